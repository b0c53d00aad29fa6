"""The gnn workload kind's spec and task placement: defaults, the three placement
policies (and the bandwidth-aware DistDGL), capacity and explicit-mapping errors, and one-line errors naming the field.
Pure checks: no DGL, no graph, no emulation."""
import copy
from pathlib import Path

import pytest
import yaml

from experiments.errors import SpecError
from experiments.gnn import placement
from experiments.gnn import spec as gnn_spec
from experiments.runner import validate_any
from hosts.gnn import task_index, task_kind

REPO = Path(__file__).resolve().parent.parent
SMOKE = REPO / "experiments" / "specs" / "gnn-oes-smoke.yaml"
HOSTS4 = ["tbh1", "tbh2", "tbh3", "tbh4"]


def smoke() -> dict:
    return yaml.safe_load(SMOKE.read_text())


def star4(**workload) -> dict:
    """A minimal spec on a 4-host star; ``workload`` fields override."""
    return {"name": "gnn-test", "topology": {"kind": "star", "hosts": 4, "host_mbps": 100},
            "workload": {"kind": "gnn", "graph": {"shape": "ogbn-products", "nodes": 1000}, **workload},
            "scheduler": {"name": "oes"}}


def tasks(raw) -> dict:
    return gnn_spec.validate(raw)["workload"]["placement"]["tasks"]


def error(raw) -> SpecError:
    with pytest.raises(SpecError) as err:
        gnn_spec.validate(raw)
    assert "\n" not in str(err.value)
    return err.value


def test_smoke_spec_resolves_with_defaults():
    spec = validate_any(smoke())
    w = spec["workload"]
    assert (spec["name"], spec["seed"], spec["time_limit_s"], spec["tcp_congestion"]) == \
        ("gnn-oes-smoke", 1, 300.0, "bbr")
    assert w["graph"] == {"shape": "ogbn-products", "nodes": 3000, "avg_degree": 10.0}
    assert (w["fanouts"], w["batch_size"], w["workers"], w["samplers_per_worker"], w["sync"], w["ps"]) == \
        ([5, 10], 32, 2, 1, "ps", 1)
    assert (w["hidden"], w["lr"], w["iterations"], w["target_accuracy"], w["eval_every"], w["eval_nodes"],
            w["profile"]) == (64, 0.001, 12, None, 4, 100, False)
    assert w["machines"] == {h: {"cpus": 8.0, "memory_gb": 32.0, "gpus": 0} for h in ("tbh1", "tbh2", "tbh3")}
    assert w["task_resources"] == gnn_spec.TASK_DEFAULTS
    assert w["placement"] == {"kind": "spread", "tasks": {
        "store0": "tbh1", "store1": "tbh2", "store2": "tbh3", "sampler0": "tbh1", "sampler1": "tbh2",
        "worker0": "tbh2", "worker1": "tbh3", "ps0": "tbh3"}}
    assert spec["scheduler"] == {"name": "oes"}


def test_queue_weights_are_refused_for_a_gnn_job_whose_flows_share_one_queue():
    assert "emulation.queue_weights: a gnn job's flows share one queue" in str(
        error(dict(star4(), emulation={"queue_weights": [2, 1, 1, 1, 1, 1, 1]})))


def test_minimal_spec_takes_every_default():
    spec = validate_any(star4())
    w = spec["workload"]
    assert (spec["seed"], spec["time_limit_s"], spec["tcp_congestion"]) == (0, 1800.0, "bbr")
    assert w["graph"]["avg_degree"] is None and w["fanouts"] == [5, 10, 15]
    assert {k: w[k] for k in gnn_spec.DEFAULTS if k != "placement"} == \
        {k: v for k, v in gnn_spec.DEFAULTS.items() if k != "placement"}
    assert w["placement"]["kind"] == "distdgl"
    assert list(w["placement"]["tasks"]) == placement.task_ids(4, 2, 1, 1)


def test_reddit_default_fanouts_and_partial_resources():
    raw = star4(graph={"shape": "reddit", "nodes": 500}, machines={"tbh2": {"cpus": 3}},
                task_resources={"worker": {"memory_gb": 1.5}})
    w = gnn_spec.validate(raw)["workload"]
    assert w["fanouts"] == [5, 10, 25]
    assert w["machines"]["tbh2"] == {"cpus": 3.0, "memory_gb": 32.0, "gpus": 0}
    assert w["task_resources"]["worker"] == {"cpus": 1.0, "memory_gb": 1.5, "gpus": 0}


