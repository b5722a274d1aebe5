"""The GPU check's --dry run: every step of benchmarks/gpu_check.sh at tiny sizes on the CPU, so the script
is known to work before the minutes on a lent GPU are spent on it."""

import json
import os
import subprocess

import pytest

from conftest import REPO

pytestmark = pytest.mark.workflow


def test_gpu_check_dry_runs_every_step(tmp_path):
    done = subprocess.run([str(REPO / "benchmarks" / "gpu_check.sh"), "--dry", "--out", str(tmp_path)],
                          capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "gpu_check.json").read_text())["results"]
    assert set(results) == {"workflow", "multiberts", "rate", "pair", "finetune", "stitch", "extract", "inn"}
    assert not [name for name, result in results.items() if "error" in result]
    # on one device the comparisons are exact: a tolerance that passed here only because it is loose would hide
    assert results["pair"]["sets"]["default"]["max_abs_difference"] == 0.0
    assert results["pair"]["sets"]["registry"]["measures"] >= 26  # run once: both "devices" are the CPU
    assert results["finetune"]["max_relative_difference"] == 0.0
    assert results["stitch"]["accuracy_rows_differing"] == 0
    rate = [r for r in results["rate"].values() if isinstance(r, dict) and "rows" in r]
    assert len(rate) == 2 and all(r["cpu_seconds"] > 0 and r["cuda_seconds"] > 0 and r["plan_gpu_seconds"] > 0
                                  and r["max_abs_difference"] == 0.0 for r in rate)
    # the workflow step ran the tiny config's 19 jobs (and `all`) through Snakemake and read its log, DAG and findings
    workflow = results["workflow"]
    assert workflow["returncode"] == 0 and workflow["jobs"] == 19 and workflow["per_rule"]["compare_pair"]["jobs"] == 3
    rules = [step["rule"] for step in workflow["critical_path"]]
    assert rules[0] in ("prepare_dataset", "materialize_model") and rules[-1] == "report"
    assert 0 < workflow["critical_path_seconds"] <= workflow["job_seconds"]
    assert workflow["findings"]["reference"] == 16 and workflow["findings"]["run"] > 0
    assert workflow["minilm"].startswith("its package's weights rounded")  # --dry takes the packed route
    # MultiBERTs' steps, each timed beside the plan's estimate for its shape
    multiberts = results["multiberts"]
    for model in multiberts["models"].values():
        assert all(model[part]["seconds"] > 0 and model[part]["plan_seconds"] > 0
                   for part in ("extract", "terms_mean", "terms_word"))
    assert set(multiberts["pairs"]) == {"mean", "word"}
    assert all(pair["rows"] > 0 and pair["seconds"] > 0 and pair["plan_seconds"] > 0
               for pair in multiberts["pairs"].values())
    assert "gpu_check summary" in done.stdout
