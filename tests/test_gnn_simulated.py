"""experiments/gnn/simulated.py: the GNN job's discrete-event model on hand-worked tiny
jobs (a sampler-bound chain, two flows into one NIC under fair and OES, same-machine
transfers, the prefetch bound), its determinism, the refusal of an untrustworthy
profile, ``trainbed simulate`` and a simulated sweep of a GNN spec, and ``compare``.

Profiles are made by code: ``job_events`` emits what the task programs report for a
job whose every request, transfer and compute has the given size and duration, and
``metrics.profile`` turns those events into the profile, as it does a real run's."""
from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from controller.schedulers import oes
from experiments import store
from experiments import summary_fields
from experiments import sweep as sweep_mod
from experiments.cli import main
from experiments.errors import SpecError
from experiments.gnn import metrics, simulated
from experiments.gnn import spec as gnn_spec
from experiments.gnn.simulated import GnnSimulation, Profile, ProfileError
from hosts.gnn import PREFETCH, is_eval

REPO = Path(__file__).resolve().parents[1]
TRUSTED = {"trustworthy": True, "untrustworthy_reasons": []}


@dataclass
class Costs:
    """Every request, transfer (bytes) and compute (s) of a synthetic job, the same each
    iteration; ``asks``: the stores each sampler asks in each round (None: every store)."""

    request: int = 1000
    reply: int = 20_000
    store_s: float = 0.001
    round_s: float = 0.002
    minibatch: int = 400_000
    evalbatch: int = 100_000
    gradient: int = 80_000
    parameter: int = 80_000
    init: int = 80_000
    ring: int = 40_000
    worker_s: float = 0.01
    ps_s: float = 0.001
    eval_s: float = 0.005
    asks: dict[str, list[str]] | None = None
    local_flows: bool = True  # a profiling run's: same-machine transfers reported too


def job_events(spec: dict, iterations: int, costs: Costs) -> list[dict]:
    """The events the task programs would report over ``iterations`` of ``spec``'s job."""
    workload = spec["workload"]
    tasks = workload["placement"]["tasks"]
    of = {kind: [t for t in tasks if t.startswith(kind)] for kind in ("store", "sampler", "worker", "ps")}
    events, clock = [], [0.0]

    def emit(kind, task, **fields):
        clock[0] += 0.001
        events.append({"kind": kind, "t": clock[0], "host": tasks[task], "task": task, **fields})

    def flow(src, dst, phase, n, nbytes):
        if tasks[src] != tasks[dst] or costs.local_flows:
            emit("flow_start", src, flow=f"{src}->{dst}/i{n}/{phase}", src=tasks[src], dst=tasks[dst], src_task=src,
                 dst_task=dst, bytes=nbytes, phase=phase, iteration=n, src_port=1, dst_port=2)

    for n in range(iterations):
        evaluates = is_eval(n, workload["eval_every"], workload["iterations"])
        if n == 0:
            for ps in of["ps"]:
                flow("worker0", ps, "init", 0, costs.init)
        for k, sampler in enumerate(of["sampler"]):
            compute = {}
            for purpose in [""] + (["eval-"] if k == 0 and evaluates else []):
                for step in [f"{purpose}sample{h}" for h in range(len(workload["fanouts"]))] + [f"{purpose}feature"]:
                    for store_task in (costs.asks or {}).get(sampler, of["store"]):
                        emit("compute", store_task, iteration=n, seconds=costs.store_s, peer=sampler, step=step,
                             request_bytes=costs.request, reply_bytes=costs.reply)
                        flow(store_task, sampler, step, n, costs.reply)
                compute["eval_rounds" if purpose else "rounds"] = [costs.round_s] * (len(workload["fanouts"]) + 1)
            worker = f"worker{k // workload['samplers_per_worker']}"
            flow(sampler, worker, "minibatch", n, costs.minibatch)
            if "eval_rounds" in compute:
                flow(sampler, worker, "evalbatch", n, costs.evalbatch)
            emit("compute", sampler, iteration=n, seconds=sum(map(sum, compute.values())), **compute)
        for w, worker in enumerate(of["worker"]):
            emit("compute", worker, iteration=n, seconds=costs.worker_s,
                 **({"eval_s": costs.eval_s} if w == 0 and evaluates else {}))
            for ps in of["ps"]:
                flow(worker, ps, "gradient", n, costs.gradient)
            if not of["ps"]:
                for step in range(2 * (len(of["worker"]) - 1)):
                    flow(worker, of["worker"][(w + 1) % len(of["worker"])], f"ring{step}", n, costs.ring)
        for ps in of["ps"]:
            emit("compute", ps, iteration=n, seconds=costs.ps_s)
            for worker in of["worker"]:
                flow(ps, worker, "parameter", n, costs.parameter)
    return events