def test_task_ids_and_samplers_workers():
    assert placement.task_ids(2, 2, 2, 1) == ["store0", "store1", "sampler0", "sampler1", "sampler2", "sampler3",
                                              "worker0", "worker1", "ps0"]
    assert placement.task_ids(1, 1, 1, 0) == ["store0", "sampler0", "worker0"]
    assert [placement.sampler_worker(i, 3) for i in range(7)] == [0, 0, 0, 1, 1, 1, 2]


def test_a_task_id_is_its_kind_and_its_index():
    assert task_kind("sampler12") == "sampler" and task_index("sampler12") == 12
    assert task_kind("ps0") == "ps" and task_index("ps0") == 0
    assert all(f"{task_kind(t)}{task_index(t)}" == t for t in placement.task_ids(2, 2, 2, 1))


def test_distdgl_puts_each_worker_with_its_samplers():
    got = tasks(star4(workers=2, samplers_per_worker=2, ps=1))
    assert [got[f"store{m}"] for m in range(4)] == HOSTS4
    assert got["worker0"] == got["sampler0"] == got["sampler1"] == "tbh1"  # all tie: host order
    assert got["worker1"] == got["sampler2"] == got["sampler3"] == "tbh2"
    assert got["ps0"] == "tbh3"  # most free CPU


def test_distdgl_prefers_the_machine_with_most_free_cpu():
    got = tasks(star4(workers=2, machines={"tbh3": {"cpus": 16}, "tbh4": {"cpus": 13}}))
    assert got["worker0"] == got["sampler0"] == "tbh3"  # 15 free
    assert got["worker1"] == got["sampler1"] == "tbh3"  # still 13 free > tbh4's 12
    assert got["ps0"] == "tbh4"  # 12 free > tbh3's 11
    assert tasks(star4(workers=2, machines={"tbh3": {"cpus": 16}, "tbh4": {"cpus": 12}}))["ps0"] == "tbh3"  # tie


def test_distdgl_fast_ps_puts_the_ps_behind_the_fastest_nic_that_fits_it():
    raw = star4(workers=2, samplers_per_worker=2, ps=2)
    raw["topology"]["host_mbps_overrides"] = {"tbh3": 20, "tbh4": 50}
    plain, fast = tasks(raw), tasks({**raw, "workload": {**raw["workload"], "placement": "distdgl-fast-ps"}})
    assert plain["ps0"] == "tbh3"  # DistDGL's: most free CPU, the slow NIC
    assert {t: h for t, h in fast.items() if not t.startswith("ps")} == {
        t: h for t, h in plain.items() if not t.startswith("ps")}  # the units are DistDGL's
    assert fast["ps0"] == "tbh1" and fast["ps1"] == "tbh2"  # 100 Mbit/s; tbh1 first on a CPU tie
    raw["workload"]["machines"] = {"tbh1": {"cpus": 1}, "tbh2": {"cpus": 1}}  # room for their stores only
    raw["workload"]["placement"] = "distdgl-fast-ps"
    assert tasks(raw)["ps0"] == "tbh4" and tasks(raw)["ps1"] == "tbh4"  # the fastest NIC with room


@pytest.mark.parametrize("name", ["gnn-hetero-products-tight", "gnn-hetero-reddit-tight"])
def test_on_table_3s_ps_specs_distdgl_already_puts_its_ps_on_a_fast_nic(name):
    # so the paper's DistDGL baseline is not a strawman there (docs/gnn-oes.md)
    raw = yaml.safe_load((REPO / "experiments/specs" / f"{name}.yaml").read_text())
    raw["workload"]["placement"] = "distdgl"
    plain = tasks(raw)
    raw["workload"]["placement"] = "distdgl-fast-ps"
    assert tasks(raw) == plain and plain["ps0"] not in raw["topology"]["host_mbps_overrides"]


def test_distdgl_splits_a_unit_that_fits_no_machine():
    machines = {h: {"cpus": 2} for h in HOSTS4}  # 1 CPU free after the store: no room for worker + sampler
    got = tasks(star4(workers=1, machines=machines))
    assert got["worker0"] == "tbh1" and got["sampler0"] == "tbh2" and got["ps0"] == "tbh3"


