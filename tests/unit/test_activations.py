"""reprsim.activations: a model's outputs by module name, pooled as the extract stage pools (reprsim.nets.pooling).

On MiniLM and 40 SST-2 sentences its mean, cls, last and per-token rows of the embedding output and every block equal
the activation store extract_activations writes (same rows, batches and max_length); on a toy module with a padding
mask, its rows equal a loop over the examples' real tokens; bad inputs are refused naming the fix."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from reprsim.nets.activations import Activations, ActivationsError, activations
from reprsim.nets.pooling import pool, token_rows

ROWS, BATCH, MAX_LENGTH = 40, 8, 24  # max_length 24 truncates some of the 40 sentences


# ------------------------------------------------------------------ equal to the workflow's store


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    from transformers import AutoModel, AutoTokenizer

    return AutoModel.from_pretrained(minilm_dir), AutoTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def minilm_store(minilm_dir, sst2_sample, tmp_path_factory):
    """The extract stage's store of MiniLM on the first 40 test sentences, in consecutive batches of 8 (unsorted:
    the batches the public function runs), and those sentences as the stage read them."""
    from reprsim.io.datasets import load_split
    from reprsim.io.store import open_store
    from reprsim.stages.extract.activations import TruncationWarning, extract_activations

    path = tmp_path_factory.mktemp("activations") / "minilm.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        extract_activations(minilm_dir, sst2_sample, path, splits=["test"], max_examples=ROWS, batch_size=BATCH,
                            max_length=MAX_LENGTH, sort_window=None)
    texts = load_split(sst2_sample, "test")["text"].tolist()[:ROWS]
    return open_store(path), texts


STORED_LAYERS = ["embeddings"] + [f"encoder.layer.{i}" for i in range(6)]


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_pooled_rows_equal_the_store(minilm, minilm_store, pooling):
    model, tokenizer = minilm
    store, texts = minilm_store
    assert store.attrs["truncated"]["test"] > 0  # truncation is exercised
    result = activations(model, texts, tokenizer=tokenizer, pooling=pooling, batch_size=BATCH, max_length=MAX_LENGTH)
    assert list(result) == STORED_LAYERS  # the default: the modules output_hidden_states reads, in its order
    stored = store[f"pooled/{pooling}"][:]
    assert result.stack().dtype == np.float32 and result.stack().shape == stored.shape == (7, ROWS, 384)
    difference = float(np.abs(result.stack() - stored).max())
    assert difference <= 1e-6, difference


def test_token_rows_equal_the_store(minilm, minilm_store):
    model, tokenizer = minilm
    store, texts = minilm_store
    result = activations(model, texts, STORED_LAYERS, tokenizer=tokenizer, pooling="tokens", batch_size=BATCH,
                         max_length=MAX_LENGTH)
    offsets = store["tokens/offsets"][:]
    np.testing.assert_array_equal(offsets[result.example] + result.position, np.arange(offsets[-1]))
    np.testing.assert_array_equal(np.bincount(result.example, minlength=ROWS), np.diff(offsets))
    difference = float(np.abs(result.stack() - store["tokens/hidden"][:]).max())
    assert difference <= 1e-6, difference
    assert result.n_examples == ROWS and result.pooling == "tokens"


def test_a_gpt2_model_defaults_to_its_hidden_states():
    """GPT-2's hidden states: the embeddings after dropout (`drop`), each block, and the last after ln_f."""
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(n_embd=16, n_layer=3, n_head=2, n_positions=32, vocab_size=50))
    ids, mask = torch.randint(0, 50, (3, 6)), torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4])
    result = activations(model, {"input_ids": ids, "attention_mask": mask}, pooling="last")
    assert list(result) == ["drop", "h.0", "h.1", "ln_f"]
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    np.testing.assert_array_equal(result.stack(), pool(hidden, mask, ("last",))["last"].numpy())


# ------------------------------------------------------------------ any torch module


