"""MkDocs hook: the guide's generated pages, made when the guide is built so that none can be stale.

- configuration.md: every key of src/reprsim/schema.yaml (reprsim.guide.docs_reference.configuration_reference);
- measures.md: the measure registry (`reprsim measures --markdown`);
- index.md: the README, the guide's front page, its links to docs/ made relative to the guide.

It also flags recorded figures that may be stale: a page holding a `<!-- recorded: NAME -->` block
(reprsim.guide.recorded_run; index.md through the README) gets a warning admonition at its top when the checkout's
fingerprint of configuration and code differs from docs/recorded-run/summary.json's, logged at INFO so that
`--strict` still passes while a new recording of the default run is pending.

mkdocs.yml names this file under `hooks:`; `mkdocs build --strict` (in .ci/run) then fails on a broken link.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
# the checkout's own schema and registry, whichever reprsim the environment has installed
sys.path.insert(0, str(ROOT / "src"))

from reprsim.guide import recorded_run  # noqa: E402
from reprsim.guide.docs_reference import generated_pages  # noqa: E402

log = logging.getLogger("mkdocs.hooks.reference")
_stale: dict[str, str | None] = {}
# a Markdown link or image target that is a relative path (not a URL, not an anchor on the page)
LINK = re.compile(r"(\]\()(?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)(\))")


def readme_as_home(text: str) -> str:
    """README.md with its docs/ links made relative to the guide; a link elsewhere in the repository is left for
    MkDocs to report (the README links to the guide only)."""
    return LINK.sub(lambda m: m.group(1) + m.group(2).removeprefix("docs/") + m.group(3), text)


def on_files(files: Files, config) -> Files:
    pages = dict(generated_pages())
    pages["index.md"] = readme_as_home((ROOT / "README.md").read_text())
    for uri, content in pages.items():
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} is generated when the guide is built; remove the file from docs/")
        files.append(File.generated(config, uri, content=content))
    return files


def on_pre_build(config) -> None:
    """Compare the recorded run's fingerprint with the checkout's once per build."""
    _stale.clear()
    _stale["note"] = recorded_run.stale_note(recorded_run.load_summary()) if recorded_run.SUMMARY.is_file() else None


def on_page_markdown(markdown: str, page, config, files) -> str:
    note = _stale.get("note")
    if note is None or not recorded_run.BLOCK.search(markdown):
        return markdown
    log.info("%s: its recorded figures come from an earlier code or configuration (docs/recorded-run/summary.json)",
             page.file.src_uri)
    lines = markdown.split("\n")
    # below the page's title when it opens with one
    at = 1 if lines and lines[0].startswith("# ") else 0
    return "\n".join(lines[:at] + ["", note] + lines[at:])
