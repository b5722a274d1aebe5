"""Datasets: a built-in generator, samples shipped in the package, local files and the Hugging Face hub.

Every source ends as the same prepared layout, `{out}/{split}.parquet` for
split in train/validation/test with columns `text`, `text_pair` (null for
single-sentence tasks) and `label` (int class index), plus `meta.json`.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reprsim.io.outputs import atomic_directory, write_json

SPLITS = ("train", "validation", "test")
COLUMNS = ("text", "text_pair", "label")


# --------------------------------------------------------------------------- builtin
_SUBJECTS = [
    "the film", "this movie", "the story", "the acting", "the soundtrack", "the plot",
    "the ending", "the script", "the director's work", "the cast", "the dialogue",
    "the pacing", "the cinematography", "this book", "the show", "the performance",
]
_POSITIVE = [
    "wonderful", "brilliant", "moving", "delightful", "superb", "charming", "gripping",
    "clever", "beautiful", "memorable", "funny", "heartfelt", "inventive", "stunning",
]
_NEGATIVE = [
    "dull", "tedious", "clumsy", "boring", "awful", "forgettable", "shallow", "messy",
    "predictable", "lifeless", "bland", "annoying", "confusing", "painful",
]
_INTENSIFIERS = ["", "", "really ", "truly ", "rather ", "quite ", "utterly ", "somewhat "]
_FRAMES = [
    "{s} was {neg}{i}{a}.",
    "i thought {s} was {neg}{i}{a}.",
    "honestly, {s} is {neg}{i}{a}.",
    "{s} felt {neg}{i}{a} from start to finish.",
    "in the end {s} was {neg}{i}{a}.",
    "everyone agreed that {s} was {neg}{i}{a}.",
]
BUILTIN_LABEL_NAMES = ["negative", "positive"]


def generate_builtin(n_examples: int, seed: int) -> pd.DataFrame:
    """A deterministic two-class sentiment task: polarity word, flipped by 'not'.

    The label needs composition (negation flips the adjective's polarity), so
    a bag of words alone does not solve it and fine-tuning has something to learn.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_examples):
        positive = bool(rng.integers(2))
        negated = rng.random() < 0.3
        adjective = rng.choice(_POSITIVE if positive else _NEGATIVE)
        frame = rng.choice(_FRAMES)
        text = frame.format(
            s=rng.choice(_SUBJECTS),
            neg="not " if negated else "",
            i=rng.choice(_INTENSIFIERS),
            a=adjective,
        )
        rows.append({"text": text, "text_pair": None, "label": int(positive != negated)})
    return pd.DataFrame(rows, columns=list(COLUMNS))


# --------------------------------------------------------------------------- local
_READERS = {
    ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet",
}


def _read_table(path: Path, fmt: str, column_names: list[str] | None) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    if fmt == "auto":
        fmt = _READERS.get(path.suffix.lower())
        if fmt is None:
            raise ValueError(
                f"cannot infer the format of {path} from its extension; set 'format' to one of "
                f"{', '.join(sorted(set(_READERS.values())))}"
            )
    header = None if column_names else "infer"
    if fmt in ("csv", "tsv"):
        # quoting off for TSV: GLUE files contain bare quote characters inside sentences
        return pd.read_csv(
            path, sep="\t" if fmt == "tsv" else ",", header=header, names=column_names,
            quoting=3 if fmt == "tsv" else 0, keep_default_na=False, dtype=str,
        )
    if fmt == "json":
        return pd.read_json(path)
    if fmt == "jsonl":
        return pd.read_json(path, lines=True)
    return pd.read_parquet(path)


def _select_columns(frame: pd.DataFrame, columns: dict, origin: str) -> pd.DataFrame:
    wanted = {"text": columns["text"], "label": columns["label"]}
    if columns.get("text_pair") is not None:
        wanted["text_pair"] = columns["text_pair"]
    missing = [src for src in wanted.values() if src not in frame.columns]
    if missing:
        raise KeyError(
            f"{origin}: column(s) {missing} not found; available columns: {list(frame.columns)}"
        )
    out = pd.DataFrame({ours: frame[src].to_numpy() for ours, src in wanted.items()})
    if "text_pair" not in out:
        out["text_pair"] = None
    return out[list(COLUMNS)]


def load_local(spec: dict) -> dict[str, pd.DataFrame]:
    root = Path(spec.get("data_root", "."))
    splits = {}
    for split, rel in spec["files"].items():
        path = root / rel
        frame = _read_table(path, spec.get("format", "auto"), spec.get("column_names"))
        splits[split] = _select_columns(frame, spec["columns"], str(path))
    return splits


# --------------------------------------------------------------------------- sample
# Small samples of real datasets shipped as package data (samples/README.md says where
# each comes from and how it was drawn): name -> (label names in class-index order).
SAMPLES = {"sst2": ["negative", "positive"]}


def sample_dir(name: str):
    """The directory of the shipped sample `name` (a Traversable inside the installed package)."""
    if name not in SAMPLES:
        raise ValueError(f"unknown dataset sample {name!r}; available samples: {', '.join(sorted(SAMPLES))}")
    return resources.files("reprsim.stages.data").joinpath("samples", name)


