"""How the recorded blocks write a value: numbers to three significant digits, an estimate with its interval, a
Markdown table cell, a measure's display name, a run's minutes and a size in GB."""

from __future__ import annotations

from reprsim.measure_registry import DISPLAY_NAMES


def _g(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _name(measure: str) -> str:
    return DISPLAY_NAMES.get(measure, measure)


def _interval(row: dict, key: str = "estimate", low: str = "ci_low", high: str = "ci_high") -> str:
    return f"{row[key]:.2f} [{row[low]:.2f}, {row[high]:.2f}]"


def _minutes(run: dict) -> str:
    wall = run.get("time_wall_s") or run["log_wall_s"]
    return f"{wall / 60:.1f} min"


def _gb(size: float | None) -> str:
    return "–" if size is None else f"{size / 1e9:.2f} GB" if size < 1e10 else f"{size / 1e9:.0f} GB"
