"""experiments.platform.fidelity: the fabric counters every kind collects, and the
verdict every kind's summary gives (CPU, controller outages, the kind's own reasons)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from experiments.platform.cpu import BoxTimes, CpuMonitor, CpuSample
from experiments.platform.fidelity import (collect_fabric_counters, fidelity_fields, packet_losses,
                                           read_switch_loss_share)
from experiments.platform.spec import FIDELITY_DEFAULTS

PORTS = {"tbl1-eth1": {1: {"bytes": 1500, "packets": 1, "dropped": 0}, 7: {"bytes": 0, "packets": 0, "dropped": 10}}}
BALANCE = {"tbl1": {"received": 1000, "transmitted": 960, "receive_socket_drops": 5, "transmit_drops": 5},
           "tbs1": {"received": 1000, "transmitted": 1000, "receive_socket_drops": 0, "transmit_drops": 0}}


QDISCS = {"tbh1": {"bytes": 3000, "packets": 2, "dropped": 5}, "tbh2": {"bytes": 0, "packets": 0, "dropped": 1},
          "tbh3": None}  # a host whose NIC had no root qdisc to read
INTERFACES = {"tbh1-eth0": {"rx": 0, "tx": 3}, "tbl1-eth1": {"rx": 1, "tx": 5}}  # tbl1's transmit drops
TCP = {"tbh1": {"TcpOutSegs": 1000, "TcpRetransSegs": 12, "TcpExtTCPRetransFail": 2, "TcpExtTCPTimeouts": 3},
       "tbh2": {"TcpOutSegs": 200}}
SENDS = {"ovs0": {"sent": 1960, "refused": 10, "failed": 0}}


class FakeEmulation:
    def __init__(self, ports=PORTS, balance=BALANCE, qdiscs=QDISCS, interfaces=INTERFACES, tcp=TCP):
        self.ports, self.balance, self.qdiscs, self.interfaces, self.tcp = ports, balance, qdiscs, interfaces, tcp
        self.fabric = SimpleNamespace(hosts=[SimpleNamespace(name=name) for name in TCP])

    def host_counters(self, host, names):
        if isinstance(self.tcp, Exception):
            raise self.tcp
        return {name: self.tcp[host][name] for name in names if name in self.tcp[host]}

    def host_qdisc_counters(self):
        return self.qdiscs

    def interface_drops(self):
        if isinstance(self.interfaces, Exception):
            raise self.interfaces
        return self.interfaces

    def port_counters(self):
        if isinstance(self.ports, Exception):
            raise self.ports
        return self.ports

    def switch_packet_balance(self):
        if isinstance(self.balance, Exception):
            raise self.balance
        return self.balance

    def switch_send_counts(self):
        return SENDS


def monitor(idle: float, stolen: float = 0.0) -> CpuMonitor:
    """A CPU monitor that saw the box ``idle`` and ``stolen`` shares of the time."""
    cpu = CpuMonitor(0.0)
    cpu.per_second = [(1.0, idle, stolen, 0.0)]
    cpu.points = [CpuSample(0.0, BoxTimes(idle=0.0, steal=0.0, total=0.0), 0.0, 0.0),
                  CpuSample(10.0, BoxTimes(idle=idle * 1000, steal=stolen * 1000, total=1000.0), 0.0, 10.0)]
    return cpu


def test_both_counter_files_are_written_and_give_the_switch_loss_share(tmp_path):
    assert collect_fabric_counters(FakeEmulation(), tmp_path) == []
    assert json.loads((tmp_path / "switch_packets.json").read_text()) == BALANCE
    assert json.loads((tmp_path / "queue_counters.json").read_text())["tbl1-eth1"]["7"]["dropped"] == 10
    assert json.loads((tmp_path / "switch_sends.json").read_text()) == SENDS
    assert read_switch_loss_share(tmp_path) == 20 / 2000  # a queue's drops are no switch loss


def test_the_packet_losses_say_where_the_fabric_lost_packets(tmp_path):
    assert collect_fabric_counters(FakeEmulation(), tmp_path) == []
    assert packet_losses(tmp_path) == {"switch_queues": 10, "switch_sockets": 5, "switch_internal": 20,
                                       "interfaces": 9, "host_queues": 6}
    (tmp_path / "other").mkdir()
    unread = collect_fabric_counters(FakeEmulation(interfaces=OSError("ip: not found")), tmp_path / "other")
    assert unread == ["interface_drops.json: OSError: ip: not found"]
    assert packet_losses(tmp_path / "other")["interfaces"] is None
    assert packet_losses(tmp_path / "other")["host_queues"] == 6
    assert set(packet_losses(tmp_path / "none").values()) == {None}  # a run that failed before the counters


def test_a_balance_recorded_before_its_socket_and_send_drops_were_counted_still_reads(tmp_path):
    """Runs recorded before 2026-12-01's counts kept received and transmitted only:
    their sockets' drops are unknown, not zero, and fell inside the switches."""
    collect_fabric_counters(FakeEmulation(balance={"tbl1": {"received": 1000, "transmitted": 960}}), tmp_path)
    losses = packet_losses(tmp_path)
    assert losses["switch_sockets"] is None and losses["switch_internal"] == 30