def load_sample(spec: dict) -> dict[str, pd.DataFrame]:
    """All three splits of a shipped sample: TSV `sentence<TAB>label` with labels 0..n-1."""
    root = sample_dir(spec["name"])
    splits = {}
    for split in SPLITS:
        entry = root.joinpath(f"{split}.tsv")
        if not entry.is_file():
            raise FileNotFoundError(
                f"sample {spec['name']!r} lacks {split}.tsv in the installed package ({entry}); "
                "reinstall reprsim (package data) or rebuild it with samples/make_sst2_sample.py"
            )
        with resources.as_file(entry) as path:
            frame = _read_table(Path(path), "tsv", None)
        frame = _select_columns(frame, {"text": "sentence", "label": "label"}, f"sample {spec['name']}/{split}")
        splits[split] = frame
    return splits


# --------------------------------------------------------------------------- hub
def load_hf(spec: dict) -> dict[str, pd.DataFrame]:
    """Load named splits from the Hugging Face hub (the path real users take)."""
    import datasets

    splits = {}
    for ours, theirs in spec["splits"].items():
        table = datasets.load_dataset(
            spec["id"], spec.get("config"), split=theirs, revision=spec.get("revision")
        )
        splits[ours] = _select_columns(table.to_pandas(), spec["columns"], f"{spec['id']}[{theirs}]")
    return splits


# --------------------------------------------------------------------------- common
def _encode_labels(splits: dict[str, pd.DataFrame], label_names: list | None) -> list:
    values = pd.concat([s["label"] for s in splits.values()])
    if label_names is None:
        distinct = pd.unique(values)
        try:  # numeric labels keep their numeric order ("0" < "1" < "10")
            label_names = sorted(distinct, key=lambda v: float(v))
        except (TypeError, ValueError):
            label_names = sorted(distinct, key=str)
    lookup = {str(v): i for i, v in enumerate(label_names)}
    for name, frame in splits.items():
        unknown = sorted({str(v) for v in frame["label"]} - set(lookup))
        if unknown:
            raise ValueError(
                f"split {name!r} has label values {unknown[:5]} not in label_names {label_names}"
            )
        frame["label"] = frame["label"].map(lambda v: lookup[str(v)]).astype("int64")
    return [v.item() if hasattr(v, "item") else v for v in label_names]


def _carve_missing_splits(
    splits: dict[str, pd.DataFrame], fractions: dict, seed: int
) -> dict[str, pd.DataFrame]:
    """Split validation/test off train (seeded shuffle) when the source lacks them."""
    missing = [s for s in ("validation", "test") if s not in splits]
    if not missing:
        return splits
    train = splits["train"]
    order = np.random.default_rng(seed).permutation(len(train))
    start = 0
    for split in missing:
        take = int(round(fractions.get(split, 0.1) * len(train)))
        splits[split] = train.iloc[order[start:start + take]]
        start += take
    splits["train"] = train.iloc[np.sort(order[start:])]
    if any(len(splits[s]) == 0 for s in SPLITS):
        raise ValueError(
            f"too few examples ({len(train)}) to carve {missing} out of train with fractions {fractions}"
        )
    return splits


def _cap(frame: pd.DataFrame, max_examples: int | None, seed: int) -> pd.DataFrame:
    if max_examples is None or len(frame) <= max_examples:
        return frame
    keep = np.sort(np.random.default_rng(seed).choice(len(frame), max_examples, replace=False))
    return frame.iloc[keep]


def prepare_dataset(name: str, spec: dict, out_dir: str | Path) -> dict[str, Any]:
    """Materialise dataset `name` from its config `spec` into `out_dir`; return meta."""
    source = spec["source"]
    seed = int(spec.get("seed", 0))
    if source == "builtin":
        splits = {"train": generate_builtin(spec["n_examples"], seed)}
        label_values = [0, 1]
        splits = _carve_missing_splits(splits, spec.get("split_fractions", {}), seed)
    elif source == "sample":
        splits = load_sample(spec)
        splits = {s: _cap(f, spec.get("max_examples"), seed) for s, f in splits.items()}
        label_values = list(range(len(SAMPLES[spec["name"]])))
    else:
        splits = load_local(spec) if source == "local" else load_hf(spec)
        splits = _carve_missing_splits(splits, spec.get("split_fractions") or {}, seed)
        splits = {s: _cap(f, spec.get("max_examples"), seed) for s, f in splits.items()}
        label_values = spec.get("label_names")
    splits = {s: splits[s].reset_index(drop=True).copy() for s in SPLITS}
    label_values = _encode_labels(splits, label_values)
    if source == "builtin":
        label_names = BUILTIN_LABEL_NAMES
    elif source == "sample":
        label_names = SAMPLES[spec["name"]]
    else:
        label_names = label_values

    digest = hashlib.sha256()
    for split in SPLITS:
        splits[split]["text"] = splits[split]["text"].astype(str)
        digest.update(split.encode())
        digest.update(pd.util.hash_pandas_object(splits[split], index=False).to_numpy().tobytes())
    meta = {
        "name": name,
        "source": source,
        "spec": spec,
        "task": "pair" if splits["train"]["text_pair"].notna().any() else "single",
        "label_names": label_names,
        "n_labels": len(label_names),
        "sizes": {s: len(splits[s]) for s in SPLITS},
        "content_hash": digest.hexdigest(),
    }
    with atomic_directory(out_dir) as tmp:
        for split in SPLITS:
            splits[split].to_parquet(tmp / f"{split}.parquet", index=False)
        write_json(tmp / "meta.json", meta)
    return meta


