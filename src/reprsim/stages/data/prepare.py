"""Datasets: a built-in generator, samples shipped in the package, local files and the Hugging Face hub.

Every source ends as the same prepared layout, `{out}/{split}.parquet` for
split in train/validation/test with columns `text`, `text_pair` (null for
single-sentence tasks) and `label` (int class index), plus `meta.json`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reprsim.design.dataset_labels import UNLABELLED, dataset_is_labelled
from reprsim.design.perturbations import shortcut_rate, shortcut_tokens, with_shortcut
from reprsim.io.outputs import atomic_directory, write_json, write_parquet
from reprsim.io.provenance import file_checksums
from reprsim.stages.data.parts import check_part, take_part
from reprsim.stages.data.validate import (
    SHOWN_ROWS,
    DatasetError,
    Origin,
    check_rows,
    check_splits,
    count,
    encode_labels,
)
from reprsim.text.segmentation import WORD_PATTERN, segment_pair

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


def _read_text(path: Path, origin: Origin) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - data.rfind(b"\n", 0, error.start)
        raise DatasetError(
            f"{origin}: the file is not UTF-8: byte {error.start} (line {line}, column {column}) is "
            f"{data[error.start:error.end]!r}. Re-encode it to UTF-8, e.g. iconv -f latin1 -t utf-8 {path} > {path.with_suffix('.utf8' + path.suffix)} (if it is Latin-1)"
        ) from None
    return text.removeprefix("\ufeff")   # a byte-order mark (Excel writes one) is not part of the header


def _read_delimited(text: str, fmt: str, column_names: list[str] | None, origin: Origin) -> pd.DataFrame:
    """A CSV/TSV table of strings indexed by the line each record starts on.

    The csv module rather than pandas: it says where each record starts, and a row with too few or
    too many fields is an error here instead of being padded with NaN or shifted into the index.
    Quoting is off for TSV: GLUE files contain bare quote characters inside sentences.
    """
    csv.field_size_limit(max(csv.field_size_limit(), len(text)))   # one very long text is not an error
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if fmt == "tsv" else ",",
                        quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL)
    records, lines, start = [], [], 1
    try:
        for record in reader:
            if record:   # blank lines are skipped, as pandas does
                records.append(record)
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as error:
        raise DatasetError(f"{origin}: cannot parse line {start} as {fmt.upper()}: {error}. Fix that line") from None

    if column_names:
        header, first, described = list(column_names), 0, f"the {len(column_names)} columns of column_names"
        if records and [f.strip().lower() for f in records[0]] == [c.lower() for c in header]:
            raise DatasetError(f"{origin}: line {lines[0]} is a header ({records[0]}) but column_names says the "
                               f"file has none. Remove datasets.{origin.dataset}.column_names")
    elif records:
        header, first, described = records[0], 1, f"the {len(records[0])} columns of the header (line {lines[0]})"
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise DatasetError(f"{origin}: the header (line {lines[0]}) repeats column name(s) {repeated}. Give "
                               "every column its own name")
    else:
        raise DatasetError(f"{origin}: the file is empty (not even a header line). Fill it or fix the path")

    ragged = [(line, len(record)) for line, record in zip(lines[first:], records[first:]) if len(record) != len(header)]
    if ragged:
        shown = ", ".join(f"line {line} has {n}" for line, n in ragged[:SHOWN_ROWS])
        fix = (f"every line has {ragged[0][1]}: name that many columns in column_names"
               if column_names and len(ragged) == len(records) and len({n for _, n in ragged}) == 1
               else f"a {'tab' if fmt == 'tsv' else 'comma'} inside a text, a missing field or a stray line: fix "
                    f"these lines{'' if fmt == 'tsv' else ' (quote fields that contain commas)'}")
        raise DatasetError(f"{origin}: {count(len(ragged), 'line')} with a field count other than {described}: "
                           f"{shown}{', ...' if len(ragged) > SHOWN_ROWS else ''}. {fix[0].upper()}{fix[1:]}")
    return pd.DataFrame(records[first:], columns=header, index=lines[first:], dtype=object)


def _json_error(text: str, lines: bool) -> str | None:
    """Where a JSON (Lines) text first fails to parse, or None when the json module reads it."""
    for number, chunk in enumerate(text.split("\n"), 1) if lines else [(None, text)]:
        if chunk.strip():
            try:
                json.loads(chunk)
            except json.JSONDecodeError as error:
                return f"line {number or error.lineno}: {error.msg}"
    return None


def _read_table(path: Path, fmt: str, column_names: list[str] | None, origin: Origin) -> tuple[pd.DataFrame, Origin]:
    """A file as a table of the source's columns, indexed by 1-based line (or row, record) numbers."""
    if fmt == "auto":
        fmt = _READERS.get(path.suffix.lower())
        if fmt is None:
            raise DatasetError(
                f"{origin}: cannot infer the format from the extension {path.suffix!r}; set "
                f"datasets.{origin.dataset}.format to one of {', '.join(sorted(set(_READERS.values())))}"
            )
    if fmt in ("csv", "tsv"):
        return _read_delimited(_read_text(path, origin), fmt, column_names, origin), origin
    if fmt == "parquet":
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as error:
            raise DatasetError(f"{origin}: not a readable Parquet file ({error}). Check the file and format") from None
        frame.index = np.arange(1, len(frame) + 1)
        return frame, replace(origin, unit="row")
    text = _read_text(path, origin)
    lines = fmt == "jsonl"
    try:
        frame = pd.read_json(io.StringIO(text), lines=lines)
    except ValueError as error:
        raise DatasetError(f"{origin}: not valid {'JSON Lines' if lines else 'JSON'} "
                           f"({_json_error(text, lines) or error}). Fix the file or set format") from None
    if lines:   # pandas skips blank lines, so the records sit on the non-blank ones
        filled = [number for number, line in enumerate(text.split("\n"), 1) if line.strip()]
        if len(filled) == len(frame):
            frame.index = filled
            return frame, origin
    frame.index = np.arange(1, len(frame) + 1)
    return frame, replace(origin, unit="record")


