"""Checks on a dataset's rows before they are encoded: what would silently change the task is refused,
what real datasets often contain is kept, counted in meta["checks"] and warned about.

Refused with a `DatasetError` (all row problems of a dataset in one message, a line each, every line
naming the dataset, split and file (or hub split), the problem, the first rows with their count
(1-based: lines of CSV/TSV/JSONL files, rows of Parquet files and hub splits, records of JSON
files) and the fix):

- a split without rows; empty or whitespace-only text, and text_pair in pair tasks;
- a missing label: empty or blank, None or NaN (and -1, the hub's mark of an unlabelled row, for
  `source: hf`); a missing label never becomes a class of its own;
- a label outside the configured label_names;
- without label_names: a number that is not an integer (1.5: a score, not a class), and numbers
  mixed with text ("label" among "0"/"1" is usually a header line read as data);
- a train split with a single class.

Unlabelled text (a local or hub dataset whose columns name no label) skips every label check: its rows' label is
reprsim.design.dataset_labels.UNLABELLED (-1) and meta["labelled"] is false; the stages that need labels refuse it in the configuration check.

Label policy without label_names: the distinct values become the classes in sorted order, numeric
order for numbers and numeric strings ("2" < "10"), text order otherwise ("negative" < "positive");
surrounding whitespace is ignored and 1.0 counts as 1. meta["label_mapping"] records value -> class
index for every source, and the stage prints it.

Kept, counted per split in meta["checks"] and warned about (`DatasetWarning`; not for the builtin
generator, which repeats sentences by design): exact duplicate rows, texts that occur with different
labels, and validation/test rows whose text (and text_pair) also occurs in train. meta["checks"] also
holds each split's text lengths in characters (max, p99): this stage has no tokenizer, so truncation
at max_length is counted at extraction.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SHOWN_ROWS = 5     # rows named in a message; the count says how many there are in all
HUB_UNLABELLED = -1


class DatasetError(ValueError):
    """A dataset's input cannot be prepared as configured; the message says where, what and how to fix it."""


class DatasetWarning(UserWarning):
    """Something in a dataset's input that is kept but may bias results (duplicates, overlap, conflicts)."""


@dataclass
class Origin:
    """Where one split's rows come from. The split's frame is indexed by 1-based `unit` numbers."""

    dataset: str
    split: str
    where: str                  # "file /data/train.tsv", "hub dataset glue/sst2, split 'train'", ...
    unit: str = "line"          # what the index counts: line, row, record or example
    columns: dict = field(default_factory=dict)   # our column -> the source's, to name it as the user does

    def __str__(self) -> str:
        return f"dataset {self.dataset!r}, split {self.split} ({self.where})"

    def rows(self, locations) -> str:
        """'line 7', 'lines 3, 7, 9', 'lines 3, 7, 9, 12, 15, ... (40 in all)'."""
        locations = sorted(locations)
        shown = ", ".join(str(n) for n in locations[:SHOWN_ROWS])
        if len(locations) > SHOWN_ROWS:
            shown += f", ... ({len(locations)} in all)"
        return f"{self.unit}{'s' if len(locations) > 1 else ''} {shown}"

    def column(self, ours: str) -> str:
        return f"{ours} (column {self.columns[ours]!r})" if ours in self.columns else ours


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def raise_problems(dataset: str, problems: list[str]) -> None:
    if len(problems) == 1:
        raise DatasetError(problems[0])
    if problems:
        raise DatasetError(f"dataset {dataset!r} has {len(problems)} problems in its input; fix them and rerun:\n- "
                           + "\n- ".join(problems))


# --------------------------------------------------------------------------- rows and labels
def canonical_label(value):
    """A label as compared and recorded: stripped text, an int for integral numbers; None when missing."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (bool, np.bool_)):   # kept: True/False are names here, not 1/0
        return bool(value)
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return int(value) if float(value).is_integer() else float(value)
    return value


def _as_number(value) -> float:
    """The label as a number; NaN for text, and for 'nan' and 'inf' (never a class index)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _blank(texts: pd.Series) -> pd.Series:
    return texts.isna() | texts.map(lambda v: isinstance(v, str) and not v.strip())


