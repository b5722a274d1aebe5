"""The report's pages from their Jinja2 templates: the fixture pages of tests/stage/test_report.py show what the
golden file says, every template ships with the package, and autoescape is on.

The golden file, tests/stage/data/report_golden.json, holds per page what a reader gets: the visible text
(html.parser's text outside <head>, whitespace-normalised, the generation time and the library versions
blanked), the title, the ordered images (source and alt text) and the ordered links. An embedded figure's source is the
sha256 of its bytes; the fixture's figures are identical matplotlib PNGs, whose bytes differ between matplotlib
versions, so the golden file says 'fixture' for an image that embeds one of them and the alt text tells them apart. When a change to what a page shows is intended, regenerate it
and review its diff:

    REPRSIM_REGENERATE_GOLDEN=1 python -m pytest tests/stage/test_report_templates.py -k golden
"""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import re
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
from jinja2 import meta
from test_report import FILES, _report, inputs  # noqa: F401  (inputs: the fixture)

from reprsim.stages.report import render
from reprsim.stages.report.html import PAGES, build_report
from reprsim.stages.report.inputs import ReportInputs

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "data" / "report_golden.json"
PACKAGE = REPO / "src" / "reprsim"
TEMPLATES = PACKAGE / "stages" / "report" / "templates"


class _Reader(HTMLParser):
    """What a page shows: the text outside <head>, the title, image sources and link targets, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.title: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []
        self._open: list[str] = []  # head, style, script or title, while inside one

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("head", "style", "script", "title"):
            self._open.append(tag)
        elif tag == "img":
            self.images.append({"src": image_reference(attrs.get("src") or ""), "alt": attrs.get("alt")})
        elif tag == "a" and attrs.get("href") is not None:
            self.links.append(attrs["href"])

    def handle_endtag(self, tag):
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data):
        if self._open == ["head", "title"]:
            self.title.append(data)
        elif not self._open:
            self.text.append(data)


def image_reference(source: str) -> str:
    """An image's src, or for an embedded one (a data URI) 'sha256:' and the hash of its bytes."""
    head, _, data = source.partition(";base64,")
    if head.startswith("data:") and data:
        return "sha256:" + hashlib.sha256(base64.b64decode(data)).hexdigest()
    return source


def _words(parts: list[str]) -> str:
    return " ".join(" ".join(parts).split())


def page_digest(page: str) -> dict:
    """What `page` shows (see the module docstring), the time it was generated and the versions blanked."""
    reader = _Reader()
    reader.feed(page)
    reader.close()
    text = re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated <time> UTC", _words(reader.text))
    text = re.sub(r"versions: \{[^}]*\}", "versions: <versions>", text)
    return {"title": _words(reader.title), "text": text, "images": reader.images, "links": reader.links}


def _fixture_digests(tmp_path, named: dict) -> dict:
    """Every fixture page's digest, an image that embeds one of the fixture's figures with the source 'fixture'."""
    figures = {"sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
               for paths in named.values() for path in ([paths] if isinstance(paths, str) else paths)
               if path.endswith(".png")}
    digests = {name: page_digest(page) for name, page in _report(tmp_path, named).items()}
    for digest in digests.values():
        for image in digest["images"]:
            image["src"] = "fixture" if image["src"] in figures else image["src"]
    return digests


def test_the_fixture_pages_match_the_golden_file(tmp_path, inputs):
    digests = _fixture_digests(tmp_path, inputs)
    if os.environ.get("REPRSIM_REGENERATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(digests, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(digests) == sorted(golden) == sorted(FILES)
    for name in FILES:
        for key in ("title", "text", "images", "links"):
            assert digests[name][key] == golden[name][key], (name, key)


def test_every_template_ships_with_the_package():
    """The package-data globs of pyproject.toml match every file of the templates folder (a non-editable
    install would otherwise render no page), and every page and section has its template."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["reprsim"]
    shipped = {Path(path) for pattern in patterns for path in glob.glob(str(PACKAGE / pattern))}
    templates = {path for path in TEMPLATES.rglob("*") if path.is_file() and "__pycache__" not in path.parts}
    assert templates and templates <= shipped, sorted(map(str, templates - shipped))
    sections = {f"sections/{section.__name__}.html" for page in PAGES.values() for section in page.sections}
    expected = {"base.html", "macros.html", "style.css", *(f"{page}.html" for page in PAGES), *sections}
    assert {path.relative_to(TEMPLATES).as_posix() for path in templates} == expected


def test_each_page_template_includes_its_sections_in_order():
    environment = render.environment()
    for name, page in PAGES.items():
        source = environment.loader.get_source(environment, f"{name}.html")[0]
        included = [t for t in meta.find_referenced_templates(environment.parse(source)) if t.startswith("sections/")]
        assert included == [f"sections/{section.__name__}.html" for section in page.sections], name


def test_autoescape_is_on(tmp_path):
    """A model, a dataset and a claim named with markup are shown as text, never run as markup; only pandas' tables
    and the figures' data URIs are marked safe."""
    script = "<script>alert(1)</script>"
    r = tmp_path / "results"
    (r / "models" / "m").mkdir(parents=True)
    (r / "models" / "m" / "meta.json").write_text(json.dumps(
        {"name": script, "source": "init", "architecture": "bert", "n_layers": 2, "hidden_size": 8,
         "n_parameters": 1e3, "seed": 0}))
    findings = r / "tables" / "findings.parquet"
    findings.parent.mkdir(parents=True)
    pd.DataFrame([{"claim": script, "source": "s", "statistic": "t", "models": script, "measure": "", "estimate": 0.1,
                   "ci_low": 0.0, "ci_high": 0.2, "reference": 0.0, "reference_kind": "zero", "n": 5,
                   "verdict": "inconclusive", "reason": f"{script}; {script}"}]).to_parquet(findings)
    out = tmp_path / "report" / "index.html"
    build_report({"index": out}, ReportInputs.from_named({"models": [str(r / "models" / "m")],
                                                          "findings": [str(findings)]}, title=script))
    page = out.read_text()
    assert "<script" not in page.lower()
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    # the title twice (head and h1), the model (list and provenance table), the claim, its models, its reason twice
    assert page.count(escaped) >= 7
    assert render.environment().autoescape is True
    assert str(render.environment().from_string("{{ x }}").render(x=script)) == escaped
