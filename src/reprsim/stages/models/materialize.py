"""Models: materialise every source into one save_pretrained layout.

Sources: `hf` (hub id), `local` (a directory), `package` (a model directory
shipped inside an installed Python package), `init` (random initialisation of a
transformers architecture from a config dict and a seed, with the tokenizer of another model or a
byte-level BPE trained on a dataset's train split). Causal LMs pretrained from scratch (`pretrain`) are
built by :mod:`reprsim.stages.models.pretrain`, fine-tuned models by
:mod:`reprsim.stages.finetune.training`; both land in the same layout.

Whatever the source, weights load from safetensors only (no pickle), no model code
runs (trust_remote_code=False), and a model with NaN or inf weights is refused.

A hub model loads by id and revision through transformers, which reads the hub cache (HF_HOME / HF_HUB_CACHE)
and, online, downloads into it; offline (HF_HUB_OFFLINE=1, the jobs on a cluster) the cache must hold the
revision's snapshot with config.json, safetensors weights and the tokenizer, which is checked first so that
a miss is named (model, id, revision, file, cache) rather than reported as transformers' "couldn't find them
in the cached files" (reprsim.io.hub).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
)

from reprsim.io.hub import NotCached, cached_snapshot, describe, miss_message, offline
from reprsim.io.model_files import locate_package_model, model_problems
from reprsim.io.outputs import atomic_directory, write_json
from reprsim.io.provenance import file_checksums, hash_directory
from reprsim.nets.language_models import texts_of
from reprsim.nets.loading import check_finite, describe_model, open_tokenizer
from reprsim.nets.tokenizers import train_byte_bpe

# the texts of a prepared dataset's split: reprsim.nets.language_models.texts_of (kept under its former name)
dataset_texts = texts_of

# loading a source: safetensors weights only, and never code shipped with a model
SAFE = {"use_safetensors": True, "trust_remote_code": False}


def init_model(architecture: str, overrides: dict, tokenizer, seed: int, auto_class=AutoModel) -> PreTrainedModel:
    """A randomly initialised `architecture` whose vocabulary matches `tokenizer` (`auto_class`: the transformers
    auto class that builds it, AutoModel for the encoder alone; AutoModelForCausalLM adds a language-model head)."""
    fields = {"vocab_size": len(tokenizer), **overrides}
    # the tokenizer's own special tokens: an architecture's defaults (GPT-2's <|endoftext|> = 50256) may lie
    # outside a small vocabulary, such as a byte-level BPE trained on the dataset
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if getattr(tokenizer, key) is not None:
            fields.setdefault(key, getattr(tokenizer, key))
    try:
        config = AutoConfig.for_model(architecture, **fields)
    except ValueError as error:
        raise ValueError(f"cannot build a {architecture!r} config from {overrides}: {error}") from error
    torch.manual_seed(seed)
    return auto_class.from_config(config)


def train_tokenizer(train: dict, dataset_dir: str | Path):
    """A byte-level BPE (:func:`reprsim.nets.tokenizers.train_byte_bpe`) trained on the train split of the
    dataset at `dataset_dir`, as a model's `tokenizer: {train: {...}}` asks; and what meta.json records of it."""
    settings = {"vocab_size": 4000, "seed": 0, "max_texts": None, "min_frequency": 2, **train}
    texts = texts_of(dataset_dir, "train")
    tokenizer = train_byte_bpe(texts, int(settings["vocab_size"]), seed=int(settings["seed"]),
                               max_texts=settings["max_texts"], min_frequency=int(settings["min_frequency"]))
    usable = sum(1 for t in texts if t.strip())  # train_byte_bpe skips blank texts, then draws max_texts
    used = usable if settings["max_texts"] is None else min(usable, int(settings["max_texts"]))
    record = {"dataset": settings.get("dataset"), "split": "train", "vocab_size": int(settings["vocab_size"]),
              "vocab_size_obtained": len(tokenizer), "seed": int(settings["seed"]),
              "max_texts": settings["max_texts"], "min_frequency": int(settings["min_frequency"]), "texts_used": used}
    return tokenizer, record


def _check_source_dir(name: str, origin: Path) -> None:
    """A source directory holds config.json, safetensors weights and a tokenizer, or the error says what to do."""
    problems = model_problems(origin)
    if problems:
        path, problem = problems[0]
        raise FileNotFoundError(
            f"models.{name}: {path}: {problem}; save both the model and its tokenizer into {origin}: "
            f"model.save_pretrained({str(origin)!r}) and tokenizer.save_pretrained({str(origin)!r}) "
            "(save_pretrained writes safetensors weights)"
        )