def profile_of(spec: dict, costs: Costs, iterations: int | None = None, verdict: dict = TRUSTED) -> dict:
    """The profile of ``iterations`` of the job (default: all of the spec's)."""
    iterations = spec["workload"]["iterations"] if iterations is None else iterations
    return metrics.profile(job_events(spec, iterations, costs), iterations, spec, verdict)


def tiny_raw(placement: dict, *, hosts: int = 2, mbps: float = 100, slow: dict | None = None, per_worker: int = 1,
             iterations: int = 6, profile: bool = False) -> dict:
    """``hosts`` machines on one switch, a one-hop GraphSAGE job of one worker and one PS,
    evaluating at its last iteration only."""
    topology = {"kind": "star", "hosts": hosts, "host_mbps": mbps, **({"host_mbps_overrides": slow} if slow else {})}
    return {"name": "tiny", "topology": topology, "scheduler": {"name": "oes"}, "workload": {
        "kind": "gnn", "graph": {"shape": "ogbn-products", "nodes": 1000}, "fanouts": [5], "workers": 1,
        "samplers_per_worker": per_worker, "ps": 1, "iterations": iterations, "eval_every": iterations,
        "profile": profile, "placement": placement}}


def tiny(placement: dict, **options) -> dict:
    return gnn_spec.validate(tiny_raw(placement, **options))


def run(spec: dict, costs: Costs, scheduler: str | None = None, profile: dict | None = None,
        iterations: int | None = None) -> simulated.Result:
    parsed = Profile.parse(profile or profile_of(spec, costs), "synthetic")
    return GnnSimulation(spec, parsed, iterations, scheduler).run()


def ends(result: simulated.Result, worker: str = "worker0") -> list[float]:
    return [e["t"] for e in result.events if e["kind"] == "iteration_end" and e["task"] == worker]


def mean_interval(times: list[float]) -> float:
    return (times[-1] - times[0]) / (len(times) - 1)


def on_wire_s(nbytes: float, mbps: float, spec: dict) -> float:
    """A transfer alone at ``mbps``: its bytes on the wire (headers at the spec's MTU) over the rate."""
    mss = spec["emulation"]["mtu"] - simulated.TCP_IP_HEADERS
    return nbytes * (1 + (simulated.TCP_IP_HEADERS + simulated.ETHERNET_HEADER) / mss) * 8 / (mbps * 1e6)


# --- hand-worked jobs ------------------------------------------------------------------

def test_a_sampler_bound_iteration_is_the_sum_of_its_rounds():
    """One worker, its sampler and its PS on tbh1; the sampler asks only store1, on tbh2.
    An iteration is the sampler's two rounds (the hop, the features), each a request to
    tbh2, the store's compute, the reply back and the sampler's compute; the worker,
    fed two mini-batches ahead, keeps up."""
    spec = tiny({"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh1"})
    costs = Costs(request=12_500, reply=125_000, store_s=0.003, round_s=0.002, worker_s=0.004, ps_s=0.001,
                  eval_s=0.006, asks={"sampler0": ["store1"]})
    for scheduler in ("oes", "default"):
        times = ends(run(spec, costs, scheduler))
        one_round = on_wire_s(costs.request, 100, spec) + costs.store_s + on_wire_s(costs.reply, 100, spec) \
            + costs.round_s
        iteration = 2 * one_round
        # The last iteration evaluates: the evaluation batch is sampled after the last
        # mini-batch (two more rounds), then worker 0 evaluates.
        last = iteration + (iteration + costs.eval_s - costs.worker_s - costs.ps_s)
        assert mean_interval(times) == pytest.approx((4 * iteration + last) / 5, rel=1e-9)
        assert times[0] == pytest.approx(iteration + costs.worker_s + costs.ps_s, rel=1e-9)


