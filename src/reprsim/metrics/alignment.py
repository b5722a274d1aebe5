"""Alignment-based measures: compare X and Y after the best map from a group (rotations, permutations,
transport plans, linear maps) aligns one to the other.

- shape_metric: generalized shape metric of Williams et al. (2021), netrep's
  LinearMetric(alpha, center_columns=True, score_method="angular"); α = 1 is `procrustes`.
- procrustes_size_shape: min over rotations of ‖X̃Q − Ỹ‖_F (Williams et al. 2021; Dryden & Mardia's size-and-shape).
- permutation_procrustes: min over unit permutations of ‖XP − Y‖_F (ReSi's PermutationProcrustes).
- aligned_cosine: mean row cosine after orthogonal Procrustes (Hamilton, Leskovec & Jurafsky 2016).
- linear_regression: pooled R² of the least-squares fit of Y from X (Li et al. 2016; Kornblith et al. 2019).
- hard_correlation_match: one-to-one unit matching by correlation (Li et al. 2016, "Convergent learning").
- soft_matching: W₂ between the units' uniform distributions (Khosla & Williams 2023).

Narrower sides are zero-padded where the group needs equal widths; the padding never has to be built
(nuclear norms, the rotation's action and the assignments are computed on the unpadded matrices).
The assignment and transport problems (scipy linear_sum_assignment, POT ot.emd) run on CPU numpy on
the small d1×d2 matrix only; everything else is torch on the inputs' device.

Where reprsim departs from the public code:
- netrep clips XᵀX's eigenvalues at 1e-7 and goes on when X̃ is rank-deficient, whitening rounding noise up to
  the scale of the data; reprsim keeps the clip (absolute, on X̃ᵀX̃ without 1/n, as netrep) but drops the
  directions below the rank cut (relative singular value 1e-10, as its CCA), so a rank-deficient side (every
  LayerNorm'd stream: its centred rows span d − 1 directions) is whitened within its column space; α < 1 needs
  n − 1 > d.
- netrep zero-pads before whitening; reprsim whitens each side at its own width: the padded columns only
  change netrep's variance-preserving scale c_α, which cancels in the angle (so c_α is not computed).
- ReSi's LinearRegression(R, R') predicts its first argument from its second; reprsim's X→Y means
  "X predicts Y" and it solves the fit by SVD, not sqrtm/inv, with an optional relative ridge.
- ReSi's HardCorrelationMatch gives zero-variance units correlation 0; reprsim leaves units constant up to
  rounding (reprsim.metrics._inputs.constant_units) out of the matching, since a correlation with a constant
  unit is undefined and 0 would silently drag the mean; soft matching with normalize=True leaves them out of
  the transport. The meta counts them ("excluded_units"); a layer with none left raises.
- ReSi's Procrustes size-and-shape and permutation Procrustes take the square root of
  ‖X‖² + ‖Y‖² − 2·(alignment term), clipping negatives; that loses √eps·‖X‖ to cancellation near 0,
  so reprsim sums the aligned residual itself (permutation; size-and-shape near 0): same value.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
import torch

from reprsim.metrics._inputs import centre, excluded_meta, kept_units

RANK_CUTOFF = 1e-10  # relative singular value below which a direction is rounding, not data (as reprsim's CCA)
EIGVAL_CLIP = 1e-7  # netrep's floor on the eigenvalues of X̃ᵀX̃ (absolute)
NEAR_ZERO = 1e-4  # d² / (‖X̃‖² + ‖Ỹ‖²) below which the closed-form size-and-shape distance is recomputed


def _real(value, name: str, low: float, high: float = math.inf) -> float:
    valid = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value) and low <= value <= high
    if not valid:
        raise ValueError(f"{name} must be a finite real number in [{low}, {high}]; got {value!r}")
    return float(value)


def _linear_sum_assignment(scores: np.ndarray, maximize: bool = False):
    """scipy's linear_sum_assignment, imported on first use (0.5 s a pair job without these measures skips)."""
    from scipy.optimize import linear_sum_assignment

    return linear_sum_assignment(scores, maximize=maximize)


# --- shape metric ------------------------------------------------------------------------------

