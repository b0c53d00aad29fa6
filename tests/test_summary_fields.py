"""The summary fields' one home: the docs page it makes, and its checks of a dotted
field and of a whole summary (real runs' summaries are checked where each kind's
tests run one: see ``undeclared`` in those tests)."""
from pathlib import Path

import pytest

from experiments import summary_fields

REPO = Path(__file__).resolve().parent.parent


def test_the_docs_page_is_the_module_s():
    assert (REPO / "docs" / "summary-fields.md").read_text() == summary_fields.markdown(), (
        "regenerate: python -m experiments.summary_fields > docs/summary-fields.md")


def test_every_kind_has_the_lifecycle_fields_and_an_emulated_run_the_platform_s():
    for (kind, backend) in summary_fields.KINDS:
        every = summary_fields.fields(kind, backend)
        assert {"name", "completed"} <= set(every), kind
        assert ("fidelity" in every) == (backend == "emulated"), (kind, backend)
    with pytest.raises(KeyError):
        summary_fields.fields("timetable", "simulated")


@pytest.mark.parametrize("dotted, kind, backend, nearest", [
    ("avg_sct", "cojob", "simulated", "avg_sct_s"),
    ("fidelity.trustworth", "gnn", "emulated", "trustworthy"),
    ("tcp.retransmitted_share", "cojob", "emulated", "retransmitted_on_wire_share"),
    ("rate_updates.latency_p99", "gnn", "emulated", "latency_ms_p99"),
    ("methods.sqtf.p99_latency", "colocation", None, "p99_latency_s"),
])
def test_a_field_no_such_summary_holds_is_named_with_the_nearest(dotted, kind, backend, nearest):
    assert summary_fields.unknown(dotted, kind, backend).endswith(f"(did you mean {nearest}?)")


@pytest.mark.parametrize("dotted, kind, backend", [
    ("avg_sct_s", "cojob", "simulated"),
    ("fidelity.trustworthy", "cojob", "emulated"),
    ("per_model_avg_sct_s.vgg19", "cojob", "emulated"),  # below a name the run gives: not checked
    ("per_model_avg_sct_s.anything.at.all", "cojob", "simulated"),
    ("methods.sqtf.p99_latency_s", "colocation", None),
    ("methods.sqtf.p99_latency_s_sd", "colocation", None),
    ("methods.sqtf", "colocation", None),
    ("conformance.per_host.tbh1", "cojob", "emulated"),
])
def test_a_field_such_a_summary_holds_passes(dotted, kind, backend):
    assert summary_fields.unknown(dotted, kind, backend) is None


def test_a_field_only_the_other_backend_writes_is_named_so():
    assert summary_fields.unknown("simulated_s", "cojob", "emulated") == (
        "'simulated_s' is written only by cojob runs on the simulated backend")
    assert summary_fields.unknown("fidelity.trustworthy", "cojob", "simulated") == (
        "'fidelity' is written only by cojob runs on the emulated backend")
    assert summary_fields.unknown("model_avg_sct_s", "cojob", "simulated") == (
        "'model_avg_sct_s' is written only by cojob runs on the emulated backend")


def test_undeclared_names_every_field_the_module_does_not_hold():
    summary = {"name": "x", "completed": True, "avg_sct_s": 1.0, "avg_sctt": 2.0,
               "tcp": {"segments": 3, "retransmitted": 1}, "per_model_avg_sct_s": {"vgg19": 1.0}}
    assert summary_fields.undeclared(summary, "cojob", "emulated") == ["avg_sctt", "tcp.retransmitted"]
    run = {"name": "q", "completed": True, "methods": {"sqtf": {"p99_latency_s": 1, "p99_latency_s_sd": 0,
                                                               "p99": 2}}}
    assert summary_fields.undeclared(run, "colocation", None) == ["methods.sqtf.p99"]


def test_the_weighted_fillings_bound_is_the_one_the_simulator_applies():
    from experiments.sim.weighted import ACCEPTED
    assert f"(the run fails past {ACCEPTED:g})" in summary_fields.fields("cojob", "simulated")["weighted_unsettled_max"]


def test_a_text_or_a_count_of_repeats_has_no_spread():
    assert summary_fields.unknown("methods.mps.mps_daemon_sd", "colocation", None) is not None
    assert summary_fields.unknown("methods.mps.groups_sd", "colocation", None) is None