def test_two_flows_into_one_nic_under_fair_shares_and_oes():
    """Two samplers send worker0 (tbh1, 100 Mbit/s) their mini-batches at the same
    instant, one from tbh2 (100), one from tbh3 (20). Max-min (TCP's sharing, or the fair
    policy) gives the fast one what the slow one leaves, 80; OES gives each flow into
    tbh1 half of its NIC, capped by the sender's: the fast one gets 50, the slow one 20."""
    spec = tiny({"sampler0": "tbh2", "sampler1": "tbh3", "worker0": "tbh1", "ps0": "tbh1"}, hosts=3,
                slow={"tbh3": 20}, per_worker=2)
    costs = Costs(minibatch=1_000_000, asks={"sampler0": ["store1"], "sampler1": ["store2"]})
    profile = profile_of(spec, costs)

    def first_minibatches(scheduler):
        result = run(spec, costs, scheduler, profile)
        start = {e["flow"]: e["t"] for e in result.events if e["kind"] == "flow_start"}
        took = {e["flow"].split("->")[0]: e["t"] - start[e["flow"]] for e in result.events
                if e["kind"] == "flow_end" and e["flow"].endswith("/i0/minibatch")}
        assert start["sampler0->worker0/i0/minibatch"] == start["sampler1->worker0/i0/minibatch"]
        return took

    for scheduler, fast_mbps in (("default", 80), ("fair", 80), ("oes", 50)):
        took = first_minibatches(scheduler)
        assert took["sampler0"] == pytest.approx(on_wire_s(costs.minibatch, fast_mbps, spec), rel=1e-9), scheduler
        assert took["sampler1"] == pytest.approx(on_wire_s(costs.minibatch, 20, spec), rel=1e-9), scheduler


@pytest.mark.parametrize("scheduler", ["mrtf", "omcoflow"])
def test_a_connection_with_two_active_transfers_carries_both_rates(scheduler):
    """The evaluation iteration: sampler0's evaluation batch follows its mini-batch on
    one connection while the mini-batch is still on the wire. MRTF gives the (smaller)
    evaluation batch the port and the mini-batch 0; the connection must carry the sum,
    or the mini-batch at its head holds both at the waiting rate (it did: 23.2 s for
    this job, 2.4 s under default scheduling)."""
    spec = tiny({"sampler0": "tbh2", "sampler1": "tbh3", "worker0": "tbh1", "ps0": "tbh1"}, hosts=3,
                slow={"tbh3": 20}, per_worker=2)
    costs = Costs(minibatch=1_000_000, asks={"sampler0": ["store1"], "sampler1": ["store2"]})
    profile = profile_of(spec, costs)
    fair = run(spec, costs, "default", profile).end_s
    result = run(spec, costs, scheduler, profile)
    assert result.end_s < 1.5 * fair


def test_same_machine_transfers_take_no_time_and_need_no_size():
    """Every task on tbh1, asking only its own store: no network flow at all, the
    iteration is the sampler's compute and its store's, whatever the links' rate, and a
    profile without the same-machine transfers' sizes (an ordinary run's) does."""
    placement = {"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh1"}
    costs = Costs(store_s=0.003, round_s=0.002, worker_s=0.004, asks={"sampler0": ["store0"]})
    fast = run(tiny(placement), costs)
    slow = run(tiny(placement, mbps=1), costs)
    ordinary = tiny(placement)
    bare = run(ordinary, costs, profile=profile_of(ordinary, dataclasses.replace(costs, local_flows=False)))
    assert [e["kind"] for e in fast.events if e["kind"].startswith("flow")] == []
    assert fast.events == slow.events == bare.events and fast.decisions == []
    times = ends(fast)
    assert times[2] - times[1] == pytest.approx(2 * (costs.store_s + costs.round_s), rel=1e-9)


