"""Forwarding and policy planning as data: no switch needed (one test puts the planned
sender commands on a real queue tree in a namespace of its own)."""
import itertools
import os
import shutil
import subprocess
import sys

import pytest

from controller import routing
from controller.hostnet import run_tc_batch
from controller.policy import FlowPolicy, PolicyError, PolicyTable, of_match
from controller.rules import FORWARD_TABLE, POLICY_TABLE
from experiments.bench import queue_ports
from topologies import queues
from topologies.fabric import leaf_spine, star


def set_policy(table: PolicyTable, policy: FlowPolicy) -> tuple[int, list]:
    """One change planned and committed, as the app does a batch of one."""
    (pid,), ops, by_key = table.plan([("set", policy)])
    table.commit(by_key)
    return pid, ops


def remove_policy(table: PolicyTable, policy_id: int) -> list:
    _ids, ops, by_key = table.plan([("remove", policy_id)])
    table.commit(by_key)
    return ops


def _walk(fabric, rules, groups, src, dst):
    """Follow forwarding rules hop by hop; every select-group bucket is explored."""
    neighbours = {}
    for link in fabric.links:
        neighbours[(link.a, link.a_port)] = link.b
        neighbours[(link.b, link.b_port)] = link.a
    dst_ip = fabric.host(dst).ip
    paths, stack = [], [(fabric.host(src).switch, [fabric.host(src).switch])]
    while stack:
        sw, path = stack.pop()
        dpid = fabric.switch(sw).dpid
        cands = [r for r in rules if r.dpid == dpid and r.table == FORWARD_TABLE and r.match.get("eth_type") == 0x800
                 and (r.match["ipv4_dst"] == dst_ip or isinstance(r.match["ipv4_dst"], tuple))]
        rule = max(cands, key=lambda r: r.priority)
        kind, arg = rule.actions[0]
        ports = [arg] if kind == "output" else next(g.ports for g in groups if g.dpid == dpid and g.group_id == arg)
        for port in ports:
            nxt = neighbours[(sw, port)]
            if nxt == dst:
                paths.append(path)
            else:
                assert nxt not in path, f"loop {path + [nxt]}"
                stack.append((nxt, path + [nxt]))
    return paths


def test_every_pair_is_reachable_loop_free_over_every_spine():
    f = leaf_spine(spines=3, leaves=3, hosts_per_leaf=2)
    rules, groups = routing.forwarding(f)
    for a, b in itertools.permutations([h.name for h in f.hosts], 2):
        paths = _walk(f, rules, groups, a, b)
        if f.host(a).switch == f.host(b).switch:
            assert paths == [[f.host(a).switch]]
        else:
            assert sorted(p[1] for p in paths) == ["tbs1", "tbs2", "tbs3"]


def test_star_forwards_directly_and_arp_goes_to_controller():
    f = star(hosts=3)
    rules, groups = routing.forwarding(f)
    assert groups == []
    assert _walk(f, rules, groups, "tbh1", "tbh3") == [["tbx1"]]
    arp = [r for r in rules if r.match.get("eth_type") == 0x806]
    assert len(arp) == 1 and arp[0].actions == (("controller",),)
    assert routing.arp_reply_for(f, "10.0.0.2") == "02:7b:00:00:00:02"
    assert routing.arp_reply_for(f, "10.0.9.9") is None


def test_policy_table_marks_and_meters_at_the_ingress_leaf():
    f = leaf_spine(2, 3, 2)
    table = PolicyTable(f)
    pid, ops = set_policy(table, FlowPolicy("tbh3", "tbh1", "tcp", dst_port=5201, queue=2, rate_mbps=40,
                                    rate_mechanism="meter"))
    assert [op[0] for op in ops] == ["meter_set", "rule_set"]
    meter, rule = ops[0][1], ops[1][1]
    assert meter.dpid == rule.dpid == f.switch("tbl2").dpid and meter.kbps == 40000
    assert rule.table == POLICY_TABLE and rule.goto == FORWARD_TABLE and rule.meter == pid
    assert rule.match == {"eth_type": 0x800, "ipv4_src": "10.0.0.3", "ipv4_dst": "10.0.0.1", "ip_proto": 6,
                          "tcp_dst": 5201}
    assert rule.actions == (("set_dscp", queues.DSCP_OF_QUEUE[2]),)
    # more specific policies outrank host-pair ones
    _, pair_ops = set_policy(table, FlowPolicy("tbh3", "tbh1", queue=5))
    assert pair_ops[0][1].priority < rule.priority


