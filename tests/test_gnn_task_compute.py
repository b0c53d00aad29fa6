"""hosts/gnn/task.py's ``computed``: a task on a machine of compute factor f computes
f times as long as this box (it sleeps the difference) and reports the whole."""
import time

import pytest

from hosts.gnn import task
from hosts.gnn.task import Job, computed


class Clock:
    """``time.perf_counter`` and ``time.sleep`` of a task, on a clock the test moves."""

    def __init__(self, now: float):
        self.now, self.slept = now, []

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def job(factor: float | None) -> Job:
    spec = {"host": "tbh1", "ip": "10.0.0.1", "port": 21000}
    return Job({"tasks": {"worker0": spec if factor is None else {**spec, "compute_factor": factor}}})


@pytest.mark.parametrize("factor, slept", [(None, []), (1.0, []), (3.0, [0.1])])
def test_a_step_on_a_machine_f_times_slower_sleeps_f_minus_1_times_its_time_and_reports_the_whole(
        monkeypatch, factor, slept):
    clock = Clock(10.05)  # the step began at 10.0: it took 50 ms here
    monkeypatch.setattr(task, "time", clock)
    assert computed(job(factor), "worker0", 10.0) == pytest.approx(0.05 * (factor or 1.0))
    assert clock.slept == pytest.approx(slept)


def test_the_report_is_the_real_time_the_step_took():
    started = time.perf_counter()
    reported = computed(job(2.0), "worker0", started - 0.02)  # a step of 20 ms (at least) here
    assert 0.04 <= reported <= time.perf_counter() - started + 0.02
