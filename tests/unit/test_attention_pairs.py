"""The attention pair job (reprsim.stages.compare.attention) and reading attention from a store
(reprsim.io.store.attention_maps), on small stores written here in the extraction layout."""

import json

import numpy as np
import pytest
import zarr

from reprsim.inference.resampling import interval
from reprsim.io.store import attention_maps, open_store
from reprsim.metrics.attention import attnsim, distributed_similarity
from reprsim.stages.compare import attention as job
from reprsim.stages.compare.attention import compare_attention
from test_attention import softmax_maps, terms_tolerance

HEAD = {"pearson": {"measure": "pearson"}, "js": {"measure": "js"}, "frob": {"measure": "frobenius"}}
SETTINGS = {"split": "test", "max_examples": None, "permutations": 8, "resamples": 20, "confidence": 0.9,
            "seed": 0, "detail_layers": None}



def write_store(path, model, word_maps, *, splits=None, rows=None, token_maps=None, dtype="float32",
                attention=True, attention_splits=("test",)):
    """A store in the extraction layout: `word_maps[l][i]` is example i's (H, w, w) word map in attention
    layer l + 1 (None: an example outside the detail splits, no entries); `token_maps` likewise."""
    n = len(word_maps[0])
    splits = np.ones(n, dtype=np.int64) if splits is None else np.asarray(splits, dtype=np.int64)
    rows = np.arange(n) if rows is None else np.asarray(rows)
    root = zarr.open_group(str(path), mode="w")
    examples = root.create_group("examples")
    examples.create_array("split", shape=(n,), dtype="int64")[:] = splits
    examples.create_array("row", shape=(n,), dtype="int64")[:] = rows
    heads = next(m.shape[0] for m in word_maps[0] if m is not None)
    if attention:
        group = root.create_group("attention")
        for name, per_layer in (("word_", word_maps), ("", token_maps if token_maps is not None else word_maps)):
            sizes = [0 if m is None else m.shape[1] ** 2 for m in per_layer[0]]
            offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            group.create_array(f"{name}offsets", shape=offsets.shape, dtype="int64")[:] = offsets
            stacked = np.stack([np.concatenate([m.reshape(heads, -1) for m in layer if m is not None], axis=1)
                                for layer in per_layer])
            group.create_array(f"{name}maps", shape=stacked.shape, dtype=dtype)[:] = stacked.astype(dtype)
    root.attrs.update({"model": model, "dataset": "toy", "split_names": ["train", "test"],
                       **({"attention": {"layers": len(word_maps), "heads": heads, "dtype": dtype,
                                         "splits": list(attention_splits)}} if attention else {})})
    return path


def layers_of(rng, n_layers, heads, lengths, causal=False):
    return [softmax_maps(rng, heads, lengths, causal) for _ in range(n_layers)]


LENGTHS = (4, 6, 4, 7, 6, 4, 7, 5, 5, 6)  # every length at least twice


@pytest.fixture
def pair_of_stores(tmp_path):
    rng = np.random.default_rng(0)
    A = layers_of(rng, 2, 3, LENGTHS, causal=True)
    B = layers_of(rng, 3, 2, LENGTHS)
    return (write_store(tmp_path / "a.zarr", "model-a", A), write_store(tmp_path / "b.zarr", "model-b", B), A, B)


def run(path_a, path_b, measures, **overrides):
    """The pair table and the head detail (the replicates have their own test)."""
    table, _, detail = compare_attention(path_a, path_b, measures=measures, **{**SETTINGS, **overrides})
    return table, detail


def test_the_replicates_give_each_value_its_interval(pair_of_stores):
    path_a, path_b, _, _ = pair_of_stores
    table, replicates, _ = compare_attention(path_a, path_b, measures={**HEAD, "cka": {"measure": "cka"}}, **SETTINGS)
    keys = ["layer_a", "layer_b", "measure", "direction"]
    merged = replicates.merge(table[keys + ["value", "ci_low", "ci_high", "n"]], on=keys, suffixes=("", "_table"))
    assert len(merged) == len(replicates) == len(table) * SETTINGS["resamples"]
    assert (merged["n"] == merged["n_table"]).all() and set(replicates["representation"]) == {"attention"}
    for _, group in merged.groupby(keys):
        low, high = interval(group["value_table"].iloc[0], group["value"].to_numpy(), int(group["n"].iloc[0]),
                             int(group["m"].iloc[0]), SETTINGS["confidence"])
        assert np.isclose(low, group["ci_low"].iloc[0], equal_nan=True)
        assert np.isclose(high, group["ci_high"].iloc[0], equal_nan=True)


