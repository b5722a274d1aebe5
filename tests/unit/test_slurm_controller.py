"""Waiting for the SLURM controller before the first submission (reprsim.workflow.slurm), on a fake clock.

The real outage (slurmctld stopped and started again under a running Snakemake) is in the cluster tier:
tests/cluster/test_cluster.py::test_snakemake_waits_for_a_controller_that_is_down.
"""

from __future__ import annotations

import pytest

from reprsim.workflow import slurm


class FakeController:
    """Down for `down_s` seconds of a fake clock, then up; sleeping advances the clock."""

    def __init__(self, down_s: float):
        self.now, self.down_s, self.pings = 0.0, down_s, 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def check(self) -> tuple[bool, str]:
        self.pings += 1
        up = self.now >= self.down_s
        return up, f"Slurmctld(primary) at node1 is {'UP' if up else 'DOWN'}"


def wait(controller: FakeController, timeout_s: float, said: list[str]) -> float:
    return slurm.wait_for_controller(timeout_s, log=said.append, interval_s=5, check=controller.check,
                                     clock=controller.clock, sleep=controller.sleep)


def test_an_answering_controller_costs_one_ping_and_no_words():
    controller, said = FakeController(down_s=0), []
    assert wait(controller, 300, said) == 0 and controller.pings == 1 and said == []


def test_a_controller_back_within_the_wait_is_waited_for():
    controller, said = FakeController(down_s=42), []
    assert wait(controller, 300, said) == 45  # the first ping at or after 42 s, at 5 s intervals
    assert said[0].startswith("reprsim: the SLURM controller does not answer (Slurmctld(primary) at node1 is DOWN)")
    assert any("still waiting" in line for line in said)  # progress at least every 30 s
    assert said[-1] == "reprsim: the SLURM controller answers after 45 s; submitting"


def test_a_controller_that_stays_down_stops_the_run_saying_what_to_do():
    controller, said = FakeController(down_s=1e9), []
    with pytest.raises(slurm.ControllerUnreachable) as raised:
        wait(controller, 12, said)
    message = str(raised.value)
    assert "did not answer in 12 s (scontrol ping: Slurmctld(primary) at node1 is DOWN)" in message
    assert "Nothing was submitted" in message and "REPRSIM_SLURM_WAIT" in message
    assert controller.now == pytest.approx(12)  # waited the whole time, not a sleep longer


@pytest.mark.parametrize("text, seconds", [("", 300.0), ("  ", 300.0), ("0", 0.0), ("90", 90.0), ("2.5", 2.5)])
def test_the_wait_comes_from_the_environment(text, seconds):
    assert slurm.wait_seconds({slurm.WAIT_VARIABLE: text}) == seconds
    assert slurm.wait_seconds({}) == slurm.DEFAULT_WAIT_S


@pytest.mark.parametrize("text", ["five minutes", "-1"])
def test_a_wait_that_is_no_number_of_seconds_names_the_variable(text):
    with pytest.raises(ValueError, match=f"REPRSIM_SLURM_WAIT='{text}'"):
        slurm.wait_seconds({slurm.WAIT_VARIABLE: text})


def test_without_scontrol_the_controller_does_not_answer(monkeypatch):
    monkeypatch.setattr(slurm.shutil, "which", lambda name: None)
    assert slurm.ping() == (False, "scontrol is not on PATH")
