"""Stitched models g_{>m} ∘ φ ∘ f_{≤l} (Bansal et al. 2021; Brown et al. 2023, §2): the residual
stream of the bottom model f after its block l, through a stitching map φ, continued by the top
model g from its block m + 1 to its output (task head or language-model head).

Layer l means the residual stream after block l (0 = the embedding output), as everywhere in
reprsim, but read at the block's output: for GPT-2 the top layer is taken before the final
LayerNorm, which belongs to g_{>m} (the store's layer L is after it).

f and g stay frozen: the forward passes run on the models' own modules (hooks capture f's stream
and put φ's output in place of g's embedding output; g's block list is cut to blocks m + 1..L
while it continues), and only φ's parameters are ever handed to an optimiser.
"""

from __future__ import annotations

import torch

from reprsim.nets.streams import continued_from, model_inputs

PHI_KINDS = ("identity", "affine", "affine_layernorm")


def stitched_forward(top, top_layer: int, phi: torch.nn.Module, stream: torch.Tensor, batch: dict):
    """g_{>top_layer}(φ(stream)) for the batch whose bottom-model stream is `stream`: the model output."""
    with continued_from(top, top_layer) as state:
        state.stream = phi(stream)
        return top(**model_inputs(batch), use_cache=False)


def freeze(*models) -> None:
    for model in models:
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)


# ---- stitching maps ------------------------------------------------------------------------------
class AffineLayerNorm(torch.nn.Module):
    """φ(h) = A·LN(h) + b, LN with its own gain and bias (the tuned-lens style map Brown et al. train)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d_in)
        self.linear = torch.nn.Linear(d_in, d_out)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(hidden))


def check_widths(kind: str, d_in: int, d_out: int, where: str = "") -> None:
    if kind == "identity" and d_in != d_out:
        raise ValueError(
            f"identity stitching needs equal widths{where}: the bottom model's stream is {d_in} wide and the top "
            f"model's {d_out}; use a learned map (phi: affine or affine_layernorm) for models of different widths"
        )


def make_phi(kind: str, d_in: int, d_out: int, where: str = "") -> torch.nn.Module:
    """A stitching map at its start: the identity where the shapes allow (affine with d_in = d_out);
    zeros otherwise, for :func:`least_squares_start` to fill (affine across widths, affine_layernorm)."""
    if kind not in PHI_KINDS:
        raise ValueError(f"unknown stitching map {kind!r}; expected one of {', '.join(PHI_KINDS)}")
    check_widths(kind, d_in, d_out, where)
    if kind == "identity":
        return torch.nn.Identity()
    phi = torch.nn.Linear(d_in, d_out) if kind == "affine" else AffineLayerNorm(d_in, d_out)
    linear = phi if kind == "affine" else phi.linear
    with torch.no_grad():
        linear.weight.copy_(torch.eye(d_out, d_in) if kind == "affine" and d_in == d_out else torch.zeros(d_out, d_in))
        linear.bias.zero_()
    return phi


def starts_at_identity(kind: str, d_in: int, d_out: int) -> bool:
    return kind == "identity" or (kind == "affine" and d_in == d_out)


def is_identity(phi: torch.nn.Module) -> bool:
    """Whether φ(h) = h to the bit: the identity map, or an affine map at its identity start (weights I, bias 0:
    each output is one h_i·1 plus exact zeros), such as one kept at its start after training."""
    if isinstance(phi, torch.nn.Identity):
        return True
    return (type(phi) is torch.nn.Linear and phi.in_features == phi.out_features and not phi.bias.any()
            and torch.equal(phi.weight, torch.eye(phi.in_features, dtype=phi.weight.dtype, device=phi.weight.device)))


@torch.no_grad()
def least_squares_start(phi: torch.nn.Module, source: torch.Tensor, target: torch.Tensor) -> float:
    """Set φ's linear part to the least-squares map from (normalised, for affine_layernorm) `source`
    rows to `target` rows (tokens, d); returns the fit's relative residual ||Y − Ŷ|| / ||Y − Ȳ||."""
    linear = phi.linear if isinstance(phi, AffineLayerNorm) else phi
    inputs = phi.norm(source) if isinstance(phi, AffineLayerNorm) else source
    X = torch.cat([inputs.double(), torch.ones(len(inputs), 1, dtype=torch.float64, device=inputs.device)], dim=1)
    Y = target.double()
    solution = torch.linalg.lstsq(X.cpu(), Y.cpu(), driver="gelsd").solution.to(Y.device)
    linear.weight.copy_(solution[:-1].T.to(linear.weight.dtype))
    linear.bias.copy_(solution[-1].to(linear.bias.dtype))
    residual = Y - X @ solution
    return float(residual.norm() / (Y - Y.mean(0)).norm())