def rows_of(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        mask &= table[column].to_numpy() == value
    return table[mask]


# ---- reading ----------------------------------------------------------------------------------

def test_attention_maps_reads_layer_and_examples(tmp_path):
    rng = np.random.default_rng(1)
    A = layers_of(rng, 2, 3, (3, 5, 2))
    A[0][1] = None  # outside the detail splits: no entries
    A[1][1] = None
    store = open_store(write_store(tmp_path / "a.zarr", "m", A, dtype="float16"))
    got = attention_maps(store, 2, np.array([2, 0]))
    assert [m.shape for m in got] == [(3, 2, 2), (3, 3, 3)] and got[0].dtype == np.float32
    np.testing.assert_allclose(got[0], A[1][2], atol=1e-3)
    np.testing.assert_allclose(got[1], A[1][0], atol=1e-3)
    assert attention_maps(store, 1, np.array([1]))[0].shape == (3, 0, 0)
    assert attention_maps(store, 1, np.array([], dtype=int)) == []
    with pytest.raises(ValueError, match="outside 1..2"):
        attention_maps(store, 3, np.array([0]))


def test_missing_attention_arrays_name_the_fix(tmp_path):
    rng = np.random.default_rng(2)
    A = layers_of(rng, 1, 2, LENGTHS)
    path = write_store(tmp_path / "plain.zarr", "model-a", A, attention=False)
    with pytest.raises(KeyError, match=r"plain\.zarr.*extraction\.attention: true"):
        attention_maps(open_store(path), 1, np.array([0]))
    other = write_store(tmp_path / "b.zarr", "model-b", A)
    with pytest.raises(KeyError, match="extraction.attention: true"):
        run(path, other, HEAD)
    with pytest.raises(KeyError, match="extraction.attention: true"):
        run(other, path, HEAD)


# ---- values -----------------------------------------------------------------------------------

def test_identical_stores(tmp_path):
    rng = np.random.default_rng(3)
    A = layers_of(rng, 2, 3, LENGTHS, causal=True)
    path_a = write_store(tmp_path / "a.zarr", "model-a", A)
    path_b = write_store(tmp_path / "b.zarr", "model-b", A)
    measures = {**HEAD, "cka": {"measure": "cka"}}
    table, _ = run(path_a, path_b, measures)
    assert len(table) == 2 * 2 * (3 * 2 + 1)
    same = table[table["layer_a"] == table["layer_b"]]
    for label, expected in (("pearson", 1.0), ("js", 0.0), ("frob", 0.0), ("cka", 1.0)):
        values = rows_of(same, measure=label)["value"].to_numpy()
        assert len(values) == (2 if label == "cka" else 4)
        if label in ("js", "frob"):
            assert np.all(values == 0.0)
        else:
            np.testing.assert_allclose(values, expected, atol=1e-12)
    pearson = rows_of(same, measure="pearson")
    # the null re-pairs sentences: the chance level of identical stores is well below 1
    assert np.all(pearson["null_mean"] < 0.9) and np.all(pearson["beyond_chance"])
    np.testing.assert_allclose(pearson["null_p"], 1 / (1 + SETTINGS["permutations"]))
    cka = rows_of(same, measure="cka")
    assert np.all(cka["null_mean"] < 0.9) and np.all(cka["beyond_chance"])
    js = rows_of(same, measure="js")
    assert np.all(js["null_mean"] > 0.05) and np.all(js["beyond_chance"])
    meta = json.loads(pearson["meta"].iloc[0])
    assert meta["best_head"] == [0, 1, 2] and meta["level"] == "word" and meta["words"] == sum(LENGTHS)


def test_values_equal_the_library_on_the_chosen_sentences(pair_of_stores):
    path_a, path_b, A, B = pair_of_stores
    measures = {**HEAD, "cka": {"measure": "cka"}, "pw": {"measure": "pwcca"},
                "sv": {"measure": "svcca", "params": {"threshold": 0.99}}}
    table, _ = run(path_a, path_b, measures)
    assert list(table.columns) == job.COLUMNS
    assert set(table["representation"]) == {"attention"} and set(table["n"]) == {len(LENGTHS)}
    assert sorted(set(zip(table["layer_a"], table["layer_b"]))) == [(a, b) for a in (1, 2) for b in (1, 2, 3)]
    store_a, store_b = open_store(path_a), open_store(path_b)
    everything = np.arange(len(LENGTHS))
    for la in (1, 2):
        maps_a = attention_maps(store_a, la, everything)  # what the job reads (float32)
        np.testing.assert_allclose(maps_a[0], A[la - 1][0], atol=1e-6)
        for lb in (1, 2, 3):
            maps_b = attention_maps(store_b, lb, everything)
            here = rows_of(table, layer_a=la, layer_b=lb)

            def value(label, direction):
                return rows_of(here, measure=label, direction=direction)["value"].item()

            for label, name in (("pearson", "pearson"), ("js", "js"), ("frob", "frobenius")):
                # the job computes the terms of every re-pairing in one batch, attnsim the observed pairs alone
                rtol, atol = terms_tolerance(name, LENGTHS)
                assert value(label, "a->b") == pytest.approx(attnsim(maps_a, maps_b, name).value, rel=rtol, abs=atol)
                assert value(label, "b->a") == pytest.approx(attnsim(maps_b, maps_a, name).value, rel=rtol, abs=atol)
                # and the maps as written, to float32 rounding
                assert value(label, "a->b") == pytest.approx(attnsim(A[la - 1], B[lb - 1], name).value, rel=1e-5)
            assert value("cka", "symmetric") == pytest.approx(
                distributed_similarity(maps_a, maps_b, "cka").value, rel=1e-12)
            assert value("pw", "a->b") == pytest.approx(distributed_similarity(maps_a, maps_b, "pwcca").value, rel=1e-10)
            assert value("pw", "b->a") == pytest.approx(distributed_similarity(maps_b, maps_a, "pwcca").value, rel=1e-10)
            assert value("sv", "symmetric") == pytest.approx(
                distributed_similarity(maps_a, maps_b, "svcca", threshold=0.99).value, rel=1e-10)
            best = json.loads(rows_of(here, measure="js", direction="a->b")["meta"].item())["best_head"]
            assert best == attnsim(maps_a, maps_b, "js").meta["best_head"].tolist()


def test_interval_contains_the_value_and_statistics_are_complete(pair_of_stores):
    path_a, path_b, _, _ = pair_of_stores
    table, _ = run(path_a, path_b, {**HEAD, "cka": {"measure": "cka"}})
    assert np.all(table["ci_low"] <= table["value"]) and np.all(table["value"] <= table["ci_high"])
    assert table[["value", "null_mean", "null_std", "null_p", "ci_low", "ci_high"]].notna().all().all()
    assert set(table["n_resamples"]) == {20} and set(table["n_permutations"]) == {8}
    assert np.all((table["null_p"] > 0) & (table["null_p"] <= 1))
    meta = json.loads(table["meta"].iloc[0])
    assert meta["interval"]["sentences_per_resample"] == len(LENGTHS) // 2
    assert meta["examples"]["used"] == len(LENGTHS) and meta["heads_a"] == 3 and meta["heads_b"] == 2


def test_null_re_pairs_only_equal_lengths(tmp_path):
    rng = np.random.default_rng(4)
    lengths = (3, 4, 5, 6, 4, 7)  # only the two 4s can be re-paired
    A = layers_of(rng, 1, 2, lengths)
    path_a = write_store(tmp_path / "a.zarr", "model-a", A)
    path_b = write_store(tmp_path / "b.zarr", "model-b", A)
    table, _ = run(path_a, path_b, {"pearson": {"measure": "pearson"}, "cka": {"measure": "cka"}})
    assert set(table["n"]) == {2}
    meta = json.loads(table["meta"].iloc[0])
    assert meta["examples"]["dropped_unshared_length"] == 4 and meta["words"] == 8
    assert np.all(table["ci_low"].isna()) and all("no interval" in w for w in table["warning"])
    pearson = rows_of(table, measure="pearson", direction="a->b")
    assert pearson["value"].item() == pytest.approx(1.0, abs=1e-12)
    # the only re-pairing swaps the two 4-word sentences: the null is that value, every draw
    swapped = attnsim([A[0][4], A[0][1]], [A[0][1], A[0][4]], "pearson").value
    assert pearson["null_mean"].item() == pytest.approx(swapped, abs=1e-6)
    assert pearson["null_std"].item() == pytest.approx(0.0, abs=1e-12)


def test_repairings_are_derangements_within_lengths():
    lengths = np.array([3, 4, 3, 4, 4, 5, 5, 3, 4])
    perms = job._repairings(lengths, 50, np.random.default_rng(0))
    for perm in perms:
        assert np.array_equal(np.sort(perm), np.arange(len(lengths)))
        assert np.array_equal(lengths[perm], lengths)
        assert not np.any(perm == np.arange(len(lengths)))


def test_max_examples_and_unusable_sentences(tmp_path):
    rng = np.random.default_rng(5)
    lengths = (4, 5) * 10
    A = layers_of(rng, 2, 2, lengths)
    B = layers_of(rng, 2, 2, lengths)
    B[1][3] = B[1][3].copy()
    B[1][3][:, 1] = np.nan  # a word no token reached, in layer 2 only
    path_a = write_store(tmp_path / "a.zarr", "model-a", A)
    path_b = write_store(tmp_path / "b.zarr", "model-b", B)
    table, _ = run(path_a, path_b, HEAD, max_examples=12)
    meta = json.loads(table["meta"].iloc[0])["examples"]
    assert meta["unusable"] == 1 and meta["chosen"] == 12 and table["n"].iloc[0] == 12 - meta["dropped_unshared_length"]
    full, _ = run(path_a, path_b, HEAD)
    assert set(full["n"]) == {19}
    # the same seed chooses the same sentences
    again, _ = run(path_a, path_b, HEAD, max_examples=12)
    np.testing.assert_array_equal(again["value"], table["value"])


def test_detail_table(pair_of_stores):
    path_a, path_b, A, B = pair_of_stores
    table, detail = run(path_a, path_b, {**HEAD, "cka": {"measure": "cka"}}, detail_layers=[(1, 3), (2, 1)])
    assert list(detail.columns) == job.DETAIL_COLUMNS
    assert len(detail) == 3 * 2 * 3 * 2  # heads_a × heads_b × head-level measures × detail pairs
    assert set(zip(detail["layer_a"], detail["layer_b"])) == {(1, 3), (2, 1)}
    cell = rows_of(detail, layer_a=2, layer_b=1, measure="frob")
    expected = attnsim(A[1], B[0], "frobenius").meta["head_similarity"]
    np.testing.assert_allclose(cell["value"].to_numpy().reshape(3, 2), expected, rtol=1e-5)
    assert set(cell["kind"]) == {"distance"}
    _, none = run(path_a, path_b, HEAD)
    assert none.empty and list(none.columns) == job.DETAIL_COLUMNS
    with pytest.raises(ValueError, match="outside"):
        run(path_a, path_b, HEAD, detail_layers=[(3, 1)])


# ---- checks -----------------------------------------------------------------------------------

def test_token_level_needs_the_same_tokens(tmp_path):
    rng = np.random.default_rng(6)
    words = layers_of(rng, 1, 2, LENGTHS)
    tokens_a = layers_of(rng, 1, 2, [t + 2 for t in LENGTHS])
    tokens_b = layers_of(rng, 1, 2, [t + 2 + (i == 0) for i, t in enumerate(LENGTHS)])
    path_a = write_store(tmp_path / "a.zarr", "model-a", words, token_maps=tokens_a)
    path_b = write_store(tmp_path / "b.zarr", "model-b", words, token_maps=tokens_b)
    with pytest.raises(ValueError, match="use level word"):
        run(path_a, path_b, HEAD, level="token")
    same = write_store(tmp_path / "c.zarr", "model-c", words, token_maps=tokens_a)
    table, _ = run(path_a, same, HEAD, level="token")
    assert json.loads(table["meta"].iloc[0])["tokens"] == sum(t + 2 for t in LENGTHS)
    assert np.all(rows_of(table, measure="js")["value"] == 0.0)


def test_different_rows_and_unknown_measures(tmp_path):
    rng = np.random.default_rng(7)
    A = layers_of(rng, 1, 2, LENGTHS)
    path_a = write_store(tmp_path / "a.zarr", "model-a", A)
    path_b = write_store(tmp_path / "b.zarr", "model-b", A, rows=np.arange(len(LENGTHS)) + 1)
    with pytest.raises(ValueError, match="model-a and model-b"):
        run(path_a, path_b, HEAD)
    with pytest.raises(ValueError, match="unknown measure 'cosine'"):
        run(path_a, path_a, {"c": {"measure": "cosine"}})
    with pytest.raises(ValueError, match="no parameter"):
        run(path_a, path_a, {"p": {"measure": "pearson", "params": {"k": 3}}})
    with pytest.raises(ValueError, match="no parameter"):
        run(path_a, path_a, {"c": {"measure": "cka", "params": {"bogus": 1}}})
    lonely = write_store(tmp_path / "c.zarr", "model-c", layers_of(rng, 1, 2, (3, 4, 5, 6)))
    with pytest.raises(ValueError, match="no two"):
        run(lonely, lonely, HEAD)
    outside = write_store(tmp_path / "d.zarr", "model-d", A, attention_splits=("train",))
    with pytest.raises(KeyError, match="detail_splits"):
        run(outside, outside, HEAD)


def test_progress_lines(pair_of_stores, capsys):
    path_a, path_b, _, _ = pair_of_stores
    run(path_a, path_b, {"js": {"measure": "js"}})
    lines = [line for line in capsys.readouterr().out.splitlines() if "attention layer" in line]
    assert len(lines) == 2 and lines[0].startswith("model-a vs model-b, attention layer 1/2")
