"""The ``programs`` kind: the user's commands on the hosts. Spec checks here; the real
runs (root: OVS, os-ken, Mininet hosts, iperf3) assert on what the processes and the
packets did."""
from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest
from emulation_checks import assert_nothing_left, cpu_was_taken, netns_inodes, processes_mentioning

from scapy.layers.inet import IP
from scapy.utils import PcapReader

from experiments import summary_fields
from experiments.errors import SpecError
from experiments.platform import spec as platform_spec
from experiments.platform.run import RunError
from experiments.programs.runner import run_programs_spec
from experiments.programs.spec import program_env, validate
from experiments.runner import read_spec, validate_any
from topologies.queues import DSCP_OF_QUEUE, queue_backlogs, queue_classid

BASE = {
    "name": "programs-test",
    "topology": {"kind": "star", "hosts": 3, "host_mbps": 50},
    "time_limit_s": 60,
    "workload": {
        "kind": "programs",
        "programs": [
            {"name": "sink", "hosts": ["tbh1"], "command": "iperf3 -s -p $TRAINBED_PORT_BASE", "role": "background"},
            {"name": "push", "hosts": ["tbh2"], "start_s": 1,
             "command": "iperf3 -c $TRAINBED_IP_tbh1 -p $TRAINBED_PORT_SINK -t 3 -J > $TRAINBED_OUT/iperf3.json"},
            {"name": "who", "hosts": ["tbh2", "tbh3"], "command": ["sh", "-c", "env > $TRAINBED_OUT/env.txt"]},
            {"name": "idle", "hosts": ["tbh3"], "command": "sleep 1000 & sleep 1001; wait", "role": "background"},
        ],
        "policies": [{"name": "push-q3", "src": "tbh2", "dst": "tbh1", "proto": "tcp", "dst_ports": [20000, 20001],
                      "queue": 3}],
    },
}


def _raw(**workload) -> dict:
    raw = copy.deepcopy(BASE)
    raw["workload"].update(workload)
    return raw


def test_the_shipped_example_validates_and_its_ddp_policy_names_every_host_pair():
    spec = validate_any(read_spec("experiments/specs/programs-ddp.yaml"))
    ddp = next(p for p in spec["workload"]["policies"] if p["name"] == "ddp-high")
    assert len(ddp["flows"]) == 12 and {f["src"] for f in ddp["flows"]} == {"tbh1", "tbh2", "tbh3", "tbh4"}
    assert spec["workload"]["analysis"] == {"allreduce": {"program": "ddp", "competing": "bulk"}}


def test_every_rank_is_told_who_it_is_and_where_every_program_listens():
    spec = validate(_raw())
    who = spec["workload"]["programs"][2]
    env = program_env(spec, who, 1, "/out")
    assert env["TRAINBED_HOST"] == "tbh3" and env["RANK"] == env["TRAINBED_RANK"] == "1"
    assert env["WORLD_SIZE"] == "2" and env["TRAINBED_PEERS"] == "10.0.0.2 10.0.0.3"
    assert env["MASTER_ADDR"] == "10.0.0.2" and env["MASTER_PORT"] == env["TRAINBED_PORT_BASE"] == "20200"
    assert env["TRAINBED_PORT_SINK"] == "20000" and env["TRAINBED_IP_tbh1"] == "10.0.0.1"
    assert env["TRAINBED_OUT"] == "/out"
    assert who["command"] == "sh -c 'env > $TRAINBED_OUT/env.txt'"  # a list of words, quoted for the shell
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("0", "1")


