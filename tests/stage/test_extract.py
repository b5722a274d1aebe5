"""Extraction: store layout and shapes, pooling definitions, token offsets, atomic writes."""

import numpy as np
import pytest
import torch

from reprsim.io.store import open_store, pooled_rows
from reprsim.nets.loading import load_encoder
from reprsim.stages.extract.activations import extract_activations


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def extracted(request, tiny_models, tiny_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("stores") / f"{request.param}.zarr"
    extract_activations(tiny_models[request.param], tiny_dataset, out, splits=["train", "validation", "test"],
                        batch_size=7, max_length=24, chunk_rows=16, chunk_tokens=50,
                        provenance={"model": request.param, "dataset": "tiny"})
    return request.param, tiny_models[request.param], out


def test_shapes_and_attrs(extracted):
    family, model_dir, path = extracted
    store = open_store(path)
    layers = {"bert": 3, "gpt2": 4}[family]
    for pooling in ("mean", "cls", "last"):
        assert store[f"pooled/{pooling}"].shape == (layers, 80, 32)
        assert np.isfinite(store[f"pooled/{pooling}"][:]).all()
    offsets = store["tokens/offsets"][:]
    assert offsets[0] == 0 and len(offsets) == 81 and np.all(np.diff(offsets) > 0)
    assert store["tokens/hidden"].shape == (layers, offsets[-1], 32)
    assert store["tokens/input_ids"].shape == store["tokens/word_ids"].shape == (offsets[-1],)
    assert store.attrs["model"] == family and store.attrs["split_sizes"] == {"train": 40, "validation": 20, "test": 20}
    assert store["pooled/mean"].chunks == (1, 16, 32)
    assert not list(path.parent.glob("*.tmp-*"))


def test_poolings_match_their_definitions(extracted):
    """mean excludes padding, cls is the first token, last is the last non-padding token."""
    family, model_dir, path = extracted
    store = open_store(path)
    tokens, offsets = store["tokens/hidden"][:], store["tokens/offsets"][:]
    for i in (0, 13, 79):
        own = tokens[:, offsets[i]:offsets[i + 1]]
        np.testing.assert_allclose(store["pooled/mean"][:, i], own.mean(axis=1), atol=1e-5)
        np.testing.assert_allclose(store["pooled/cls"][:, i], own[:, 0], atol=1e-6)
        np.testing.assert_allclose(store["pooled/last"][:, i], own[:, -1], atol=1e-6)


def test_batching_does_not_change_values(extracted, tiny_dataset):
    """An example alone (no padding) gives the hidden states stored from a padded batch."""
    family, model_dir, path = extracted
    store = open_store(path)
    model = load_encoder(model_dir, torch.device("cpu"))
    offsets = store["tokens/offsets"][:]
    i = int(np.argmin(np.diff(offsets)))  # the shortest example was padded in its batch
    ids = store["tokens/input_ids"][offsets[i]:offsets[i + 1]]
    with torch.no_grad():
        hidden = model(input_ids=torch.as_tensor(ids)[None], output_hidden_states=True).hidden_states
    alone = torch.stack(hidden)[:, 0].numpy()
    np.testing.assert_allclose(store["tokens/hidden"][:, offsets[i]:offsets[i + 1]], alone, atol=1e-5)


def test_split_rows(extracted):
    _, _, path = extracted
    store = open_store(path)
    assert pooled_rows(store, "mean", "test").shape[1] == 20
    with pytest.raises(KeyError, match="nope"):
        pooled_rows(store, "mean", "nope")


def test_float16_storage(tiny_models, tiny_dataset, tmp_path):
    extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "h.zarr", splits=["test"],
                        dtype="float16", tokens=False, poolings=["mean"])
    store = open_store(tmp_path / "h.zarr")
    assert store["pooled/mean"].dtype == np.float16 and "tokens" not in store