@pytest.mark.parametrize("name", ["gnn-hetero-products-tight", "gnn-hetero-reddit-tight"])
def test_distdgl_keeps_as_many_samplers_beside_their_worker_as_fit(name):
    # Table III's tight star: worker + 2 samplers need 5 CPUs of 4, so each unit is
    # split; "maximally colocates" keeps one sampler beside its worker, not none
    raw = yaml.safe_load((REPO / "experiments/specs" / f"{name}.yaml").read_text())
    raw["workload"]["placement"] = "distdgl"
    got = tasks(raw)
    for w in range(2):
        beside = [i for i in (2 * w, 2 * w + 1) if got[f"sampler{i}"] == got[f"worker{w}"]]
        assert len(beside) == 1, got
    assert (got["worker0"], got["sampler0"], got["sampler1"]) == ("tbh1", "tbh1", "tbh2")
    assert (got["worker1"], got["sampler2"], got["sampler3"]) == ("tbh3", "tbh3", "tbh4")


def test_distdgl_puts_a_split_units_worker_where_most_of_its_samplers_fit():
    # tbh1 has the most free CPU but memory for the worker alone; tbh2 fits the worker
    # and one of its samplers
    machines = {"tbh1": {"cpus": 8, "memory_gb": 8}, "tbh2": {"cpus": 4}, "tbh3": {"cpus": 1}, "tbh4": {"cpus": 1}}
    got = tasks(star4(workers=1, samplers_per_worker=2, ps=0, sync="allreduce", machines=machines,
                      task_resources={"store": {"cpus": 0, "memory_gb": 0}, "sampler": {"cpus": 2, "memory_gb": 6},
                                      "worker": {"cpus": 1, "memory_gb": 3}}))
    assert got["worker0"] == got["sampler0"] == "tbh2"  # beside its worker, though tbh1 has more CPU free
    assert got["sampler1"] == "tbh1"  # the one left over: most free CPU that fits


def test_spread_separates_workers_from_their_samplers():
    got = tasks(star4(workers=2, samplers_per_worker=1, ps=2, placement="spread"))
    assert (got["sampler0"], got["sampler1"]) == ("tbh1", "tbh2")
    assert (got["worker0"], got["worker1"]) == ("tbh2", "tbh3")
    assert (got["ps0"], got["ps1"]) == ("tbh3", "tbh4")  # the samplers' round-robin goes on
    got = tasks(star4(workers=2, samplers_per_worker=2, placement="spread"))
    assert [got[f"sampler{i}"] for i in range(4)] == HOSTS4
    for w in range(2):
        assert got[f"worker{w}"] not in {got[f"sampler{i}"] for i in range(2 * w, 2 * w + 2)}


def test_spread_skips_a_full_machine():
    got = tasks(star4(workers=2, samplers_per_worker=2, placement="spread", machines={"tbh2": {"cpus": 1}}))
    assert [got[f"sampler{i}"] for i in range(4)] == ["tbh1", "tbh3", "tbh4", "tbh1"]
    assert "tbh2" not in [host for task, host in got.items() if task != "store1"]


@pytest.mark.parametrize("kind", ["distdgl", "distdgl-fast-ps", "spread"])
def test_no_room_anywhere_names_the_field_the_machines_and_the_resource(kind):
    raw = star4(placement=kind, machines={h: {"cpus": 1.5} for h in HOSTS4})
    err = error(raw)
    assert err.field == "workload.placement"
    assert err.problem.startswith("no machine has room for ")
    assert "tbh1 has cpus 0.5 free of 1.5, needs 1" in err.problem and "tbh4" in err.problem
    raw = star4(placement=kind, task_resources={"worker": {"memory_gb": 31}})
    err = error(raw)
    assert err.field == "workload.placement" and "no machine has room for worker0" in err.problem
    assert "tbh4 has memory_gb 30 free of 32, needs 31" in err.problem  # 2 GB for its store


def test_a_store_that_does_not_fit_its_machine_is_named():
    err = error(star4(machines={"tbh3": {"memory_gb": 1}}))
    assert str(err) == "workload.placement: store2 is fixed on tbh3, which has no room for it: " \
                       "tbh3 has memory_gb 1 free of 1, needs 2"
    err = error(star4(task_resources={"store": {"gpus": 1}}, machines={"tbh1": {"gpus": 1}}))
    assert err.field == "workload.placement" and "store1 is fixed on tbh2" in err.problem and "gpus" in err.problem


def test_gpus_are_placed_where_there_are_gpus():
    got = tasks(star4(workers=1, task_resources={"worker": {"gpus": 1}}, machines={"tbh4": {"gpus": 2}}))
    assert got["worker0"] == got["sampler0"] == "tbh4"


EXPLICIT = {"sampler0": "tbh1", "sampler1": "tbh1", "worker0": "tbh2", "worker1": "tbh4", "ps0": "tbh3"}