def test_every_kind_keeps_the_hosts_tcp_account(tmp_path):
    assert collect_fabric_counters(FakeEmulation(), tmp_path) == []
    assert json.loads((tmp_path / "tcp_counters.json").read_text()) == TCP
    fields = fidelity_fields(monitor(idle=0.5), FIDELITY_DEFAULTS, [], tmp_path)
    assert fields["tcp"]["segments"] == 1200 and fields["tcp"]["retransmitted_on_wire"] == 10
    (tmp_path / "other").mkdir()
    unread = collect_fabric_counters(FakeEmulation(tcp=OSError("nstat: not found")), tmp_path / "other")
    assert unread == ["tcp_counters.json: OSError: nstat: not found"]
    fields = fidelity_fields(monitor(idle=0.5), FIDELITY_DEFAULTS, [], tmp_path / "other")
    assert (fields["tcp"], fields["tcp_retransmitted_share"], fields["tcp_timeouts"]) == (None, None, None)


def test_a_counter_that_cannot_be_read_is_named_and_the_other_still_written(tmp_path):
    unread = collect_fabric_counters(FakeEmulation(balance=OSError("ip: not found")), tmp_path)
    assert unread == ["switch_packets.json: OSError: ip: not found"]
    assert (tmp_path / "queue_counters.json").exists() and not (tmp_path / "switch_packets.json").exists()
    assert read_switch_loss_share(tmp_path) is None
    (tmp_path / "other").mkdir()
    unread = collect_fabric_counters(FakeEmulation(ports=RuntimeError("tc failed")), tmp_path / "other")
    assert unread == ["queue_counters.json: RuntimeError: tc failed"]
    assert (tmp_path / "other" / "switch_packets.json").exists()


def test_a_run_with_cpu_to_spare_and_no_outage_is_trustworthy_and_reports_its_switch_loss(tmp_path):
    collect_fabric_counters(FakeEmulation(), tmp_path)
    fields = fidelity_fields(monitor(idle=0.5), FIDELITY_DEFAULTS, [], tmp_path)
    shares = {"cpu_idle_share": 0.5, "cpu_stolen_share": 0.0, "cpu_throttled_share": 0.0}
    tcp = {"segments": 1200, "retransmissions_tried": 12, "retransmissions_tried_share": 12 / 1200,
           "retransmitted_on_wire": 10, "retransmitted_on_wire_share": 10 / 1200, "timeouts": 3, "loss_probes": 0,
           "spurious_timeouts": 0, "retransmissions_held_in_sender_queue": 0, "fast_retransmits": 0,
           "sack_recoveries": 0, "retransmissions_refused_by_sender_queue": 2, "dsacks_received": 0,
           "reorderings_seen": 0, "receiver_drops": 0}
    assert fields == {**shares, "controller_outages": [], "switch_loss_share": 20 / 2000,
                      "packet_losses": {"switch_queues": 10, "switch_sockets": 5, "switch_internal": 20,
                                        "interfaces": 9, "host_queues": 6},
                      "tcp": tcp, "tcp_retransmitted_share": 10 / 1200, "tcp_timeouts": 3,
                      "fidelity": {**shares, "untrustworthy_reasons": [], "trustworthy": True},
                      "trustworthy": True}


