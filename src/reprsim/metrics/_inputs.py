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
