"""The grounding stage end to end on tiny models: fine-tuned seed siblings, a label-noise group, their outputs
on the compared rows, and every test's score with an interval for two measures (one similarity, one distance);
the values read from the pair jobs' tables equal the computed ones."""

import dataclasses
import itertools
import json

import numpy as np
import pandas as pd
import pytest
import torch

from reprsim.metrics import api
from reprsim.stages.compare.pairs import compare_pair
from reprsim.stages.extract.activations import extract_activations
from reprsim.stages.finetune.training import finetune_model
from reprsim.stages.grounding import pair_tables as pair_tables_module
from reprsim.stages.grounding.measure_tests import COLUMNS, measure_tests
from reprsim.stages.grounding.probes import layers, probe_table
from reprsim.stages.grounding.scores import ranked
from reprsim.stages.grounding.setup import Setup
from reprsim.io.datasets import load_split, read_meta
from reprsim.nets.loading import load_classifier, load_tokenizer
from reprsim.nets.heads import stored_head_rows
from reprsim.stages.grounding.predictions import model_predictions

SPEC = {"source": "finetune", "base": "bert", "dataset": "tiny", "steps": 6, "batch_size": 8,
        "learning_rate": 1e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_length": 24,
        "group_by_length": True, "freeze": None, "label_noise": None, "shortcut": None, "augment": None}
NOISE = {"fraction": 1.0, "new_classes": 2, "seed": 0}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("grounding")


@pytest.fixture(scope="module")
def grounded(tiny_models, tiny_dataset, root):
    specs = {f"std-s{s}": {**SPEC, "seed": s} for s in (1, 2, 3)}  # three seeds: the prediction test's family
    specs.update({f"noise-s{s}": {**SPEC, "seed": s, "label_noise": NOISE} for s in (1, 2)})
    stores, predictions = {}, {}
    for name, spec in specs.items():
        finetune_model(name, spec, tiny_models["bert"], tiny_dataset, root / name, torch.device("cpu"))
        stores[name] = root / f"{name}.zarr"
        extract_activations(root / name, tiny_dataset, stores[name], splits=["train", "test"], max_length=24,
                            poolings=["mean", "cls"], tokens=False, provenance={
                                "model": name, "dataset": "tiny", "model_hash": read_meta(root / name)["content_hash"],
                                "dataset_hash": read_meta(tiny_dataset)["content_hash"]})
        predictions[name] = root / f"{name}.predictions.parquet"
        model_predictions(root / name, tiny_dataset, "test", None, 16, torch.device("cpu")).to_parquet(
            predictions[name])
    setup = Setup(stores=stores, specs=specs, dataset_dir=tiny_dataset, predictions=predictions, resamples=8,
                  deletion_models=["std-s1"])
    # rule deletion_probes: every layer at k = 0 (Ding's layer test), the deleted versions of the deletion model's
    probes = {}
    for name in ("std-s1", "std-s2", "std-s3"):
        probes[name] = root / f"{name}.probes.parquet"
        probe_table(setup, name, deleted=name in setup.deletion_models).to_parquet(probes[name])
    return dataclasses.replace(setup, probes=probes)


def head_rows(model_dir, store, tiny_dataset, frame, max_length=24):
    model, tokenizer = load_classifier(model_dir, torch.device("cpu")), load_tokenizer(model_dir)
    return stored_head_rows(store, model.config, tokenizer, model_dir, tiny_dataset, "test", frame, max_length)


def test_predictions_from_the_stored_last_layer_are_the_forward_pass_ones(grounded, tiny_dataset, root):
    """The head on the store's CLS rows gives the forward pass's predictions, its logits within float noise."""
    for name, store in grounded.stores.items():
        forward = pd.read_parquet(grounded.predictions[name])
        assert head_rows(root / name, store, tiny_dataset, load_split(tiny_dataset, "test")) is not None
        stored = model_predictions(root / name, tiny_dataset, "test", None, 16, torch.device("cpu"), store=store)
        logits = [c for c in forward.columns if c.startswith("logit_")]
        assert (stored["predicted"] == forward["predicted"]).all() and (stored["label"] == forward["label"]).all()
        np.testing.assert_allclose(stored[logits].to_numpy(), forward[logits].to_numpy(), rtol=0, atol=1e-5)