def check_rows(frames: dict[str, pd.DataFrame], origins: dict, pair: bool, label_names: list | None = None,
               hub: bool = False, labelled: bool = True) -> list:
    """Refuse bad rows (every problem in one DatasetError); return the class values in index order.

    `label_names` fixes the classes (labels outside it are refused); without it the label policy of
    this module's docstring decides them. `hub`: -1 marks an unlabelled row. `labelled` False: unlabelled text,
    whose texts alone are checked (no classes: returns []).
    """
    problems, labels = [], {}
    for split, frame in frames.items():
        origin = origins[split]
        if frame.empty:
            problems.append(f"{origin}: no rows. Add examples, or, for validation or test, leave the split out "
                            "of the config so that it is carved from train")
            continue
        for column in ("text", "text_pair") if pair else ("text",):
            blank = frame.index[_blank(frame[column])]
            if len(blank):
                problems.append(f"{origin}: {count(len(blank), 'row')} with empty or whitespace-only "
                                f"{origin.column(column)}: {origin.rows(blank)}. Every example needs a {column}: "
                                "fill these rows in or delete them")
        if not labelled:
            continue
        label = frame["label"].map(canonical_label)
        unlabelled = frame.index[label.eq(HUB_UNLABELLED)] if hub else frame.index[:0]
        if len(unlabelled):
            problems.append(f"{origin}: {count(len(unlabelled), 'row')} labelled -1, the hub's mark of an unlabelled "
                            f"row (GLUE test splits have no public labels): {origin.rows(unlabelled)}. Map this split "
                            f"to a labelled hub split in datasets.{origin.dataset}.splits, or leave it out so that it "
                            "is carved from train")
        missing = frame.index[label.isna()]
        if len(missing):
            problems.append(f"{origin}: {count(len(missing), 'row')} without a {origin.column('label')}: "
                            f"{origin.rows(missing)}. Fill the labels in or delete these rows (a missing label "
                            "is never made a class of its own)")
        labels[split] = label[label.notna() & ~label.index.isin(unlabelled)]
    values = _class_values(labels, origins, label_names, problems) if labelled else []
    raise_problems(origins["train"].dataset, problems)
    return values


def _class_values(labels: dict[str, pd.Series], origins: dict, label_names: list | None, problems: list) -> list:
    """The classes in index order by the label policy; problems with the labels are appended to `problems`."""
    if label_names is not None:
        known = {str(v) for v in label_names}
        for split, label in labels.items():
            unknown = label[~label.map(str).isin(known)]
            if len(unknown):
                origin = origins[split]
                values = sorted(set(unknown.map(str)))
                problems.append(f"{origin}: {count(len(unknown), 'row')} with labels {values[:SHOWN_ROWS]} outside "
                                f"label_names {list(label_names)}: {origin.rows(unknown.index)}. Add them to "
                                f"datasets.{origin.dataset}.label_names or fix these rows")
        return list(label_names)

    as_numbers = {split: label.map(_as_number) for split, label in labels.items()}
    n_numeric = sum(int(n.notna().sum()) for n in as_numbers.values())
    n_text = sum(int(n.isna().sum()) for n in as_numbers.values())
    for split, number in as_numbers.items():
        origin, label = origins[split], labels[split]
        fractional = number[number.notna() & (number % 1 != 0)]
        if len(fractional):
            problems.append(f"{origin}: {count(len(fractional), 'row')} with labels that are not integers "
                            f"({sorted(set(label[fractional.index].map(str)))[:SHOWN_ROWS]}): "
                            f"{origin.rows(fractional.index)}. Classes need integer or text labels (a score is "
                            f"not a class): fix these rows, or list the classes in datasets.{origin.dataset}.label_names")
        if n_numeric and n_text:
            # the rarer kind is the odd one out: a header line read as data, or a stray value
            odd = number.index[number.isna()] if n_text <= n_numeric else number.index[number.notna()]
            if len(odd):
                kind = "text labels among numeric ones" if n_text <= n_numeric else "numeric labels among text ones"
                values = sorted(set(label[odd].map(str)))[:SHOWN_ROWS]
                problems.append(f"{origin}: {count(len(odd), 'row')} with {kind} ({values}): {origin.rows(odd)}. "
                                "A header line read as data (then drop column_names) or a stray value: fix these "
                                f"rows, or list every class in datasets.{origin.dataset}.label_names")
    if problems:
        return []
    distinct = {}
    for label in labels.values():
        for value in pd.unique(label):
            distinct.setdefault(str(value), value)
    return sorted(distinct.values(), key=_as_number if n_numeric else str)


