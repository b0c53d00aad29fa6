import pytest

from topologies import fabric as fab
from topologies import queues, units


def test_leaf_spine_plan():
    f = fab.leaf_spine(spines=2, leaves=3, hosts_per_leaf=2, host_mbps=100, fabric_mbps=50)
    assert [s.name for s in f.switches] == ["tbs1", "tbs2", "tbl1", "tbl2", "tbl3"]
    assert [s.dpid for s in f.switches] == [0x1001, 0x1002, 0x2001, 0x2002, 0x2003]
    assert [h.name for h in f.hosts] == [f"tbh{i}" for i in range(1, 7)]
    h3 = f.host("tbh3")
    assert (h3.ip, h3.mac, h3.switch, h3.port) == ("10.0.0.3", "02:7b:00:00:00:03", "tbl2", 1)
    assert len(f.links) == 6 + 3 * 2
    assert f.uplinks("tbl2") == [(3, "tbs1"), (4, "tbs2")]
    assert f.port_towards("tbs2", "tbl3") == 3
    assert {link.mbps for link in f.links if link.a.startswith("tbh")} == {100.0}
    assert {link.mbps for link in f.links if link.a.startswith("tbl")} == {50.0}
    # every switch port (both directions of every switch link) gets a queue tree
    assert len(f.switch_ports()) == 6 + 2 * 6


def test_addressing_past_255_hosts():
    f = fab.star(hosts=300)
    assert f.host("tbh256").ip == "10.0.1.0"
    assert f.host("tbh300").mac == "02:7b:00:00:01:2c"
    assert len({h.ip for h in f.hosts}) == 300


def test_host_rate_overrides_make_heterogeneous_nics():
    f = fab.leaf_spine(1, 2, 2, host_mbps=100, host_mbps_overrides={"tbh4": 25})
    rates = {link.a: link.mbps for link in f.links if link.a.startswith("tbh")}
    assert rates == {"tbh1": 100.0, "tbh2": 100.0, "tbh3": 100.0, "tbh4": 25.0}


def test_fabric_round_trips_through_dict():
    f = fab.leaf_spine(2, 2, 1)
    assert fab.Fabric.from_dict(f.to_dict()) == f


@pytest.mark.parametrize("kwargs, message", [
    (dict(hosts_per_leaf=0), "hosts_per_leaf: must be an integer >= 1, got 0"),
    (dict(host_mbps=5000), "host_mbps: 5000 Mbit/s cannot be emulated on this box (allowed 1..1000); the simulator "
                           "takes it: backend: simulated, trainbed simulate (trainbed validate --simulated checks it)"),
    # a rate no machine could take is not blamed on the box
    (dict(host_mbps=-100), "host_mbps: must be at least 1 Mbit/s, got -100"),
    (dict(fabric_mbps=float("nan")), "fabric_mbps: must be at least 1 Mbit/s, got nan"),
    (dict(fabric_mbps="fast"), "fabric_mbps: must be a number of Mbit/s"),
    (dict(host_mbps_overrides={"tbh99": 10}), "host_mbps_overrides: 'tbh99' is not a host"),
    (dict(spines=True), "spines: must be an integer"),
])
def test_invalid_leaf_spine(kwargs, message):
    with pytest.raises(fab.TopologyError) as err:
        fab.leaf_spine(**kwargs)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_star_needs_hosts_and_unknown_kind_is_named():
    with pytest.raises(fab.TopologyError, match="^hosts: must be an integer >= 1"):
        fab.star(hosts=0)
    with pytest.raises(fab.TopologyError, match="^topology.kind: unknown 'ring'"):
        fab.build("ring")
    with pytest.raises(fab.TopologyError, match="^topology.racks: unknown field for star"):
        fab.build("star", racks=2)


def test_duplicate_names_are_rejected():
    f = fab.star(hosts=2)
    f.hosts.append(f.hosts[0])
    with pytest.raises(fab.TopologyError, match="^names: duplicate node name 'tbh1'"):
        fab._check_names(f)


def test_dscp_map_is_one_to_one_and_reserves_queue_zero():
    assert len(queues.DSCP_OF_QUEUE) == queues.N_QUEUES == 8
    assert len(set(queues.DSCP_OF_QUEUE.values())) == 8
    assert queues.DSCP_OF_QUEUE[queues.LOWEST_QUEUE] == 0  # unmarked traffic is the lowest queue
    assert queues.CONTROL_QUEUE not in queues.SCHEDULER_QUEUES
    assert all(0 <= d < 64 for d in queues.DSCP_OF_QUEUE.values())


