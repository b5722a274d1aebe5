"""Similarity measures between representations (rows = the same inputs)."""

from reprsim.metrics.cka import linear_cka, linear_cka_layers

__all__ = ["linear_cka", "linear_cka_layers"]
