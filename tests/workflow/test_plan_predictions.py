"""`reprsim plan`'s predictions against what the tiny workflow run actually made: every dataset's rows per
split, every model's depth and width (and its size within 2 %), and every store's rows, read by the same
FileFacts the cluster's resource requests read; and after the run the plan prices from the real files."""

from __future__ import annotations

import os

import pytest
from conftest import TINY

from reprsim.config import load_yaml, validate_config
from reprsim.workflow.facts import FileFacts
from reprsim.workflow.planning import format_plan, make_plan
from reprsim.workflow.predicted import PredictedFacts


@pytest.fixture(scope="module")
def facts(workflow, tmp_path_factory):
    """(predicted before anything existed, read from the finished run)."""
    config = validate_config(load_yaml(TINY))
    here = os.getcwd()
    try:
        os.chdir(tmp_path_factory.mktemp("empty"))
        predicted = PredictedFacts(config)
        before = {
            "datasets": {d: predicted.dataset_sizes(d) for d in config["datasets"]},
            "models": {m: predicted.model(m) for m in config["models"]},
            "stores": {(d, m): predicted.store(d, m) for d in config["extraction"]["datasets"]
                       for m in config["models"]},
        }
        os.chdir(workflow)
        made = FileFacts(config)
        after = {
            "datasets": {d: made.dataset_sizes(d) for d in config["datasets"]},
            "models": {m: made.model(m) for m in config["models"]},
            "stores": {(d, m): made.store(d, m) for d in config["extraction"]["datasets"] for m in config["models"]},
        }
    finally:
        os.chdir(here)
    return before, after


def test_dataset_rows_are_predicted_exactly(facts):
    before, after = facts
    assert before["datasets"] == after["datasets"]


def test_model_sizes_are_predicted(facts):
    before, after = facts
    for name, made in after["models"].items():
        guess = before["models"][name]
        assert (guess["n_layers"], guess["hidden_size"]) == (made["n_layers"], made["hidden_size"]), name
        assert abs(guess["n_parameters"] - made["n_parameters"]) / made["n_parameters"] < 0.02, name


def test_store_shapes_are_predicted_exactly(facts):
    before, after = facts
    for key, made in after["stores"].items():
        guess = before["stores"][key]
        for fact in ("n_examples", "n_layers", "hidden_size", "split_sizes"):
            assert guess[fact] == made[fact], (key, fact)


def test_the_plan_reads_a_finished_run(workflow):
    plan = make_plan(workflow / "tiny.yaml", workflow)
    assert not plan.unknown
    printed = format_plan(plan)
    assert "largest single job:" in printed and "GPU-hours" in printed