def encode_labels(frames: dict[str, pd.DataFrame], label_values: list) -> dict[str, int]:
    """Replace each split's labels by class indices in place; return value -> index (meta["label_mapping"])."""
    mapping = {str(v): i for i, v in enumerate(label_values)}
    for frame in frames.values():
        frame["label"] = frame["label"].map(lambda v: mapping[str(canonical_label(v))]).astype("int64")
    return mapping


# --------------------------------------------------------------------------- prepared splits
def _text_keys(frame: pd.DataFrame, pair: bool) -> pd.Series:
    texts = frame["text"].astype(str)
    return texts + "\x00" + frame["text_pair"].astype(str) if pair else texts


def _length_stats(texts: pd.Series) -> dict:
    lengths = texts.astype(str).str.len().to_numpy()
    return {"max": int(lengths.max()), "p99": round(float(np.percentile(lengths, 99)), 1)}


def check_splits(frames: dict[str, pd.DataFrame], origins: dict, label_names: list, pair: bool,
                 warn: bool = True) -> dict:
    """Refuse a single-class train split; count what is kept (duplicates, conflicting labels, overlap
    with train) and the texts' lengths per split: meta["checks"]. Labels are class indices here; no
    `label_names`: unlabelled text, which has no classes to check."""
    train, origin = frames["train"], origins["train"]
    classes = train["label"].unique()
    if label_names and len(classes) < 2:
        listed = f"label_names lists {label_names}, but " if len(label_names) > 1 else ""
        raise DatasetError(f"{origin}: {listed}all {count(len(train), 'row')} of the prepared split have the label "
                           f"{label_names[classes[0]]!r}; a classifier needs at least two classes. Add examples of "
                           f"the other class(es), or check that {origin.column('label')} is the label column")

    train_keys = set(_text_keys(train, pair))
    checks = {}
    for split, frame in frames.items():
        origin, keys = origins[split], _text_keys(frame, pair)
        repeated = frame.index[pd.DataFrame({"key": keys, "label": frame["label"]}).duplicated()]
        labels_per_text = frame["label"].groupby(keys).nunique()
        conflicting = labels_per_text.index[labels_per_text > 1]
        texts = f"text{' and text_pair' if pair else ''}"
        # (meta key, count, rows, what the rows are, advice)
        findings = [
            ("duplicate_rows", len(repeated), repeated, f"repeating an earlier row of the split exactly ({texts} and label)",
             "remove them if they should not count twice"),
            ("texts_with_conflicting_labels", len(conflicting), frame.index[keys.isin(conflicting)],
             f"holding {count(len(conflicting), 'text')} seen with different labels", "check their labels"),
        ]
        if split != "train":
            shared = frame.index[keys.isin(train_keys)]
            findings.append(("rows_shared_with_train", len(shared), shared, f"whose {texts} also occurs in train",
                             "scores on this split partly measure examples seen in training; remove them to hold them out"))
        checks[split] = {name: n for name, n, *_ in findings}
        checks[split]["text_chars"] = _length_stats(frame["text"])
        if pair:
            checks[split]["text_pair_chars"] = _length_stats(frame["text_pair"])
        for _, _, rows, problem, advice in findings:
            if warn and len(rows):
                warnings.warn(f"{origin}: {count(len(rows), 'row')} {problem}: {origin.rows(rows)}. Kept; {advice}",
                              DatasetWarning, stacklevel=3)
    return checks