def test_overlapping_policies_rank_alike_in_the_switches_and_on_the_sender():
    """More fields named first, then the lower id: the switches' rule priorities
    (higher first) and the sender's filter prefs (lower first) order them the same,
    and no two rules of one switch share a priority (OVS's order among them is its own)."""
    table = PolicyTable(leaf_spine())
    policies = [FlowPolicy("tbh1", "tbh3", queue=5, host_queue=5),  # id 1: the pair
                FlowPolicy("tbh1", "tbh3", "udp", src_port=7, queue=4, host_queue=4),  # id 2
                FlowPolicy("tbh1", "tbh3", "udp", dst_port=9, queue=3, host_queue=3),  # id 3: ties with 2
                FlowPolicy("tbh1", "tbh3", "udp", src_port=7, dst_port=9, queue=2, host_queue=2)]  # id 4
    ranked = []
    for policy in policies:
        pid, ops = set_policy(table, policy)
        rule = next(op[1] for op in ops if op[0] == "rule_set")
        [pref] = [int(cmd.split(" prio ")[1].split()[0]) for op in ops if op[0] == "host_tc" for cmd in op[2]]
        ranked.append((pid, rule.priority, pref))
    by_switch = [pid for pid, _, _ in sorted(ranked, key=lambda r: -r[1])]
    by_sender = [pid for pid, _, _ in sorted(ranked, key=lambda r: r[2])]
    assert by_switch == by_sender == [4, 2, 3, 1]
    assert len({priority for _, priority, _ in ranked}) == 4


def test_update_keeps_the_id_and_cleans_what_the_new_policy_drops():
    f = leaf_spine(1, 2, 1)
    table = PolicyTable(f)
    pid, _ = set_policy(table, FlowPolicy("tbh1", "tbh2", rate_mbps=10, rate_mechanism="meter"))
    pid2, ops = set_policy(table, FlowPolicy("tbh1", "tbh2", rate_mbps=20, rate_mechanism="host"))
    assert pid2 == pid
    assert [op[0] for op in ops] == ["rule_set", "meter_del", "host_tc"]
    assert ops[1][1].meter_id == pid and ops[2][1] == "tbh1"
    assert any("rate 20mbit ceil 20mbit" in c for c in ops[2][2])
    _, ops = set_policy(table, FlowPolicy("tbh1", "tbh2", queue=3))
    assert [op[0] for op in ops] == ["rule_set", "host_tc"] and "del" in ops[1][2][0]
    remove = remove_policy(table, pid)
    assert [op[0] for op in remove] == ["rule_del"]
    assert table.listing() == []
    with pytest.raises(PolicyError, match="^policy.id: no policy with id"):
        remove_policy(table, pid)


def test_ids_are_reused_after_removal():
    table = PolicyTable(leaf_spine(1, 2, 2))
    a, _ = set_policy(table, FlowPolicy("tbh1", "tbh3", queue=1))
    b, _ = set_policy(table, FlowPolicy("tbh2", "tbh3", queue=1))
    remove_policy(table, a)
    c, _ = set_policy(table, FlowPolicy("tbh1", "tbh4", queue=1))
    assert (a, b, c) == (1, 2, 1)