def test_a_sampler_never_runs_more_than_the_prefetch_bound_ahead():
    """A fast sampler (tbh2) and a slow worker (tbh1): mini-batch n leaves the sampler
    only after the worker computed mini-batch n - PREFETCH (its credit), and then at once
    (the sampling's own time later): the bound holds and binds."""
    spec = tiny({"sampler0": "tbh2", "worker0": "tbh1", "ps0": "tbh1"}, iterations=8)
    costs = Costs(minibatch=10_000, store_s=0.001, round_s=0.001, worker_s=0.1, ps_s=0.0,
                  asks={"sampler0": ["store1"]})
    result = run(spec, costs)
    sent = [e["t"] for e in result.events if e["kind"] == "flow_start" and e["phase"] == "minibatch"]
    computed = ends(result)  # the PS is local and computes nothing: the iteration ends with the compute
    sampling = 2 * (costs.store_s + costs.round_s)
    assert sent[:PREFETCH] == pytest.approx([sampling, 2 * sampling], rel=1e-9)
    for n in range(PREFETCH, len(sent)):
        assert sent[n] == pytest.approx(computed[n - PREFETCH] + sampling, rel=1e-9)


@pytest.mark.parametrize("minibatch", [10_000_000, 1_000_000])
def test_a_send_returns_once_its_connection_holds_at_most_the_measured_backlog(minibatch):
    """A sampler on tbh2 sends worker0 (tbh1) its mini-batches; its store is local, so
    the network carries nothing else. The send of a mini-batch larger than
    ``SEND_BACKLOG_BYTES`` returns once that much of it is left to deliver, and the next
    mini-batch is sampled while it is: the next send starts the sampling's time after;
    a smaller one returns at once."""
    spec = tiny({"sampler0": "tbh2", "worker0": "tbh1", "ps0": "tbh1"})
    costs = Costs(minibatch=minibatch, store_s=0.001, round_s=0.001, asks={"sampler0": ["store1"]})
    result = run(spec, costs, "default")
    sent = [e["t"] for e in result.events if e["kind"] == "flow_start" and e["phase"] == "minibatch"]
    sampling = 2 * (costs.store_s + costs.round_s)
    waited = on_wire_s(max(0, minibatch - simulated.SEND_BACKLOG_BYTES), 100, spec)
    assert (waited > 0) == (minibatch > simulated.SEND_BACKLOG_BYTES)
    assert sent[1] - sent[0] == pytest.approx(waited + sampling, rel=1e-9)
    if waited:  # the next send waits for the whole backlog ahead of it, queued frame included
        assert sent[2] - sent[1] == pytest.approx(on_wire_s(minibatch, 100, spec), rel=1e-9)


def test_every_scheduler_a_gnn_spec_accepts_is_the_default_or_a_rate_policy_of_the_model():
    assert set(gnn_spec.SCHEDULERS) == {"default", *oes.rate_policies()}


def test_the_model_is_deterministic_under_every_policy():
    spec = gnn_spec.validate(yaml.safe_load((REPO / "experiments/specs/gnn-hetero-products-ps.yaml").read_text()))
    profile = profile_of(spec, Costs(), iterations=5)
    for scheduler in gnn_spec.SCHEDULERS:
        first, second = (run(spec, Costs(), scheduler, profile, iterations=8) for _ in range(2))
        assert first.events == second.events and first.decisions == second.decisions, scheduler
        assert first.events and (scheduler == "default") == (first.decisions == [])


def test_a_long_simulation_shows_progress_and_a_short_one_stays_quiet(monkeypatch):
    spec = tiny({"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh2"})
    parsed = Profile.parse(profile_of(spec, Costs()), "synthetic")
    lines: list[str] = []
    quiet = GnnSimulation(spec, parsed, progress=lines.append).run()  # well under PROGRESS_EVERY_S
    assert lines == []
    monkeypatch.setattr(simulated, "PROGRESS_EVERY_S", 0.0)  # as if every iteration took long
    shown = GnnSimulation(spec, parsed, progress=lines.append).run()
    assert shown.events == quiet.events  # progress changes nothing it models
    ends_at = [f"{t:.1f}" for t in ends(shown)]
    assert lines == [f"iteration {n + 1} of 6 ends at {t} s simulated" for n, t in enumerate(ends_at)]


# --- the profile ---------------------------------------------------------------------

