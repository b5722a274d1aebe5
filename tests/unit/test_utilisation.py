"""benchmarks/utilisation.py's critical path: the longest chain of dependent jobs, and of chains equal to the log's
one-second resolution, the one that ends later (the report after the figure it reads)."""

import importlib.util
from datetime import datetime, timedelta
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "utilisation", Path(__file__).resolve().parents[2] / "benchmarks" / "utilisation.py")
utilisation = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(utilisation)


def job(start, end, inputs, outputs):
    zero = datetime(2026, 11, 27)
    return {"start": zero + timedelta(seconds=start), "end": zero + timedelta(seconds=end), "input": inputs,
            "output": outputs}


def test_the_critical_path_follows_dependencies_and_ends_at_the_last_of_equal_chains():
    jobs = {
        1: job(0.0, 10.0, [], ["results/a"]),
        2: job(0.0, 4.0, [], ["results/b"]),
        3: job(10.0, 15.0, ["results/a"], ["results/figure.png"]),
        4: job(15.0, 15.0, ["results/figure.png", "results/b"], ["results/report/index.html"]),  # under a second
    }
    assert utilisation.critical_path(jobs) == [1, 3, 4]
