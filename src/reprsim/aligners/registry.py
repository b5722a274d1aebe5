"""Aligners by name, with their parameters and defaults, so a config can name one and be checked early."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any

from reprsim.aligners.cca import VARIANTS, CanonicalMap
from reprsim.aligners.inn import CouplingArchitecture, InvertibleAligner
from reprsim.aligners.linear import LinearAligner
from reprsim.aligners.mlp import MLPAligner
from reprsim.aligners.training import TrainingConfig

TRAINING = {field.name: field.default for field in fields(TrainingConfig)}

# name -> {parameter: default}; the torch aligners share TrainingConfig's parameters. The config's
# types and ranges of these are declared in schema.yaml ($defs/aligner_params; tests keep the names in step).
PARAMETERS: dict[str, dict[str, Any]] = {
    "linear": {"ridge": 0.0},
    "cca": {"components": None, "pca_dims": None},
    "svcca": {"components": None, "pca_dims": None, "threshold": 0.99},
    "pwcca": {"components": None, "pca_dims": None},
    "inn": {**asdict(CouplingArchitecture()), **TRAINING},
    "mlp": {"hidden": None, "depth": 2, **TRAINING},
}

# The aligners whose fit takes `shared`, one dict per side that the caller keeps across fits on the same rows:
# the CCA family decomposes each side once for all three maps and both directions (reprsim.aligners.cca).
SHARING = frozenset(VARIANTS)


def _split_training(params: dict) -> tuple[dict, TrainingConfig]:
    """The model's own parameters, and the training ones as a TrainingConfig."""
    training = TrainingConfig(**{k: v for k, v in params.items() if k in TRAINING})
    return {k: v for k, v in params.items() if k not in TRAINING}, training


def _inn(**params: Any) -> InvertibleAligner:
    architecture, training = _split_training(params)
    return InvertibleAligner(CouplingArchitecture(**architecture), training)


def _mlp(**params: Any) -> MLPAligner:
    architecture, training = _split_training(params)
    return MLPAligner(**architecture, training=training)


ALIGNERS: dict[str, Callable[..., Any]] = {
    "linear": LinearAligner,
    "cca": lambda **params: CanonicalMap("cca", **params),
    "svcca": lambda **params: CanonicalMap("svcca", **params),
    "pwcca": lambda **params: CanonicalMap("pwcca", **params),
    "inn": _inn,
    "mlp": _mlp,
}


def make(name: str, **params: Any) -> Any:
    """An unfitted aligner: `fit(X, Y, X_val=None, Y_val=None)`, `transform(X)`, `score(X, Y)`, `meta`
    after fitting, and `inverse(Y)` for the bijective ones (all but mlp). Unknown names, unknown
    parameters and bad values are ValueErrors that say what is allowed."""
    if name not in ALIGNERS:
        raise ValueError(f"unknown aligner {name!r}; known: {', '.join(ALIGNERS)}")
    unknown = sorted(set(params) - set(PARAMETERS[name]))
    if unknown:
        raise ValueError(f"aligner {name!r} has no parameter(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join(PARAMETERS[name])}")
    return ALIGNERS[name](**params)