def test_reasons_come_from_the_cpu_then_every_outage_then_the_kind(tmp_path):
    outages = [{"start_s": 12.34, "end_s": 15.0}, {"start_s": 40.0, "end_s": None}]
    fields = fidelity_fields(monitor(idle=0.01, stolen=0.2), FIDELITY_DEFAULTS, outages, tmp_path,
                             ["an installed rate is 9.0% off its OES target"])
    reasons = fields["fidelity"]["untrustworthy_reasons"]
    assert reasons[0] == "CPU idle share 0.01 < 0.05" and reasons[1].startswith("the box took 0.20")
    assert reasons[2:] == ["controller outage at 12.3 s", "controller outage at 40.0 s",
                           "an installed rate is 9.0% off its OES target"]
    assert fields["trustworthy"] is False and fields["fidelity"]["trustworthy"] is False
    assert fields["controller_outages"] == outages and fields["switch_loss_share"] is None  # nothing collected
    # a kind that judges its outages itself (the timetable: by the windows each touched)
    judged = fidelity_fields(monitor(idle=0.9), FIDELITY_DEFAULTS, outages, tmp_path, outage_reasons=[])
    assert judged["trustworthy"] is True and judged["controller_outages"] == outages


@pytest.mark.parametrize("reasons", [["a kind's reason"], ()])
def test_the_kinds_reasons_alone_decide_when_the_cpu_and_controller_were_fine(tmp_path, reasons):
    fields = fidelity_fields(monitor(idle=0.9), FIDELITY_DEFAULTS, [], tmp_path, reasons)
    assert fields["fidelity"]["untrustworthy_reasons"] == list(reasons)
    assert fields["trustworthy"] is (not reasons)


def test_a_policy_change_applied_more_than_a_second_late_is_a_reason():
    from experiments.platform.fidelity import delayed_changes
    changes = [{"flow": "low", "at_s": 10, "applied_s": 10.9}, {"flow": "high", "at_s": 12, "applied_s": 13.25}]
    delayed, reasons = delayed_changes(changes, "flow")
    assert delayed == changes[1:] and reasons == ["policy change of high due at 12 s applied at 13.2 s"]


def box_run(idle_per_second: list[float], t0_epoch: float = 1000.0) -> CpuMonitor:
    """A monitor sampled once a second (epoch ``t0_epoch`` + i) of a box idle the given
    share in each second."""
    cpu = CpuMonitor(0.0)
    idle = total = 0.0
    cpu.points = [CpuSample(0.0, BoxTimes(0.0, 0.0, 0.0), 0.0, t0_epoch)]
    for i, share in enumerate(idle_per_second, 1):
        idle, total = idle + 100 * share, total + 100
        cpu.points.append(CpuSample(float(i), BoxTimes(idle, 0.0, total), 0.0, t0_epoch + i))
    cpu.per_second = [(float(i), share, 0.0, 0.0) for i, share in enumerate(idle_per_second, 1)]
    return cpu