def test_ranks_may_share_a_host_as_a_servers_gpus_do():
    """Rank r runs on hosts[r]; ranks on one host are told their place there, and a
    policy by program names the flows between its hosts, not within one."""
    raw = _raw()
    raw["workload"]["programs"][2]["hosts"] = ["tbh2", "tbh2", "tbh3"]
    raw["workload"]["policies"].append({"name": "who-q2", "program": "who", "queue": 2})
    spec = validate(raw)
    who = spec["workload"]["programs"][2]
    envs = [program_env(spec, who, rank, "/out") for rank in range(3)]
    assert [(e["TRAINBED_HOST"], e["RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in envs] == [
        ("tbh2", "0", "0", "2"), ("tbh2", "1", "1", "2"), ("tbh3", "2", "0", "1")]
    assert envs[2]["WORLD_SIZE"] == "3" and envs[2]["TRAINBED_PEERS"] == "10.0.0.2 10.0.0.2 10.0.0.3"
    policy = next(p for p in spec["workload"]["policies"] if p["name"] == "who-q2")
    assert policy["flows"] == [{"src": "tbh2", "dst": "tbh3"}, {"src": "tbh3", "dst": "tbh2"}]


@pytest.mark.parametrize("change, message", [
    (lambda w: w["programs"][1].update(hosts=["tbh9"]), r"^workload.programs\[1\].hosts\[0\]: 'tbh9' is not a host"),
    (lambda w: w["programs"][1].update(name="sink"), r"^workload.programs\[1\].name: duplicate program name"),
    (lambda w: w["programs"][2].update(hosts=["tbh2", "tbh2"]) or w.update(analysis={"allreduce": {"program": "who"}}),
     r"^workload.analysis.allreduce.program: the ring's ideal is of one rank per host"),
    (lambda w: w["programs"][1].update(role="side"), r"^workload.programs\[1\].role: must be one of main, background"),
    (lambda w: [p.update(role="background") for p in w["programs"]], r"^workload.programs: needs at least one"),
    (lambda w: w["programs"][1].update(start_s=60), r"^workload.programs\[1\].start_s: 60 s is not before"),
    (lambda w: w["policies"][0].update(dst_ports=[1, 100]), r"^workload.policies\[0\].dst_ports: at most 64 ports"),
    (lambda w: w["policies"][0].pop("proto"), r"^workload.policies\[0\].proto: is required with ports"),
    (lambda w: w["policies"][0].update(queue=0), r"^workload.policies\[0\].queue: must be a scheduler queue 1..7"),
    (lambda w: w["policies"][0].update(rate_mbps=True), r"^workload.policies\[0\].rate_mbps: must be a number"),
    (lambda w: w["policies"][0].update(program="who"), r"^workload.policies\[0\].program: names its flows alone"),
    (lambda w: w["policies"].append({"program": "who", "queue": 2, "name": "b"}) or
     w["policies"].append({"src": "tbh3", "dst": "tbh2", "queue": 4}),
     r"^workload.policies\[2\]: flow tbh3->tbh2 is also policy 'b'"),
    (lambda w: w.update(policy_changes=[{"at_s": 2, "policy": "nope", "queue": 2}]),
     r"^workload.policy_changes\[0\].policy: 'nope' is not a policy"),
    (lambda w: w.update(policy_changes=[{"at_s": 2, "policy": "push-q3", "remove": True, "queue": 2}]),
     r"^workload.policy_changes\[0\].remove: drops the policy"),
    (lambda w: w.update(analysis={"allreduce": {"program": "push"}}),
     r"^workload.analysis.allreduce.program: an all-reduce needs a program on two hosts"),
    # a resolved spec's fields (a run's spec.yaml) are checked, not taken on trust
    (lambda w: w["programs"][1].update(port_base=20000), r"^workload.programs\[1\].port_base: is the program's place"),
    (lambda w: w["policies"][0].update(flows=[{"src": "tbh2", "dst": "tbh1"}]),
     r"^workload.policies\[0\].flows: names the flows one by one; leave out"),
    (lambda w: w["policies"].append({"flows": [{"src": "tbh3", "dst": "tbh3"}], "queue": 2}),
     r"^workload.policies\[1\].flows\[0\].dst: must differ from src"),
    (lambda w: w.update(policy_changes=[{"at_s": 2, "policy": "push-q3", "rate_mbps": 500}]),  # links at 50
     r"^workload.policy_changes\[0\].rate_mbps: 500 Mbit/s is above tbh\d's link \(50 Mbit/s\): the limit could "
     r"never bind$"),
])
def test_bad_programs_specs_are_one_line_naming_the_field(change, message):
    raw = _raw()
    change(raw["workload"])
    with pytest.raises(SpecError, match=message):
        validate(raw)


@pytest.mark.root
def test_programs_run_in_their_namespaces_their_flows_follow_the_policy_and_background_ones_are_stopped(tmp_path):
    namespaces = netns_inodes()
    raw = _raw(policy_changes=[{"at_s": 2.5, "policy": "push-q3", "queue": 4}])
    raw["workload"]["programs"][2]["hosts"] = ["tbh2", "tbh3", "tbh3"]  # two ranks on tbh3
    raw["capture"] = {"hosts": ["tbh1"], "packets": 5000, "filter": "tcp dst port 20000", "queue_interval_s": 0.2,
                      "tcp_interval_s": 0.2}
    spec = validate(raw)
    run = run_programs_spec(spec, out=str(tmp_path / "run"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] and summary["failed_programs"] == []
    assert summary_fields.undeclared(summary, "programs", "emulated") == []
    records = {(p["program"], p["rank"]): p for p in summary["programs"]}
    assert records[("push", 0)]["exit_code"] == 0 and records[("who", 1)]["exit_code"] == 0
    assert records[("who", 2)]["exit_code"] == 0 and records[("who", 2)]["host"] == "tbh3"
    assert records[("idle", 0)]["stopped"] and records[("sink", 0)]["stopped"]
    assert processes_mentioning("sleep 1001") == [] and processes_mentioning("sleep 1000") == []
    env = dict(line.split("=", 1) for line in (run / "raw/programs/who/1/env.txt").read_text().splitlines()
               if "=" in line)
    assert env["TRAINBED_HOST"] == "tbh3" and env["RANK"] == "1" and env["LOCAL_RANK"] == "0"
    assert env["TRAINBED_PEERS"] == "10.0.0.2 10.0.0.3 10.0.0.3"
    second = dict(line.split("=", 1) for line in (run / "raw/programs/who/2/env.txt").read_text().splitlines()
                  if "=" in line)
    assert (second["TRAINBED_HOST"], second["LOCAL_RANK"], second["LOCAL_WORLD_SIZE"]) == ("tbh3", "1", "2")
    sent = json.loads((run / "raw/programs/push/0/iperf3.json").read_text())["end"]["sum_sent"]["bytes"]
    # The packets: tbh2 -> tbh1 was marked into queue 3, then moved to queue 4 at 2.5 s.
    port = next(link.intf(link.b) for link in platform_spec.fabric_of(spec).host_links() if link.a == "tbh1")
    counters = json.loads((run / "raw" / "queue_counters.json").read_text())[port]
    assert counters["3"]["bytes"] > 0.1 * sent and counters["4"]["bytes"] > 0.1 * sent, (counters, sent)
    assert counters["3"]["bytes"] + counters["4"]["bytes"] > 0.9 * sent
    assert [c["policy"] for c in summary["policy_changes"]] == ["push-q3"]
    # The hosts' TCP account, as every kind keeps it: the summary's is the hosts' sum,
    # and tbh2 sent what tbh1 received in full segments (MSS 8948 at MTU 9000; TcpOutSegs
    # leaves re-sent ones out). iperf3's sum_sent counts bytes written into the socket,
    # some never sent before the test closed it (~1.5 MB at 50 Mbit/s), hence a bound.
    tcp = json.loads((run / "raw" / "tcp_counters.json").read_text())
    segments = {host: counters["TcpOutSegs"] for host, counters in tcp.items()}
    assert summary["tcp"]["segments"] == sum(segments.values())
    received = json.loads((run / "raw/programs/push/0/iperf3.json").read_text())["end"]["sum_received"]["bytes"]
    assert received / 8948 <= segments["tbh2"] <= sent / 8948 + 50, (segments, received, sent)
    # The capture: what tbh1 received carried the DSCP of queue 3, then of queue 4.
    with PcapReader(str(run / "raw" / "capture-tbh1.pcap")) as packets:
        dscps = [p[IP].tos >> 2 for p in packets if IP in p]
    assert len(dscps) > 100 and set(dscps) == {DSCP_OF_QUEUE[3], DSCP_OF_QUEUE[4]}, set(dscps)
    occupancy = (run / "raw" / "queue_occupancy.csv").read_text().splitlines()
    assert occupancy[0] == "time_s,port,queue,backlog_bytes" and any(line.startswith(f"{t}") for t in "12"
                                                                      for line in occupancy[1:])
    assert {line.split(",")[1] for line in occupancy[1:]} == {intf for _s, intf, _m in
                                                              platform_spec.fabric_of(spec).switch_ports()}
    assert summary["queue_samples"] > 10 and summary["fidelity"]["queue_sampler_cpu_s"] > 0
    # tbh1's connections: push's iperf3 from tbh2 among them, sampled while it ran.
    sockets = list(csv.DictReader((run / "raw" / "tcp_sockets.csv").open()))
    assert summary["tcp_samples"] > 10 and summary["fidelity"]["tcp_sampler_cpu_s"] > 0
    assert {s["host"] for s in sockets} == {"tbh1"}
    pushed = [s for s in sockets if s["local"] == "10.0.0.1:20000" and s["peer"].startswith("10.0.0.2:")]
    assert pushed and max(int(s["bytes_received"]) for s in pushed) > 0.5 * received, (len(sockets), received)
    assert (run / "raw" / "tcp_backoffs.csv").read_text().startswith("host,local,peer,start_s")
    assert summary["host_mbps"]["tbh2"]["sent"] > 1.0
    rows = (run / "raw" / "host_bytes.csv").read_text().splitlines()
    assert rows[0] == "time_s,host,sent_bytes,received_bytes" and len(rows) > 3 * 5
    assert_nothing_left(platform_spec.fabric_of(spec), tmp_path / "state", run, namespaces)


@pytest.mark.root
def test_a_program_sets_its_own_policies_through_the_runs_controller(tmp_path):
    """The user's own online scheduler: a program on tbh2 rate-limits its flows to tbh1
    through the controller of the run (``ControllerClient.from_env``), then sends;
    the receiver got about that rate, far below the 50 Mbit/s link."""
    namespaces = netns_inodes()
    limit = ("python3 -c \"from controller.client import ControllerClient; ControllerClient.from_env().apply("
             "[{'set': {'src': 'tbh2', 'dst': 'tbh1', 'proto': 'tcp', 'rate_mbps': 10}}])\"")
    send = "iperf3 -c $TRAINBED_IP_tbh1 -p $TRAINBED_PORT_SINK -t 3 -J > $TRAINBED_OUT/iperf3.json"
    raw = _raw(programs=[BASE["workload"]["programs"][0],
                         {"name": "push", "hosts": ["tbh2"], "start_s": 1, "command": f"{limit} && {send}"}],
               policies=[])
    spec = validate(raw)
    run = run_programs_spec(spec, out=str(tmp_path / "run"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] and summary["failed_programs"] == [], summary
    received = json.loads((run / "raw/programs/push/0/iperf3.json").read_text())["end"]["sum_received"]
    installed = json.loads((run / "raw" / "policies.json").read_text())
    assert [(p["src"], p["dst"], p["rate_mbps"]) for p in installed] == [("tbh2", "tbh1", 10.0)], installed
    assert_nothing_left(platform_spec.fabric_of(spec), tmp_path / "state", run, namespaces)
    assert received["bits_per_second"] < 12e6, received  # the limit holds whatever the box's CPU
    if received["bits_per_second"] <= 6e6 and (taken := cpu_was_taken(summary)):
        pytest.skip(f"the rate reached cannot be judged on this box now ({received['bits_per_second']}): {taken}")
    assert 6e6 < received["bits_per_second"], received


@pytest.mark.root
def test_a_program_that_fails_is_named_and_the_others_are_stopped(tmp_path):
    namespaces = netns_inodes()
    raw = _raw(policies=[])
    raw["workload"]["programs"] = [
        {"name": "idle", "hosts": ["tbh3"], "command": "sleep 1002", "role": "background"},
        {"name": "long", "hosts": ["tbh1"], "command": "sleep 1003"},
        {"name": "crash", "hosts": ["tbh1", "tbh2"], "start_s": 1,
         "command": 'if [ "$RANK" = 1 ]; then echo "no GPU found" >&2; exit 3; fi; sleep 1004'},
    ]
    spec = validate(raw)
    with pytest.raises(RunError, match=r"program crash\[1\] on tbh2 exited 3: no GPU found"):
        run_programs_spec(spec, out=str(tmp_path / "run"))
    run = Path(tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    assert not summary["completed"] and not summary["trustworthy"]
    [failed] = summary["failed_programs"]
    assert (failed["host"], failed["exit_code"], failed["stderr_tail"]) == ("tbh2", 3, "no GPU found")
    stopped = {(p["program"], p["rank"]) for p in summary["programs"] if p["stopped"]}
    assert stopped == {("idle", 0), ("long", 0), ("crash", 0)}
    assert all(processes_mentioning(f"sleep {n}") == [] for n in (1002, 1003, 1004))
    assert (run / "report.html").is_file()
    assert_nothing_left(platform_spec.fabric_of(spec), tmp_path / "state", run, namespaces)


def test_a_capture_section_is_checked_for_every_kind():
    raw = read_spec("experiments/specs/priority-demo.yaml")
    raw["capture"] = {"hosts": ["tbh2", "tbh2"], "queue_interval_s": 0.5}
    assert validate_any(raw)["capture"] == {"hosts": ["tbh2"], "snap_bytes": 128, "packets": 20000, "filter": "",
                                            "queue_interval_s": 0.5, "tcp_interval_s": None}
    assert "capture" not in validate_any(read_spec("experiments/specs/priority-demo.yaml"))
    for name in ("grouper-smoke", "gnn-oes-smoke"):
        raw = read_spec(f"experiments/specs/{name}.yaml")
        raw["capture"] = {"hosts": ["nohost"]}
        with pytest.raises(SpecError, match=r"^capture.hosts\[0\]: 'nohost' is not a host of the topology"):
            validate_any(raw)
    raw["capture"] = {"queue_interval_s": 0.001}
    with pytest.raises(SpecError, match=r"^capture.queue_interval_s: must be"):
        validate_any(raw)
    raw["capture"] = {"tcp_interval_s": 0.01}
    with pytest.raises(SpecError, match=r"^capture.tcp_interval_s: must be"):
        validate_any(raw)


def test_queue_backlogs_are_read_per_queue_from_tcs_text():
    text = f"""class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b
 Sent 10 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 9b 0p requeues 0
class htb {queue_classid(3)} parent 1:1 prio 3 rate 2Mbit ceil 100Mbit burst 1600b cburst 1600b
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 1514b 1p requeues 0
class htb {queue_classid(5)} parent 1:1 prio 5 rate 2Mbit ceil 100Mbit burst 1600b cburst 1600b
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 12Kb 8p requeues 0
class htb {queue_classid(7)} parent 1:1 prio 7 rate 2Mbit ceil 100Mbit burst 1600b cburst 1600b
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
"""
    assert queue_backlogs(text) == {3: 1514, 5: 12 * 1024, 7: 0}


def test_a_resolved_spec_of_a_program_on_many_hosts_validates_to_itself():
    """A program policy on 9 hosts names 72 flows: its resolved form (flows one by one)
    is taken as the program form is, with no cap of its own."""
    raw = {"name": "p9", "topology": {"kind": "star", "hosts": 9, "host_mbps": 50}, "time_limit_s": 60,
           "workload": {"kind": "programs",
                        "programs": [{"name": "a", "hosts": [f"tbh{i}" for i in range(1, 10)], "command": "true"}],
                        "policies": [{"name": "all", "program": "a", "queue": 2}]}}
    resolved = validate(raw)
    assert len(resolved["workload"]["policies"][0]["flows"]) == 72
    assert validate(copy.deepcopy(resolved)) == resolved