def test_an_untrustworthy_profile_is_refused_in_one_line_naming_it(tmp_path, capsys):
    spec = tiny({"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh1"})
    bad = profile_of(spec, Costs(), verdict={"trustworthy": False,
                                             "untrustworthy_reasons": ["CPU idle share 0.03 < 0.05"]})
    with pytest.raises(ProfileError, match=r"^prof\.json: its run was untrustworthy \(CPU idle share 0\.03 < 0\.05\); "
                                           r"profile again$"):
        Profile.parse(bad, "prof.json")
    with pytest.raises(ProfileError, match=r"^old\.json: does not say whether its run was trustworthy"):
        Profile.parse(metrics.profile(job_events(spec, 6, Costs()), 6), "old.json")
    path = tmp_path / "profile.json"
    store.write_json(path, bad)
    raw = {**tiny_raw({"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh1"}), "simulation": {"profile": str(path)}}
    with pytest.raises(SpecError) as err:
        simulated.validate(raw)
    assert str(err.value) == f"simulation.profile: {path}: its run was untrustworthy (CPU idle share 0.03 < 0.05); " \
                             f"profile again"
    # a recorded emulated run whose summary says it was untrustworthy
    recorded = REPO / "tests/data/runs/gnn-untrustworthy"
    with pytest.raises(ProfileError, match=r"gnn-untrustworthy \(its events\): its run was untrustworthy "
                                           r"\(CPU idle share 0\.03 < 0\.05\)"):
        simulated.compare(recorded)
    simulated.main([str(recorded)])
    assert "its run was untrustworthy (CPU idle share 0.03 < 0.05)" in capsys.readouterr().out.splitlines()[-1]


def test_a_profile_of_another_job_or_lacking_a_part_is_refused():
    spec = tiny({"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh1"})
    profile = Profile.parse(profile_of(spec, Costs()), "p")
    other = copy.deepcopy(spec)
    other["workload"]["batch_size"] = 64
    with pytest.raises(ProfileError, match=r"^p: profiles a job with workload.batch_size 32, not 64$"):
        GnnSimulation(other, profile)
    lacking = profile_of(spec, Costs())
    del lacking["sampler_rounds_s"]["sampler0"]
    with pytest.raises(ProfileError, match=r"^p: lacks sampler0's compute of each of its 2 rounds"):
        Profile.parse(lacking, "p")
    moved = tiny({"sampler0": "tbh2", "worker0": "tbh1", "ps0": "tbh1"})  # its mini-batches now cross machines
    ordinary = Profile.parse(profile_of(spec, Costs(local_flows=False)), "p")
    with pytest.raises(ProfileError, match=r"^p: has no sampler0->worker0 minibatch of profiled iteration 0"):
        GnnSimulation(moved, ordinary).run()


def test_the_profile_carries_what_the_model_reads():
    spec = tiny({"sampler0": "tbh2", "worker0": "tbh1", "ps0": "tbh1"})
    events = job_events(spec, 6, Costs())
    sent = next(e["t"] for e in events if e.get("flow") == "worker0->ps0/i5/gradient")
    events.append({"kind": "flow_end", "t": sent + 0.5, "flow": "worker0->ps0/i5/gradient", "bytes": 1})
    profile = metrics.profile(events, 6, spec, TRUSTED)
    assert profile["spec"] == spec and profile["trustworthy"] is True and profile["untrustworthy_reasons"] == []
    assert profile["sampler_rounds_s"]["sampler0"] == [[0.002, 0.002]] * 6
    assert profile["sampler_eval_rounds_s"]["sampler0"] == [None] * 5 + [[0.002, 0.002]]
    assert profile["eval_s"]["worker0"] == [None] * 5 + [0.005]
    assert {(r["store"], r["step"]) for r in profile["requests"] if r["iteration"] == 5} == {
        (s, step) for s in ("store0", "store1") for step in ("sample0", "feature", "eval-sample0", "eval-feature")}
    gradient = [f for f in profile["flows"] if f["phase"] == "gradient"]
    assert [f["duration_s"] for f in gradient][-1] == pytest.approx(0.5) and gradient[0]["duration_s"] is None
    assert profile["compute_s"]["sampler0"][5] == pytest.approx(0.008)  # both batches' rounds


# --- the backend and compare ---------------------------------------------------------

def hetero_with_profile(tmp_path: Path) -> Path:
    """The shipped headline spec with ``simulation.profile`` set to a synthetic profile of its job."""
    raw = yaml.safe_load((REPO / "experiments/specs/gnn-hetero-products-ps.yaml").read_text())
    path = tmp_path / "profile.json"
    store.write_json(path, profile_of(gnn_spec.validate(raw), Costs(), iterations=5))
    raw["simulation"] = {"profile": str(path)}
    raw["workload"]["iterations"] = 12
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(raw))
    return spec_path


