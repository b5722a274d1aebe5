"""Pair work in blocks: which pair job computes which model pairs (similarity.block_size).

The models are cut into blocks; one pair job (rule compare_pair) computes every compared pair of one block with
one other block (or with itself), loading each model's store and terms once, and writes one table and one
replicates file for them (the same rows, pair by pair, as one job per pair would). With M models in blocks of B
the pair jobs grow like (M / B)^2 / 2 instead of M^2 / 2.

A block of one model is named by the model, so with blocks of one a pair's table is
``results/pairs/{representation}/{dataset}/{a}__{b}.parquet`` as it always was. Larger blocks are named
``block000``, ``block001``, ... in the configuration's order of the models: a model added at the end joins the
last block (or opens a new one), so only the pair jobs of that block rerun. Standard library only (the rules load
it whenever the DAG is built).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

# `auto`: one pair per job up to this many models (a job per pair spreads best over few cores, and the default's
# tables keep their paths); above it, blocks of AUTO_BLOCK models
AUTO_SINGLE_UP_TO = 16
AUTO_BLOCK = 8


def block_size(setting: int | str | None, n_models: int) -> int:
    """similarity.block_size for a study of `n_models` models: the integer given, or `auto` (None) as above."""
    if setting in (None, "auto"):
        return 1 if n_models <= AUTO_SINGLE_UP_TO else AUTO_BLOCK
    if not isinstance(setting, int) or isinstance(setting, bool) or setting < 1:
        raise ValueError(f"similarity.block_size: expected a whole number of models >= 1 or 'auto', got {setting!r}")
    return setting


def blocks(models: Sequence[str], size: int) -> dict[str, list[str]]:
    """Block name -> its models, in order. `models` in the configuration's order; blocks of one are each model,
    named by it (sorted, as a pair's names are)."""
    if size == 1:
        return {model: [model] for model in sorted(models)}
    ordered = list(models)
    return {f"block{i // size:03d}": ordered[i:i + size] for i in range(0, len(ordered), size)}


class PairBlocks:
    """The compared pairs of one representation grouped by the pair of blocks that computes them."""

    def __init__(self, block_models: Mapping[str, Sequence[str]], pairs: Iterable[tuple[str, str]]):
        self.order = {name: i for i, name in enumerate(block_models)}
        self.block_of = {model: name for name, members in block_models.items() for model in members}
        self.pairs: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for a, b in pairs:
            self.pairs.setdefault(self.key(a, b), []).append((a, b))

    def key(self, a: str, b: str) -> tuple[str, str]:
        """The (block_a, block_b) whose job computes the pair a, b: the two blocks in block order."""
        x, y = self.block_of[a], self.block_of[b]
        return (x, y) if self.order[x] <= self.order[y] else (y, x)

    def models(self, block_a: str, block_b: str) -> list[str]:
        """The models a block pair's job reads, each once, sorted."""
        return sorted({model for pair in self.pairs[(block_a, block_b)] for model in pair})