class Toy(nn.Module):
    """An embedding and two linear layers, token by token (no mixing across tokens), taking a padding mask."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed, self.first, self.second = nn.Embedding(20, 8), nn.Linear(8, 6), nn.Linear(6, 4)

    def forward(self, input_ids, attention_mask=None):
        return self.second(torch.relu(self.first(self.embed(input_ids))))


def toy_batches(pad_id: int = 0, left: bool = False):
    """Two batches of right (or left) padded token ids: examples of 3, 5, 1 tokens, then 4, 2."""
    examples = [[3, 4, 5], [6, 7, 8, 9, 10], [11], [12, 13, 14, 15], [16, 17]]
    batches = []
    for group in (examples[:3], examples[3:]):
        width = max(map(len, group))
        ids = torch.full((len(group), width), pad_id)
        mask = torch.zeros((len(group), width), dtype=torch.int64)
        for i, row in enumerate(group):
            place = slice(width - len(row), width) if left else slice(0, len(row))
            ids[i, place], mask[i, place] = torch.tensor(row), 1
        batches.append({"input_ids": ids, "attention_mask": mask})
    return examples, batches


def manual(model: Toy, examples, pooling: str) -> dict[str, np.ndarray]:
    """Each layer's rows computed example by example on its real tokens alone."""
    rows = {"embed": [], "first": [], "second": []}
    with torch.no_grad():
        for ids in examples:
            embed = model.embed(torch.tensor(ids))
            first = model.first(embed)
            second = model.second(torch.relu(first))
            for name, values in (("embed", embed), ("first", first), ("second", second)):
                chosen = {"mean": values.mean(dim=0, keepdim=True), "cls": values[:1], "last": values[-1:],
                          "tokens": values}[pooling]
                rows[name].append(chosen.numpy())
    return {name: np.concatenate(values) for name, values in rows.items()}


@pytest.mark.parametrize("pooling", ["mean", "cls", "last", "tokens"])
@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
def test_a_torch_module_with_a_mask_equals_a_manual_computation(pooling, left):
    model = Toy()
    examples, batches = toy_batches(pad_id=0, left=left)
    result = activations(model, batches, ["embed", "first", "second"], pooling=pooling)
    expected = manual(model, examples, pooling)
    assert list(result) == ["embed", "first", "second"] and result.n_examples == 5
    for name in expected:
        np.testing.assert_allclose(result[name], expected[name], rtol=1e-6, atol=1e-6, err_msg=name)
    if pooling == "tokens":
        lengths = [len(e) for e in examples]
        np.testing.assert_array_equal(result.example, np.repeat(np.arange(5), lengths))
        np.testing.assert_array_equal(result.position, np.concatenate([np.arange(n) for n in lengths]))
    else:
        assert result.example is None and result.position is None


def test_padding_is_excluded_from_the_mean():
    """Other padding ids (whose rows differ) leave the pooled rows as they are."""
    model = Toy()
    _, batches = toy_batches(pad_id=0)
    _, other = toy_batches(pad_id=19)
    for pooling in ("mean", "last"):
        a = activations(model, batches, ["first", "second"], pooling=pooling)
        b = activations(model, other, ["first", "second"], pooling=pooling)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    unmasked = [{"input_ids": batch["input_ids"]} for batch in other]  # no mask: padding counted as tokens
    assert not np.allclose(activations(model, unmasked, "second")["second"][:3],
                           activations(model, other, "second")["second"][:3])