def _select_columns(frame: pd.DataFrame, columns: dict, origin: Origin, headerless_hint: bool = False) -> pd.DataFrame:
    wanted = {"text": columns["text"]}
    if columns.get("label") is not None:
        wanted["label"] = columns["label"]
    if columns.get("text_pair") is not None:
        wanted["text_pair"] = columns["text_pair"]
    missing = [src for src in wanted.values() if src not in frame.columns]
    if missing:
        hint = (f", or, if the file has no header line, name its columns in datasets.{origin.dataset}.column_names"
                if headerless_hint else "")
        raise DatasetError(f"{origin}: column(s) {missing} not found; its columns are {list(frame.columns)}. Set "
                           f"datasets.{origin.dataset}.columns to the right names{hint}")
    out = pd.DataFrame({ours: frame[src].to_numpy() for ours, src in wanted.items()}, index=frame.index)
    if "text_pair" not in out:
        out["text_pair"] = None
    if "label" not in out:  # unlabelled text: every row's label is UNLABELLED
        out["label"] = UNLABELLED
    return out[list(COLUMNS)]


def _missing_file(name: str, split: str, relative: str, root: Path) -> DatasetError:
    path = root / relative
    where = f"relative to data_root {str(root)!r} ({root.resolve()}"
    if root.is_dir():
        entries = sorted(p.name for p in root.iterdir())
        where += f", which holds {entries[:10]}{' ...' if len(entries) > 10 else ''})"
    else:
        where += ", which does not exist)"
    return DatasetError(
        f"dataset {name!r}, split {split}: datasets.{name}.files.{split} = {relative!r} is {path.resolve()}, which "
        f"{'is a directory' if path.is_dir() else 'does not exist'}; file paths are taken {where}. Fix the path, or "
        f"set data_root (datasets.{name}.data_root, or the top-level data_root, e.g. --config data_root=DIR)"
    )