def _hub_model_problem(name: str, spec: dict, error: BaseException | None = None) -> ValueError | None:
    """What the hub cache lacks of hub model `name` (the revision's snapshot, or a file in it) as an error
    naming the model, its id and revision and the cache; None when the cache holds everything. After a
    failed load (`error`), an error in any case, carrying the loader's."""
    source = describe("model", spec["id"], spec.get("revision"))
    try:
        snapshot = cached_snapshot(spec["id"], "model", spec.get("revision"))
    except NotCached as miss:
        return ValueError(miss_message(f"model {name!r}", source, str(miss), error))
    problems = model_problems(snapshot)
    if problems:
        path, problem = problems[0]
        missing = (f"its snapshot {snapshot} has {problem}" if path == snapshot
                   else f"file {path.relative_to(snapshot).as_posix()} of its snapshot {snapshot} is {problem}")
        if "pickle" in problem:
            missing += ("; pin the revision that holds safetensors weights (e.g. the hub's conversion pull "
                        "request, revision: refs/pr/N)")
        return ValueError(miss_message(f"model {name!r}", source, missing, error))
    if error is not None:
        return ValueError(miss_message(f"model {name!r}", source, f"the cached snapshot {snapshot} holds config, "
                                       "weights and tokenizer, yet loading failed", error))
    return None


def _save(model: PreTrainedModel, tokenizer, out_dir: Path, meta: dict[str, Any]) -> dict[str, Any]:
    with atomic_directory(out_dir) as tmp:
        model.save_pretrained(tmp)  # safetensors (transformers' default; the only format transformers 5 writes)
        tokenizer.save_pretrained(tmp)
        # per-file checksums let `reprsim verify` name a damaged file; content_hash identifies the model
        meta = {**meta, **describe_model(model), "content_hash": hash_directory(tmp), "checksums": file_checksums(tmp)}
        write_json(tmp / "meta.json", meta)
    return meta


def with_its_head(config) -> type:
    """The auto class that keeps a checkpoint's head: a task classifier (e.g. BERTs fine-tuned on MNLI) keeps
    its classification head and a causal LM its language-model head, which stitching scores through; any
    other checkpoint loads as the encoder alone."""
    architectures = config.architectures or []
    if any(name.endswith("ForSequenceClassification") for name in architectures):
        return AutoModelForSequenceClassification
    if any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in architectures):
        return AutoModelForCausalLM
    return AutoModel


def materialize_model(
    name: str, spec: dict, out_dir: str | Path, tokenizer_dir: str | Path | None = None,
    dataset_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Build model `name` from `spec` into `out_dir` (save_pretrained + meta.json).

    A random model (`init`) takes the tokenizer saved in `tokenizer_dir` (``tokenizer: <model>``), or one
    trained on the train split of the dataset at `dataset_dir` (``tokenizer: {train: {dataset, ...}}``)."""
    source = spec["source"]
    meta: dict[str, Any] = {"name": name, "source": source, "spec": spec, "seed": None, "parent": None}
    if source in ("local", "package", "hf"):
        if source == "hf":
            origin, kwargs = spec["id"], {"revision": spec.get("revision")}
            if offline() and (problem := _hub_model_problem(name, spec)):
                raise problem
        else:
            origin = Path(spec["path"]) if source == "local" else locate_package_model(spec["package"], spec.get("subdir"))
            _check_source_dir(name, origin)
            kwargs = {}
        meta["origin"] = str(origin)
        try:
            auto_class = with_its_head(AutoConfig.from_pretrained(origin, trust_remote_code=False, **kwargs))
            model = auto_class.from_pretrained(origin, **SAFE, **kwargs)
            tokenizer = AutoTokenizer.from_pretrained(origin, trust_remote_code=False, **kwargs)
        except OSError as error:  # transformers' and huggingface_hub's "not found" errors are OSErrors
            if source != "hf":
                raise
            raise _hub_model_problem(name, spec, error) from error
    elif source == "init" and isinstance(spec["tokenizer"], dict):
        train = spec["tokenizer"]["train"]
        if dataset_dir is None:
            raise ValueError(f"model {name!r} (source init) trains its tokenizer on dataset "
                             f"{train.get('dataset')!r}: it needs that dataset's directory")
        tokenizer, trained = train_tokenizer(train, dataset_dir)
        model = init_model(spec["architecture"], spec.get("config", {}), tokenizer, int(spec["seed"]))
        meta.update(seed=int(spec["seed"]), tokenizer_from=f"trained on {trained['dataset']}",
                    tokenizer_trained=trained)
        print(f"{name}: byte-level BPE of {trained['vocab_size_obtained']} tokens (asked {trained['vocab_size']}) "
              f"from {trained['texts_used']} texts of {trained['dataset']}'s train split", flush=True)
    elif source == "init":
        if tokenizer_dir is None:
            raise ValueError(f"model {name!r} (source init) needs the directory of its tokenizer model")
        tokenizer = open_tokenizer(tokenizer_dir)
        model = init_model(spec["architecture"], spec.get("config", {}), tokenizer, int(spec["seed"]))
        meta.update(seed=int(spec["seed"]), tokenizer_from=spec["tokenizer"])
    else:
        raise ValueError(f"materialize_model cannot build source {source!r}; fine-tuned models come from the finetune "
                         "stage, pretrained ones (pretrain) from reprsim.stages.models.pretrain")
    check_finite(model, f"model {name!r} ({meta.get('origin', source)})", "its weights are broken: use another "
                 "checkpoint or revision")
    return _save(model, tokenizer, Path(out_dir), meta)