def test_a_store_of_other_rows_gives_no_head_rows(grounded, tiny_dataset, root, capsys):
    store, frame = grounded.stores["std-s1"], load_split(tiny_dataset, "test")
    assert head_rows(root / "std-s1", store, tiny_dataset, frame.iloc[:3]) is not None  # a subset of its rows
    assert head_rows(root / "std-s1", store, tiny_dataset, frame, max_length=32) is None
    assert "max_length 24, not 32" in capsys.readouterr().out
    beyond = frame.iloc[:2].set_axis([0, len(frame)])  # a row the split's store does not hold
    assert head_rows(root / "std-s1", store, tiny_dataset, beyond) is None
    assert "not every row of split test" in capsys.readouterr().out
    assert head_rows(root / "std-s1", grounded.stores["std-s2"], tiny_dataset, frame) is None
    assert "another model's store" in capsys.readouterr().out


def test_the_store_is_not_read_where_the_extraction_fed_the_model_otherwise(grounded, tiny_dataset, root, capsys):
    """The extraction passes no token type ids: a BERT reads that as all 0 (one segment), so a text pair's second
    segment is not what its forward pass reads."""
    frame = load_split(tiny_dataset, "test")
    assert head_rows(root / "std-s1", grounded.stores["std-s1"], tiny_dataset,
                     frame.assign(text_pair=frame["text"])) is None
    assert "token types the store's passes lack" in capsys.readouterr().out


def test_predictions_hold_every_output_of_a_grown_head(grounded):
    table = pd.read_parquet(grounded.predictions["noise-s1"])
    logits = [c for c in table.columns if c.startswith("logit_")]
    assert len(logits) == 4  # the dataset's 2 classes and the 2 new ids
    assert (table["predicted"].to_numpy() == table[logits].to_numpy().argmax(axis=1)).all()
    assert len(table) == len(pd.read_parquet(grounded.predictions["std-s1"]))


TESTED = {("monotonicity", "spearman"), ("monotonicity", "conformity"), ("deletion", "spearman"),
          ("layer", "spearman"), ("prediction", "accuracy"), ("prediction", "disagreement"), ("prediction", "jsd"),
          ("prediction", "all recipes: accuracy"), ("prediction", "all recipes: disagreement"),
          ("prediction", "all recipes: jsd"), ("groups:label_noise", "auprc"), ("groups:label_noise", "d_prime"),
          ("seeds", "auprc"), ("seeds", "d_prime"), ("specificity", "same_depth")}
DECISIONS = {"pass", "fail", "too few items", "cannot rank", "descriptive", "undefined"}


@pytest.mark.parametrize("label, spec", [("linear_cka", {"measure": "cka", "params": {"kernel": "linear"}}),
                                         ("procrustes", {"measure": "procrustes"})])
def test_every_test_scores_with_an_interval(grounded, label, spec):
    table = measure_tests(label, spec, grounded, progress=lambda message: None)
    assert list(table.columns) == COLUMNS
    assert set(zip(table["test"], table["variant"])) == TESTED
    scored = table.dropna(subset=["score"])
    assert (scored["ci_low"] <= scored["score"] + 1e-12).all() and (scored["score"] <= scored["ci_high"] + 1e-12).all()
    assert scored[["ci_low", "ci_high"]].notna().all().all()  # no score without an interval
    groups = table[table["test"] == "groups:label_noise"].iloc[0]
    assert json.loads(groups["detail"])["groups"] == ["0.0", "0.0", "0.0", "1.0", "1.0"]
    # the label-noise group test's chance is a random ranking's AUPRC (the mean of its null): above the share
    assert groups["chance"] == pytest.approx(groups["null_mean"])
    assert groups["chance"] > json.loads(groups["detail"])["positive_share"] > 0
    # every row decided; a pass needs the item-level p and the interval; descriptive and undecided rows never pass
    assert set(table["decision"]) <= DECISIONS and (table["passes"] == (table["decision"] == "pass")).all()
    passed = table[table["passes"]]
    assert (passed["p_value"] <= 0.05).all() and (passed["ci_low"] > passed["chance"]).all()
    descriptive = table[table["variant"].str.endswith("d_prime") | table["variant"].str.startswith("all recipes: ")]
    assert (descriptive["decision"] == "descriptive").all() and (descriptive["null"] == "").all()
    # prediction over the three standard seeds (the largest family): 3 pairs, every one of the 3! pairings as its
    # null, too few items to rank; over every recipe it is descriptive
    prediction = table[(table["test"] == "prediction") & ~table["variant"].str.startswith("all recipes: ")]
    assert [json.loads(d)["models"] for d in prediction["detail"]] == [["std-s1", "std-s2", "std-s3"]] * 3
    assert (prediction["null"] == "outputs permuted over the models").all() and prediction["null_exact"].all()
    assert (prediction["null_draws"] <= 6).all() and (prediction["decision"] == "too few items").all()
    everyone = table[table["variant"].str.startswith("all recipes: ")]
    assert [len(json.loads(d)["models"]) for d in everyone["detail"]] == [5] * 3
    # the deletion test checked the deletion model's last layer; it ranks only where the probe falls
    deletion = table[table["test"] == "deletion"].iloc[0]
    checked = json.loads(deletion["detail"])["checked"]
    assert [(cell["models"], cell["used"]) for cell in checked] == [(["std-s1"], cell["used"]) for cell in checked]
    assert (deletion["decision"] == "cannot rank") == (not any(cell["used"] for cell in checked))
    assert set(checked[0]["probe"]["std-s1"]) >= {"accuracy", "change", "drop", "drop_se", "falls", "head_accuracy"}


