"""The recorded block that quotes the interval coverage study (summary["interval_coverage"], from
benchmarks/interval_coverage.py): each interval's coverage per measure and n/d."""

from __future__ import annotations

from typing import Callable

from reprsim.guide.recorded_format import _cell


def _coverage_table(summary: dict) -> str:
    coverage = summary["interval_coverage"]
    lines = [f"{coverage['datasets']} simulated data sets per setting, n = {coverage['rows']} rows, "
             f"{coverage['resamples']} half-samples per interval; share of 95 % intervals holding the truth ± its "
             "Monte Carlo standard error (half-width in the estimate's units):", "",
             "| measure | truth | interval | n/d = " + " | n/d = ".join(f"{r:g}" for r in coverage["ratios"]) + " |",
             "|---|---|---|" + "---:|" * len(coverage["ratios"])]
    # a k-NN measure's value depends on n: moving it towards another n is no bias correction
    keys = list(dict.fromkeys((r["measure"], r["truth"], r["interval"]) for r in coverage["results"]
                              if not (r["measure"] == "mutual_knn" and "bias-corrected" in r["interval"])))
    for measure, truth, method in keys:
        cells = []
        for ratio in coverage["ratios"]:
            found = [r for r in coverage["results"] if (r["measure"], r["truth"], r["interval"]) == (measure, truth,
                                                                                                method)
                     and r["n_over_d"] == ratio]
            cells.append("–" if not found else f"{found[0]['coverage']:.1%} ± {found[0]['mc_error']:.1%} "
                         f"(±{found[0]['mean_half_width']:.3f})")
        lines.append(f"| {_cell(measure)} | {_cell(truth)} | {_cell(method)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


COVERAGE_BLOCKS: dict[str, tuple[Callable[[dict], str], bool]] = {
    # name: (renderer, block-level: its own paragraphs, else inline text)
    "interval-coverage": (_coverage_table, True),
}