def _whitened(Zc: torch.Tensor, alpha: float, name: str) -> torch.Tensor:
    """φ_α up to netrep's scale c_α: X̃ V diag(α + (1−α) λ^{−1/2}) Vᵀ with λ the eigenvalues of X̃ᵀX̃
    (no 1/n, clipped at 1e-7 as netrep). From the thin SVD X̃ = U S Vᵀ it is U diag(αs + (1−α)s/ŝ) Vᵀ,
    ŝ = max(s, √1e-7): no inverse is formed. α = 1 returns X̃ itself."""
    if alpha == 1.0:
        return Zc
    _, n, d = Zc.shape
    if n - 1 <= d:
        raise ValueError(f"shape_metric with alpha {alpha} < 1 needs n − 1 > d for {name}; got n={n}, d={d}")
    U, S, Vt = torch.linalg.svd(Zc, full_matrices=False)
    if (S[:, 0] == 0).any():
        raise ValueError(f"shape_metric: a layer of {name} is constant")
    # directions below the rank cut carry rounding only (a LayerNorm'd stream's centred rows span d − 1
    # directions): whitening would blow them up, so they are dropped, as CCA's bases drop them
    kept = S > RANK_CUTOFF * S[:, :1]
    gains = torch.where(kept, alpha * S + (1 - alpha) * S / S.clamp(min=math.sqrt(EIGVAL_CLIP)), 0.0)
    return (U * gains.unsqueeze(-2)) @ Vt


def shape_metric_layers(Xs: torch.Tensor, Ys: torch.Tensor, alpha: float = 1.0) -> tuple[torch.Tensor, dict]:
    """θ = arccos(‖φ(X)ᵀφ(Y)‖_* / (‖φ(X)‖_F ‖φ(Y)‖_F)) for all layer pairs, with φ_α the centred, partially
    whitened representation; zero padding leaves the nuclear norm unchanged. Each layer is whitened once.
    α = 1: rotations only (equals `procrustes`); α = 0: any invertible linear map (needs n − 1 > d)."""
    alpha = _real(alpha, "alpha", 0.0, 1.0)
    Px, Py = _whitened(centre(Xs), alpha, "X"), _whitened(centre(Ys), alpha, "Y")
    norm_x, norm_y = torch.linalg.matrix_norm(Px), torch.linalg.matrix_norm(Py)
    if (norm_x == 0).any() or (norm_y == 0).any():
        raise ValueError("a representation is constant; the shape metric is undefined")
    nuclear = torch.stack([torch.linalg.svdvals(P.T @ Py).sum(dim=-1) for P in Px])
    cosine = nuclear / (norm_x[:, None] * norm_y[None, :])
    return torch.arccos(cosine.clamp(max=1.0)), {
        "alpha": alpha, "zero_padded": Xs.shape[-1] != Ys.shape[-1], "eigval_clip": EIGVAL_CLIP if alpha < 1 else None,
    }


# --- rotations -----------------------------------------------------------------------------------

def _rotations(X: torch.Tensor, Ys: torch.Tensor) -> torch.Tensor:
    """(L2, d1, d2): W = U Vᵀ from the thin SVD of Xᵀ Y for each Y. The zero-padded Procrustes rotation Q*
    acts as X_pad Q* = X W when d1 ≤ d2 and as Q*'s first d2 columns, X W, when d1 > d2; W has orthonormal
    rows or columns, so ‖x W‖ = ‖x‖ (d1 ≤ d2). Not unique when Xᵀ Y is rank-deficient (as in ReSi)."""
    U, _, Vt = torch.linalg.svd(X.T @ Ys, full_matrices=False)
    return U @ Vt


def procrustes_size_shape_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """min over rotations of ‖X̃_pad Q − Ỹ_pad‖_F = sqrt(‖X̃‖² + ‖Ỹ‖² − 2‖X̃ᵀỸ‖_*), centred, not scaled,
    for all layer pairs. The closed form loses √eps·‖X̃‖ to cancellation, so pairs where it is below
    1e-2·sqrt(‖X̃‖² + ‖Ỹ‖²) are recomputed as the residual of the narrower side rotated onto the wider one
    (the distance is symmetric); elsewhere its relative error is about 1e-12."""
    Xc, Yc = centre(Xs), centre(Ys)
    sq_x, sq_y = Xc.pow(2).sum(dim=(-2, -1)), Yc.pow(2).sum(dim=(-2, -1))
    total = sq_x[:, None] + sq_y[None, :]
    nuclear = torch.stack([torch.linalg.svdvals(X.T @ Yc).sum(dim=-1) for X in Xc])
    squared = (total - 2 * nuclear).clamp(min=0)
    for i, j in (squared <= NEAR_ZERO * total).nonzero().tolist():
        X, Y = Xc[i], Yc[j]
        W = _rotations(X, Y[None])[0]
        residual = X @ W - Y if X.shape[-1] <= Y.shape[-1] else Y @ W.T - X
        squared[i, j] = residual.pow(2).sum()
    return squared.sqrt(), {"zero_padded": Xs.shape[-1] != Ys.shape[-1]}