def test_explicit_placement_is_taken_as_given():
    spec = gnn_spec.validate(star4(placement=dict(EXPLICIT)))
    assert spec["workload"]["placement"] == {"kind": "explicit", "tasks": {
        "store0": "tbh1", "store1": "tbh2", "store2": "tbh3", "store3": "tbh4", **EXPLICIT}}


@pytest.mark.parametrize("change, message", [
    ({"worker1": KeyError}, "workload.placement.worker1: is required (an explicit placement names every task "
                            "but the stores)"),
    ({"ps0": "tbh9"}, "workload.placement.ps0: 'tbh9' is not a host of the topology (tbh1..tbh4)"),
    ({"ps0": 3}, "workload.placement.ps0: must be a host name (string), got 3"),
    ({"store0": "tbh1"}, "workload.placement.store0: stores are fixed (store m on the m-th host of the fabric); "
                         "leave them out"),
    ({"worker2": "tbh1"}, "workload.placement.worker2: unknown task (tasks: sampler0..sampler1, worker0..worker1, "
                          "ps0)"),
    ({"sampler0": "tbh2", "sampler1": "tbh2"},
     "workload.placement.worker0: no room on tbh2 for worker0: tbh2 has cpus 0 free of 3, needs 1 "
     "(with the tasks placed before it)"),
])
def test_explicit_placement_errors(change, message):
    mapping = dict(EXPLICIT)
    for task, host in change.items():
        if host is KeyError:
            del mapping[task]
        else:
            mapping[task] = host
    raw = star4(placement=mapping, machines={"tbh2": {"cpus": 3}})
    assert str(error(raw)) == message


def test_allreduce_has_no_parameter_servers():
    got = tasks(star4(sync="allreduce"))
    assert not any(task.startswith("ps") for task in got)
    assert gnn_spec.validate(star4(sync="allreduce", ps=0))["workload"]["ps"] == 0
    assert str(error(star4(sync="allreduce", ps=2))) == \
        "workload.ps: must be absent or 0 with sync allreduce (no parameter servers), got 2"
    assert str(error(star4(sync="allreduce", placement={**EXPLICIT, "ps0": "tbh1"}))) == \
        "workload.placement.ps0: unknown task (tasks: sampler0..sampler1, worker0..worker1)"


def _set(raw: dict, path: str, value) -> dict:
    node = raw
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return raw


