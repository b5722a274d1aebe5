"""MkDocs hook: the guide's generated pages, made when the guide is built so that none can be stale.

- configuration.md: every key of src/reprsim/schema.yaml (reprsim.docs_reference.configuration_reference);
- measures.md: the measure registry (`reprsim measures --markdown`);
- index.md: the README, the guide's front page, its links to docs/ made relative to the guide.

mkdocs.yml names this file under `hooks:`; `mkdocs build --strict` (in .ci/run) then fails on a broken link.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
# the checkout's own schema and registry, whichever reprsim the environment has installed
sys.path.insert(0, str(ROOT / "src"))

from reprsim.docs_reference import generated_pages  # noqa: E402
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