def test_a_kind_can_have_the_cpu_judged_over_its_traffic_window_only(tmp_path):
    # 40 s of start-up with the box saturated (DGL importing), then 4 s of iterations at 40% idle
    cpu = box_run([0.0] * 40 + [0.4] * 4)
    whole = fidelity_fields(cpu, FIDELITY_DEFAULTS, [], tmp_path)
    assert whole["trustworthy"] is False and whole["cpu_idle_share"] == pytest.approx(1.6 / 44)
    assert "cpu_window_s" not in whole
    windowed = fidelity_fields(cpu, FIDELITY_DEFAULTS, [], tmp_path, cpu_window=(1040.2, 1044.0))
    assert windowed["cpu_idle_share"] == pytest.approx(0.4)  # the samples inside: seconds 42-44
    assert windowed["cpu_window_s"] == windowed["fidelity"]["cpu_window_s"] == [40.2, 44.0]
    assert windowed["trustworthy"] is True
    # a window saturated itself is judged so, whatever the run around it
    busy = fidelity_fields(box_run([0.9] * 10 + [0.01] * 4), FIDELITY_DEFAULTS, [], tmp_path,
                           cpu_window=(1010.0, 1014.0))
    assert busy["fidelity"]["untrustworthy_reasons"] == ["CPU idle share 0.01 < 0.05"]


def test_a_window_shorter_than_the_sampling_is_judged_from_the_samples_around_it():
    cpu = box_run([0.1, 0.2, 0.6, 0.8])  # samples at 1000, 1001, ..., 1004
    assert cpu.summary((1002.3, 1002.8))["cpu_idle_share"] == pytest.approx(0.6)  # second 3 only
    assert cpu.summary((1001.5, 1002.5))["cpu_idle_share"] == pytest.approx(0.4)  # seconds 2-3, around it
    assert cpu.summary((990.0, 1100.0)) == cpu.summary()  # a window past both ends: the whole run
    # never one sample against itself (no time between them: idle 0, a false verdict)
    assert cpu.summary((1002.0, 1002.0))["cpu_idle_share"] == pytest.approx(0.6)  # on a sample: the second after
    assert cpu.summary((1004.0, 1004.0))["cpu_idle_share"] == pytest.approx(0.8)  # on the last: the last second
    assert cpu.summary((900.0, 950.0))["cpu_idle_share"] == pytest.approx(0.1)  # before the first: the first second
    assert cpu.summary((1200.0, 1300.0))["cpu_idle_share"] == pytest.approx(0.8)  # after the last: the last second


def test_the_traffic_window_spans_the_sampling_intervals_that_carried_more_than_chatter():
    from experiments.platform.fidelity import TRAFFIC_MIN_BYTES, traffic_window
    sent = [0, 0, 300, 300, 300 + 2 * TRAFFIC_MIN_BYTES, 5 * TRAFFIC_MIN_BYTES, 5 * TRAFFIC_MIN_BYTES + 90]
    samples = [(0.5 * i, {"tbh1": (s, 0), "tbh2": (s // 2, 7)}) for i, s in enumerate(sent)]
    assert traffic_window(samples, 100.0) == (101.5, 102.5)  # seconds 1.5-2.5; the ARP-sized steps left out
    assert traffic_window(samples[:4], 100.0) is None and traffic_window(samples, None) is None


def test_a_hosts_counters_are_nstats_absolute_ones_in_its_namespace(monkeypatch):
    """The one reader of the hosts' TCP/UDP counters (the bench's and cojob's): nstat's
    names; a counter the kernel lacks reads 0."""
    from types import SimpleNamespace

    from experiments.platform import net
    ran = []

    def nstat(cmd, **_):
        ran.append(cmd)
        return SimpleNamespace(stdout=json.dumps({"kernel": {"TcpOutSegs": 900, "TcpRetransSegs": 9,
                                                             "UdpRcvbufErrors": 2}}))

    monkeypatch.setattr(net.subprocess, "run", nstat)
    em = object.__new__(net.Emulation)
    monkeypatch.setattr(em, "host", lambda name: SimpleNamespace(pid=4242), raising=False)
    assert em.host_counters("tbh1", ("TcpOutSegs", "TcpRetransSegs", "TcpExtTCPTimeouts")) == {
        "TcpOutSegs": 900, "TcpRetransSegs": 9, "TcpExtTCPTimeouts": 0}
    assert ran == [["nsenter", "--net=/proc/4242/ns/net", "nstat", "-asz", "--json"]]