def load_local(spec: dict, name: str) -> tuple[dict[str, pd.DataFrame], dict[str, Origin]]:
    root = Path(spec.get("data_root") or ".")
    column_names = spec.get("column_names")
    frames, origins = {}, {}
    for split, relative in spec["files"].items():
        path = root / relative
        if not path.is_file():
            raise _missing_file(name, split, relative, root)
        origin = Origin(name, split, f"file {path.absolute()}", columns=dict(spec["columns"]))
        frame, origins[split] = _read_table(path, spec.get("format", "auto"), column_names, origin)
        headerless_hint = origins[split].unit == "line" and not column_names and path.suffix.lower() != ".jsonl"
        frames[split] = _select_columns(frame, spec["columns"], origins[split], headerless_hint)
    return frames, origins


def local_split_rows(name: str, spec: dict) -> dict[str, int]:
    """Rows per split of a local dataset's files, read as prepare_dataset reads them (for `reprsim plan`)."""
    frames, _ = load_local(dict(spec), name)
    return {split: len(frame) for split, frame in frames.items()}


# --------------------------------------------------------------------------- sample
# Small samples of real datasets shipped as package data (samples/README.md says where
# each comes from and how it was drawn): name -> (label names in class-index order).
SAMPLES = {"sst2": ["negative", "positive"], "cola": ["unacceptable", "acceptable"]}
_SAMPLE_COLUMNS = {"text": "sentence", "label": "label"}


def sample_dir(name: str):
    """The directory of the shipped sample `name` (a Traversable inside the installed package)."""
    if name not in SAMPLES:
        raise DatasetError(f"unknown dataset sample {name!r}; available samples: {', '.join(sorted(SAMPLES))}")
    return resources.files("reprsim.stages.data").joinpath("samples", name)


def load_sample(spec: dict, name: str) -> tuple[dict[str, pd.DataFrame], dict[str, Origin]]:
    """All three splits of a shipped sample: TSV `sentence<TAB>label` with labels 0..n-1."""
    root = sample_dir(spec["name"])
    frames, origins = {}, {}
    for split in SPLITS:
        entry = root.joinpath(f"{split}.tsv")
        if not entry.is_file():
            raise DatasetError(
                f"sample {spec['name']!r} lacks {split}.tsv in the installed package ({entry}); "
                f"reinstall reprsim (package data) or rebuild it with samples/make_{spec['name']}_sample.py"
            )
        with resources.as_file(entry) as path:
            origin = Origin(name, split, f"sample file {path}", columns=_SAMPLE_COLUMNS)
            frame, origins[split] = _read_table(Path(path), "tsv", None, origin)
        frames[split] = _select_columns(frame, _SAMPLE_COLUMNS, origin)
    return frames, origins


# --------------------------------------------------------------------------- hub
def load_hf(spec: dict, name: str) -> tuple[dict[str, pd.DataFrame], dict[str, Origin]]:
    """Named splits of a Hugging Face hub dataset, read from the hub cache (downloaded into it when online):
    reprsim.stages.data.hub says which files and layouts."""
    from reprsim.stages.data import hub

    tables, hub_name = hub.hub_tables(name, spec)
    frames, origins = {}, {}
    for ours, theirs in spec["splits"].items():
        origins[ours] = Origin(name, ours, f"hub dataset {hub_name}, split {theirs!r}", unit="row",
                               columns=dict(spec["columns"]))
        frames[ours] = _select_columns(tables[theirs], spec["columns"], origins[ours])
    return frames, origins


