"""The report's markup: the Jinja2 environment over the templates/ folder next to this module.

templates/base.html is the layout every page shares (head, style.css, the links between pages, the page's
heading, its content, the footer); templates/<page>.html is one page of `html.PAGES`, a list of includes of
templates/sections/<section>.html, one per section, each given the data its section function in
pages/<page>.py prepared; templates/macros.html holds the pieces they share (a figure, a caption's paragraphs, a link).
Autoescape is on: every value is escaped, except what the filters below mark safe deliberately, a table
pandas renders (its cells escaped by pandas) and a figure's data URI (base64).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import jinja2
import pandas as pd
from markupsafe import Markup


def table(frame: pd.DataFrame) -> Markup:
    """A table as pandas renders it, every cell escaped by pandas: numbers to four significant digits, – for
    a missing value."""
    return Markup(frame.to_html(index=False, border=0, classes="data", na_rep="–", escape=True,
                                float_format=lambda v: f"{v:.4g}"))


def png_data_uri(path: str | Path) -> Markup:
    """A PNG file as a data URI, so that a page carries its figures (base64: nothing to escape)."""
    return Markup("data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode())


@cache
def environment() -> jinja2.Environment:
    """The templates shipped with the package; autoescape on for every template."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("reprsim.stages.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(table=table, png_data_uri=png_data_uri)
    return env


def render_page(page: str, context: Mapping) -> str:
    """The page `page` (templates/<page>.html) filled with `context`."""
    return environment().get_template(f"{page}.html").render(context)
