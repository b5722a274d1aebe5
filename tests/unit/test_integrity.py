"""Corrupt outputs, the torch-free parts: the rule that writes each results path, the Parquet reader's
error, the safetensors header check, and what no code may do (unpickle weights, run a model's code)."""

from __future__ import annotations

import json
import re
import struct

import pandas as pd
import pytest
from conftest import REPO

from reprsim.io.integrity import CorruptOutputError
from reprsim.io.model_files import safetensors_problem
from reprsim.io.tables import read_table
from reprsim.workflow import paths
from reprsim.workflow.codedeps import code_dependencies


def rule_outputs() -> dict[str, set[str]]:
    """template -> the rules whose `output:` names it, read from rules/*.smk."""
    found: dict[str, set[str]] = {}
    for smk in sorted((REPO / "rules").glob("*.smk")):
        text = smk.read_text()
        pages = re.search(r"^REPORT_PAGES = \{(.*?)^\}", text, re.MULTILINE | re.DOTALL)
        for rule, body in re.findall(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", text, re.MULTILINE | re.DOTALL):
            output = re.search(r"^    output:\n(.*?)(?=^    \w+:|\Z)", body, re.MULTILINE | re.DOTALL)
            section = output.group(1) if output else ""
            if "**REPORT_PAGES" in section:
                section += pages.group(1)
            for name in re.findall(r"paths\.([A-Z_]+)", section):
                found.setdefault(getattr(paths, name), set()).add(rule)
    return found


def test_the_rule_map_matches_the_rules():
    assert {template: set(rules.split(" or ")) for template, rules in paths.MADE_BY.items()} == rule_outputs()


@pytest.mark.parametrize("path, expected", [
    ("/data/run/results/pairs/mean/tiny/a__b.parquet", ("results/pairs/mean/tiny/a__b.parquet", "compare_pair")),
    ("results/pairs/mean/tiny/a__b.resamples.parquet", ("results/pairs/mean/tiny/a__b.resamples.parquet", "compare_pair")),
    ("results/align/synthetic/tiny/m.parquet", ("results/align/synthetic/tiny/m.parquet", "synthetic_recovery")),
    ("results/activations/tiny/m.zarr/pooled/mean/c/0/0/0", ("results/activations/tiny/m.zarr",
                                                            "extract_activations or import_activations")),
    ("results/models/m/model.safetensors", ("results/models/m", "materialize_model or finetune_model or pretrain_model or checkpoint_model")),
    ("results/logs/models/m.log", None),
])
def test_a_path_maps_to_its_output_and_rule(path, expected):
    assert paths.made_by(path) == expected


def test_jobs_do_not_depend_on_the_rule_map():
    """Readers' errors name the output, not the rule: adding a path must rerun no job."""
    for script in sorted((REPO / "scripts").glob("*.py")):
        deps = code_dependencies(script, REPO / "src")
        assert not [d for d in deps if d.endswith("workflow/paths.py")], script.name


def test_a_truncated_table_names_itself_and_the_remake_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "results" / "tables" / "pairs.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame({"value": range(500), "measure": ["cka"] * 500}).to_parquet(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptOutputError) as caught:
        read_table(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: not a readable Parquet file")
    assert "snakemake --forcerun results/tables/pairs.parquet" in message


def test_a_missing_table_stays_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_table(tmp_path / "none.parquet")


def _safetensors(path, data_bytes: int = 16, extra: int = 0) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [data_bytes // 4], "data_offsets": [0, data_bytes]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * (data_bytes + extra))


def test_the_safetensors_header_check(tmp_path):
    path = tmp_path / "model.safetensors"
    _safetensors(path)
    assert safetensors_problem(path) is None
    path.write_bytes(path.read_bytes()[:-3])
    assert "truncated" in safetensors_problem(path)
    path.write_bytes(b"\x05")
    assert "not a safetensors file" in safetensors_problem(path)
    assert safetensors_problem(tmp_path / "absent.safetensors") == "missing"


def test_no_code_unpickles_weights_or_runs_model_code():
    for path in [*(REPO / "src").rglob("*.py"), *(REPO / "scripts").glob("*.py")]:
        text = path.read_text()
        assert "trust_remote_code=True" not in text, path
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, f"{path}: {call}"
