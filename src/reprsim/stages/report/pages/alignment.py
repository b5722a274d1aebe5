"""The aligners' page (alignment.html): synthetic recovery, aligners between models, layer injection."""

from __future__ import annotations

from pathlib import Path

from reprsim.io.tables import read_table, read_tables
from reprsim.stages.report.common import Figure, _pair_label, _task_metric_rows, paragraphs
from reprsim.stages.report.inputs import ReportInputs


def aligners(inputs: ReportInputs) -> dict | None:
    """Ren et al. (2023): synthetic recovery (Table 3), aligners between models (Table 4 and their
    figures), layer injection (Table 5)."""
    if not (inputs.synthetic_tables or inputs.aligner_tables or inputs.aligner_figures or inputs.injection_tables):
        return None
    section = {"synthetic": None, "between_models": bool(inputs.aligner_tables or inputs.aligner_figures),
               "summary": None, "figures": None, "injection": None}
    if inputs.synthetic_tables:
        synthetic = read_tables(inputs.synthetic_tables)
        synthetic = synthetic[synthetic["role"] == "score"] if "role" in synthetic else synthetic
        wide = synthetic.pivot_table(index=["dataset", "model", "layer", "map_seed"], columns="aligner",
                                     values="rel_error", sort=False)
        wide.columns.name = None
        section["synthetic"] = {"caption": paragraphs("synthetic"), "table": wide.reset_index()}
    if inputs.aligner_tables:
        scored = read_tables(inputs.aligner_tables)
        scored = scored[scored["role"] == "score"]
        wide = scored.pivot_table(index=["dataset", "model_a", "model_b", "direction", "split"], columns="aligner",
                                  values="rel_error", aggfunc="mean", sort=False)
        wide.columns.name = None
        section["summary"] = {"caption": paragraphs("aligner_summary"), "table": wide.reset_index()}
    if inputs.aligner_figures:
        tables = {Path(p).stem: p for p in inputs.aligner_tables}
        figures = []
        for path in inputs.aligner_figures:
            n = ""
            if Path(path).stem in tables:
                scored = read_table(tables[Path(path).stem])
                scored = scored[scored["role"] == "score"]
                n = f"; n = {int(scored['n'].iloc[0]):,} {scored['split'].iloc[0]} rows" if not scored.empty else ""
            figures.append(Figure(path, f"{_pair_label(path)}{n}; no chance level is computed for aligner errors "
                                        "(0 = an exact map).", wide=True))
        section["figures"] = {"caption": paragraphs("aligners"), "figures": figures}
    if inputs.injection_tables:
        injected = read_tables(inputs.injection_tables)
        wide = _task_metric_rows(injected, "target", inputs.task_metrics).pivot_table(
            index=["dataset", "source", "target", "metric"], columns="method", values="value", sort=False)
        wide.columns.name = None
        section["injection"] = {"caption": paragraphs("injection"), "table": wide.reset_index()}
    return section
