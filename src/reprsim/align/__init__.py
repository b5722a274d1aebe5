"""Aligners: maps from one representation space onto another."""

from reprsim.align.linear import LinearAligner, relative_error

__all__ = ["LinearAligner", "relative_error"]