def test_switch_port_tree_is_strict_priority_over_htb():
    cmds = queues.switch_port_cmds("tbl1-eth3", 100)
    assert cmds[0] == "tc qdisc replace dev tbl1-eth3 root handle 1: htb default 10"
    assert "classid 1:1 htb rate 100mbit ceil 100mbit" in cmds[1]
    classes = [c for c in cmds if "parent 1:1 classid" in c]
    assert len(classes) == 8
    for q, c in enumerate(classes):
        assert f"classid {queues.queue_classid(q)} " in c and c.endswith(f"prio {q}")
        assert "ceil 100mbit" in c and "rate 2mbit" in c
    leaves = [c for c in cmds if "bfifo" in c]
    assert len(leaves) == 8 and all(f"limit {queues.LEAF_LIMIT_BYTES}" in c for c in leaves)
    filters = [c for c in cmds if " filter " in c]
    tos = {int(c.split("match ip tos ")[1].split()[0], 16): c.split("flowid ")[1] for c in filters if "tos" in c}
    assert tos == {d << 2: queues.queue_classid(q) for q, d in queues.DSCP_OF_QUEUE.items()}
    assert filters[-1].endswith(f"match u32 0 0 flowid {queues.queue_classid(7)}")


def test_weighted_queues_share_one_prio_by_weight_below_a_strict_control_queue():
    weights = queues.check_weights([8, 4, 2, 1, 1, 1, 1])
    cmds = queues.switch_port_cmds("tbl1-eth3", 100, weights=weights)
    classes = [c for c in cmds if "parent 1:1 classid" in c]
    assert classes[0].endswith("prio 0") and "rate 2mbit" in classes[0] and "quantum" not in classes[0]
    rates, quanta = [], []
    for q, c in enumerate(classes[1:], 1):
        assert f"classid {queues.queue_classid(q)} " in c and c.endswith("prio 1") and "ceil 100mbit" in c
        rates.append(float(c.split(" rate ")[1].split("mbit")[0]))
        quanta.append(int(c.split(" quantum ")[1].split()[0]))
    assert sum(rates) == pytest.approx(14)  # strict priority's guarantees in all (7 x 2%): a NIC's rate
    assert [r / rates[-1] for r in rates] == pytest.approx([8, 4, 2, 1, 1, 1, 1], rel=1e-5)  # classes stay in it
    assert quanta == [8 * 9000, 4 * 9000, 2 * 9000, 9000, 9000, 9000, 9000]
    host = queues.host_base_cmds("tbl1-eth3", 100, weights)  # the sender NIC weighted alike
    assert [c for c in host if "parent 1:1 classid" in c] == classes
    small = queues.switch_port_cmds("tbl1-eth3", 100, weights=queues.check_weights([16, 8, 4, 2, 2, 2, 2]), mtu=1500)
    assert [int(c.split(" quantum ")[1].split()[0]) for c in small if " quantum " in c] == [
        8 * 1500, 4 * 1500, 2 * 1500, 1500, 1500, 1500, 1500]  # the least weight's quantum: one frame
    assert cmds[len(classes) * 2 + 2:] == queues.switch_port_cmds("tbl1-eth3", 100)[len(classes) * 2 + 2:]  # filters


@pytest.mark.parametrize("weights, says", [
    ([1] * 6, "must be a list of 7 weights, one per queue 1..7"),
    ("8,4", "must be a list of 7 weights"),
    ([1, 1, 1, 0, 1, 1, 1], r"every weight must be a finite number > 0; item 3 \(queue 4\) is 0$"),
    ([1, 1, 1, True, 1, 1, 1], r"item 3 \(queue 4\) is True$"),
    ([float("inf")] * 7, r"item 0 \(queue 1\) is inf$"),
    (["1e3"] + [1] * 6, r"item 0 \(queue 1\) is '1e3' \(YAML reads 1e3 as text: write 1.0e3\)$"),
    (["high"] + [1] * 6, r"item 0 \(queue 1\) is 'high'$"),
    ([101, 1, 1, 1, 1, 1, 1], "at most 100 times the least"),
])
def test_queue_weights_are_seven_positive_numbers_within_a_ratio(weights, says):
    with pytest.raises(ValueError, match=says):
        queues.check_weights(weights)


def test_huge_weights_are_their_ratios():
    cmds = queues.switch_port_cmds("x", 100, weights=queues.check_weights([1e308, 5e307, 1e307, 1e307, 1e307,
                                                                            1e307, 1e307]))
    assert [int(c.split(" quantum ")[1].split()[0]) for c in cmds if " quantum " in c] == [
        90000, 45000, 9000, 9000, 9000, 9000, 9000]