def test_trainbed_simulate_runs_a_shipped_gnn_spec(tmp_path, capsys):
    spec_path = hetero_with_profile(tmp_path)
    assert main(["simulate", str(spec_path), "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["backend"] == "simulated" and summary["completed"] is True and summary["trustworthy"] is True
    assert summary_fields.undeclared(summary, "gnn", "simulated") == []
    assert summary["iterations"] == 12 and summary["iteration_s_mean"] > 0 and summary["decisions"] > 0
    assert summary["profile"] == str((tmp_path / "profile.json").resolve()) and summary["profile_iterations"] == 5
    rows = (tmp_path / "run" / "flows.csv").read_text().splitlines()
    assert len(rows) == summary["transfers"] + 1 and summary["transfers"] > 0
    spec = simulated.validate(yaml.safe_load(spec_path.read_text()))
    assert summary["iteration_s_mean"] == simulated.predict(spec, simulated.load_profile(spec["simulation"]["profile"]))
    raw = yaml.safe_load(spec_path.read_text())
    del raw["simulation"]
    with pytest.raises(SpecError, match=r"^simulation.profile: is required to simulate a gnn spec"):
        simulated.validate(raw)


def test_a_simulated_sweep_of_a_gnn_spec(tmp_path):
    spec_path = hetero_with_profile(tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "gnn-model", "spec": str(spec_path), "backend": "simulated",
                                     "schedulers": ["default", "oes"], "seeds": [1]}))
    result = sweep_mod.run_any_sweep(sweep, out=str(tmp_path / "out"))
    assert result.failed == [] and len(result.rows) == 2
    assert all(float(row["iteration_s_median"]) > 0 for row in result.rows)


def recorded_events(spec: dict) -> list[dict]:
    """Six iterations of the job's events, worker 0 ending one every 0.25 s."""
    return job_events(spec, 6, Costs()) + [
        {"kind": "iteration_end", "t": 100.0 + 0.25 * n, "host": "tbh1", "task": "worker0", "iteration": n,
         "loss": 1.0, "val_accuracy": None, "compute_s": 0.01, "sync_s": 0.01, "wait_s": 0.0} for n in range(6)]


def test_an_emulated_run_predicts_itself_and_profiles_with_its_verdict(tmp_path):
    from experiments.gnn import runner
    from experiments.platform.cpu import CpuMonitor
    spec = tiny({"sampler0": "tbh2", "worker0": "tbh1", "ps0": "tbh1"}, profile=True)
    events = recorded_events(spec)
    store.write_jsonl(tmp_path / "events.jsonl", events)
    summary = runner.analyse(spec, tmp_path, CpuMonitor(0.0), [])
    assert summary["trustworthy"] is True and summary["iteration_s_mean"] == 0.25
    own = Profile.parse(metrics.profile(events, 6, spec, TRUSTED), "own")
    assert summary["predicted_iteration_s"] == simulated.predict(spec, own, 6) and "prediction_note" not in summary
    written = json.loads((tmp_path / "profile.json").read_text())
    assert written["trustworthy"] is True and written["spec"] == spec and written["iterations"] == 6


def test_compare_predicts_a_recorded_run_beside_its_measurement(tmp_path, capsys):
    """A run directory as an emulated run leaves it (spec, summary, events) whose worker 0
    took a known time per iteration: compare gives that measurement and the model's
    prediction from the run's own events, or from another profile."""
    spec = tiny({"sampler0": "tbh2", "worker0": "tbh1", "ps0": "tbh1"})
    events = recorded_events(spec)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    store.write_spec(run_dir, spec)
    store.write_jsonl(run_dir / "events.jsonl", events)
    store.write_json(run_dir / "summary.json", {"trustworthy": True, "fidelity": TRUSTED})
    got = simulated.compare(run_dir)
    own = Profile.parse(metrics.profile(events, 6, spec, TRUSTED), "own")
    assert got["measured_iteration_s"] == 0.25 and got["iterations"] == 6
    assert got["predicted_iteration_s"] == simulated.predict(spec, own, 6)
    assert got["error"] == pytest.approx(got["predicted_iteration_s"] / 0.25 - 1)
    other = tmp_path / "other.json"
    store.write_json(other, profile_of(spec, Costs(minibatch=4_000_000)))
    slower = simulated.compare(run_dir, other)
    assert slower["profile"] == str(other) and slower["predicted_iteration_s"] > got["predicted_iteration_s"]
    simulated.main([str(run_dir)])
    assert f"| {run_dir} | explicit | oes | 6 | 0.25 | {got['predicted_iteration_s']} |" in capsys.readouterr().out