# --------------------------------------------------------------------------- common
def _carve_missing_splits(
    splits: dict[str, pd.DataFrame], origins: dict[str, Origin], fractions: dict, seed: int
) -> dict[str, pd.DataFrame]:
    """Split validation/test off train (seeded shuffle) when the source lacks them."""
    missing = [s for s in ("validation", "test") if s not in splits]
    if not missing:
        return splits
    train = splits["train"]
    order = np.random.default_rng(seed).permutation(len(train))
    start = 0
    for split in missing:
        take = round(fractions.get(split, 0.1) * len(train))
        splits[split] = train.iloc[order[start:start + take]]
        origins[split] = replace(origins["train"], split=split, where=f"carved from train, {origins['train'].where}")
        start += take
    splits["train"] = train.iloc[np.sort(order[start:])]
    if any(len(splits[s]) == 0 for s in SPLITS):
        raise DatasetError(
            f"{origins['train']}: too few examples ({len(train)}) to carve {missing} out of train with "
            f"fractions {fractions}. Add examples, give the splits their own files, or raise split_fractions"
        )
    return splits


def _cap(frame: pd.DataFrame, max_examples: int | None, seed: int) -> pd.DataFrame:
    if max_examples is None or len(frame) <= max_examples:
        return frame
    keep = np.sort(np.random.default_rng(seed).choice(len(frame), max_examples, replace=False))
    return frame.iloc[keep]


def _load(name: str, spec: dict) -> tuple[dict[str, pd.DataFrame], dict[str, Origin]]:
    """The source's splits, each indexed by the 1-based line (row, example) its rows come from."""
    source = spec["source"]
    if source == "builtin":
        frame = generate_builtin(spec["n_examples"], int(spec.get("seed", 0)))
        frame.index += 1
        return {"train": frame}, {"train": Origin(name, "train", "the builtin generator", unit="example")}
    if source == "sample":
        return load_sample(spec, name)
    return load_local(spec, name) if source == "local" else load_hf(spec, name)


WORDS_META = {
    "column": "word_spans",
    "layout": "flattened (sequence, start, end) triples: sequence 0 = text, 1 = text_pair; character spans",
    "segmentation": "reprsim.text.words.segment_pair",
    "pattern": WORD_PATTERN.pattern,
}


