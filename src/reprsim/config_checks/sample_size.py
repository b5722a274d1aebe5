"""What the configuration alone says about the rows each measure needs, before any data exists: a warning per
measure that too few rows would leave biased, undefined or without an interval."""

from __future__ import annotations

from reprsim.measure_registry import MEASURES as REGISTERED
from reprsim.metrics.sample_size import CCA_FAMILY, RATIO


class SampleSizeWarning(UserWarning):
    """The similarity split may be too small for a configured measure (docs/numerics.md, rows needed)."""


def sample_size_warnings(config: dict) -> list[str]:
    """What the config alone says about rows per compared dimension, before any data exists.

    The rows are at most extraction.max_examples (when set); every interval rests on half of
    them. The CCA family compares k = k_x + k_y dimensions (2·pca_dims at most), mixedsim
    pca_dims, mutual k-NN needs k below the half-sample's rows.
    """
    rows = config.get("extraction", {}).get("max_examples")
    half = rows // 2 if rows else None
    out = []
    for label, spec in config.get("measures", {}).items():
        name, params = spec["measure"], spec.get("params") or {}
        pca_dims = params.get("pca_dims")
        where = f"measures.{label} ({name})"
        if name in CCA_FAMILY and pca_dims is None:
            out.append(f"{where} has no pca_dims: it compares k_x + k_y = every dimension of both models "
                       f"(768 for two 384-wide models), which needs ≥ {RATIO}·k rows to be read without a "
                       "warning and is undefined above n − 1; set pca_dims (the default uses 64)")
        elif name in CCA_FAMILY and rows:
            k = 2 * pca_dims
            if rows - 1 < k:
                out.append(f"{where}: extraction.max_examples = {rows} rows cannot support k_x + k_y = {k} "
                           f"(needs n − 1 ≥ k): every value undefined")
            elif rows < RATIO * k:
                out.append(f"{where}: {rows} rows < {RATIO}·(k_x + k_y) = {RATIO * k}: values biased upward, "
                           "rows carry a warning")
            if half - 1 < k:
                out.append(f"{where}: half-samples of {half} rows cannot support k_x + k_y = {k}: no interval")
        if name == "mixedsim" and pca_dims is not None and rows and rows < RATIO * pca_dims:
            out.append(f"{where}: {rows} rows < {RATIO}·pca_dims = {RATIO * pca_dims}: values biased upward")
        if "k" in REGISTERED[name].params and half is not None and params.get("k", 10) >= half:
            out.append(f"{where}: k = {params.get('k', 10)} is not below the {half} rows of a half-sample: "
                       "no interval")
    return out