def test_interrupted_extraction_leaves_no_store(tiny_models, tiny_dataset, tmp_path, monkeypatch):
    """A job that dies mid-way leaves neither a finished-looking store nor its temporary."""
    import reprsim.stages.extract.activations as extract

    calls = {"n": 0}
    real_pool = extract.pool

    def dying_pool(hidden, mask, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_pool(hidden, mask, *args)

    monkeypatch.setattr(extract, "pool", dying_pool)
    with pytest.raises(KeyboardInterrupt):
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "x.zarr", splits=["train"], batch_size=4)
    assert calls["n"] == 3
    assert list(tmp_path.iterdir()) == []


def test_token_minibatch_cka_streams_to_the_in_memory_value(extracted, tiny_models, tiny_dataset, tmp_path):
    """Streaming from the stores gives exactly minibatch CKA on the same token rows in memory."""
    from reprsim.metrics.cka import minibatch_cka_layers
    from reprsim.stages.compare.tokens import token_minibatch_cka

    family, model_dir, path = extracted
    other = tmp_path / "other.zarr"
    extract_activations(tiny_models["bert"], tiny_dataset, other, splits=["train", "validation", "test"],
                        batch_size=5, max_length=24, chunk_tokens=37)
    # both tiny models borrow MiniLM's tokenizer, so their token rows correspond
    streamed, meta = token_minibatch_cka(path, other, batch_size=64)
    a, b = open_store(path)["tokens/hidden"][:], open_store(other)["tokens/hidden"][:]
    expected, _ = minibatch_cka_layers(a, b, batch_size=64)
    np.testing.assert_allclose(streamed, expected.numpy(), atol=1e-10)
    assert meta["n_batches"] == a.shape[1] // 64


def test_token_cka_refuses_different_tokenisations(extracted, tmp_path):
    import shutil

    import zarr

    from reprsim.stages.compare.tokens import token_minibatch_cka

    _, _, path = extracted
    copy = tmp_path / "copy.zarr"
    shutil.copytree(path, copy)
    ids = zarr.open_group(copy, mode="r+")["tokens/input_ids"]
    ids[0] = ids[0] + 1
    with pytest.raises(ValueError, match="tokenised the inputs differently"):
        token_minibatch_cka(path, copy, batch_size=16)


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def detailed(request, tiny_models, tiny_dataset, tmp_path_factory):
    """A store with word rows and attention maps for the test split (float32 maps, to check sums)."""
    out = tmp_path_factory.mktemp("detail") / f"{request.param}.zarr"
    extract_activations(tiny_models[request.param], tiny_dataset, out, splits=["train", "test"], batch_size=7,
                        max_length=24, chunk_tokens=50, detail_splits=["test"], attention=True,
                        attention_dtype="float32", provenance={"model": request.param, "dataset": "tiny"})
    return request.param, open_store(out)


def test_word_rows_are_the_last_sub_word_of_each_data_word(detailed):
    family, store = detailed
    split, n_words = store["examples/split"][:], store["examples/n_words"][:]
    test = split == store.attrs["split_names"].index("test")
    offsets = store["words/offsets"][:]
    assert np.array_equal(np.diff(offsets), np.where(test, n_words, 0))  # only the detail split has words
    tokens, word_ids = store["tokens/offsets"][:], store["tokens/word_ids"][:]
    hidden, words = store["tokens/hidden"][:], store["words/hidden"][:]
    for i in np.flatnonzero(test)[:5]:
        ids = word_ids[tokens[i]:tokens[i + 1]]
        for w in range(n_words[i]):
            last = tokens[i] + np.flatnonzero(ids == w)
            if len(last):  # the word's last sub-word token, every layer
                np.testing.assert_array_equal(words[:, offsets[i] + w], hidden[:, last[-1]])
            else:  # cut off by max_length: no token reached it
                assert np.isnan(words[:, offsets[i] + w]).all()
    assert store.attrs["words"]["words"] == offsets[-1] and store.attrs["word_pooling"] == "last"


