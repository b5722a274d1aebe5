"""What the HTML report shows: a main page that leads with the answer, and linked detail pages.

The main page (index.html) says what was compared, then the findings, the model × model summary
per measure family and the model distances; everything per pair, per fine-tuned model and per
aligner lives on detail pages in the same folder (relative links, figures embedded, so the folder
can be copied anywhere). This module holds the page table (PAGES), the links between the pages, and
writes them. The sections live in pages/, one module per page, and prepare data only: every section is
`section(inputs: ReportInputs) -> dict | None`, the tables (DataFrames), figures (`Figure`: a PNG and its
caption), sentences and links it makes of the tidy tables it is given, and None when it has nothing to
show. Sections only show: whatever a table holds was computed by the stage that wrote it; a section may
reshape a table for display (pivot, filter to the task metric, pick a median to quote), nothing more.

The markup lives in Jinja2 templates, in templates/ next to this module: base.html (head, style.css, the
links between pages, footer), one <page>.html per entry of PAGES, and sections/<section>.html, one per
section function, given that function's data under the function's name (render.py holds the
environment; autoescape on). Captions live once, in the `captions/*.rst` files next to this module, shared
with `snakemake --report` (common.py reads them for the pages).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from reprsim.io.outputs import write_text
from reprsim.stages.report.common import _link
from reprsim.stages.report.inputs import ReportInputs
from reprsim.stages.report.pages.alignment import aligners
from reprsim.stages.report.pages.attention import attention_section
from reprsim.stages.report.pages.index import (by_measure, contents, findings, header, model_distance, model_summary,
                                               provenance)
from reprsim.stages.report.pages.measures import agreement_section, which_measure
from reprsim.stages.report.pages.models import finetuned
from reprsim.stages.report.pages.pairs import pair_details, token_section
from reprsim.stages.report.pages.stitching import stitching_section
from reprsim.stages.report.pages.universality import (controls_section, convergence_section, senses_section,
                                                      universality_section, universality_statement)
from reprsim.stages.report.render import render_page


# ----------------------------------------------------------------- pages

Section = Callable[[ReportInputs], "dict | None"]


@dataclass(frozen=True)
class Page:
    """One HTML page of the report: its title, a line saying what is on it (for the main page's
    contents), its sections (templates/<page>.html includes templates/sections/<section>.html for each,
    in this order), and the inputs whose presence means it has something to show."""

    title: str
    blurb: str
    sections: tuple[Section, ...]
    inputs: tuple[str, ...]


PAGES: dict[str, Page] = {
    "index": Page("Summary", "findings, model × model summaries, model distances",
                  (header, contents, findings, by_measure, model_summary, model_distance, provenance), ()),  # always written
    "universality": Page("What is universal?", "the universality study: how much of the similarity seed siblings "
                                               "share survives a change of one factor (width, depth, data, "
                                               "objective, training time), per sense of similarity, depth third "
                                               "and measure, with "
                                               "intervals and verdicts; cross-seed similarity over training",
                         (senses_section, controls_section, universality_statement, universality_section,
                          convergence_section),
                         ("universality", "universality_statement", "universality_figure")),
    "pairs": Page("Similarity per model pair",
                  "every measure between every pair of layers of every model pair (heatmaps), the summary per "
                  "pair as a table with warnings, localization",
                  (pair_details, token_section), ("heatmaps", "pair_summary", "localization_figure", "token_tables")),
    "models": Page("Fine-tuned models", "truncation, skipping blocks and CKA between layers, per fine-tuned model",
                   (finetuned,), ("truncation_figures", "skip_figures", "layer_view_figures", "layer_blocks")),
    "alignment": Page("Aligners", "maps between the models' representation spaces (Ren et al. 2023): synthetic "
                                  "recovery, aligners between models, layer injection",
                      (aligners,), ("aligner_tables", "aligner_figures", "synthetic_tables", "injection_tables")),
    "attention": Page("Attention", "attention similarity between layers and heads (Wu et al. 2020): along depth, "
                                   "every layer pair, head by head",
                      (attention_section,), ("attention",)),
    "stitching": Page("Stitching", "model stitching (Bansal et al. 2021; Brown et al. 2023): penalties per model "
                                   "pair and layer, identity stitching beside CKA, the asymmetry between directions",
                      (stitching_section,), ("stitching", "stitch_figures", "stitching_figures")),
    "measures": Page("Which measure?", "each measure's scores on tests of sensitivity and specificity (Ding et al. "
                                       "2021; ReSi): which measures to believe on these models; how far the "
                                       "measures agree, and the model pairs they order oppositely",
                     (which_measure, agreement_section), ("measure_tests", "measure_agreement")),
}


def _navigation(inputs: ReportInputs, current: str) -> list[dict]:
    """The links between the pages (the current page's title without one); none for a one-page report."""
    if len(inputs.pages) < 2:
        return []
    return [{"title": page.title, "link": None if name == current else _link(inputs, name, page.title)}
            for name, page in PAGES.items() if name in inputs.pages]


def has_content(inputs: ReportInputs, page: str) -> bool:
    """Whether `page` has anything to show for these inputs."""
    return page == "index" or any(getattr(inputs, name) for name in PAGES[page].inputs)


def render(inputs: ReportInputs, page: str = "index") -> str:
    """One page of the report: its sections' data, each under its section's name, in templates/<page>.html."""
    return render_page(page, {
        "document_title": inputs.title if page == "index" else f"{inputs.title}: {PAGES[page].title}",
        "report_title": inputs.title, "page_title": PAGES[page].title, "navigation": _navigation(inputs, page),
        **{section.__name__: section(inputs) for section in PAGES[page].sections}})


def build_report(pages: Mapping[str, str | Path], inputs: ReportInputs) -> None:
    """Write the report's pages atomically (each a temporary file beside it, then renamed).

    `pages` maps page names (keys of PAGES) to output paths, all in one folder so that the pages
    link to each other by file name. A page with something
    to show that is not asked for is an error, and so is one asked for with nothing to show: the
    report rule's outputs and the inputs disagree.
    """
    pages = dict(pages)
    unknown = sorted(set(pages) - set(PAGES))
    if unknown or "index" not in pages:
        raise ValueError(f"report pages {sorted(pages)}: the main page 'index' is required and only "
                         f"{sorted(PAGES)} exist")
    folders = {Path(p).parent.resolve() for p in pages.values()}
    if len(folders) != 1:
        raise ValueError(f"report pages must share one folder (they link by file name); "
                         f"got {sorted(map(str, folders))}")
    wanted = {name for name in PAGES if has_content(inputs, name)}
    if wanted != set(pages):
        missing, empty = sorted(wanted - set(pages)), sorted(set(pages) - wanted)
        raise ValueError(f"the report rule's pages and inputs disagree: pages with content but no output "
                         f"{missing}, outputs with nothing to show {empty} (rules/report.smk REPORT_PAGES)")
    inputs = dataclasses.replace(inputs, pages={name: Path(path).name for name, path in pages.items()})
    for name, path in pages.items():
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, render(inputs, name))