def aligned_cosine_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """Mean over rows of cos(x_i Q*, y_i), Q* the orthogonal Procrustes rotation of the zero-padded,
    uncentred X onto Y (Hamilton et al. 2016), for all layer pairs. Rows that are all zero on either side
    are skipped (meta "skipped_rows", per pair); a pair with every row skipped is an error."""
    norm_x, norm_y = torch.linalg.vector_norm(Xs, dim=-1), torch.linalg.vector_norm(Ys, dim=-1)  # (L, n)
    kept = (norm_x > 0)[:, None, :] & (norm_y > 0)[None, :, :]  # (L1, L2, n)
    counts = kept.sum(dim=-1)
    if (counts == 0).any():
        raise ValueError("aligned_cosine is undefined: every row is all zeros in X or Y for some layer pair")
    denominator = (norm_x[:, None, :] * norm_y[None, :, :]).masked_fill(~kept, 1.0)
    values = []
    for i, X in enumerate(Xs):
        dots = ((X @ _rotations(X, Ys)) * Ys).sum(dim=-1)  # (L2, n)
        values.append(torch.where(kept[i], (dots / denominator[i]).clamp(-1.0, 1.0), 0.0).sum(dim=-1) / counts[i])
    n = Xs.shape[1]
    return torch.stack(values), {
        "zero_padded": Xs.shape[-1] != Ys.shape[-1], "skipped_rows": (n - counts).tolist(),
    }


# --- assignments -----------------------------------------------------------------------------------

