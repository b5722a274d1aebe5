"""The grounding tests' decisions (measure_tests.parquet, written by the grounding stage): the names of the outcomes,
and which measures failed a test on this configuration's models (the findings and the universality study mark their
verdicts and leave them out of a headline; the report marks each test)."""

from __future__ import annotations

import pandas as pd

# a test's `decision`: pass or fail (against its null and its chance level, reprsim.stages.grounding.nulls), or one
# that ranks nothing (too few items, a measure that cannot rank), is only shown (descriptive) or is undefined
PASS, FAIL, TOO_FEW, CANNOT_RANK, DESCRIPTIVE, UNDEFINED = (
    "pass", "fail", "too few items", "cannot rank", "descriptive", "undefined")
RANKABLE = (PASS, FAIL)


def failed_grounding(grounding: pd.DataFrame | None) -> dict[str, list[str]]:
    """Measure label -> the grounding tests (test:variant) it failed in this configuration: decision "fail" (the
    item-level null or the row interval does not clear chance; reprsim.stages.grounding, measure_tests.parquet).
    A test that is descriptive, has too few items or cannot rank is no failure. A table from before the decisions
    (no `decision` column): a score whose interval is not beyond its chance level."""
    if grounding is None or grounding.empty:
        return {}
    if "decision" in grounding:
        failed = grounding[grounding["decision"] == FAIL]
    else:
        failed = grounding[grounding["score"].notna() & ~grounding["beyond_chance"].astype(bool)]
    return {label: sorted(f"{row.test}:{row.variant}" for row in rows.itertuples())
            for label, rows in failed.groupby("measure")}
