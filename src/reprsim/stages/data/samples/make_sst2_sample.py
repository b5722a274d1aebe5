"""Rebuild the SST-2 sample shipped in ``samples/sst2/`` from the GLUE SST-2 files.

Standard library only, so it runs anywhere the GLUE files are:

    python src/reprsim/stages/data/samples/make_sst2_sample.py \
        --glue-dir data/glue/sst2

reads ``train.tsv`` (GLUE train, phrases and sentences, https://gluebenchmark.com/tasks;
the copy the shipped sample was drawn from has 60,614 rows) and
``validation.tsv`` (the 872 sentences of the official GLUE dev set), both
``sentence<TAB>label`` with a header, and writes

* ``train.tsv``: ``--n-train`` rows of GLUE train, stratified by label;
* ``validation.tsv``: ``--n-validation`` further rows of GLUE train, disjoint
  from the train sample, stratified by label;
* ``test.tsv``: all GLUE dev sentences, in their original order.

Train rows are drawn only from rows of at least ``--min-words`` whitespace
tokens (so they are sentence-like rather than two-word phrases), with a
distinct text, and whose text is not a dev sentence. Stratified means each
label keeps its share of that pool (rounded). Texts are stripped of the
trailing space GLUE leaves; nothing else is changed. The same seed and
inputs give byte-identical files. See ``samples/README.md``.
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = ["sentence", "label"]


def read_tsv(path: Path) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if rows[0] != HEADER:
        raise ValueError(f"{path}: expected header {HEADER}, found {rows[0]}")
    return [(sentence.strip(), label) for sentence, label in rows[1:]]


def write_tsv(path: Path, rows: list[tuple[str, str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\t".join(HEADER) + "\n")
        for sentence, label in rows:
            if "\t" in sentence or "\n" in sentence:
                raise ValueError(f"cannot write {sentence!r} to a TSV without quoting")
            f.write(f"{sentence}\t{label}\n")


def stratified(pool: list[int], labels: list[str], n: int, rng: random.Random) -> list[int]:
    """n indices from pool, each label keeping its share of the pool (largest remainder)."""
    by_label: dict[str, list[int]] = {}
    for i in pool:
        by_label.setdefault(labels[i], []).append(i)
    names = sorted(by_label)
    exact = {lab: n * len(by_label[lab]) / len(pool) for lab in names}
    counts = {lab: int(exact[lab]) for lab in names}
    for lab in sorted(names, key=lambda lab: exact[lab] - counts[lab], reverse=True)[: n - sum(counts.values())]:
        counts[lab] += 1
    chosen: list[int] = []
    for lab in names:
        chosen += rng.sample(by_label[lab], counts[lab])
    return sorted(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue-dir", type=Path, default=Path("data/glue/sst2"),
                        help="directory with GLUE SST-2 train.tsv and validation.tsv")
    parser.add_argument("--out", type=Path, default=HERE / "sst2", help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=3000)
    parser.add_argument("--n-validation", type=int, default=500)
    parser.add_argument("--min-words", type=int, default=5)
    args = parser.parse_args()

    train = read_tsv(args.glue_dir / "train.tsv")
    dev = read_tsv(args.glue_dir / "validation.tsv")
    dev_texts = {sentence for sentence, _ in dev}
    seen: set[str] = set()
    pool = []
    for i, (sentence, _) in enumerate(train):
        if len(sentence.split()) >= args.min_words and sentence not in dev_texts and sentence not in seen:
            pool.append(i)
        seen.add(sentence)
    labels = [label for _, label in train]
    rng = random.Random(args.seed)
    train_idx = stratified(pool, labels, args.n_train, rng)
    taken = set(train_idx)
    validation_idx = stratified([i for i in pool if i not in taken], labels, args.n_validation, rng)

    args.out.mkdir(parents=True, exist_ok=True)
    write_tsv(args.out / "train.tsv", [train[i] for i in train_idx])
    write_tsv(args.out / "validation.tsv", [train[i] for i in validation_idx])
    write_tsv(args.out / "test.tsv", dev)
    for name, rows in (("train", train_idx), ("validation", validation_idx)):
        positive = sum(labels[i] == "1" for i in rows)
        print(f"{name}: {len(rows)} rows ({len(rows) - positive} negative, {positive} positive)")
    print(f"test: {len(dev)} rows ({sum(l == '0' for _, l in dev)} negative, {sum(l == '1' for _, l in dev)} positive)")
    print(f"pool: {len(pool)} of {len(train)} train rows (>= {args.min_words} words, distinct, not in dev)")


if __name__ == "__main__":
    main()
