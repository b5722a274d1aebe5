"""The plans the guide prints (docs/planning.md) are what `reprsim plan` prints now.

Each block under a marker `<!-- plan: CONFIG [VARIABLE=VALUE ...] [| FIRST WORDS] -->` must equal the plan of CONFIG
(in an empty directory, with the SLURM time-limit variables given and no others), or with `| FIRST WORDS` the
paragraph of it that starts with those words. The DAG's build time is left out of the comparison.
`REPRSIM_REGENERATE_GUIDE=1` rewrites the blocks after an intended change.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

from reprsim import cli
from reprsim.workflow import resources

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "planning.md"
BLOCK = re.compile(r"<!-- plan: (?P<spec>[^>]*?) -->\n```text\n(?P<text>.*?)\n```", re.S)
BUILD_TIME = re.compile(r"DAG built in [0-9.]+ s")


def plan_text(spec: str, directory: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    words, _, first = (part.strip() for part in spec.partition("|"))
    config, *assignments = words.split()
    for variable in resources.TIME_LIMIT_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv(resources.PAIRS_ON_GPU_VARIABLE, raising=False)
    for assignment in assignments:
        monkeypatch.setenv(*assignment.split("=", 1))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["plan", config, "--directory", str(directory)]) == 0
    text = printed.getvalue().rstrip("\n")
    if first:
        paragraphs = [p for p in text.split("\n\n") if p.startswith(first)]
        assert len(paragraphs) == 1, f"the plan of {config} has no one paragraph starting {first!r}"
        text = paragraphs[0]
    return text


def test_the_planning_page_prints_what_reprsim_plan_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    page = PAGE.read_text()
    blocks = list(BLOCK.finditer(page))
    assert len(blocks) >= 3, "docs/planning.md lost its plan blocks"
    regenerate = os.environ.get("REPRSIM_REGENERATE_GUIDE") == "1"
    stale, rewritten, end = [], [], 0
    for number, block in enumerate(blocks):
        directory = tmp_path / str(number)
        directory.mkdir()
        text = plan_text(block["spec"], directory, monkeypatch)
        if BUILD_TIME.sub("DAG built", text) != BUILD_TIME.sub("DAG built", block["text"]):
            stale.append(block["spec"])
        rewritten += [page[end:block.start("text")], text]
        end = block.end("text")
        if block["spec"] == "config/examples/multiberts.yaml":  # the clusters page's command is this plan's
            command = next(line.strip() for line in text.splitlines() if "--group-components" in line)
            assert command in (REPO / "docs" / "clusters.md").read_text(), f"docs/clusters.md lacks {command}"
    if regenerate and stale:
        PAGE.write_text("".join(rewritten) + page[end:])
    assert regenerate or not stale, (f"docs/planning.md shows plans that differ from reprsim plan's: {stale} "
                                     "(REPRSIM_REGENERATE_GUIDE=1 rewrites them)")


SCALE = re.compile(r"<!-- dag-scale: docs/recorded-run/dag-scale.json -->\n(?P<table>.*?)\n\n", re.S)


def test_the_dag_scale_table_is_the_benchmarks_record():
    """The table under "Scale of the DAG itself" is benchmarks/dag_scale.py's recorded run, as rendered by
    reprsim.guide.recorded_scale; and the record meets the issue's bounds: 256 models plan within a minute."""
    from reprsim.guide import recorded_scale

    page = PAGE.read_text()
    found = SCALE.search(page)
    assert found, "docs/planning.md lost its dag-scale table marker"
    record = recorded_scale.load()
    expected = recorded_scale.table(record)
    if os.environ.get("REPRSIM_REGENERATE_GUIDE") == "1" and found["table"] != expected:
        PAGE.write_text(page[:found.start("table")] + expected + page[found.end("table"):])
        return
    assert found["table"] == expected, ("docs/planning.md's dag-scale table is not the record "
                                        "(REPRSIM_REGENERATE_GUIDE=1 rewrites it)")
    largest = max(record["scaling"], key=lambda row: row["models"])
    assert largest["models"] >= 256 and largest["dry_run_s"] <= 60