# --- per-host compute factors ----------------------------------------------------------

def test_a_compute_factor_stretches_the_tasks_on_its_host_and_the_profile_is_normalised():
    placement = {"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh2"}
    plain = tiny(placement)
    raw = tiny_raw(placement)
    raw["workload"]["compute_factor"] = {"tbh1": 3}
    slow = gnn_spec.validate(raw)
    assert slow["workload"]["compute_factor"] == {"tbh1": 3.0, "tbh2": 1.0}
    costs = Costs(asks={"sampler0": ["store0"]})  # only tbh1's store serves: every compute but the PS's on tbh1
    profile = profile_of(plain, costs)  # profiled at factor 1
    computes = {e["task"]: e["compute_s"] for e in run(slow, costs, "default", profile).events
                if e["kind"] == "iteration_end"}
    assert computes["worker0"] == pytest.approx(3 * costs.worker_s, rel=1e-9)
    # A profile taken at factor 3 stands for factor-1 times three times as long: the
    # factor-3 run predicts the same from either profile.
    slow_profile = profile_of(slow, dataclasses.replace(costs, worker_s=3 * costs.worker_s,
                                                        round_s=3 * costs.round_s, store_s=3 * costs.store_s,
                                                        eval_s=3 * costs.eval_s))
    assert run(slow, costs, "default", slow_profile).end_s == pytest.approx(
        run(slow, costs, "default", profile).end_s, rel=1e-9)
    assert run(plain, costs, "default", slow_profile).end_s == pytest.approx(
        run(plain, costs, "default", profile).end_s, rel=1e-9)
    assert run(slow, costs, "default", profile).end_s > run(plain, costs, "default", profile).end_s


@pytest.mark.parametrize("factor, message", [
    ({"tbh9": 2}, r"^workload\.compute_factor\.tbh9: 'tbh9' is not a host of the topology \(tbh1\.\.tbh2\)$"),
    ({"tbh1": 0.5}, r"^workload\.compute_factor\.tbh1: must be "),
    ({"tbh1": "fast"}, r"^workload\.compute_factor\.tbh1: must be a number"),
    ([2], r"^workload\.compute_factor: ")])
def test_a_bad_compute_factor_is_one_line_naming_the_field(factor, message):
    raw = tiny_raw({"sampler0": "tbh1", "worker0": "tbh1", "ps0": "tbh2"})
    raw["workload"]["compute_factor"] = factor
    with pytest.raises(SpecError, match=message) as err:
        gnn_spec.validate(raw)
    assert "\n" not in str(err.value)


