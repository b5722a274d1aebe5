"""The SLURM controller as the submitting host sees it, before Snakemake submits anything.

sbatch gives up on an unreachable controller after about ten seconds, and the executor plugin counts that as a
failed job: a controller restarting for a minute would use up every job's retries at the start of a study. So
the workflow (rules/common.smk, onstart) waits for `scontrol ping` to answer before the first submission, saying
so, and stops with what to do when it does not answer in time; nothing has been submitted or touched by then.
Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable

WAIT_VARIABLE = "REPRSIM_SLURM_WAIT"  # seconds to wait for the controller before giving up
DEFAULT_WAIT_S = 300.0


class ControllerUnreachable(RuntimeError):
    """The SLURM controller did not answer `scontrol ping` in the time allowed."""


def wait_seconds(environ: dict[str, str] | None = None) -> float:
    """The wait from REPRSIM_SLURM_WAIT (seconds), else DEFAULT_WAIT_S; a value that is no number is an error."""
    text = (os.environ if environ is None else environ).get(WAIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_WAIT_S
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{WAIT_VARIABLE}={text!r}: expected the seconds to wait for the SLURM controller") from None
    if seconds < 0:
        raise ValueError(f"{WAIT_VARIABLE}={text!r}: expected a number of seconds ≥ 0")
    return seconds


def ping() -> tuple[bool, str]:
    """(whether the controller answers, what `scontrol ping` said)."""
    if shutil.which("scontrol") is None:
        return False, "scontrol is not on PATH"
    try:
        done = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "scontrol ping did not return in 60 s"
    # its first line ("Slurmctld(primary) at HOST is DOWN"); a banner of asterisks follows
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    said = lines[0] if lines else f"exit status {done.returncode}"
    return done.returncode == 0, said


def wait_for_controller(timeout_s: float, log: Callable[[str], None] = print, interval_s: float = 5.0,
                        check: Callable[[], tuple[bool, str]] = ping,
                        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> float:
    """Return once the controller answers (the seconds waited); ControllerUnreachable after timeout_s."""
    started = clock()
    answered, said = check()
    if answered:
        return 0.0
    log(f"reprsim: the SLURM controller does not answer ({said}); waiting up to {timeout_s:.0f} s before "
        "submitting anything")
    last_said = clock()
    while clock() - started < timeout_s:
        sleep(min(interval_s, max(0.0, timeout_s - (clock() - started))))
        answered, said = check()
        if answered:
            waited = clock() - started
            log(f"reprsim: the SLURM controller answers after {waited:.0f} s; submitting")
            return waited
        if clock() - last_said >= 30:
            log(f"reprsim: still waiting for the SLURM controller ({clock() - started:.0f} s: {said})")
            last_said = clock()
    raise ControllerUnreachable(
        f"the SLURM controller did not answer in {timeout_s:.0f} s (scontrol ping: {said}). Nothing was submitted "
        "and no output was touched; run the same command again once `scontrol ping` answers (set "
        f"{WAIT_VARIABLE} to wait longer).")
