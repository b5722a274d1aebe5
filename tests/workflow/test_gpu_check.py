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
    assert set(results) == {"pair", "finetune", "stitch", "rate", "extract", "inn"}
    assert not [name for name, result in results.items() if "error" in result]
    # on one device the comparisons are exact: a tolerance that passed here only because it is loose would hide
    assert results["pair"]["sets"]["default"]["max_abs_difference"] == 0.0
    assert results["pair"]["sets"]["registry"]["measures"] >= 26
    assert results["finetune"]["max_relative_difference"] == 0.0
    assert results["stitch"]["accuracy_rows_differing"] == 0
    assert all(r["rows"] > 0 and r["cuda_seconds"] > 0 for k, r in results["rate"].items() if isinstance(r, dict))
    assert "gpu_check summary" in done.stdout
