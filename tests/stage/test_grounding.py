"""The grounding stage end to end on tiny models: fine-tuned seed siblings, a label-noise group, their outputs
on the compared rows, and every test's score with an interval for two measures (one similarity, one distance)."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from reprsim.stages.extract.activations import extract_activations
from reprsim.stages.finetune.training import finetune_model
from reprsim.stages.grounding.measure_tests import COLUMNS, measure_tests
from reprsim.stages.grounding.scores import ranked
from reprsim.stages.grounding.setup import Setup
from reprsim.stages.grounding.predictions import model_predictions

SPEC = {"source": "finetune", "base": "bert", "dataset": "tiny", "steps": 6, "batch_size": 8,
        "learning_rate": 1e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_length": 24,
        "group_by_length": True, "freeze": None, "label_noise": None, "shortcut": None, "augment": None}
NOISE = {"fraction": 1.0, "new_classes": 2, "seed": 0}


@pytest.fixture(scope="module")
def grounded(tiny_models, tiny_dataset, tmp_path_factory):
    root = tmp_path_factory.mktemp("grounding")
    specs = {f"std-s{s}": {**SPEC, "seed": s} for s in (1, 2)}
    specs.update({f"noise-s{s}": {**SPEC, "seed": s, "label_noise": NOISE} for s in (1, 2)})
    stores, predictions = {}, {}
    for name, spec in specs.items():
        finetune_model(name, spec, tiny_models["bert"], tiny_dataset, root / name, torch.device("cpu"))
        stores[name] = root / f"{name}.zarr"
        extract_activations(root / name, tiny_dataset, stores[name], splits=["train", "test"], max_length=24,
                            poolings=["mean"], tokens=False, provenance={"model": name, "dataset": "tiny"})
        predictions[name] = root / f"{name}.predictions.parquet"
        model_predictions(root / name, tiny_dataset, "test", None, 16, torch.device("cpu")).to_parquet(
            predictions[name])
    return Setup(stores=stores, specs=specs, dataset_dir=tiny_dataset, predictions=predictions, resamples=8,
                 deletion_models=["std-s1"])


def test_predictions_hold_every_output_of_a_grown_head(grounded):
    table = pd.read_parquet(grounded.predictions["noise-s1"])
    logits = [c for c in table.columns if c.startswith("logit_")]
    assert len(logits) == 4  # the dataset's 2 classes and the 2 new ids
    assert (table["predicted"].to_numpy() == table[logits].to_numpy().argmax(axis=1)).all()
    assert len(table) == len(pd.read_parquet(grounded.predictions["std-s1"]))


@pytest.mark.parametrize("label, spec", [("linear_cka", {"measure": "cka", "params": {"kernel": "linear"}}),
                                         ("procrustes", {"measure": "procrustes"})])
def test_every_test_scores_with_an_interval(grounded, label, spec):
    table = measure_tests(label, spec, grounded, progress=lambda message: None)
    assert list(table.columns) == COLUMNS
    found = set(zip(table["test"], table["variant"]))
    assert found == {("monotonicity", "spearman"), ("monotonicity", "conformity"), ("deletion", "spearman"),
                     ("prediction", "accuracy"), ("prediction", "disagreement"), ("prediction", "jsd"),
                     ("groups:label_noise", "auprc"), ("groups:label_noise", "d_prime"),
                     ("seeds", "auprc"), ("seeds", "d_prime")}
    scored = table.dropna(subset=["score"])
    assert (scored["ci_low"] <= scored["score"] + 1e-12).all() and (scored["score"] <= scored["ci_high"] + 1e-12).all()
    assert scored[["ci_low", "ci_high"]].notna().all().all()  # no score without an interval
    groups = table[table["test"] == "groups:label_noise"].iloc[0]
    assert json.loads(groups["detail"])["groups"] == ["0.0", "0.0", "1.0", "1.0"]
    # the label-noise group test's chance is a random ranking's AUPRC over 2 groups of 2: above the share 1/5
    assert groups["chance"] > json.loads(groups["detail"])["positive_share"] == pytest.approx(1 / 5)


def test_ranks_are_per_test_best_first(grounded):
    tables = [measure_tests(label, spec, grounded, progress=lambda message: None)
              for label, spec in (("linear_cka", {"measure": "cka"}), ("procrustes", {"measure": "procrustes"}))]
    table = ranked(pd.concat(tables, ignore_index=True))
    for _, rows in table.groupby(["test", "variant"]):
        best = rows.loc[rows["score"].idxmax()] if rows["score"].notna().any() else None
        if best is not None:
            assert best["rank"] == 1
            assert np.isin(rows["rank"].dropna(), [1, 2]).all()
