"""Whether a dataset has labels, decided from its configuration alone (no import beyond the standard library):
the configuration check (reprsim.config) refuses the stages that need labels on a dataset without them, and the
data stage skips the label checks and marks its rows UNLABELLED."""

from __future__ import annotations

UNLABELLED = -1  # every row's label in a prepared dataset of unlabelled text


def dataset_is_labelled(spec: dict) -> bool:
    """Whether a dataset spec has labels: the builtin generator and the samples do; a local or hub dataset does
    when its columns name a label column (without one it is unlabelled text)."""
    return spec.get("source") in ("builtin", "sample") or (spec.get("columns") or {}).get("label") is not None
