"""reprsim.compare on a finished run's stored rows equals the run's pair table row for row: values, chance levels,
p, intervals, warnings and meta (benchmarks/api_equals_workflow.py, on the test suite's shared run)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from api_equals_workflow import api_and_workflow, differences  # noqa: E402

from reprsim.config import validate_config  # noqa: E402


def test_compare_equals_the_pair_table(workflow):
    config = validate_config(yaml.safe_load((workflow / "tiny.yaml").read_text()), model_configs=False)
    # a pretrained model against a fine-tuned one: every measure of the tiny run, both directions of neuronsim
    ours, theirs, _ = api_and_workflow(workflow, config, "tiny", ("minilm", "tiny-ft-s1"))
    found = differences(ours, theirs)
    assert found["same_columns"]
    assert found["rows"] == len(theirs) > 0 and set(theirs.measure) == set(config["measures"])
    assert {column: result for column, result in found["columns"].items() if result[0]} == {}