def test_host_nic_tree_is_the_switch_tree_with_a_nic_deep_queue():
    host = queues.host_base_cmds("tbh1-eth0", 100)
    switch = queues.switch_port_cmds("tbh1-eth0", 100)
    assert len(host) == len(switch)
    differ = [(h, s) for h, s in zip(host, switch) if h != s]
    assert len(differ) == 8 and all(f"limit {queues.HOST_LEAF_LIMIT_BYTES}" in h for h, _ in differ)
    assert queues.HOST_LEAF_LIMIT_BYTES >= 1000 * 1500  # a NIC's txqueuelen of MTU packets


def test_host_nics_run_at_the_fabrics_mtu_and_segment_only_as_asked():
    assert queues.host_nic_cmds("tbh1-eth0", "wire", 9000) == [
        ["ip", "link", "set", "dev", "tbh1-eth0", "mtu", "9000"],
        ["ethtool", "-K", "tbh1-eth0", "tso", "off", "gso", "off"],
        ["ip", "link", "set", "dev", "tbh1-eth0", "gso_max_segs", "1"]]
    assert queues.host_nic_cmds("tbh1-eth0", "offload") == [["ip", "link", "set", "dev", "tbh1-eth0", "mtu", "1500"]]
    for bad in (1499, 9001):
        with pytest.raises(ValueError, match="mtu"):
            queues.mtu_cmd("tbh1-eth0", bad)
    with pytest.raises(ValueError, match="segmentation"):
        queues.host_nic_cmds("tbh1-eth0", "gro")


def test_a_switch_send_buffer_holds_every_queue_of_its_ports_full():
    # 3 ports x 8 queues x 150 KB, twice over for the kernel's per-packet overhead
    assert queues.switch_send_buffer_bytes(3) == 7_200_000
    assert queues.switch_send_buffer_bytes(2, 30_000) == 960_000  # a spec's smaller switch buffers
    assert queues.switch_send_buffer_bytes(1) > 208 * 1024  # the kernel's default, shared by all ports


def test_a_switch_port_socket_holds_a_burst_and_what_its_link_brings_while_the_switch_waits():
    # a 150 KB burst + 100 ms at 100 Mbit/s (1.25 MB) = 1.4 MB, twice over
    assert queues.switch_receive_buffer_bytes(100) == 2_800_000
    assert queues.switch_receive_buffer_bytes(1000) > queues.switch_receive_buffer_bytes(100)
    assert queues.switch_receive_buffer_bytes(1) > 208 * 1024  # the kernel's default: 8 ms at 100 Mbit/s


def test_host_route_sets_tcps_minimum_rto_and_congestion_control_only_when_asked():
    assert queues.host_route_cmds("tbh1-eth0", "10.0.0.0/16", None) == []
    assert queues.host_route_cmds("tbh1-eth0", "10.0.0.0/16", 40) == [
        ["ip", "route", "replace", "10.0.0.0/16", "dev", "tbh1-eth0", "rto_min", "40ms"]]
    assert queues.host_route_cmds("tbh1-eth0", "10.0.0.0/16", 40, "cubic") == [
        ["ip", "route", "replace", "10.0.0.0/16", "dev", "tbh1-eth0", "rto_min", "40ms", "congctl", "cubic"]]
    assert queues.host_route_cmds("tbh1-eth0", "10.0.0.0/16", congestion="bbr")[0][-2:] == ["congctl", "bbr"]


def test_host_flow_commands_add_and_remove_the_same_class():
    match = queues.host_flow_match("10.0.0.2", "tcp", None, 5201)
    assert match == "match ip dst 10.0.0.2/32 match ip protocol 6 0xff match ip dport 5201 0xffff"
    pref = queues.host_flow_pref(3, "tcp", None, 5201)
    add = queues.host_flow_set_cmds("tbh1-eth0", 3, pref, 40, match)
    assert "classid 1:103 htb rate 40mbit ceil 40mbit" in add[0]
    assert add[2].endswith(f"{match} flowid 1:103") and "prio 4103" in add[2]
    remove = queues.host_flow_remove_cmds("tbh1-eth0", 3, pref)
    assert remove == ["tc filter del dev tbh1-eth0 parent 1: protocol ip prio 4103",
                      "tc qdisc del dev tbh1-eth0 parent 1:103", "tc class del dev tbh1-eth0 classid 1:103"]


