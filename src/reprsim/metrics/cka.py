"""Linear CKA (Kornblith et al. 2019), biased HSIC estimator, batched over layers.

CKA(X, Y) = ||Xcᵀ Yc||_F² / (||Xcᵀ Xc||_F · ||Ycᵀ Yc||_F), with Xc the column-centred X.
Feature-space form (d×d products) when n > max(d1, d2), Gram form (n×n) otherwise;
the two are the same number. Accumulation is in float64 whatever the input dtype.
"""

from __future__ import annotations

import numpy as np


def _centred(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        raise ValueError("activations contain NaN or Inf; CKA is undefined")
    return X - X.mean(axis=-2, keepdims=True)


def _check_rows(Xs: np.ndarray, Ys: np.ndarray) -> None:
    if Xs.shape[-2] != Ys.shape[-2]:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={Xs.shape[-2]} and n={Ys.shape[-2]}")
    if Xs.shape[-2] < 2:
        raise ValueError("CKA needs at least 2 rows")


def _self_norms(Zc: np.ndarray, gram: bool) -> np.ndarray:
    """||Zcᵀ Zc||_F per layer (equal to ||Zc Zcᵀ||_F); zero means a constant layer."""
    products = Zc @ np.swapaxes(Zc, -1, -2) if gram else np.swapaxes(Zc, -1, -2) @ Zc
    norms = np.sqrt(np.einsum("lij,lij->l", products, products))
    return norms


def linear_cka_layers(Xs: np.ndarray, Ys: np.ndarray) -> np.ndarray:
    """Linear CKA for every layer pair: Xs (L1, n, d1), Ys (L2, n, d2) -> (L1, L2).

    Per-layer work (centring, self-similarity) is done once per layer; the cross
    terms are batched matrix products. A constant layer yields NaN (0/0), never a
    number biased by an epsilon.
    """
    Xs, Ys = np.asarray(Xs), np.asarray(Ys)
    if Xs.ndim != 3 or Ys.ndim != 3:
        raise ValueError(f"expected (layers, n, d) arrays; got shapes {Xs.shape} and {Ys.shape}")
    _check_rows(Xs, Ys)
    Xc, Yc = _centred(Xs), _centred(Ys)
    n, d1, d2 = Xs.shape[1], Xs.shape[2], Ys.shape[2]
    gram = n <= max(d1, d2)
    x_norm, y_norm = _self_norms(Xc, gram), _self_norms(Yc, gram)
    cross = np.empty((Xs.shape[0], Ys.shape[0]))
    if gram:
        # <Kx, Ky>_F for centred Grams K = Zc Zcᵀ: one (L1, n²) × (n², L2) product
        Kx = (Xc @ np.swapaxes(Xc, -1, -2)).reshape(Xs.shape[0], -1)
        Ky = (Yc @ np.swapaxes(Yc, -1, -2)).reshape(Ys.shape[0], -1)
        cross[:] = Kx @ Ky.T
    else:
        for i, X in enumerate(Xc):  # (L2, d1, d2) at a time bounds memory
            products = X.T[None] @ Yc
            cross[i] = np.einsum("lij,lij->l", products, products)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cross / np.outer(x_norm, y_norm)


def linear_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Linear CKA of X (n, d1) and Y (n, d2)."""
    return float(linear_cka_layers(np.asarray(X)[None], np.asarray(Y)[None])[0, 0])