def with_words(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the words of every row recorded (columns word_spans and n_words), so every model's
    tokens map onto the same words (reprsim.text.words; docs/numerics.md, "Words")."""
    pairs = frame["text_pair"] if "text_pair" in frame else pd.Series([None] * len(frame), index=frame.index)
    spans = [np.asarray(segment_pair(text, None if pd.isna(pair) else pair), dtype=np.int64).reshape(-1)
             for text, pair in zip(frame["text"], pairs)]
    return frame.assign(word_spans=spans, n_words=np.array([len(s) // 3 for s in spans], dtype=np.int64))


def add_shortcut(splits: dict[str, pd.DataFrame], n_labels: int, shortcut: dict) -> dict[str, Any]:
    """ReSi's shortcut on every split (datasets.NAME.shortcut): "[CLASSc] " in front of each `text` (the
    first text of a pair), c the row's label with probability rate, else another label drawn uniformly;
    one seeded pass over train, validation, test in that order (ReSi's stream passes over train first).
    "majority" is the train split's majority-class share. Changes `splits` in place; returns the record
    meta.json keeps."""
    labels = np.concatenate([splits[s]["label"].to_numpy(dtype=np.int64) for s in SPLITS])
    texts = [text for s in SPLITS for text in splits[s]["text"]]
    rate = shortcut_rate(shortcut["rate"], splits["train"]["label"].to_numpy(dtype=np.int64))
    seed = int(shortcut.get("seed", 0))
    texts, tokens = with_shortcut(texts, labels, n_labels, rate, seed)
    start, correct_share = 0, {}
    for split in SPLITS:
        end = start + len(splits[split])
        splits[split]["text"] = texts[start:end]
        correct_share[split] = float(np.mean(tokens[start:end] == labels[start:end])) if end > start else None
        start = end
    return {"rate": rate, "requested": shortcut["rate"], "seed": seed, "correct_share": correct_share,
            "tokens": shortcut_tokens(n_labels)}


def prepare_dataset(name: str, spec: dict, out_dir: str | Path) -> dict[str, Any]:
    """Materialise dataset `name` from its config `spec` into `out_dir`; return meta.

    Every source's rows are checked before anything is written (stages/data/validate.py: what is
    refused with a DatasetError, the label policy, what is only counted in meta["checks"]). Order:
    splits carved out of train, then train's part (stages/data/parts.py), then the max_examples cap.
    """
    source = spec["source"]
    seed = int(spec.get("seed", 0))
    check_part(name, spec)
    splits, origins = _load(name, spec)
    pair = source in ("local", "hf") and spec["columns"].get("text_pair") is not None
    labelled = dataset_is_labelled(spec)
    if source == "builtin":
        given_labels = [0, 1]
    elif source == "sample":
        given_labels = list(range(len(SAMPLES[spec["name"]])))
    else:
        given_labels = spec.get("label_names")
    label_values = check_rows(splits, origins, pair, given_labels, hub=source == "hf", labelled=labelled)

    if source != "sample":   # a sample ships all three splits
        splits = _carve_missing_splits(splits, origins, spec.get("split_fractions") or {}, seed)
    part = None
    if spec.get("part"):   # after carving, so every part shares the carved splits; before the cap, so a
        # capped part is a subset of the part
        splits["train"], part = take_part(splits["train"], spec["part"], origins["train"])
        origins["train"] = replace(origins["train"], where=f"part {part['index']} of {part['of']}, "
                                                           f"{origins['train'].where}")
    if source != "builtin":
        splits = {s: _cap(f, spec.get("max_examples"), seed) for s, f in splits.items()}
    splits = {s: splits[s].copy() for s in SPLITS}
    label_mapping = encode_labels(splits, label_values) if labelled else {}
    if source == "builtin":
        label_names = BUILTIN_LABEL_NAMES
    elif source == "sample":
        label_names = SAMPLES[spec["name"]]
    else:
        label_names = label_values
    classes = [f"{value!r} -> {index}" + ("" if str(label_names[index]) == value else f" ({label_names[index]})")
               for value, index in label_mapping.items()]
    if labelled:
        print(f"dataset {name!r}: label -> class: {', '.join(classes)}"
              + ("" if given_labels else " (sorted; list label_names to choose the order)"))
    else:
        print(f"dataset {name!r}: unlabelled text (columns.label is null; every row's label is {UNLABELLED})")
    checks = check_splits(splits, origins, label_names, pair, warn=source != "builtin")
    splits = {s: splits[s].reset_index(drop=True) for s in SPLITS}
    shortcut = add_shortcut(splits, len(label_names), spec["shortcut"]) if spec.get("shortcut") else None
    if shortcut:
        requested = shortcut["requested"]
        print(f"dataset {name!r}: shortcut tokens in front of every text, the label's with rate "
              f"{shortcut['rate']:.4f}" + (f" ({requested})" if isinstance(requested, str) else ""))

    digest = hashlib.sha256()
    for split in SPLITS:
        splits[split]["text"] = splits[split]["text"].astype(str)
        digest.update(split.encode())
        digest.update(pd.util.hash_pandas_object(splits[split], index=False).to_numpy().tobytes())
    for split in SPLITS:
        splits[split] = with_words(splits[split])
    meta = {
        "name": name,
        "source": source,
        "spec": spec,
        "task": "pair" if splits["train"]["text_pair"].notna().any() else "single",
        "labelled": labelled,
        "label_names": label_names,
        "n_labels": len(label_names),
        "label_mapping": label_mapping,
        "sizes": {s: len(splits[s]) for s in SPLITS},
        "checks": checks,
        "shortcut": shortcut,
        "part": part,
        "content_hash": digest.hexdigest(),
        "words": WORDS_META,
    }
    with atomic_directory(out_dir) as tmp:
        for split in SPLITS:
            write_parquet(tmp / f"{split}.parquet", splits[split])
        meta["checksums"] = file_checksums(tmp)  # per file, so that `reprsim verify` names a damaged split
        write_json(tmp / "meta.json", meta)
    return meta
