"""Rebuild the CoLA sample shipped in ``samples/cola/`` from the GLUE CoLA files.

Standard library only, so it runs anywhere the GLUE files are:

    python src/reprsim/stages/data/samples/make_cola_sample.py --glue-dir /path/to/glue/cola

reads ``train.tsv`` (GLUE train) and ``validation.tsv`` (the official GLUE dev
set), both header-less with the columns ``source, label, original label,
sentence`` (label 1 acceptable, 0 unacceptable), and writes

* ``train.tsv``: ``--n-train`` sentences of GLUE train, stratified by label;
* ``validation.tsv``: ``--n-validation`` further sentences of GLUE train,
  disjoint from the train sample, stratified by label;
* ``test.tsv``: ``--n-test`` sentences of the GLUE dev set, stratified by
  label (GLUE's CoLA test set has no public labels), in their dev order;

all ``sentence<TAB>label``, the layout of every shipped sample. A sentence is
eligible once: the first occurrence of each distinct text, leaving out texts
seen with both labels and, for train and validation, texts that are also dev
sentences, so that no text is in two splits. Stratified means each label
keeps its share of its pool (rounded). Texts are stripped of surrounding
whitespace; nothing else is changed. The same seed and inputs give
byte-identical files. See ``samples/README.md``.
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

# run as a script (its folder first on sys.path), as the SST-2 sample's script is: the same TSV layout and draws
from make_sst2_sample import stratified, write_tsv

HERE = Path(__file__).resolve().parent
COLUMNS = 4   # source, label, original label (the annotators' mark), sentence


def read_tsv(path: Path) -> list[tuple[str, str]]:
    """(sentence, label) of every row of a header-less GLUE CoLA file."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    bad = [i + 1 for i, row in enumerate(rows) if len(row) != COLUMNS or row[1] not in ("0", "1")]
    if bad:
        raise ValueError(f"{path}: lines {bad[:5]} are not 'source, label (0/1), original label, sentence'")
    return [(row[3].strip(), row[1]) for row in rows]


def eligible(rows: list[tuple[str, str]], excluded: set[str]) -> list[int]:
    """First occurrence of each distinct text whose label is unambiguous, leaving out `excluded` texts."""
    labels: dict[str, set[str]] = {}
    for sentence, label in rows:
        labels.setdefault(sentence, set()).add(label)
    seen: set[str] = set()
    pool = []
    for i, (sentence, _) in enumerate(rows):
        if sentence not in seen and sentence not in excluded and len(labels[sentence]) == 1:
            pool.append(i)
        seen.add(sentence)
    return pool


def counts(rows: list[tuple[str, str]]) -> str:
    acceptable = sum(label == "1" for _, label in rows)
    return f"{len(rows)} rows ({len(rows) - acceptable} unacceptable, {acceptable} acceptable)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue-dir", type=Path, required=True,
                        help="directory with GLUE CoLA train.tsv and validation.tsv (header-less)")
    parser.add_argument("--out", type=Path, default=HERE / "cola", help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=3000)
    parser.add_argument("--n-validation", type=int, default=500)
    parser.add_argument("--n-test", type=int, default=500)
    args = parser.parse_args()

    train = read_tsv(args.glue_dir / "train.tsv")
    dev = read_tsv(args.glue_dir / "validation.tsv")
    train_texts = {sentence for sentence, _ in train}
    dev_texts = {sentence for sentence, _ in dev}
    train_pool = eligible(train, excluded=dev_texts)
    dev_pool = eligible(dev, excluded=train_texts)
    train_labels, dev_labels = [label for _, label in train], [label for _, label in dev]

    rng = random.Random(args.seed)
    train_idx = stratified(train_pool, train_labels, args.n_train, rng)
    taken = set(train_idx)
    validation_idx = stratified([i for i in train_pool if i not in taken], train_labels, args.n_validation, rng)
    test_idx = stratified(dev_pool, dev_labels, args.n_test, rng)

    splits = {"train": [train[i] for i in train_idx], "validation": [train[i] for i in validation_idx],
              "test": [dev[i] for i in test_idx]}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        write_tsv(args.out / f"{name}.tsv", rows)
        print(f"{name}: {counts(rows)}")
    print(f"pools: {len(train_pool)} of {len(train)} GLUE train rows, {len(dev_pool)} of {len(dev)} dev rows "
          "(distinct, one label, not in the other file)")


if __name__ == "__main__":
    main()
