"""What a user reads stays inside the repository (issue 42): no page, docstring, configuration or profile points
at `../shared` (the copy beside the checkout that only the tests may read), and every repository path the guide
and README name, in backticks or as a link, exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

USER_FACING = ["src", "rules", "docs", "config", "profiles", "README.md"]
OUTSIDE = re.compile(r"\.\./shared|/work/shared|(?<![\w.-])shared/(?:docs|data)/")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".smk", ".txt", ".toml", ".cfg", ".sh", ".json", ".css", ".html",
                 ".j2", ".jinja", ""}
# a repository path: one of these top-level folders, then at least one more segment
ROOTS = ("src", "config", "benchmarks", "scripts", "rules", "tests", "profiles", "docs", "envs")
PATH = re.compile(r"^(?:\./)?((?:%s)/[\w./-]*[\w-])" % "|".join(ROOTS))
PLACEHOLDER = re.compile(r"(?:^|/)[A-Z][A-Z_]+(?:\.\w+)?$")  # config/examples/NAME.yaml
BACKTICKED = re.compile(r"`([^`\n]+)`")
LINKED = re.compile(r"\]\(([^)\s]+)\)")


def user_files() -> list[Path]:
    files = []
    for name in USER_FACING:
        path = REPO / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        files += [p for p in candidates if "__pycache__" not in p.parts and p.suffix in TEXT_SUFFIXES]
    return files


def guide_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def named_paths(page: Path) -> set[str]:
    """The repository paths a page names: in backticks (the first word of a command included) or as a link target
    (a link relative to the page is resolved from it); results/ and placeholders ({…}, <…>, *) left out."""
    text = page.read_text(encoding="utf-8")
    found = set()
    for token in BACKTICKED.findall(text):
        for word in token.split():
            match = PATH.match(word)
            if match:
                found.add(match.group(1))
    for target in LINKED.findall(text):
        target = target.split("#")[0]
        if not target or "://" in target or target.startswith("mailto:"):
            continue
        resolved = (page.parent / target).resolve()
        if resolved.is_relative_to(REPO):
            relative = resolved.relative_to(REPO).as_posix()
            if PATH.match(relative):
                found.add(relative)
    return {path.rstrip(".") for path in found
            if not re.search(r"[{}<>*]", path) and not PLACEHOLDER.search(path)}


def test_nothing_a_user_reads_points_at_shared():
    offenders = []
    for path in user_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offenders += [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
                      for number, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not offenders, "\n".join(offenders)


# pages generated when the guide builds (docs/hooks/reference.py: the README as index.md), and what a benchmark
# writes (git-ignored, like results/)
GENERATED = {"docs/index.md", "docs/configuration.md", "docs/measures.md", "benchmarks/.minilm-float16"}


@pytest.mark.parametrize("page", guide_pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_path_the_guide_names_exists(page):
    missing = sorted(path for path in named_paths(page)
                     if path not in GENERATED and not (REPO / path).exists())
    assert not missing, f"{page.relative_to(REPO)} names paths that are not in the repository: {missing}"
