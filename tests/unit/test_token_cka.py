"""Token-level minibatch CKA with its chance level (batch-shifted pairings), half-sample interval over batches
and n, on small synthetic stores; and the configuration key similarity.tokens."""

import copy
import json

import numpy as np
import pytest
import torch
import zarr
from conftest import REPO
from test_config import problems_of

from reprsim.config import load_yaml, validate_config
from reprsim.inference.resampling import half_samples
from reprsim.metrics.cka import MinibatchHSIC, minibatch_cka_layers
from reprsim.stages.compare.pairs import compare_pair
from reprsim.stages.compare.tokens import chance_shifts, token_cka_table, token_minibatch_cka

SPLITS = ["train", "test"]
LENGTHS = {"train": 40, "test": 60}  # examples per split
WIDTH = 8


def lengths(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(5, 40, size=sum(LENGTHS.values()))


def write_store(path, name, hidden, input_ids, offsets, chunk_tokens=300):
    """A store with the layout of reprsim.stages.extract (tokens, examples, a pooled mean), written by hand."""
    root = zarr.open_group(path, mode="w")
    n_examples = len(offsets) - 1
    codes = np.repeat(np.arange(len(SPLITS)), [LENGTHS[s] for s in SPLITS])
    rows = np.concatenate([np.arange(LENGTHS[s]) for s in SPLITS])
    tokens = root.create_group("tokens")
    tokens.create_array("hidden", shape=hidden.shape, chunks=(1, chunk_tokens, hidden.shape[2]),
                        dtype="float32")[:] = hidden
    for key, values in (("input_ids", input_ids), ("offsets", offsets), ("word_ids", np.zeros_like(input_ids))):
        tokens.create_array(key, shape=values.shape, dtype="int64")[:] = values
    examples = root.create_group("examples")
    for key, values in (("split", codes), ("row", rows), ("label", rows % 2)):
        examples.create_array(key, shape=(n_examples,), dtype="int64")[:] = values
    pooled = np.stack([np.stack([layer[offsets[i]:offsets[i + 1]].mean(axis=0) for i in range(n_examples)])
                       for layer in hidden])
    root.create_group("pooled").create_array("mean", shape=pooled.shape, dtype="float32")[:] = pooled
    root.attrs.update({"model": name, "dataset": "synthetic", "split_names": SPLITS, "poolings": ["mean"],
                       "tokenizer": "Synthetic"})
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Models a (3 layers) and b (2 layers) read the same tokens; b's layers are noisy maps of a's latent."""
    root = tmp_path_factory.mktemp("stores")
    offsets = np.concatenate([[0], np.cumsum(lengths())])
    n = int(offsets[-1])
    rng = np.random.default_rng(1)
    latent = rng.standard_normal((n, 4))
    a = np.stack([latent @ rng.standard_normal((4, WIDTH)) + noise * rng.standard_normal((n, WIDTH))
                  for noise in (0.1, 0.5, 2.0)])
    b = np.stack([latent @ rng.standard_normal((4, WIDTH)) + noise * rng.standard_normal((n, WIDTH))
                  for noise in (0.2, 1.0)])
    ids = rng.integers(0, 1000, size=n)
    return {"a": write_store(root / "a.zarr", "a", a, ids, offsets),
            "b": write_store(root / "b.zarr", "b", b, ids, offsets, chunk_tokens=170),
            "other_ids": write_store(root / "c.zarr", "c", b, ids + 1, offsets),
            "hidden": {"a": a, "b": b}, "offsets": offsets}


def test_the_value_is_minibatch_cka_over_the_split_s_tokens(stores):
    table = token_cka_table(stores["a"], stores["b"], split="test", batch_size=128, shifts=5,
                            intervals={"resamples": 50, "seed": 0})
    offsets = stores["offsets"]
    start, end = offsets[LENGTHS["train"]], offsets[-1]
    batches = (end - start) // 128
    rows = slice(start, start + batches * 128)
    expected, _ = minibatch_cka_layers(stores["hidden"]["a"][:, rows].astype(np.float32),
                                       stores["hidden"]["b"][:, rows].astype(np.float32), batch_size=128)
    values = table.pivot(index="layer_a", columns="layer_b", values="value").to_numpy()
    np.testing.assert_allclose(values, expected.numpy(), atol=1e-10)
    assert (table["n"] == batches * 128).all() and (table["split"] == "test").all()
    assert (table["representation"] == "token").all() and (table["measure"] == "cka_minibatch").all()
    assert set(table["kind"]) == {"similarity"} and set(table["direction"]) == {"symmetric"}
    assert json.loads(table["params"][0]) == {"kernel": "linear", "batch_size": 128}
    meta = json.loads(table["meta"][0])
    assert meta["n_batches"] == batches and meta["dropped_tokens"] == (end - start) - batches * 128
    assert meta["shifts"] == chance_shifts(batches, 5) and len(meta["shifts"]) == 5
    assert meta["estimator"] == "unbiased-minibatch" and "half-sample of batches" in meta["interval"]["method"]
    assert table[["model_a", "model_b", "dataset"]].iloc[0].tolist() == ["a", "b", "synthetic"]
    # the library's plain value agrees (every token of the store, no split)
    whole, _ = token_minibatch_cka(stores["a"], stores["b"], batch_size=128)
    all_rows = slice(0, (offsets[-1] // 128) * 128)
    expected, _ = minibatch_cka_layers(stores["hidden"]["a"][:, all_rows].astype(np.float32),
                                       stores["hidden"]["b"][:, all_rows].astype(np.float32), batch_size=128)
    np.testing.assert_allclose(whole, expected.numpy(), atol=1e-10)


def test_the_table_has_the_pair_table_s_columns(stores):
    pairs, _ = compare_pair(stores["a"], stores["b"], representation="mean", split="test",
                            measures={"linear_cka": {"measure": "cka"}}, chance={"permutations": 19},
                            intervals={"resamples": 20})
    table = token_cka_table(stores["a"], stores["b"], split="test", batch_size=128, intervals={"resamples": 20})
    assert list(table.columns) == list(pairs.columns)
    assert table.dtypes.to_dict() == pairs.dtypes.to_dict()


def test_the_shifted_null_of_a_store_against_itself_is_far_below_its_value(stores):
    table = token_cka_table(stores["a"], stores["a"], split=None, batch_size=100, shifts=5,
                            intervals={"resamples": 40})
    diagonal = table[table["layer_a"] == table["layer_b"]]
    np.testing.assert_allclose(diagonal["value"], 1.0, atol=1e-12)
    assert (table["null_mean"].abs() < 0.2).all() and (table["null_std"] > 0).all()
    assert (table["n_permutations"] == 5).all()
    assert np.allclose(diagonal["null_p"], 1 / 6) and diagonal["beyond_chance"].all()


def test_the_null_is_minibatch_cka_with_b_s_batches_shifted(stores):
    """Each chance draw is minibatch CKA of A's batch b against B's batch (b + s) mod T, streamed with
    readers that keep whole chunks (chunks of 300 and 170 tokens, batches of 64)."""
    table = token_cka_table(stores["a"], stores["b"], split=None, batch_size=64, shifts=3,
                            intervals={"resamples": 20})
    meta = json.loads(table["meta"][0])
    T, shifts = meta["n_batches"], meta["shifts"]
    a = stores["hidden"]["a"][:, :T * 64].astype(np.float32)
    b = stores["hidden"]["b"][:, :T * 64].astype(np.float32)
    draws = np.stack([minibatch_cka_layers(a, np.roll(b, -s * 64, axis=1), batch_size=64)[0].numpy()
                      for s in shifts])
    np.testing.assert_allclose(table["null_mean"].to_numpy().reshape(3, 2), draws.mean(axis=0), atol=1e-10)
    np.testing.assert_allclose(table["null_std"].to_numpy().reshape(3, 2), draws.std(axis=0), atol=1e-10)


def test_the_interval_contains_the_value_and_lies_beyond_chance(stores):
    table = token_cka_table(stores["a"], stores["b"], split=None, batch_size=64, shifts=4,
                            intervals={"resamples": 60, "confidence": 0.9, "seed": 3})
    assert ((table["ci_low"] <= table["value"]) & (table["value"] <= table["ci_high"])).all()
    assert (table["ci_high"] > table["ci_low"]).all() and (table["n_resamples"] == 60).all()
    assert table["beyond_chance"].all() and (table["null_p"] == 1 / 5).all()
    assert (table["warning"] == "").all()


def test_replicates_are_the_cka_of_half_samples_of_batches():
    rng = np.random.default_rng(0)
    Xs, Ys = rng.standard_normal((2, 240, 5)), rng.standard_normal((3, 240, 6))
    accumulator = MinibatchHSIC(keep_batches=True)
    for b in range(8):
        accumulator.add(Xs[:, b * 30:(b + 1) * 30], Ys[:, b * 30:(b + 1) * 30])
    for rows in half_samples(8, 3, seed=1):
        subset = np.concatenate([np.arange(b * 30, (b + 1) * 30) for b in rows])
        expected, _ = minibatch_cka_layers(Xs[:, subset], Ys[:, subset], batch_size=30)
        torch.testing.assert_close(accumulator.cka(rows), expected)
    torch.testing.assert_close(accumulator.cka(np.arange(8)), accumulator.cka())
    assert accumulator.kept()["cross"].shape == (8, 2, 3)
    with pytest.raises(ValueError, match="keep_batches"):
        MinibatchHSIC().kept()


def test_a_few_batches_give_no_interval_and_say_so(stores):
    table = token_cka_table(stores["a"], stores["b"], split="test", batch_size=600, intervals={"resamples": 20})
    assert table["ci_low"].isna().all() and not table["beyond_chance"].any()
    assert table["warning"].str.contains("no interval").all()


def test_different_tokenisations_are_refused(stores):
    with pytest.raises(ValueError, match="a .Synthetic.*and c .*tokenised the inputs differently"):
        token_cka_table(stores["a"], stores["other_ids"], split="test", batch_size=64)


def test_chance_shifts_are_spread_over_the_batches():
    assert chance_shifts(1, 5) == [] and chance_shifts(3, 5) == [1, 2]
    assert chance_shifts(101, 5) == [1, 26, 50, 75, 100]


# ----------------------------------------------------------------- configuration

@pytest.fixture()
def config():
    config = load_yaml(REPO / "config" / "config.yaml")
    config["extraction"]["tokens"] = True
    config["similarity"]["tokens"] = {"pairs": [["bert-small-s0", "bert-small-s1"], ["minilm", "minilm-ft-s1"]]}
    return config


def test_token_pairs_are_off_by_default_and_get_their_defaults(config):
    assert validate_config(load_yaml(REPO / "config" / "config.yaml"))["similarity"]["tokens"] is None
    tokens = validate_config(copy.deepcopy(config))["similarity"]["tokens"]
    assert tokens == {"pairs": config["similarity"]["tokens"]["pairs"], "batch_size": 512, "kernel": "linear",
                      "max_tokens": None, "shifts": 5}


@pytest.mark.parametrize("edit, expected", [
    (lambda c: c["extraction"].update(tokens=False), "similarity.tokens needs extraction.tokens"),
    (lambda c: c["similarity"]["tokens"].update(pairs=[["minilm", "nope"]]),
     "key 'similarity.tokens.pairs' names 'nope', which is not a model"),
    (lambda c: c["similarity"]["tokens"].pop("pairs"), "similarity.tokens: 'pairs' is a required property"),
    (lambda c: c["similarity"]["tokens"].update(kernel="poly"), "key 'similarity.tokens.kernel' is 'poly'"),
    (lambda c: c["similarity"]["tokens"].update(batch_size=3), "key 'similarity.tokens.batch_size' is 3; must be ≥ 4"),
    (lambda c: c["similarity"]["tokens"].update(shifts=0), "key 'similarity.tokens.shifts' is 0; must be ≥ 1"),
])
def test_token_pair_errors_name_the_key(config, edit, expected):
    edit(config)
    assert expected in problems_of(config)
