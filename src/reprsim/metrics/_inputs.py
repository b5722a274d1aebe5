"""Input handling shared by the measures: float64 tensors on one device, with the checks every measure needs."""

from __future__ import annotations

import numpy as np
import torch


def as_float64(X, device: torch.device | str | None = None, name: str = "X") -> torch.Tensor:
    """X (numpy array or torch tensor, any float dtype) as a float64 tensor; NaN/Inf rejected."""
    if isinstance(X, torch.Tensor):
        tensor = X.detach()
        if device is not None:
            tensor = tensor.to(device)
        tensor = tensor.to(torch.float64)
    else:
        tensor = torch.as_tensor(np.asarray(X, dtype=np.float64), device=device)
    if not torch.isfinite(tensor).all():
        raise ValueError(f"{name} contains NaN or Inf; similarity is undefined")
    return tensor


def device_of(X) -> torch.device:
    return X.device if isinstance(X, torch.Tensor) else torch.device("cpu")


def dtype_name(X) -> str:
    return str(X.dtype).replace("torch.", "")


def pair(X, Y) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (n, d) inputs with the same rows, as float64 tensors on X's device."""
    device = device_of(X)
    X, Y = as_float64(X, device, "X"), as_float64(Y, device, "Y")
    if X.ndim != 2 or Y.ndim != 2:
        raise ValueError(f"expected (n, d) inputs; got shapes {tuple(X.shape)} and {tuple(Y.shape)}")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X and Y must have the same rows (inputs); got n={X.shape[0]} and n={Y.shape[0]}"
        )
    return X, Y


def layers(Xs, device: torch.device | None = None, name: str = "Xs") -> torch.Tensor:
    """(L, n, d) array/tensor or a list of (n, d) as one float64 tensor."""
    if isinstance(Xs, (list, tuple)):
        if not Xs:
            raise ValueError(f"{name} is empty")
        device = device or device_of(Xs[0])
        stacked = torch.stack([as_float64(x, device, name) for x in Xs])
    else:
        stacked = as_float64(Xs, device or device_of(Xs), name)
    if stacked.ndim != 3:
        raise ValueError(f"{name} must be (layers, n, d); got shape {tuple(stacked.shape)}")
    return stacked


def layer_pair(Xs, Ys) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (L, n, d) stacks (or lists of (n, d)) with the same rows, as float64 tensors on Xs's device."""
    Xs = layers(Xs, name="Xs")
    Ys = layers(Ys, Xs.device, name="Ys")
    if Xs.shape[1] != Ys.shape[1]:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={Xs.shape[1]} and n={Ys.shape[1]}")
    return Xs, Ys


def centre(X: torch.Tensor) -> torch.Tensor:
    """Column-centred X (works on (..., n, d))."""
    return X - X.mean(dim=-2, keepdim=True)


# --- units without variance ------------------------------------------------------------------------

# The one rule for spread that is rounding: a unit (:func:`constant_units`) or a whole layer (:func:`constant_layers`)
# whose spread is at or below this fraction of its layer's size is constant
CONSTANT_UNIT = 1e-5
_MANTISSA, _EXPONENT = f"{CONSTANT_UNIT:e}".split("e")
FLOOR = f"{float(_MANTISSA):g}e{int(_EXPONENT)}"  # CONSTANT_UNIT as the notes write it: "1e-5"

# measures that divide by a unit's own spread, and so leave out the units :func:`constant_units` finds (each takes
# the masks as `constant`); soft_matching only with normalize=True
UNIT_VARIANCE = ("neuronsim", "mixedsim", "hard_correlation_match", "soft_matching")


def constant_units(Zs: torch.Tensor) -> torch.Tensor:
    """Boolean mask (..., d) over the units (columns) of Zs (..., n, d) that are constant up to rounding:

        std_j ≤ CONSTANT_UNIT · RMS,   std_j = sqrt(mean_i (z_ij − z̄_j)²),   RMS = sqrt(mean_ij z_ij²)

    in float64, with RMS the layer's own (uncentred) root mean square. Why relative to the layer and why 1e-5:
    a unit's values are sums over the layer's units (matrix products, LayerNorm's statistics), so their float32
    rounding scales with the layer, not with the unit: a spread below 1e-5 of the layer's RMS is below what
    float32 computation and storage leave (each value's own rounding, 2⁻²⁴·|z_ij| ≤ 2⁻²⁴·√d·RMS, stays below the
    floor for d ≤ 28,000). Z-scoring such a unit divides rounding by rounding and gives its correlations full
    weight. Exactly constant units (std 0, a LayerNorm gain rounded to 0) and numerically constant ones (float32
    MiniLM has units with std ~1e-33 of the others) are both caught; an all-zero layer is all constant. It is
    :func:`constant_layers`'s floor per unit: a layer whose every unit is under it is a constant layer there. A row
    permutation leaves the mask as it is.
    """
    std = centre(Zs).pow(2).mean(dim=-2).sqrt()
    rms = Zs.pow(2).mean(dim=(-2, -1)).sqrt()
    return std <= CONSTANT_UNIT * rms.unsqueeze(-1)