@pytest.mark.parametrize("fields, message", [
    (dict(src="tbh1", dst="tbh9", queue=1), "policy.dst: 'tbh9' is not a host"),
    (dict(src="tbh1", dst="tbh2", queue=0), "policy.queue: must be a scheduler queue 1..7"),
    (dict(src="tbh1", dst="tbh2", queue=8), "policy.queue: must be a scheduler queue 1..7"),
    (dict(src="tbh1", dst="tbh2", dst_port=80, queue=1), "policy.dst_port: a port needs proto"),
    (dict(src="tbh1", dst="tbh2", proto="tcp", dst_port=70000, queue=1),
     "policy.dst_port: must be a port number 1..65535, got 70000"),
    (dict(src="tbh1", dst="tbh2", rate_mbps=-5), "policy.rate_mbps: must be a number in (0, 1000] (Mbit/s), got -5"),
    (dict(src="tbh1", dst="tbh2", rate_mbps=0.0004, rate_mechanism="meter"),
     "policy.rate_mbps: a meter counts whole kbit/s: at least 0.001 Mbit/s, got 0.0004"),
    (dict(src="tbh1", dst="tbh2", rate_mbps=5, rate_mechanism="magic"),
     "policy.rate_mechanism: must be one of host, meter, got 'magic'"),
    (dict(src="tbh1", dst="tbh2"), "policy: sets neither queue, host_queue nor rate_mbps"),
    (dict(src="tbh1", dst="tbh1", queue=1), "policy.dst: must differ from src"),
])
def test_invalid_policies_are_named(fields, message):
    table = PolicyTable(leaf_spine(1, 2, 1))
    with pytest.raises(PolicyError) as err:
        set_policy(table, FlowPolicy(**fields))
    assert str(err.value).startswith(message)
    assert table.listing() == []


def test_policy_from_dict_rejects_unknown_fields():
    with pytest.raises(PolicyError, match="^policy.prio: unknown field"):
        FlowPolicy.from_dict({"src": "tbh1", "dst": "tbh2", "prio": 1})


def test_sender_queue_is_one_filter_on_the_senders_nic_and_changes_kind_cleanly():
    table = PolicyTable(leaf_spine())
    pid, ops = set_policy(table, FlowPolicy("tbh1", "tbh3", "tcp", src_port=40000, dst_port=20000, queue=2, host_queue=1))
    assert [op[0] for op in ops] == ["rule_set", "host_tc"]
    assert ops[0][1].actions == (("set_dscp", queues.DSCP_OF_QUEUE[2]),)  # the receiver's queue, in the switches
    [filter_cmd] = ops[1][2]
    assert ops[1][1] == "tbh1" and f"prio {queues.HOST_FLOW_PREF_BASE + pid} u32" in filter_cmd  # names all 3
    assert "match ip sport 40000 0xffff" in filter_cmd and filter_cmd.endswith(f"flowid {queues.queue_classid(1)}")
    _, ops = set_policy(table, FlowPolicy("tbh1", "tbh3", "tcp", src_port=40000, dst_port=20000, queue=2, host_queue=3))
    assert [op[0] for op in ops] == ["host_tc", "host_tc"]  # old filter deleted, new one added; rule unchanged
    assert "filter del" in ops[0][2][0] and ops[1][2][0].endswith(f"flowid {queues.queue_classid(3)}")
    _, ops = set_policy(table, FlowPolicy("tbh1", "tbh3", "tcp", src_port=40000, dst_port=20000, queue=2, rate_mbps=5))
    assert [op[0] for op in ops] == ["host_tc", "host_tc"] and "del" in ops[0][2][0]
    with pytest.raises(PolicyError, match="^policy.host_queue: a flow's sender NIC class"):
        set_policy(table, FlowPolicy("tbh1", "tbh3", host_queue=1, rate_mbps=5))


def test_a_rate_only_change_is_one_class_command_and_no_switch_op():
    table = PolicyTable(leaf_spine())
    flow = dict(src="tbh1", dst="tbh3", proto="tcp", src_port=40000, dst_port=20000, rate_mechanism="host")
    pid, first = set_policy(table, FlowPolicy(**flow, rate_mbps=50.0))
    assert [op[0] for op in first] == ["rule_set", "host_tc"] and len(first[1][2]) == 3  # class, queue, filter
    same_pid, ops = set_policy(table, FlowPolicy(**flow, rate_mbps=12.5))
    assert same_pid == pid
    [(kind, host, [cmd])] = ops
    assert (kind, host) == ("host_tc", "tbh1")
    assert f"classid 1:{queues.HOST_FLOW_MINOR_BASE + pid:x} htb rate 12.5mbit ceil 12.5mbit" in cmd
    # Switching to a meter rebuilds: the rule now points at the meter, the host class goes.
    _, ops = set_policy(table, FlowPolicy(**{**flow, "rate_mechanism": "meter"}, rate_mbps=12.5))
    assert [op[0] for op in ops] == ["meter_set", "rule_set", "host_tc"]