BAD = [
    ("scheduler", KeyError, "scheduler: is required"),
    ("scheduler.name", "grouper", "scheduler.name: must be one of oes, default, omcoflow, mrtf, fair or a rate policy of your own as "
     "module:function, got 'grouper'"),
    ("scheduler.name", {"oes": 1}, "scheduler.name: must be one of oes, default"),  # found by the mutation test
    ("scheduler.period_s", 1, "scheduler.period_s: unknown field (allowed: name)"),
    ("seed", -1, "seed: must be >= 0, got -1"),
    ("time_limit_s", 0, "time_limit_s: must be > 0, got 0"),
    ("tcp_congestion", "vegas", "tcp_congestion: must be one of cubic, bbr, reno, got 'vegas'"),
    ("topology.hosts", 0, "topology.hosts: must be an integer >= 1, got 0"),
    ("workload.colour", 1, "workload.colour: unknown field (allowed: "),
    ("workload.graph", KeyError, "workload.graph: is required"),
    ("workload.graph.shape", "cora", "workload.graph.shape: unknown graph shape 'cora' (known: ogbn-products, "
                                     "reddit)"),
    ("workload.graph.shape", KeyError, "workload.graph.shape: is required"),
    ("workload.graph.nodes", 93, "workload.graph.nodes: must be in [94, 2000000], got 93"),
    ("workload.graph.nodes", 1000.0, "workload.graph.nodes: must be an integer in [94, 2000000], got 1000.0"),
    ("workload.graph.nodes", True, "workload.graph.nodes: must be an integer in [94, 2000000], got true"),
    ("workload.graph.avg_degree", 0, "workload.graph.avg_degree: must be in (0, 1000], got 0"),
    ("workload.graph.avg_degree", "ten", "workload.graph.avg_degree: must be a number in (0, 1000], got 'ten'"),
    ("workload.graph.edges", 10, "workload.graph.edges: unknown field (allowed: avg_degree, nodes, shape)"),
    ("workload.fanouts", [], "workload.fanouts: must be a non-empty list, got an empty list"),
    ("workload.fanouts", [5, 5, 5, 5, 5], "workload.fanouts: must have 1 to 4 hops, got 5"),
    ("workload.fanouts", [5, 0], "workload.fanouts[1]: must be in [1, 100], got 0"),
    ("workload.fanouts", [5, True], "workload.fanouts[1]: must be an integer in [1, 100], got true"),
    ("workload.batch_size", 0, "workload.batch_size: must be in [1, 10000], got 0"),
    ("workload.workers", 33, "workload.workers: must be in [1, 32], got 33"),
    ("workload.workers", None, "workload.workers: must be an integer in [1, 32], got null"),
    ("workload.samplers_per_worker", 9, "workload.samplers_per_worker: must be in [1, 8], got 9"),
    ("workload.sync", "gossip", "workload.sync: must be one of ps, allreduce, got 'gossip'"),
    ("workload.ps", 0, "workload.ps: must be in [1, 8], got 0"),
    ("workload.ps", 9, "workload.ps: must be in [1, 8], got 9"),
    ("workload.hidden", 4, "workload.hidden: must be in [8, 4096], got 4"),
    ("workload.lr", 0, "workload.lr: must be > 0, got 0"),
    ("workload.lr", float("nan"), "workload.lr: must be a number > 0, got nan"),
    ("workload.iterations", 0, "workload.iterations: must be in [1, 100000], got 0"),
    ("workload.target_accuracy", 0, "workload.target_accuracy: must be in (0, 1], got 0"),
    ("workload.target_accuracy", 1.5, "workload.target_accuracy: must be in (0, 1], got 1.5"),
    ("workload.eval_every", 0, "workload.eval_every: must be in [1, 100000], got 0"),
    ("workload.eval_nodes", 0, "workload.eval_nodes: must be in [1, 100000], got 0"),
    ("workload.profile", 1, "workload.profile: must be true or false, got 1"),
    ("workload.machines", [], "workload.machines: must be a mapping, got an empty list"),
    ("workload.machines", {"tbh5": {"cpus": 4}}, "workload.machines.tbh5: 'tbh5' is not a host of the topology "
                                                 "(tbh1..tbh4)"),
    ("workload.machines", {"tbh1": {"cpus": 0}}, "workload.machines.tbh1.cpus: must be in (0, 1024], got 0"),
    ("workload.machines", {"tbh1": {"gpus": 0.5}}, "workload.machines.tbh1.gpus: must be an integer in [0, 64], "
                                                   "got 0.5"),
    ("workload.machines", {"tbh1": {"disk_gb": 1}}, "workload.machines.tbh1.disk_gb: unknown field "
                                                    "(allowed: cpus, gpus, memory_gb)"),
    ("workload.machines", {"tbh1": 4}, "workload.machines.tbh1: must be a mapping, got 4"),
    ("workload.task_resources", {"trainer": {}}, "workload.task_resources.trainer: unknown field "
                                                 "(allowed: ps, sampler, store, worker)"),
    ("workload.task_resources", {"worker": {"cpus": -1}},
     "workload.task_resources.worker.cpus: must be in [0, 1024], got -1"),
    ("workload.task_resources", {"worker": {"memory_gb": "3G"}},
     "workload.task_resources.worker.memory_gb: must be a number in [0, 65536], got '3G'"),
    ("workload.placement", "explicit", "workload.placement: must be distdgl, distdgl-fast-ps, spread, a mapping "
                                       "of task id to host (explicit) or {kind: etp | ifs | module:function, "
                                       "profile: ...}, got 'explicit'"),
    ("workload.placement", None, "workload.placement: must be distdgl, distdgl-fast-ps, spread, a mapping of task "
                                 "id to host (explicit) or {kind: etp | ifs | module:function, profile: ...}, got null"),
]


@pytest.mark.parametrize("path, value, message", BAD, ids=[f"{p}={v!r}" for p, v, _ in BAD])
def test_bad_values_name_their_field(path, value, message):
    raw = _set(star4(), path, value)
    with pytest.raises(SpecError) as err:
        validate_any(raw)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(message), str(err.value)
    assert err.value.field == message.split(": ")[0]


def test_a_workload_kind_is_checked_by_the_registry_then_by_its_own_validator():
    raw = copy.deepcopy(smoke())
    raw["workload"] = ["gnn"]
    with pytest.raises(SpecError, match=r"^workload: must be a mapping, got a list of 1 item$"):
        validate_any(raw)
    raw = copy.deepcopy(smoke())
    raw["workload"] = {"kind": "GNN"}
    with pytest.raises(SpecError, match=r"^workload.kind: unknown workload kind 'GNN' \(known: cojob, gnn, programs, timetable\)$"):
        validate_any(raw)
    raw["workload"] = {"kind": "gnn"}
    with pytest.raises(SpecError, match=r"^workload.graph: is required$"):
        validate_any(raw)
