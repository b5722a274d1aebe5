"""Every finding under every measure: each claim that reads the pair tables evaluated with each configured
measure (its series from reprsim.stages.findings.agreement.oriented: distances negated, an asymmetric
measure's directions averaged), with the same statistic and interval logic as the findings table; claims about
function (accuracy, stitching, aligners, attention) keep their one statistic. Per claim: how many measures
support it, and a sentence naming where it holds, fails and stays open, by measure family."""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import pandas as pd

from reprsim.measure_registry import FAMILIES, MEASURES
from reprsim.stages.findings.context import Setup, Tables
from reprsim.stages.findings.groups import groups_closer_within
from reprsim.stages.findings.profiles import adjacent_layers, finetuning_changes_upper_layers, lower_layers_across_seeds
from reprsim.stages.findings.table import COLUMNS, findings_frame
from reprsim.stages.findings.two_blocks import two_block_structure
from reprsim.tables.grounding import failed_grounding
from reprsim.tables.pair_series import oriented

# the claims whose statistic any measure of the pair tables can express
PAIR_CLAIMS: list[Callable[[Tables, Setup], list[dict]]] = [
    adjacent_layers,
    lower_layers_across_seeds,
    finetuning_changes_upper_layers,
    two_block_structure,
    groups_closer_within,
]
BY_MEASURE_COLUMNS = [*COLUMNS, "family", "grounding_failed"]
SUMMARY_COLUMNS = ["holds_under", "across_measures"]
KEY = ["claim_id", "dataset", "representation"]
ANGULAR = ("cka", "cka_minibatch")  # values in [-1, 1]: Brown et al.'s arccos model distance applies


def oriented_tables(tables: Tables) -> Tables:
    """The pair tables with one symmetric, similarity-oriented series per measure label."""
    series, replicate_series = oriented(tables.pairs, tables.replicates)
    return Tables(pairs=series.assign(direction="symmetric", kind="similarity"),
                  replicates=replicate_series.assign(direction="symmetric"))


def findings_by_measure(tables: Tables, setup: Setup, measures: Mapping[str, str], main: pd.DataFrame,
                        grounding: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per claim, dataset, representation and measure label (`measures`: label -> measure name, in
    config order). `main`: the findings table, whose rows of claims about function are carried over."""
    rows = []
    if tables.pairs is not None and tables.replicates is not None:
        series = oriented_tables(tables)
        present = set(series.pairs["measure"])
        for label, name in measures.items():
            if label not in present:
                continue
            distance = "arccos" if name in ANGULAR else "negated mean"
            # this measure's rows alone: the datasets and representations it was computed on
            own = Tables(pairs=series.pairs[series.pairs["measure"] == label],
                         replicates=series.replicates[series.replicates["measure"] == label])
            for claim in PAIR_CLAIMS:
                rows += claim(own, dataclasses.replace(setup, measure=label, model_distance=distance))
    table = findings_frame(rows)
    functional = main[~main["claim_id"].isin(_pair_claim_ids(table))]
    table = pd.concat([table, functional[COLUMNS]], ignore_index=True) if len(table) else functional[COLUMNS].copy()
    family = {label: MEASURES[name].family for label, name in measures.items() if name in MEASURES}
    failed = failed_grounding(grounding)
    table["family"] = table["measure"].map(family).fillna("")
    table["grounding_failed"] = table["measure"].map(lambda label: ", ".join(failed.get(label, [])))
    order = {claim_id: i for i, claim_id in enumerate(dict.fromkeys(main["claim_id"]))}
    table = table.sort_values(["claim_id", "dataset", "representation"], key=lambda c: c.map(order)
                              if c.name == "claim_id" else c, kind="stable", ignore_index=True)
    return table[BY_MEASURE_COLUMNS]


def _pair_claim_ids(table: pd.DataFrame) -> set[str]:
    return set(table["claim_id"]) if len(table) else set()


def _names(labels: list[str], measures: Mapping[str, str], configured: list[str]) -> str:
    """Labels named by family where a whole family (of the configured ones, more than one) shares them."""
    parts, left = [], list(labels)
    for family in FAMILIES:
        members = [label for label in configured if label in measures and MEASURES.get(measures[label]) and
                   MEASURES[measures[label]].family == family]
        if len(members) > 1 and set(members) <= set(left):
            parts.append(f"every {family.replace(' family', '-family')} measure ({', '.join(members)})")
            left = [label for label in left if label not in members]
    return ", ".join(parts + left)


def summary(by_measure: pd.DataFrame, measures: Mapping[str, str]) -> pd.DataFrame:
    """Per claim, dataset and representation: holds_under ("k of K": measures whose interval supports it, of
    those that could test it) and across_measures (a sentence from the verdicts, by family; measures that failed
    a grounding test here are named)."""
    rows = []
    for key, group in by_measure.groupby(KEY, sort=False):
        tested = group[group["verdict"] != "not applicable"]
        configured = list(tested["measure"])
        if tested.empty:
            rows.append({**dict(zip(KEY, key)), "holds_under": "", "across_measures": ""})
            continue
        supported = int((tested["verdict"] == "supported").sum())
        if set(configured) - set(measures):  # accuracy, stitching, aligners, attention maps: the claim's own statistic
            sentence = (f"{tested['verdict'].iloc[0]} under its own statistic ({', '.join(configured)}), which the "
                        "similarity measures do not express")
        else:
            parts = []
            for verdict in ("supported", "contradicted", "inconclusive"):
                labels = list(tested.loc[tested["verdict"] == verdict, "measure"])
                if labels and len(tested) == 1:
                    parts.append(f"{verdict} under {labels[0]}, the one measure computed here")
                elif labels and len(labels) == len(tested):
                    parts.append(f"{verdict} under all {len(labels)} measures")
                elif labels:
                    parts.append(f"{verdict} under {_names(labels, measures, configured)}")
            sentence = "; ".join(parts)
            doubtful = [label for label in configured
                        if tested.loc[tested["measure"] == label, "grounding_failed"].iloc[0]]
            if doubtful:
                sentence += f" (failed a grounding test here: {', '.join(doubtful)})"
        rows.append({**dict(zip(KEY, key)), "holds_under": f"{supported} of {len(tested)}",
                     "across_measures": sentence})
    return pd.DataFrame(rows, columns=[*KEY, *SUMMARY_COLUMNS])


def with_summary(main: pd.DataFrame, by_measure: pd.DataFrame, measures: Mapping[str, str]) -> pd.DataFrame:
    """The findings table with SUMMARY_COLUMNS added (empty for a claim no measure could test)."""
    merged = main.merge(summary(by_measure, measures), on=KEY, how="left")
    for column in SUMMARY_COLUMNS:
        merged[column] = merged[column].fillna("")
    return merged