def test_a_rollback_undoes_both_flows_of_an_id_the_failed_batch_freed_and_gave_to_another():
    """The batch removed id 1 (tbh1's host pair) and gave it to tbh2's port flow: undoing
    it deletes the new flow's filter (its own pref, its own sender) and rule, and sets the
    committed one's again."""
    table = PolicyTable(leaf_spine())
    pair = FlowPolicy("tbh1", "tbh3", queue=1, host_queue=1)
    assert set_policy(table, pair)[0] == 1
    port = FlowPolicy("tbh2", "tbh3", "udp", dst_port=9, queue=2, host_queue=2)
    ids, _ops, by_key = table.plan([("remove", 1), ("set", port)])
    assert ids == [1, 1]
    ops = table.rollback(by_key)
    tc = [(op[1], cmd) for op in ops if op[0] == "host_tc" for cmd in op[2]]
    assert [" ".join(cmd.split()[:5]) for host, cmd in tc if host == "tbh2"] == [
        "tc filter del dev tbh2-eth0", "tc qdisc del dev tbh2-eth0", "tc class del dev tbh2-eth0"]
    assert f"prio {queues.host_flow_pref(1, 'udp', None, 9)}" in tc[0][1]
    assert [cmd for host, cmd in tc if host == "tbh1"][-1] == _host_cmds(table, pair)[-1]  # set again as committed
    rules = [(op[0], op[1].match) for op in ops if op[0] in ("rule_del", "rule_set")]
    assert rules == [("rule_del", of_match(port, table.fabric)), ("rule_set", of_match(pair, table.fabric))]
    assert table.rollback(table.by_key) == []  # nothing changed: nothing to undo


def _host_cmds(table: PolicyTable, policy: FlowPolicy) -> list[str]:
    """The sender commands of ``policy`` set alone on an empty table (id 1)."""
    _pid, ops = set_policy(PolicyTable(table.fabric), policy)
    return [cmd for op in ops if op[0] == "host_tc" for cmd in op[2]]


# Sends 30 datagrams of 200 bytes to UDP port 9 and 30 to port 10 of the port's neighbour.
SEND_TO_PORTS = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for port in (9, 10):
    for _ in range(30):
        s.sendto(bytes(200), ("10.99.0.2", port))
"""


@pytest.mark.skipif(not (os.geteuid() == 0 and all(shutil.which(t) for t in ("unshare", "nsenter", "ip", "tc"))),
                    reason="needs root, unshare, nsenter, ip and tc (a network namespace of the test's own)")
def test_a_ports_sender_queue_wins_over_its_host_pairs_on_the_nic_whatever_their_ids():
    """Real tc on a queue tree of the test's own: the host pair's policy (id 1, queue 5)
    is set before its port's (id 2, queue 2), and the port's datagrams still take queue
    2 on the sender, as the port's rule wins in the switches; the pair's others, queue 5."""
    fabric = leaf_spine()
    table = PolicyTable(fabric)
    ops = [set_policy(table, FlowPolicy("tbh1", "tbh3", queue=5, host_queue=5))[1],
           set_policy(table, FlowPolicy("tbh1", "tbh3", "udp", dst_port=9, queue=2, host_queue=2))[1]]
    cmds = [cmd.replace("tbh1-eth0", "tbq0").replace(f"{fabric.host('tbh3').ip}/32", "10.99.0.2/32")
            for batch in ops for op in batch if op[0] == "host_tc" for cmd in op[2]]
    assert len(cmds) == 2 and all("10.99.0.2/32" in cmd for cmd in cmds)
    with queue_ports(1) as (pid, [port]):
        run_tc_batch(cmds, pid, where="policies")
        ns = f"/proc/{pid}/ns/net"
        subprocess.run(["nsenter", f"--net={ns}", sys.executable, "-c", SEND_TO_PORTS], check=True, timeout=60)
        counters = queues.parse_class_counters(subprocess.run(
            ["nsenter", f"--net={ns}", "tc", "-s", "class", "show", "dev", port], capture_output=True, text=True,
            check=True).stdout)
    assert counters[queues.queue_classid(2)]["packets"] == 30
    assert counters[queues.queue_classid(5)]["packets"] == 30
