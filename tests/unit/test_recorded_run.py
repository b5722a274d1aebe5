"""The default run's figures that the README and the guide quote come from docs/recorded-run/summary.json
(issue 42): every `<!-- recorded: NAME -->` block equals its rendering from the summary, the summary's quoted values
are the copied results tables' own, and the fingerprint that dates it is computed the way the recording computes it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil

import pandas as pd
import pytest
from conftest import REPO

from reprsim.guide import recorded_run

SUMMARY = recorded_run.load_summary()


def test_every_recorded_block_equals_its_rendering():
    pages = recorded_run.pages(REPO)
    names = {name for page in pages for name, _ in recorded_run.blocks(page.read_text())}
    assert {"findings-table", "findings-holds-under", "findings-agreement", "default-jobs", "default-time",
            "default-peak-memory", "default-results-size"} <= names
    for page in pages:
        for name, held in recorded_run.blocks(page.read_text()):
            assert held == recorded_run.render(name, SUMMARY), (
                f"{page.relative_to(REPO)}: block {name!r} differs from docs/recorded-run/summary.json; "
                "run benchmarks/record_run.py RUN --write")


def test_pages_with_blocks_include_the_readme_findings_and_seed_papers():
    named = {str(p.relative_to(REPO)) for p in recorded_run.pages(REPO)}
    assert {"README.md", "docs/findings.md", "docs/seed-papers.md"} <= named


def test_quoted_values_are_the_copied_tables():
    tables = {name: pd.read_parquet(recorded_run.RECORDED_DIR / f"{name}.parquet") for name in recorded_run.TABLES}
    # through JSON, as the recording writes it
    recomputed = json.loads(json.dumps(recorded_run.summarise(tables), allow_nan=False))
    for key, value in recomputed.items():
        assert SUMMARY[key] == value, key


def test_kernel_variation_is_the_two_runs_findings():
    """The guide's 'which numbers depend on the CPU' is recomputed from both runs' findings tables."""
    findings = pd.read_parquet(recorded_run.RECORDED_DIR / "findings.parquet")
    other = pd.read_parquet(recorded_run.RECORDED_DIR / f"{recorded_run.OTHER_KERNEL_FINDINGS}.parquet")
    variation = SUMMARY["kernel_variation"]
    recomputed = recorded_run.kernel_variation(findings, other, variation["path"])
    assert json.loads(json.dumps(recomputed, allow_nan=False)) == variation
    assert variation["decided"] == (findings["verdict"] != "not applicable").sum()
    rendered = recorded_run.render("default-kernel-variation", SUMMARY)
    assert f"{variation['verdicts_held']} of {variation['decided']} verdicts held" in rendered
    assert rendered.count("\n| ") == variation["decided"] + 1  # the header and a row per decided finding


def test_kernel_variation_finds_what_moved():
    findings = pd.DataFrame({"claim_id": ["a", "b", "c"], "claim": ["A", "B", "C"], "measure": ["m"] * 3,
                             "representation": ["mean"] * 3, "n": [10] * 3, "estimate": [0.5, 0.2, float("nan")],
                             "ci_low": [0.4, 0.1, float("nan")], "ci_high": [0.6, 0.3, float("nan")],
                             "verdict": ["supported", "supported", "not applicable"]})
    other = findings.copy()
    other.loc[0, "ci_low"] = 0.4 + 1e-12  # rounding
    other.loc[1, ["estimate", "verdict"]] = [0.25, "inconclusive"]
    variation = recorded_run.kernel_variation(findings, other, "MKL_CBWR=COMPATIBLE")
    assert [row["claim_id"] for row in variation["rows"]] == ["b", "a"]  # largest change first; c not applicable
    assert variation["rows"][0]["change"] == pytest.approx(0.05) and variation["rows"][0]["verdict_other"] == "inconclusive"
    assert variation["rows"][1]["change"] == pytest.approx(1e-12, rel=1e-3)
    assert (variation["decided"], variation["verdicts_held"]) == (2, 1)


def test_findings_table_has_every_row_of_the_findings_table():
    findings = pd.read_parquet(recorded_run.RECORDED_DIR / "findings.parquet")
    table = recorded_run.render("findings-table", SUMMARY).strip().splitlines()
    assert len(table) == 2 + len(findings)
    assert sum("not applicable" in line for line in table) == (findings["verdict"] == "not applicable").sum()


def test_summary_records_the_run():
    run = SUMMARY["run"]
    assert run["jobs"] > 0 and run["cores"] >= 1 and run["results_bytes"] > 0 and run["log_wall_s"] > 0
    assert re.fullmatch(r"[0-9a-f]{40}", SUMMARY["commit"])
    assert re.fullmatch(r"[0-9a-f]{64}", SUMMARY["fingerprint"])


def _record_run():
    spec = importlib.util.spec_from_file_location("record_run", REPO / "benchmarks" / "record_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fingerprint_covers_the_configuration_and_the_rules_code(tmp_path):
    files = recorded_run.fingerprint_files(REPO)
    assert {"config/config.yaml", "src/reprsim/schema.yaml", "Snakefile", "rules/common.smk", "scripts/findings.py",
            "src/reprsim/workflow/paths.py"} <= set(files)
    assert "src/reprsim/guide/recorded_run.py" not in files and "src/reprsim/guide/docs_reference.py" not in files
    # the recording's fingerprint is recorded_run.fingerprint; a changed configuration changes it
    assert _record_run().recorded_run.fingerprint is recorded_run.fingerprint
    copy = tmp_path / "checkout"
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, copy / name)
    assert recorded_run.fingerprint(copy) == recorded_run.fingerprint(REPO)
    (copy / "config" / "config.yaml").write_text((REPO / "config" / "config.yaml").read_text() + "\n# edited\n")
    assert recorded_run.fingerprint(copy) != recorded_run.fingerprint(REPO)


def test_time_output_is_parsed(tmp_path):
    timed = tmp_path / "time.err"
    timed.write_text('\tCommand being timed: "snakemake --cores 2"\n'
                     "\tElapsed (wall clock) time (h:mm:ss or m:ss): 9:36.83\n"
                     "\tMaximum resident set size (kbytes): 1757416\n")
    assert _record_run().time_output(timed) == {"time_wall_s": 576.83, "peak_rss_bytes": 1757416 * 1024,
                                                "command": "snakemake --cores 2"}


def test_stale_note_names_the_commit_and_the_command():
    assert recorded_run.stale_note({**SUMMARY, "fingerprint": recorded_run.fingerprint()}) is None
    note = recorded_run.stale_note({**SUMMARY, "fingerprint": "0" * 64})
    assert note.startswith("!!! warning") and SUMMARY["commit"][:7] in note
    assert "benchmarks/record_run.py RUN --other-kernel OTHER --write" in note


@pytest.mark.parametrize("name", sorted(recorded_run.BLOCKS))
def test_every_block_renders(name):
    assert recorded_run.render(name, SUMMARY).strip()