def test_a_sequential_with_tensor_batches():
    """Tensors (no mask: every token real); a (batch, features) output is returned as it is."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
    tokens = [torch.randn(4, 6, 5), torch.randn(2, 6, 5)]
    result = activations(model, tokens, ["0", "2"])
    with torch.no_grad():
        hidden = [model[0](x) for x in tokens]
        np.testing.assert_allclose(result["0"], torch.cat([h.mean(dim=1) for h in hidden]).numpy(), atol=1e-6)
        np.testing.assert_allclose(result["2"], torch.cat([model(x).mean(dim=1) for x in tokens]).numpy(), atol=1e-6)
    flat = activations(model, [torch.randn(3, 5)], ["1"], pooling="cls")
    assert flat["1"].shape == (3, 7)
    inplace = nn.Sequential(nn.Linear(5, 7), nn.ReLU(inplace=True))  # rewrites the Linear's output after its hook
    x = torch.randn(3, 5)
    with torch.no_grad():
        np.testing.assert_array_equal(activations(inplace, x, "0")["0"], inplace[0](x).numpy())
    with pytest.raises(ActivationsError, match="no token axis"):
        activations(model, [torch.randn(3, 5)], ["1"], pooling="tokens")


def test_hooks_removed_and_model_left_in_eval_mode():
    model = Toy().train()

    def hooks():
        return sum(len(module._forward_hooks) for module in model.modules())

    _, batches = toy_batches()
    activations(model, batches, ["embed", "second"])
    assert hooks() == 0 and not model.training
    ids = batches[1]["input_ids"]
    broken = [batches[0], {"input_ids": ids, "attention_mask": torch.zeros_like(ids)}]
    with pytest.raises(ActivationsError, match="no real token"):
        activations(model, broken, ["embed", "second"])
    assert hooks() == 0


def test_float16_and_a_progress_line(capsys):
    model = Toy()
    _, batches = toy_batches()
    half = activations(model, batches, "second", dtype="float16", progress=True)
    assert half["second"].dtype == np.float16
    np.testing.assert_allclose(half["second"], activations(model, batches, "second")["second"], rtol=1e-3, atol=1e-3)
    printed = capsys.readouterr().err
    assert "activations: batch 1, 3 examples" in printed and "activations: done: 2 batches, 5 examples" in printed


def test_the_pooling_library_ignores_padding_side():
    torch.manual_seed(0)
    right = torch.randn(2, 5, 3)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    left = torch.stack([torch.cat([right[0, 3:], right[0, :3]]), right[1]])
    left_mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    a, b = pool([right], mask), pool([left], left_mask)
    for name in ("mean", "cls", "last"):
        torch.testing.assert_close(a[name], b[name])
    rows, example, position = token_rows(left, left_mask)
    assert rows.shape == (8, 3) and example.tolist() == [0] * 3 + [1] * 5
    assert position.tolist() == [0, 1, 2, 0, 1, 2, 3, 4]
    torch.testing.assert_close(rows, token_rows(right, mask)[0])


# ------------------------------------------------------------------ bad inputs


def test_an_unknown_layer_names_close_ones(minilm):
    model, tokenizer = minilm
    with pytest.raises(ActivationsError, match=r"no module named 'encoder.layr.1'.*close names: encoder.layer.1"):
        activations(model, ["a film"], ["encoder.layr.1"], tokenizer=tokenizer)
    with pytest.raises(ActivationsError, match=r"'layer.3'.*encoder.layer.3"):
        activations(model, ["a film"], "layer.3", tokenizer=tokenizer)


def test_bad_pooling_dtype_and_settings():
    model = Toy()
    _, batches = toy_batches()
    with pytest.raises(ActivationsError, match=r"pooling must be one of mean, cls, last, tokens; got 'max'"):
        activations(model, batches, "embed", pooling="max")
    with pytest.raises(ActivationsError, match=r"did you mean 'mean'"):
        activations(model, batches, "embed", pooling="means")
    with pytest.raises(ActivationsError, match="dtype must be one of float32, float16"):
        activations(model, batches, "embed", dtype="float64")
    with pytest.raises(ActivationsError, match="batch_size must be an integer"):
        activations(model, batches, "embed", batch_size=0)
    with pytest.raises(ActivationsError, match="model must be a torch.nn.Module"):
        activations("bert", batches, "embed")
    with pytest.raises(ActivationsError, match="layers names .embed. more than once"):
        activations(model, batches, ["embed", "embed"])


def test_strings_need_a_tokenizer_and_batches_refuse_one(minilm):
    model, tokenizer = minilm
    with pytest.raises(ActivationsError, match="inputs are strings, so the model's tokenizer is needed: pass"):
        activations(model, ["a film", "another"])
    with pytest.raises(ActivationsError, match="inputs is one string"):
        activations(model, "a film", tokenizer=tokenizer)
    _, batches = toy_batches()
    with pytest.raises(ActivationsError, match="a tokenizer was given, so inputs must be strings; item 0 is a dict"):
        activations(model, batches, tokenizer=tokenizer)
    with pytest.raises(ActivationsError, match="inputs must be strings; item 1 is a int"):
        activations(model, ["a film", 3], tokenizer=tokenizer)
    with pytest.raises(ActivationsError, match="batch 0 is a int"):
        activations(Toy(), [1, 2], "embed")
    with pytest.raises(ActivationsError, match="inputs holds no batch"):
        activations(Toy(), [], "embed")


def test_modules_that_cannot_be_read():
    model = Toy()
    _, batches = toy_batches()
    with pytest.raises(ActivationsError, match="layers=None chooses the hidden states of a transformers model"):
        activations(model, batches)

    class Twice(Toy):
        def forward(self, input_ids, attention_mask=None):
            return self.first(torch.relu(self.first(self.embed(input_ids)[..., :8])[..., :6].repeat(1, 1, 2)[..., :8]))

    with pytest.raises(ActivationsError, match="'first' ran 2 times in one forward pass"):
        activations(Twice(), batches, "first")
    with pytest.raises(ActivationsError, match="'second' did not run"):
        activations(Twice(), batches, "second")
    assert isinstance(activations(model, batches, "embed"), Activations)