def test_a_sender_tries_the_more_specific_flow_filter_first_as_the_switches_do():
    """tc classifies by the first filter (ascending pref) that matches: a port's policy
    must come before its host pair's whatever their ids, and every flow filter before
    the DSCP filters a queue tree ends with."""
    pair, proto, port, both = (queues.host_flow_pref(1, *fields) for fields in
                               ((None, None, None), ("tcp", None, None), ("tcp", None, 5201), ("tcp", 40000, 5201)))
    assert both < port < proto < pair
    last = queues.MAX_POLICY_SLOTS  # ids run 1..MAX_POLICY_SLOTS
    assert queues.host_flow_pref(last, "udp", 1, 2) < queues.host_flow_pref(1, "udp", 1, None)
    assert queues.host_flow_pref(2, "tcp", None, 5201) > queues.host_flow_pref(1, "tcp", 5201, None)  # ties: by id
    assert queues.host_flow_pref(1, "udp", 1, 2) > queues.HOST_FLOW_PREF_BASE
    assert queues.host_flow_pref(last, None, None, None) < queues.DSCP_FILTER_PREF < 0xFFFF  # tc's pref: 16 bits


TC_OUTPUT = """class htb 1:11 parent 1:1 leaf 11: prio 1 rate 1Mbit ceil 100Mbit burst 150000b cburst 150000b
 Sent 123456 bytes 89 pkt (dropped 2, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
class htb 1:1 root rate 100Mbit ceil 100Mbit burst 150000b cburst 150000b
 Sent 999 bytes 9 pkt (dropped 0, overlimits 0 requeues 0)
class htb 1:17 parent 1:1 leaf 17: prio 7 rate 1Mbit ceil 100Mbit burst 150000b cburst 150000b
 Sent 5 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)
"""


def test_counters_parse_back_per_queue():
    assert queues.parse_class_counters(TC_OUTPUT)["1:1"] == {"bytes": 999, "packets": 9, "dropped": 0}
    assert queues.queue_counters(TC_OUTPUT) == {1: {"bytes": 123456, "packets": 89, "dropped": 2},
                                                7: {"bytes": 5, "packets": 1, "dropped": 0}}


# ``tc -s qdisc show`` of an htb root whose 3000-byte leaf refused 46 of 49 datagrams
# (this box's tc, in a namespace of its own, 2026-11-29)
QDISC_OUTPUT = """qdisc htb 1: root refcnt 3 r2q 10 default 0x17 direct_packets_stat 0 direct_qlen 1000
 Sent 2974 bytes 3 pkt (dropped 46, overlimits 2 requeues 0)
 backlog 2884b 2p requeues 0
qdisc bfifo 17: parent 1:17 limit 3000b
 Sent 2974 bytes 3 pkt (dropped 7, overlimits 0 requeues 0)
 backlog 2884b 2p requeues 0
"""


def test_the_root_qdisc_counters_are_the_roots_not_a_leafs():
    assert queues.root_qdisc_counters(QDISC_OUTPUT) == {"bytes": 2974, "packets": 3, "dropped": 46}
    leaf_first = "\n".join(QDISC_OUTPUT.splitlines()[3:] + QDISC_OUTPUT.splitlines()[:3])
    assert queues.root_qdisc_counters(leaf_first)["dropped"] == 46
    assert queues.root_qdisc_counters("qdisc bfifo 17: parent 1:17 limit 3000b\n Sent 1 bytes 1 pkt (dropped 0, "
                                      "overlimits 0 requeues 0)\n") is None
    assert queues.root_qdisc_counters("") is None


@pytest.mark.parametrize("args, field", [((2, 1, 998), "hosts_per_leaf"), ((998, 1, 2), "spines"),
                                         ((1, 1000, 1), "leaves"), ((1000, 1, 1), "spines"),
                                         ((1, 1000, 70), "leaves"),  # switch numbers before the host count
                                         ((1, 999, 70), "leaves"), ((1, 100, 700), "hosts_per_leaf")])
def test_too_many_ports_or_switches_name_the_field_that_makes_them(args, field):
    spines, leaves, hosts_per_leaf = args
    with pytest.raises(fab.TopologyError, match=f"^{field}: "):
        fab.leaf_spine(spines, leaves, hosts_per_leaf)


def test_host_mbps_is_each_hosts_nic_rate_in_host_order():
    f = fab.leaf_spine(1, 2, 2, host_mbps=100, host_mbps_overrides={"tbh3": 25})
    assert f.host_mbps() == {"tbh1": 100.0, "tbh2": 100.0, "tbh3": 25.0, "tbh4": 100.0}
    assert list(f.host_mbps()) == [h.name for h in f.hosts]


def test_units_convert_mbit_per_s_and_bytes():
    assert units.mbps_to_bytes_per_s(100) == 12_500_000
    assert units.bytes_to_mbit(12_500_000) == 100
    assert units.mbps_of_bytes(12_500_000, 2) == 50
    assert units.transfer_s(12_500_000, 50) == 2
    # The callers' order is kept: bytes x 8 / s / 1e6 is not bytes x 8 / 1e6 / s in the last bit.
    assert units.mbps_of_bytes(1, 1.1) == 1 * 8 / 1.1 / 1e6 != units.bytes_to_mbit(1) / 1.1
