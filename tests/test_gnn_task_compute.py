"""hosts/gnn/task.py's ``computed``: a task on a machine of compute factor f computes
f times as long as this box (it sleeps the difference) and reports the whole."""
import time

import pytest

from hosts.gnn.task import Job, computed


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("factor", [1.0, 3.0])
def test_a_step_takes_factor_times_as_long_and_reports_it(factor):
    job = Job({"tasks": {"worker0": {"host": "tbh1", "ip": "10.0.0.1", "port": 21000, "compute_factor": factor}}})
    started = time.perf_counter()
    busy(0.05)
    reported = computed(job, "worker0", started)
    took = time.perf_counter() - started
    assert 0 <= took - reported < 0.05  # what it reports is what it took (the box may stall the caller)
    assert reported >= factor * 0.05 * 0.98  # sleeps cannot be short
    assert reported < factor * 0.05 + 0.5 * factor  # nor make a slow box look slower than factor x the step