def _assignment(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows and columns of the one-to-one matching maximising the summed scores (on CPU)."""
    rows, cols = _linear_sum_assignment(scores.cpu().numpy(), maximize=True)
    return torch.as_tensor(rows, device=scores.device), torch.as_tensor(cols, device=scores.device)


def permutation_procrustes_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """min over unit permutations of ‖X_pad P − Y_pad‖_F, uncentred and unscaled as ReSi, for all layer pairs.
    The permutation maximises Σ_k ⟨x_k, y_π(k)⟩ (an assignment on XᵀY, CPU); units left unmatched by the
    padding face zero columns and add their squared norms."""
    col_x, col_y = Xs.pow(2).sum(dim=-2), Ys.pow(2).sum(dim=-2)  # (L, d) squared unit norms
    values = []
    for X, sq_x in zip(Xs, col_x):
        row = []
        for Y, sq_y in zip(Ys, col_y):
            r, c = _assignment(X.T @ Y)
            unmatched = _unpicked(sq_x, r) + _unpicked(sq_y, c)
            row.append((X[:, r] - Y[:, c]).pow(2).sum() + unmatched)
        values.append(torch.stack(row))
    return torch.stack(values).sqrt(), {"zero_padded": Xs.shape[-1] != Ys.shape[-1], "centred": False}


def _unpicked(values: torch.Tensor, picked: torch.Tensor) -> torch.Tensor:
    """Sum of the entries not in `picked` (summed directly: no cancellation)."""
    keep = torch.ones_like(values, dtype=torch.bool)
    keep[picked] = False
    return values[keep].sum()


def hard_correlation_match_layers(Xs: torch.Tensor, Ys: torch.Tensor, constant: tuple | None = None
                                  ) -> tuple[torch.Tensor, dict]:
    """Mean signed Pearson correlation over the one-to-one unit matching (min(d1, d2) pairs) that maximises
    the summed correlation (Li et al. 2016), for all layer pairs; the assignment runs on CPU. Constant units are
    left out (min(kept1, kept2) pairs, per pair in the meta's "per_pair")."""
    excluded_x, excluded_y = (kept_units(Zs, None if constant is None else constant[k], side, "hard_correlation_match")
                              for k, (Zs, side) in enumerate(((Xs, "X"), (Ys, "Y"))))
    # centred units of unit norm (an excluded one all zeros): Zxᵀ Zy holds the Pearson correlations
    Zx, Zy = _unit_columns(centre(Xs), excluded_x), _unit_columns(centre(Ys), excluded_y)
    values = []
    for Z, out_x in zip(Zx, excluded_x):
        correlations = Z.T @ Zy  # (L2, d1, d2)
        values.append(torch.stack([_matched_mean(C, out_x, out_y) for C, out_y in zip(correlations, excluded_y)]))
    meta = excluded_meta(excluded_x, excluded_y)
    for (i, j), entry in meta.get("per_pair", {}).items():
        entry["matched_units"] = int(min((~excluded_x[i]).sum(), (~excluded_y[j]).sum()))
    return torch.stack(values), {"matched_units": min(Xs.shape[-1], Ys.shape[-1]), "correlation": "pearson (signed)",
                                 **meta}


def _matched_mean(C: torch.Tensor, out_x: torch.Tensor, out_y: torch.Tensor) -> torch.Tensor:
    """Mean correlation over the best one-to-one matching of the units not left out (rows, columns of C)."""
    if out_x.any() or out_y.any():
        C = C[~out_x][:, ~out_y]
    return C[_assignment(C)].mean()


# --- optimal transport -----------------------------------------------------------------------------

def soft_matching_layers(Xs: torch.Tensor, Ys: torch.Tensor, normalize: bool = False, constant: tuple | None = None
                         ) -> tuple[torch.Tensor, dict]:
    """W₂ between the units as points of Rⁿ with uniform masses 1/d1 and 1/d2 (Khosla & Williams 2023):
    sqrt(min_P Σ P_kl ‖x_k − y_l‖²), columns centred; with `normalize` also scaled to unit norm (then
    ‖x_k − y_l‖² = 2 − 2 corr_kl). Exact transport on CPU: POT's network simplex (ot.emd), or at d1 = d2 an
    assignment; the plan's cost is then summed over its support from the unit differences themselves,
    which keeps the value exact near 0. At d1 = d2 it equals permutation Procrustes of the centred
    inputs / √d. With `normalize`, constant units are left out (a unit of zero norm has no direction): the
    masses are uniform over the kept units. Without, a constant unit is a point at the origin, kept."""
    if not isinstance(normalize, bool):
        raise ValueError(f"normalize must be a bool; got {normalize!r}")
    Xc, Yc = centre(Xs), centre(Ys)
    meta = {"normalize": normalize, "ground_cost": "sqeuclidean", "centred": True}
    if normalize:
        excluded_x, excluded_y = (kept_units(Zs, None if constant is None else constant[k], side,
                                             "soft_matching with normalize=True")
                                  for k, (Zs, side) in enumerate(((Xs, "X"), (Ys, "Y"))))
        Xc, Yc = _unit_columns(Xc, excluded_x), _unit_columns(Yc, excluded_y)
        if excluded_x.any() or excluded_y.any():
            values = torch.stack([torch.stack([_transport(X[:, ~out_x], Y[:, ~out_y])
                                               for Y, out_y in zip(Yc, excluded_y)]) for X, out_x in zip(Xc, excluded_x)])
            return values, {**meta, **excluded_meta(excluded_x, excluded_y)}
    d1, d2 = Xs.shape[-1], Ys.shape[-1]
    mass_x, mass_y = np.full(d1, 1.0 / d1), np.full(d2, 1.0 / d2)
    sq_x, sq_y = Xc.pow(2).sum(dim=-2), Yc.pow(2).sum(dim=-2)
    values = []
    for X, nx in zip(Xc, sq_x):
        costs = (nx[None, :, None] + sq_y[:, None, :] - 2 * (X.T @ Yc)).clamp(min=0).cpu().numpy()
        row = []
        for Y, cost in zip(Yc, costs):
            k, l, weights = _optimal_plan(cost, mass_x, mass_y)
            weights = torch.as_tensor(weights, device=X.device)
            k, l = torch.as_tensor(k, device=X.device), torch.as_tensor(l, device=X.device)
            row.append((weights * (X[:, k] - Y[:, l]).pow(2).sum(dim=0)).sum())
        values.append(torch.stack(row))
    return torch.stack(values).sqrt(), meta


def _transport(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """W₂ of one layer pair of centred units X (n, d1), Y (n, d2), uniform masses (as soft_matching_layers)."""
    d1, d2 = X.shape[-1], Y.shape[-1]
    cost = (X.pow(2).sum(dim=0)[:, None] + Y.pow(2).sum(dim=0)[None, :] - 2 * (X.T @ Y)).clamp(min=0).cpu().numpy()
    k, l, weights = _optimal_plan(cost, np.full(d1, 1.0 / d1), np.full(d2, 1.0 / d2))
    k, l = torch.as_tensor(k, device=X.device), torch.as_tensor(l, device=X.device)
    return (torch.as_tensor(weights, device=X.device) * (X[:, k] - Y[:, l]).pow(2).sum(dim=0)).sum().sqrt()


def _optimal_plan(cost: np.ndarray, mass_x: np.ndarray, mass_y: np.ndarray):
    """Support (rows, columns) and masses of an optimal transport plan. At equal widths a permutation / d
    is optimal (Birkhoff–von Neumann), and the assignment solver finds it exactly, faster than ot.emd."""
    if cost.shape[0] == cost.shape[1]:
        rows, cols = _linear_sum_assignment(cost)
        return rows, cols, mass_x[rows]
    import ot  # POT: 2.5 s to import, so only where unequal widths need transport

    plan, log = ot.emd(mass_x, mass_y, cost, numItermax=100 * sum(cost.shape) ** 2, log=True)
    if log["result_code"] != 1:
        raise ValueError(f"soft_matching: exact transport did not converge ({log['warning']})")
    rows, cols = np.nonzero(plan)
    return rows, cols, plan[rows, cols]


def _unit_columns(Zc: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """Centred units `Zc` (L, n, d) scaled to unit norm; the `excluded` ones (L, d) all zeros."""
    norms = torch.linalg.vector_norm(Zc, dim=-2, keepdim=True)
    return Zc / norms.masked_fill(excluded.unsqueeze(-2), torch.inf)


# --- regression ------------------------------------------------------------------------------------

def linear_regression_layers(Xs: torch.Tensor, Ys: torch.Tensor, ridge: float = 0.0) -> tuple[torch.Tensor, dict]:
    """Pooled R² of predicting Y (target) from X (predictor), both centred: 1 − ‖Ỹ − X̃B‖²_F / ‖Ỹ‖²_F with B
    the least-squares fit, for all layer pairs (X→Y = "X predicts Y"; ReSi's LinearRegression(R, R')
    predicts R from R'). From X̃ = U S Vᵀ (one SVD per X layer) the fit shrinks Ỹ's coordinates Uᵀ Ỹ by
    f = s² / (s² + λ), λ = ridge·tr(X̃ᵀX̃)/d_x (a ridge relative to X's mean variance per unit), and
    R² = Σ_k f_k (2 − f_k) ‖(UᵀỸ)_k‖² / ‖Ỹ‖². ridge = 0 (plain OLS) needs n − 1 > d_x; a rank-deficient X
    predicts from its column space (the meta records each layer's rank)."""
    ridge = _real(ridge, "ridge", 0.0)
    _, n, dx = Xs.shape
    if ridge == 0 and n - 1 <= dx:
        raise ValueError(f"linear_regression with ridge 0 needs n − 1 > d_x; got n={n}, d_x={dx}")
    Yc = centre(Ys)
    total_y = Yc.pow(2).sum(dim=(-2, -1))
    if (total_y == 0).any():
        raise ValueError("linear_regression: a target layer of Y is constant; R² is undefined")
    U, S, _ = torch.linalg.svd(centre(Xs), full_matrices=False)
    if (S[:, 0] == 0).any():
        raise ValueError("linear_regression: a predictor layer of X is constant")
    if ridge == 0:
        # least squares projects onto X̃'s column space, whatever its rank: directions below the rank cut are
        # rounding (a LayerNorm'd stream's centred rows span d − 1 directions), not predictors
        shrink = (S > RANK_CUTOFF * S[:, :1]).to(S.dtype)
    else:
        penalty = ridge * S.pow(2).sum(dim=-1, keepdim=True) / dx
        fit = S.pow(2) / (S.pow(2) + penalty)
        shrink = fit * (2 - fit)
    values = torch.stack([
        (shrink[i][None, :, None] * (U[i].T @ Yc).pow(2)).sum(dim=(-2, -1)) / total_y for i in range(len(Xs))
    ])
    rank = (S > RANK_CUTOFF * S[:, :1]).sum(dim=-1).tolist()
    return values.clamp(max=1.0), {"direction": "x->y", "predictor": "x", "target": "y", "ridge": ridge,
                                   "rank_x": rank}
