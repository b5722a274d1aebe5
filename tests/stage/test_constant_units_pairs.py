"""A pair job whose models have constant units (issue 41): one model with a LayerNorm gain rounded to 0 (an exactly
constant unit), the other with a gain of ~1e-33 (a numerically constant unit, as float32 MiniLM has). Every
measure of the default configuration gives finite rows, and the rows whose layers hold such units say so in their
warning."""

import json

import numpy as np
import pytest
import yaml
from conftest import REPO, write_pooled_store

from reprsim.stages.compare.pairs import compare_pair

N_TEST, N_TRAIN = 60, 10
CHANCE, INTERVALS = {"permutations": 6, "seed": 0}, {"resamples": 8, "confidence": 0.95, "seed": 0}
# the default configuration's measures, with the few draws above; and every other measure that leaves units out
DEFAULT = {label: {key: value for key, value in spec.items() if key not in ("null_permutations", "resamples")}
           for label, spec in yaml.safe_load((REPO / "config" / "config.yaml").read_text())["measures"].items()}
MEASURES = {**DEFAULT, "mixedsim": {"measure": "mixedsim"}, "hard_match": {"measure": "hard_correlation_match"},
            "soft_matching": {"measure": "soft_matching", "params": {"normalize": True}}}


def write_store(path, name, pooled):
    return write_pooled_store(path, name, pooled, N_TRAIN, N_TEST)


def layer_norm(rng, rows, d, gains):
    """A LayerNorm's output: normalised rows times the gains plus a bias, as float32."""
    z = rng.normal(size=(rows, d))
    z = (z - z.mean(axis=1, keepdims=True)) / z.std(axis=1, keepdims=True)
    return (z * gains + rng.normal(size=d) * 0.1).astype(np.float32)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    rng = np.random.default_rng(11)
    rows = N_TRAIN + N_TEST
    rounded, tiny = np.ones(7), np.ones(6)
    rounded[3] = 0.0  # a float16-rounded gain: the unit is its bias on every row
    tiny[2] = 1e-33  # float32 MiniLM's gain: a spread of 1e-33 of the layer's
    latent = rng.normal(size=(rows, 7))
    a = np.stack([layer_norm(rng, rows, 7, np.ones(7)), layer_norm(rng, rows, 7, rounded)])
    b = np.stack([layer_norm(rng, rows, 6, tiny), layer_norm(rng, rows, 6, np.ones(6)) + latent[:, :6]])
    b[0, :, 2] = (rng.normal(size=rows) * 1e-33).astype(np.float32)  # no bias, or float32 rounds it to a constant
    stores = [write_store(root / f"{name}.zarr", name, pooled) for name, pooled in (("a", a), ("b", b))]
    return compare_pair(*stores, representation="mean", split="test", measures=MEASURES, chance=CHANCE,
                        intervals=INTERVALS)[0]


def test_the_default_measures_are_the_configuration_s():
    assert {spec["measure"] for spec in DEFAULT.values()} >= {"cka", "svcca", "pwcca", "neuronsim", "mutual_knn"}


@pytest.mark.parametrize("label", sorted(MEASURES))
def test_every_measure_s_rows_are_finite(table, label):
    rows = table[table["measure"] == label]
    assert len(rows) == 4 * (1 if rows["direction"].iloc[0] == "symmetric" else 2)
    numbers = rows[["value", "null_mean", "null_std", "null_p", "ci_low", "ci_high"]].to_numpy(float)
    assert np.isfinite(numbers).all()
    assert not any("undefined" in json.loads(meta) for meta in rows["meta"])


@pytest.mark.parametrize("label", ["neuronsim", "hard_match", "soft_matching", "mixedsim"])
def test_the_warning_names_the_units_left_out(table, label):
    rows = table[table["measure"] == label]
    note = "are constant (std ≤ 1e-5 × the layer's RMS) and left out"
    for row in rows.itertuples():
        counts = {"a": int(row.layer_a == 1), "b": int(row.layer_b == 0)}  # units left out of each model's layer
        # the direction's X is model a's layer (a->b, symmetric) or model b's (b->a); mixedsim divides by X's alone
        x, y = ("b", "a") if row.direction == "b->a" else ("a", "b")
        expected = {"x": counts[x], "y": 0 if label == "mixedsim" else counts[y]}
        assert json.loads(row.meta).get("excluded_units", {"x": 0, "y": 0}) == expected
        assert (note in row.warning) == any(expected.values())
        if expected["x"]:
            assert f"1 of {7 if x == 'a' else 6} units of X's layer" in row.warning
    assert rows["warning"].str.contains(note, regex=False).any()


def test_measures_that_need_no_unit_variance_have_no_note(table):
    others = table[table["measure"].isin(["linear_cka", "unbiased_cka", "svcca", "pwcca", "mutual_knn"])]
    assert not others["warning"].str.contains("left out").any()
    assert not any("excluded_units" in json.loads(meta) for meta in others["meta"])


def test_minilm_rounded_through_float16_compares_with_minilm(minilm_dir):
    """The case that stopped the default run: MiniLM with every parameter rounded through float16 (as a transfer to a
    GPU machine does) has LayerNorm gains of ~1e-33 turned to 0. Against MiniLM itself, on 300 SST-2 sentences,
    every default measure is computed; neuronsim leaves out the same three units of the top layer on both sides (in
    float32 they are numerically constant) and so scores the top layers 1."""
    import importlib.resources

    import pandas as pd
    import torch
    from transformers import AutoModel, AutoTokenizer

    import reprsim

    sentences = pd.read_csv(importlib.resources.files("reprsim") / "stages/data/samples/sst2/test.tsv",
                            sep="\t")["sentence"].tolist()[:300]
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=64, return_tensors="pt")
    mask = batch["attention_mask"][..., None].float()

    def layer_stack(model):
        with torch.no_grad():
            hidden = model(**batch, output_hidden_states=True).hidden_states
        return torch.stack([(h * mask).sum(1) / mask.sum(1) for h in hidden])

    model = AutoModel.from_pretrained(minilm_dir).eval()
    original = layer_stack(model)
    with torch.no_grad():
        zeroed = 0
        for parameter in model.parameters():
            rounded = parameter.half().float()
            zeroed += int(((parameter != 0) & (rounded == 0)).sum())
            parameter.copy_(rounded)
    assert zeroed > 0
    table = reprsim.compare(original, layer_stack(model), {**DEFAULT}, permutations=19, resamples=20)
    assert table.value.notna().all() and set(table.measure) == set(DEFAULT)
    top = table[(table.measure == "neuronsim") & (table.layer_a == 6) & (table.layer_b == 6)]
    assert np.allclose(top.value, 1.0) and len(top) == 2
    assert all("3 of 384 units of X's layer and 3 of 384 units of Y's layer are constant" in w for w in top.warning)
