"""The universality study's artefact controls: each control (a measure on conditioned features, or a sweep of one
parameter) beside its twin, per factor level and third."""

from __future__ import annotations

import pandas as pd

from reprsim.stages.universality.study import Study

CONTROL_COLUMNS = ["dataset", "representation", "factor", "level", "depth", "control", "conditioning", "change",
                   "measure", "u", "ci_low", "ci_high", "verdict", "control_u", "control_ci_low", "control_ci_high",
                   "control_verdict", "changed", "control_grounding_failed", "n", "m"]


def _control_table(table: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Each artefact control (a measure on conditioned features, or a sweep of one parameter) beside its twin, per
    factor level and third: both u, intervals and verdicts, what the control changes, and whether the verdict
    changed."""
    rows = []
    thirds = table[table["depth"].str.endswith("third")].set_index(["measure", "factor", "level", "depth"])
    for control in study.measures:
        twin = study.twin(control)
        if twin is None or control not in thirds.index or twin not in thirds.index:
            continue
        for (factor, level, depth), mine in thirds.loc[control].iterrows():
            base = thirds.loc[(twin, factor, level, depth)]
            rows.append({"dataset": mine["dataset"], "representation": mine["representation"], "factor": factor,
                         "level": level, "depth": depth, "control": control, "conditioning": mine["conditioning"],
                         "change": mine["control"],
                         "measure": twin, "u": base["u"], "ci_low": base["ci_low"], "ci_high": base["ci_high"],
                         "verdict": base["verdict"], "control_u": mine["u"], "control_ci_low": mine["ci_low"],
                         "control_ci_high": mine["ci_high"], "control_verdict": mine["verdict"],
                         "changed": bool(mine["verdict"] != base["verdict"]),
                         "control_grounding_failed": mine["grounding_failed"], "n": mine["n"], "m": mine["m"]})
    return pd.DataFrame(rows, columns=CONTROL_COLUMNS)
