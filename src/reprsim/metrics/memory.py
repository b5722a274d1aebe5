"""The working memory the measures may take beyond their inputs: the n×n matrices of the Gram-based
(`cka` in its Gram form, RBF or unbiased with n ≤ d) and neighbour-based (`mutual_knn`) measures.

A budget in bytes that those measures split their work by: Gram matrices built a block of layers at a
time (the other side's one layer at a time, rebuilt per block), similarity rows a chunk at a time. It
changes how they compute, never what: the numbers are the same under any budget (up to the order of
float64 sums). One layer's matrices are the least they work with: a budget below that is exceeded, by
that much (:func:`gram_layers_held` says when). The pair job sets it from `similarity.max_memory_gb`
(docs/numerics.md §1, "Memory"); outside a job it is DEFAULT_GB.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_GB = 8.0
GIB = 2**30
_budget = {"bytes": int(DEFAULT_GB * GIB)}


def working_bytes() -> int:
    """The current budget in bytes."""
    return _budget["bytes"]


@contextmanager
def budget(gb: float | None) -> Iterator[int]:
    """Set the budget to `gb` GiB (None: leave it) for the duration of the block."""
    previous = _budget["bytes"]
    if gb is not None:
        if not gb > 0:
            raise ValueError(f"the measures' memory budget must be > 0 GiB; got {gb}")
        _budget["bytes"] = int(gb * GIB)
    try:
        yield _budget["bytes"]
    finally:
        _budget["bytes"] = previous


def gram_layers_held(n: int, layers: int, transient: float) -> int:
    """How many layers' n×n float64 matrices to hold at once, between 1 and `layers`: those that fit the
    budget beside one more layer's (the other side's, streamed) and `transient` matrices of scratch."""
    matrix = 8 * n * n
    fits = int(working_bytes() // matrix - 1 - transient)
    return max(1, min(layers, fits))


def rows_per_chunk(n: int, columns: int, copies: float = 3.0) -> int:
    """Rows of an (rows, columns) float64 block such that `copies` of it fit the budget (at least 1, at most n)."""
    return max(1, min(n, int(working_bytes() // (8 * columns * copies))))