def constant_layers(rep: np.ndarray) -> np.ndarray:
    """Boolean mask over the layers of `rep` (layers, rows, d) whose rows are one vector up to
    rounding: ||X − mean||_F ≤ CONSTANT_UNIT · ||X||_F (numpy, float64, one layer at a time).

    BERT-style models' first token at the embedding layer is such a layer (same token, same
    position for every example): similarity to it is undefined (docs/numerics.md: a degenerate input
    gives NaN with a reason), not rounding noise dressed up as a number. The pair jobs leave such layers
    out before any measure sees them (reprsim.metrics.pair_engine, reprsim.stages.compare.terms).
    """
    def constant(layer: np.ndarray) -> bool:
        # one layer at a time: a float64 copy of the whole stack would double a pair job's memory
        layer = np.asarray(layer, dtype=np.float64)
        return np.linalg.norm(layer - layer.mean(axis=0)) <= CONSTANT_UNIT * np.linalg.norm(layer)

    return np.array([constant(layer) for layer in rep], dtype=bool)


def kept_units(Zs: torch.Tensor, given: torch.Tensor | None, side: str, measure: str) -> torch.Tensor:
    """The mask (L, d) of the units of Zs (L, n, d) a measure leaves out: `given` (decided on all rows and passed
    on to the null's and the interval's draws, so every draw leaves out the same units) or else those of Zs
    (:func:`constant_units`). A unit not in `given` that is constant on these rows (a half-sample's) makes the
    draw undefined: a ValueError (the interval leaves the draw out as NaN). So does a layer with no unit left."""
    found = constant_units(Zs)
    if given is None:
        given = found
    elif (found & ~given).any():
        raise ValueError(f"{measure}: {int((found & ~given).sum())} unit(s) of {side} are constant on these rows "
                         "but not on all rows; the value on these rows is undefined")
    empty = given.all(dim=-1)
    if empty.any():
        layer = int(empty.nonzero()[0, 0])
        raise ValueError(f"{measure}: every unit of {side}'s layer {layer} is constant (std ≤ {FLOOR} × the layer's "
                         "RMS); nothing is left to compare")
    return given


def excluded_meta(excluded_x: torch.Tensor, excluded_y: torch.Tensor) -> dict:
    """What a measure records of the units it left out, from the masks (L1, d1), (L2, d2) of X and Y:
    :func:`counted_meta` of their counts."""
    return counted_meta(excluded_x.sum(dim=-1).tolist(), excluded_y.sum(dim=-1).tolist(), excluded_x.shape[-1],
                        excluded_y.shape[-1])


def counted_meta(counts_x: list[int], counts_y: list[int], d_x: int, d_y: int, transposed: bool = False) -> dict:
    """Nothing when no unit is left out; else "excluded_units" {"x": [count per X layer], "y": [count per Y layer]}
    and, per layer pair, "per_pair" {(i, j): {"excluded_units": {"x": count, "y": count}, "units_note": a sentence
    where either count is not 0}}; reprsim.metrics.api.describe adds each note to that pair's warning.
    `transposed`: keyed (Y's layer, X's layer), as the Y→X direction of an X→Y call keys its pairs."""
    if not any(counts_x) and not any(counts_y):
        return {}
    per_pair = {}
    for i, cx in enumerate(counts_x):
        for j, cy in enumerate(counts_y):
            entry = {"excluded_units": {"x": cx, "y": cy}}
            counted = [f"{count} of {d} units of {side}'s layer"
                       for count, d, side in ((cx, d_x, "X"), (cy, d_y, "Y")) if count]
            if counted:
                entry["units_note"] = (f"{' and '.join(counted)} are constant (std ≤ {FLOOR} × the layer's RMS) "
                                       "and left out")
            per_pair[(j, i) if transposed else (i, j)] = entry
    return {"excluded_units": {"x": counts_x, "y": counts_y}, "per_pair": per_pair}