def test_the_shipped_model_spec_simulates_and_its_summary_shows_no_learning(tmp_path, monkeypatch):
    """experiments/specs/gnn-hetero-products-model.yaml runs on the job's model from the
    kept profile; its summary leaves out what the model cannot have (epochs, accuracy,
    loss: it trains nothing) and names its training time simulated."""
    from experiments.reports.run import run_summary
    from experiments.runner import simulate_any_spec
    monkeypatch.setenv("TRAINBED_RESULTS", str(tmp_path / "results"))
    raw = yaml.safe_load(Path("experiments/specs/gnn-hetero-products-model.yaml").read_text())
    raw["workload"]["iterations"] = 6
    run = simulate_any_spec(raw, str(tmp_path / "run"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] is True and summary["backend"] == "simulated" and summary["iterations"] == 6
    labels = [line[:37].strip() for line in run_summary(run).splitlines()[1:]]
    assert "simulated training time" in labels and "iterations" in labels
    assert not {"epochs", "validation accuracy", "training loss", "training time"} & set(labels)


def half_fair(machines, flows):
    """A researcher's own rate policy: half the max-min fair share (for the test below)."""
    return {flow: mbps / 2 for flow, mbps in oes.max_min_fair_rates(machines, flows).items()}


def zero_rates(machines, flows):
    return {flow.flow_id: 0.0 for flow in flows}


def negative_rate(machines, flows):
    return {flow.flow_id: -5.0 for flow in flows}


def word_rate(machines, flows):
    return {flow.flow_id: "fast" for flow in flows}


def nan_rate(machines, flows):
    return {flow.flow_id: float("nan") for flow in flows}


def ghost_rate(machines, flows):
    return {**half_fair(machines, flows), "ghost": 1.0}


def forgets_a_flow(machines, flows):
    return dict(list(half_fair(machines, flows).items())[1:])


def rates_as_a_list(machines, flows):
    return list(half_fair(machines, flows).values())


def divides_by_zero(machines, flows):
    return 1 / 0


def one_argument(flows):
    return {}


@pytest.mark.parametrize("policy, says", [
    ("negative_rate", "returned -5.0 for flow '"),
    ("word_rate", "returned 'fast' for flow '"),
    ("nan_rate", "returned nan for flow '"),
    ("ghost_rate", "returned a rate for unknown flow 'ghost'"),
    ("forgets_a_flow", "gave no rate to flow '"),
    ("rates_as_a_list", "must return {flow id: Mbit/s}, got a list"),
    ("divides_by_zero", "raised ZeroDivisionError: division by zero"),
])
def test_an_own_rate_policy_that_fails_or_answers_wrong_ends_the_run_with_its_name(policy, says):
    raw = yaml.safe_load((REPO / "experiments/specs/gnn-hetero-products-ps.yaml").read_text())
    raw["scheduler"] = {"name": f"tests.test_gnn_simulated:{policy}"}
    spec = gnn_spec.validate(raw)
    profile = profile_of(spec, Costs(), iterations=5)
    with pytest.raises(RuntimeError, match=f"^scheduler tests.test_gnn_simulated:{policy} ") as err:
        run(spec, Costs(), spec["scheduler"]["name"], profile, iterations=3)
    assert says in str(err.value) and "\n" not in str(err.value), err.value


def test_an_own_rate_policy_may_hold_a_flow_at_zero():
    """0 is a rate (the built-in policies hold a waiting flow there): installed as the least."""
    raw = yaml.safe_load((REPO / "experiments/specs/gnn-hetero-products-ps.yaml").read_text())
    raw["scheduler"] = {"name": "tests.test_gnn_simulated:zero_rates"}
    spec = gnn_spec.validate(raw)
    result = run(spec, Costs(), spec["scheduler"]["name"], profile_of(spec, Costs(), iterations=5), iterations=2)
    assert result.decisions


def test_a_rate_policy_of_your_own_runs_by_its_module_path():
    """scheduler.name "module:function": the spec names it, the model (and the emulated
    driver, through the same gnn_spec.rate_policy) runs it; half the fair rates take
    longer than the fair rates."""
    raw = yaml.safe_load((REPO / "experiments/specs/gnn-hetero-products-ps.yaml").read_text())
    raw["scheduler"] = {"name": "tests.test_gnn_simulated:half_fair"}
    spec = gnn_spec.validate(raw)
    assert spec["scheduler"] == {"name": "tests.test_gnn_simulated:half_fair"}
    profile = profile_of(spec, Costs(), iterations=5)
    own, fair = (run(spec, Costs(), name, profile, iterations=6) for name in (spec["scheduler"]["name"], "fair"))
    assert own.decisions and own.end_s > fair.end_s
    for bad, says in (("nope", "must be one of oes, default, omcoflow, mrtf, fair or a rate policy of your own"),
                      ("tests.test_gnn_simulated:absent", "cannot import it (AttributeError"),
                      ("no_such_module_here:f", "cannot import it (ModuleNotFoundError"),
                      ("tests.test_gnn_simulated:REPO", "is not a function"),
                      ("tests.test_gnn_simulated:one_argument", "takes (flows), not (machines, flows) -> ")):
        raw["scheduler"] = {"name": bad}
        with pytest.raises(SpecError, match="^scheduler.name: ") as err:
            gnn_spec.validate(raw)
        assert says in str(err.value), err.value
