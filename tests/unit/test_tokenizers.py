"""The offline byte-level BPE: deterministic, lossless, offsets into the text, saved and reloaded
as transformers does, and usable by a randomly initialised model."""

from importlib.resources import files

import pytest
import torch
from transformers import AutoTokenizer

from reprsim.nets.tokenizers import train_byte_bpe
from reprsim.stages.models.materialize import init_model

SENTENCES = [line.split("\t")[0] for line in
             files("reprsim.stages.data").joinpath("samples/sst2/train.tsv").read_text().splitlines()[1:401]]
TEXT = "it 's a charming , often hilarious -- and Zoë's 1990's score isn't bad ?!"


@pytest.fixture(scope="module")
def bpe():
    return train_byte_bpe(SENTENCES, vocab_size=600)


def test_vocabulary_is_bounded_and_training_deterministic(bpe):
    assert len(bpe) <= 600
    again = train_byte_bpe(SENTENCES, vocab_size=600)
    assert again.get_vocab() == bpe.get_vocab()
    assert again(TEXT)["input_ids"] == bpe(TEXT)["input_ids"]


def test_the_seed_draws_the_training_texts():
    a = train_byte_bpe(SENTENCES, vocab_size=400, max_texts=100, seed=0)
    assert a.get_vocab() == train_byte_bpe(SENTENCES, vocab_size=400, max_texts=100, seed=0).get_vocab()
    assert a.get_vocab() != train_byte_bpe(SENTENCES, vocab_size=400, max_texts=100, seed=1).get_vocab()


def test_lossless_with_offsets_into_the_text(bpe):
    encoded = bpe(TEXT, return_offsets_mapping=True)
    ids = encoded["input_ids"]
    assert ids[0] == bpe.bos_token_id and ids[-1] == bpe.eos_token_id
    assert bpe.decode(ids, skip_special_tokens=True) == TEXT
    spans = encoded["offset_mapping"][1:-1]
    assert spans == sorted(spans)  # in text order; a character of several bytes may span several tokens
    covered = {i for start, end in spans for i in range(start, end)}
    assert {i for i, c in enumerate(TEXT) if not c.isspace()} <= covered
    pair = bpe(TEXT, "a second text .")
    assert pair["input_ids"].count(bpe.eos_token_id) == 2


def test_saved_and_reloaded_like_any_tokenizer(bpe, tmp_path):
    bpe.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded(TEXT)["input_ids"] == bpe(TEXT)["input_ids"]
    batch = loaded([TEXT, "short ."], padding=True)
    assert batch["input_ids"][1][-1] == loaded.pad_token_id


def test_a_random_gpt2_runs_on_it(bpe):
    model = init_model("gpt2", {"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64}, bpe, seed=0)
    assert model.config.vocab_size == len(bpe) and model.config.pad_token_id == bpe.pad_token_id
    out = model(**bpe([TEXT], return_tensors="pt"), output_hidden_states=True)
    assert torch.isfinite(out.hidden_states[-1]).all()


def test_bad_requests_name_the_problem():
    with pytest.raises(ValueError, match="vocab_size 100 leaves no merges"):
        train_byte_bpe(SENTENCES, vocab_size=100)
    with pytest.raises(ValueError, match="no text"):
        train_byte_bpe(["", "  "], vocab_size=400)
