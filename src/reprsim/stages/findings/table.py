"""The findings table: its columns, the verdict rule, and writing it (parquet and CSV, atomically)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reprsim.io.outputs import write_parquet, write_text

# The contract's columns (docs/numerics.md, Findings), then where the row's numbers come from.
COLUMNS = ["claim_id", "claim", "source", "statistic", "models", "measure", "estimate", "ci_low", "ci_high",
           "reference", "reference_kind", "n", "verdict", "reason", "dataset", "representation"]
VERDICTS = ("supported", "contradicted", "inconclusive", "not applicable")
REFERENCE_KINDS = ("chance", "baseline", "zero")


@dataclass(frozen=True)
class Claim:
    """A claim of a seed paper: what it says, where, and the statistic that tests it.

    The claim holds when the statistic lies on the `side` (+1: above, −1: below) of `reference`.
    """

    id: str
    text: str
    source: str
    statistic: str
    reference: float = 0.0
    reference_kind: str = "zero"
    side: int = 1

    def __post_init__(self):
        if self.reference_kind not in REFERENCE_KINDS or self.side not in (1, -1):
            raise ValueError(f"claim {self.id}: reference_kind must be one of {REFERENCE_KINDS} and side ±1")


def verdict(low: float, high: float, reference: float, side: int = 1) -> str:
    """Supported when the whole interval lies on the claimed side of the reference, contradicted when
    it lies wholly on the other side, inconclusive otherwise (touching or containing it, or no interval)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive"
    if low > reference:
        return "supported" if side > 0 else "contradicted"
    if high < reference:
        return "contradicted" if side > 0 else "supported"
    return "inconclusive"


def judged(claim: Claim, *, estimate: float, low: float, high: float, n: int, models: str, measure: str,
           method: str, confidence: float, dataset: str = "", representation: str = "") -> dict:
    """One row with its verdict; the reason says where the interval lies and how it was made."""
    result = verdict(low, high, claim.reference, claim.side)
    if not (math.isfinite(low) and math.isfinite(high)):
        where = "has no interval (too few defined replicates or units)"
    else:
        where = (f"the {confidence:.0%} interval [{low:.4g}, {high:.4g}] "
                 + ("lies above" if low > claim.reference else "lies below" if high < claim.reference
                    else "contains") + f" the reference {claim.reference:g}")
    claimed = "above" if claim.side > 0 else "below"
    reason = f"{where} (the claim needs it {claimed}); {method}"
    return {"claim_id": claim.id, "claim": claim.text, "source": claim.source, "statistic": claim.statistic,
            "models": models, "measure": measure, "estimate": float(estimate), "ci_low": float(low),
            "ci_high": float(high), "reference": float(claim.reference), "reference_kind": claim.reference_kind,
            "n": int(n), "verdict": result, "reason": reason, "dataset": dataset, "representation": representation}


def not_applicable(claim: Claim, reason: str, dataset: str = "", representation: str = "") -> dict:
    return {"claim_id": claim.id, "claim": claim.text, "source": claim.source, "statistic": claim.statistic,
            "models": "", "measure": "", "estimate": math.nan, "ci_low": math.nan, "ci_high": math.nan,
            "reference": float(claim.reference), "reference_kind": claim.reference_kind, "n": 0,
            "verdict": "not applicable", "reason": reason, "dataset": dataset, "representation": representation}


def findings_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows in the contract's column order and types (an empty list gives an empty, typed table)."""
    table = pd.DataFrame(rows, columns=COLUMNS)
    bad = sorted(set(table["verdict"]) - set(VERDICTS))
    if bad:
        raise ValueError(f"findings: unknown verdict(s) {bad}; allowed {VERDICTS}")
    for column in ("estimate", "ci_low", "ci_high", "reference"):
        table[column] = table[column].astype("float64")
    table["n"] = table["n"].astype("int64")
    return table


def write_findings(table: pd.DataFrame, parquet_path: str | Path, csv_path: str | Path) -> None:
    """Both files atomically (a temporary sibling, renamed when complete), the same rows in both."""
    write_parquet(parquet_path, table)
    write_text(csv_path, table.to_csv(index=False))