def test_ranks_are_per_test_best_first(grounded):
    tables = [measure_tests(label, spec, grounded, progress=lambda message: None)
              for label, spec in (("linear_cka", {"measure": "cka"}), ("procrustes", {"measure": "procrustes"}))]
    table = ranked(pd.concat(tables, ignore_index=True))
    decided = table["decision"].isin(["pass", "fail"])
    assert decided.any() and table.loc[~decided, "rank"].isna().all()  # descriptive, too few, cannot rank: no rank
    for _, rows in table[decided].groupby(["test", "variant"]):
        best = rows.loc[rows["score"].idxmax()] if rows["score"].notna().any() else None
        if best is not None:
            assert best["rank"] == 1
            assert np.isin(rows["rank"].dropna(), [1, 2]).all()


# one symmetric and one asymmetric measure, as the pair jobs compute them (with more half-samples than the tests').
# Not neuronsim: on these models its two directions are equal, and a rank correlation over exact ties turns with
# the float noise between two computations
PAIR_MEASURES = {"linear_cka": {"measure": "cka", "params": {"kernel": "linear"}},
                 "pwcca": {"measure": "pwcca", "params": {"pca_dims": 3}}}


@pytest.fixture(scope="module")
def pair_tables(grounded, tmp_path_factory):
    """Every pair's table and replicates as rule compare_pair writes them, by sorted model pair."""
    root = tmp_path_factory.mktemp("pairs")
    tables = {}
    for a, b in itertools.combinations_with_replacement(sorted(grounded.stores), 2):
        table, replicates = compare_pair(grounded.stores[a], grounded.stores[b], representation="mean", split="test",
                                         measures=PAIR_MEASURES, chance={"permutations": 2},
                                         intervals={"resamples": 12, "seed": grounded.seed})
        tables[(a, b)] = (root / f"{a}__{b}.parquet", root / f"{a}__{b}.resamples.parquet")
        table.to_parquet(tables[(a, b)][0])
        replicates.to_parquet(tables[(a, b)][1])
    return tables


@pytest.mark.parametrize("label", PAIR_MEASURES)
def test_the_values_read_from_the_pair_tables_equal_the_computed_ones(grounded, pair_tables, label):
    """Every test's score and interval alike whether the measure's values are computed or read from the pair
    tables (every pair's, or some: the others computed): the same rows, the pair jobs' first half-samples, each
    direction of an asymmetric measure."""
    spec = PAIR_MEASURES[label]
    computed = measure_tests(label, spec, grounded, progress=lambda message: None)
    assert set(zip(computed["test"], computed["variant"])) == TESTED
    for tables in (pair_tables, {pair: files for pair, files in pair_tables.items() if "std-s1" in pair}):
        read = measure_tests(label, spec, dataclasses.replace(grounded, pair_tables=tables),
                             progress=lambda message: None)
        pd.testing.assert_frame_equal(read.drop(columns="detail"), computed.drop(columns="detail"),
                                      check_exact=False, rtol=1e-9, atol=1e-12)
        assert [json.loads(d) for d in read["detail"]] == [json.loads(d) for d in computed["detail"]]


def test_a_pair_table_is_read_in_the_direction_asked(grounded, pair_tables):
    """The pair (noise-s1, std-s1) is stored under sorted names: std-s1 → noise-s1 is its b->a direction."""
    X, Y = (layers(grounded.stores[m], "mean", "test") for m in ("std-s1", "noise-s1"))
    params = PAIR_MEASURES["pwcca"]["params"]
    values, draws = pair_tables_module.layer_values(pair_tables, "pwcca", params, len(X[0]), 8, "std-s1", "noise-s1")
    np.testing.assert_allclose(values, api.compute_layers("pwcca", X, Y, **params).values, rtol=1e-9, atol=1e-12)
    assert not np.allclose(values, api.compute_layers("pwcca", Y, X, **params).values.T, rtol=1e-9, atol=1e-12)
    assert draws.shape == (8, len(X), len(Y))
    with pytest.raises(ValueError, match="not there"):  # more half-samples than the pair job drew
        pair_tables_module.layer_values(pair_tables, "pwcca", params, len(X[0]), 13, "std-s1", "noise-s1")
