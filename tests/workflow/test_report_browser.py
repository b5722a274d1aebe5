"""The tiny run's report as a reader sees it: every page rendered by headless Chromium (Debian's
`chromium`, installed here when missing and possible), every image loaded, the main page short.

The main page must stay within MAX_HEIGHT px at 1,400 px wide (issue 13: findings first, detail on
linked pages); the tiny configuration has as many models and pairs as the default one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.workflow
WIDTH, MAX_HEIGHT = 1400, 12_000
# Appended to a copy of each page: once everything has loaded, write what a reader would get into the DOM.
PROBE = """<script>window.addEventListener('load', () => {
  const images = [...document.images];
  const result = {height: document.documentElement.scrollHeight, width: window.innerWidth, images: images.length,
                  broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt)};
  const out = document.createElement('pre'); out.id = 'reprsim-probe'; out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});</script>"""


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary; installed with apt when missing (root only), else the test is skipped, saying why."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("headless Chromium is not installed and cannot be installed here (needs root and apt-get: "
                    "apt-get install -y chromium)")
    result = subprocess.run("apt-get update && apt-get install -y chromium", shell=True, capture_output=True,
                            text=True, timeout=1200, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    found = shutil.which("chromium")
    if result.returncode != 0 or not found:
        pytest.skip(f"installing chromium with apt-get failed (offline?): {result.stderr.strip()[-400:]}")
    return found


def render(chromium: str, page, tmp_path) -> dict:
    """Load a copy of `page` (with the probe) in headless Chromium at WIDTH px; what the probe found."""
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    result = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={WIDTH},1000",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=20000", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="reprsim-probe">(.*?)</pre>', result.stdout)
    assert found, f"Chromium rendered no probe result for {page.name}: {result.stderr[-2000:]}"
    return json.loads(found.group(1))


def test_every_image_loads_and_the_main_page_is_short(workflow, chromium, tmp_path):
    report = workflow / "results" / "report"
    pages = sorted(report.glob("*.html"))
    assert {p.name for p in pages} == {"index.html", "pairs.html", "models.html", "alignment.html", "stitching.html",
                                         "measures.html"}
    for page in pages:
        seen = render(chromium, page, tmp_path)
        assert seen["width"] == WIDTH
        assert seen["images"] == page.read_text().count("<img") and seen["broken"] == [], (page.name, seen)
        if page.name == "index.html":
            assert 0 < seen["height"] <= MAX_HEIGHT, seen