def test_attention_maps_are_row_distributions_over_the_example_s_own_tokens(detailed):
    family, store = detailed
    heads, blocks = 2, {"bert": 2, "gpt2": 3}[family]
    assert store.attrs["attention"] == {"layers": blocks, "heads": heads, "dtype": "float32", "splits": ["test"],
                                        "layer_axis": "0 = block 1"}
    lengths, n_words = store["examples/n_tokens"][:], store["examples/n_words"][:]
    maps, offsets = store["attention/maps"][:], store["attention/offsets"][:]
    word_maps, word_offsets = store["attention/word_maps"][:], store["attention/word_offsets"][:]
    assert maps.shape[:2] == (blocks, heads) and offsets[-1] == maps.shape[2]
    for i in np.flatnonzero(np.diff(offsets)):
        t = lengths[i]
        block = maps[:, :, offsets[i]:offsets[i + 1]].reshape(blocks, heads, t, t)
        np.testing.assert_allclose(block.sum(-1), 1.0, atol=1e-5)
        if family == "gpt2":  # causal: nothing above the diagonal, and the zeros are kept
            assert np.all(block[..., np.triu_indices(t, 1)[0], np.triu_indices(t, 1)[1]] == 0)
        w = n_words[i]
        word_block = word_maps[:, :, word_offsets[i]:word_offsets[i + 1]].reshape(blocks, heads, w, w)
        if np.isfinite(word_block).all():
            np.testing.assert_allclose(word_block.sum(-1), 1.0, atol=1e-5)


def test_attention_maps_match_the_model_s_own_output(detailed, tiny_models):
    """The stored maps are transformers' attention weights for the example, padding removed."""
    family, store = detailed
    i = int(np.flatnonzero(np.diff(store["attention/offsets"][:]))[0])
    t = int(store["examples/n_tokens"][i])
    ids = store["tokens/input_ids"][:][store["tokens/offsets"][:][i]:store["tokens/offsets"][:][i] + t]
    model = load_encoder(tiny_models[family], torch.device("cpu"), attention=True)
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(ids)[None], output_attentions=True)
    o = store["attention/offsets"][:]
    stored = store["attention/maps"][:, :, o[i]:o[i + 1]].reshape(len(out.attentions), -1, t, t)
    np.testing.assert_allclose(stored, torch.stack(out.attentions)[:, 0].numpy(), atol=1e-5)


def test_attention_above_its_size_limit_is_refused_before_any_forward_pass(tiny_models, tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match=r"attention maps would take .* GB, above extraction.attention_max_gb = 1e-06"):
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "big.zarr", splits=["test"],
                            detail_splits=["test"], attention=True, attention_max_gb=1e-6)
    assert not (tmp_path / "big.zarr").exists()
    with pytest.raises(ValueError, match=r"detail split\(s\) \['validation'\] are not extracted"):
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "x.zarr", splits=["test"],
                            detail_splits=["validation"])


def test_model_without_a_position_limit_extracts(minilm_dir, tiny_dataset, tmp_path):
    """XLNet's config says max_position_embeddings = -1 (relative positions, no limit): extraction keeps
    extraction.max_length instead of reading -1 as the limit (which made the tokenizer fail)."""
    from transformers import AutoTokenizer

    from reprsim.stages.models.materialize import init_model

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    model = init_model("xlnet", {"d_model": 32, "n_layer": 2, "n_head": 2, "d_inner": 64}, tokenizer, seed=0)
    assert model.config.max_position_embeddings == -1
    model_dir = tmp_path / "xlnet"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    attrs = extract_activations(model_dir, tiny_dataset, tmp_path / "xlnet.zarr", splits=["test"], batch_size=7,
                                max_length=24, detail_splits=["test"], attention=True)  # as wu-glue.yaml asks
    store = open_store(tmp_path / "xlnet.zarr")
    assert attrs["max_length"] == 24 and store["pooled/mean"].shape == (3, 20, 32)
    assert np.isfinite(store["pooled/mean"][:]).all() and np.isfinite(store["words/hidden"][:]).all()
    assert attrs["attention"]["heads"] == 2
