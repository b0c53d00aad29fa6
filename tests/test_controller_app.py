"""controller/app.py's OpenFlow logic against a fake switch: no OVS, no socket, no root.

The datapath is a stub as os-ken's own unit tests make one (``ProtocolDesc``: the real
``ofproto_v1_3`` and ``ofproto_v1_3_parser``), with the set_xid/send_msg of
``os_ken.controller.controller.Datapath``: every message the app sends is serialized
for real and decoded back from its bytes, so the assertions are on what a switch would
read. Behind it, ``FakeSwitch`` keeps the flows, groups and meters an OpenFlow 1.3
switch would, answers with the errors the spec names (an unknown group or meter, one
that exists) and answers barriers; its errors and barrier replies are parsed from
bytes by os-ken and handed to the app's own handlers, in OpenFlow's order (an error
before the barrier reply behind it), synchronously, so a call's barrier wait returns at
once and the tests need no thread or event loop.

The app is built through its real ``__init__`` with os-ken's hub seams replaced:
``hub.StreamServer`` by a recorder (no socket is opened) and ``hub.spawn`` by a list
the tests run from, so a switch's installation runs when and where a test says.
The management API is called as the socket's handler calls it: ``_handle`` for the
policy calls, ``_serve_client`` (over an in-memory connection) for the one-line
error replies. Host tc runs through ``controller.app.run_tc_batch``, replaced by a
recorder where a test needs it.

Fabric: topologies' leaf-spine with 2 spines, 2 leaves, 2 hosts per leaf. Its
address plan (topologies/fabric.py) is spelled out below as literals, so these tests
do not derive their expectations from the code under test.
"""
from __future__ import annotations

import io
import json
import os
import struct
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
from os_ken.controller import ofp_event
from os_ken.lib import hub
from os_ken.lib.packet import arp, ethernet, ipv4, packet
from os_ken.ofproto import ofproto_parser, ofproto_protocol
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller import app as app_mod
from controller.app import TrainbedController
from controller.hostnet import TcError
from controller.policy import PolicyError
from topologies.fabric import leaf_spine

FABRIC = leaf_spine(spines=2, leaves=2, hosts_per_leaf=2)
SPINE1, SPINE2, LEAF1, LEAF2 = 0x1001, 0x1002, 0x2001, 0x2002
ALL = (SPINE1, SPINE2, LEAF1, LEAF2)
# tbh1, tbh2 on tbl1 ports 1, 2; tbh3, tbh4 on tbl2 ports 1, 2; a leaf's ports 3 and 4
# go to spines 1 and 2; spine port l goes to leaf l.
IP = {1: "10.0.0.1", 2: "10.0.0.2", 3: "10.0.0.3", 4: "10.0.0.4"}
MAC = {1: "02:7b:00:00:00:01", 2: "02:7b:00:00:00:02", 3: "02:7b:00:00:00:03", 4: "02:7b:00:00:00:04"}
FORWARD = 1  # the forwarding table; policies live in table 0
ETH_IP, ETH_ARP = 0x0800, 0x0806
CONTROLLER = ("controller", ofp.OFPCML_NO_BUFFER)  # output to the controller, whole packet

POLICY = {"src": "tbh3", "dst": "tbh1", "proto": "tcp", "dst_port": 5201}  # enters at tbl2
POLICY_MATCH = {"eth_type": ETH_IP, "ipv4_src": "10.0.0.3", "ipv4_dst": "10.0.0.1", "ip_proto": 6, "tcp_dst": 5201}
POLICY_PRIORITY = 1000 + 2 * 4000 + 3999  # PRIO_POLICY_BASE, 2 fields named (proto, dst_port), id 1


# --- the wire ---------------------------------------------------------------------------

def from_switch(dp, msg_type: int, body: bytes = b"", xid: int = 0):
    """A message from the switch, parsed by os-ken from its bytes as a Datapath would."""
    length = ofp.OFP_HEADER_SIZE + len(body)
    buf = bytearray(struct.pack(ofp.OFP_HEADER_PACK_STR, ofp.OFP_VERSION, msg_type, length, xid) + body)
    return ofproto_parser.msg(dp, ofp.OFP_VERSION, msg_type, length, xid, buf)


def _action(a) -> tuple:
    if isinstance(a, parser.OFPActionOutput):
        return ("controller", a.max_len) if a.port == ofp.OFPP_CONTROLLER else ("output", a.port)
    if isinstance(a, parser.OFPActionGroup):
        return ("group", a.group_id)
    if isinstance(a, parser.OFPActionSetField):
        return ("set_field", a.key, a.value)
    raise AssertionError(f"unexpected action {a}")


def _actions(buf, offset: int, end: int) -> list:
    out = []
    while offset < end:
        a = parser.OFPAction.parser(buf, offset)
        out.append(_action(a))
        offset += a.len
    return out


def _instruction(i) -> tuple:
    if isinstance(i, parser.OFPInstructionGotoTable):
        return ("goto", i.table_id)
    if isinstance(i, parser.OFPInstructionMeter):
        return ("meter", i.meter_id)
    if isinstance(i, parser.OFPInstructionActions):
        assert i.type == ofp.OFPIT_APPLY_ACTIONS, i
        return ("apply", [_action(a) for a in i.actions])
    raise AssertionError(f"unexpected instruction {i}")


def decode(msg) -> SimpleNamespace:
    """What a switch reads from ``msg``'s bytes (``msg.buf`` after serialize)."""
    buf = bytes(msg.buf)
    version, msg_type, length, xid = ofproto_parser.header(buf)
    assert version == ofp.OFP_VERSION and length == len(buf)
    body = ofp.OFP_HEADER_SIZE
    if msg_type == ofp.OFPT_FLOW_MOD:
        fm = ofproto_parser.msg(None, version, msg_type, length, xid, bytearray(buf))
        return SimpleNamespace(kind="flow", xid=xid, table=fm.table_id, priority=fm.priority, command=fm.command,
                               cookie=fm.cookie, cookie_mask=fm.cookie_mask, out_port=fm.out_port,
                               out_group=fm.out_group, match=dict(fm.match.items()),
                               instructions=[_instruction(i) for i in fm.instructions])
    if msg_type == ofp.OFPT_GROUP_MOD:
        command, gtype, group_id = struct.unpack_from(ofp.OFP_GROUP_MOD_PACK_STR, buf, body)
        buckets, offset = [], ofp.OFP_GROUP_MOD_SIZE
        while offset < length:
            b = parser.OFPBucket.parser(buf, offset)
            buckets.append(SimpleNamespace(weight=b.weight, watch_port=b.watch_port, watch_group=b.watch_group,
                                           actions=[_action(a) for a in b.actions]))
            offset += b.len
        return SimpleNamespace(kind="group", xid=xid, command=command, type=gtype, group_id=group_id,
                               buckets=buckets)
    if msg_type == ofp.OFPT_METER_MOD:
        command, flags, meter_id = struct.unpack_from(ofp.OFP_METER_MOD_PACK_STR, buf, body)
        bands, offset = [], ofp.OFP_METER_MOD_SIZE
        while offset < length:
            band = parser.OFPMeterBandHeader.parser(buf, offset)
            bands.append((type(band).__name__, band.rate, band.burst_size))
            offset += band.len
        return SimpleNamespace(kind="meter", xid=xid, command=command, flags=flags, meter_id=meter_id, bands=bands)
    if msg_type == ofp.OFPT_PACKET_OUT:
        buffer_id, in_port, actions_len = struct.unpack_from(ofp.OFP_PACKET_OUT_PACK_STR, buf, body)
        start = ofp.OFP_PACKET_OUT_SIZE
        return SimpleNamespace(kind="packet_out", xid=xid, buffer_id=buffer_id, in_port=in_port,
                               actions=_actions(buf, start, start + actions_len), data=buf[start + actions_len:])
    if msg_type == ofp.OFPT_BARRIER_REQUEST:
        assert length == ofp.OFP_HEADER_SIZE
        return SimpleNamespace(kind="barrier", xid=xid)
    raise AssertionError(f"the app sent an unexpected message type {msg_type}")


def flow_key(table: int, priority: int, match: dict) -> tuple:
    return (table, priority, tuple(sorted(match.items())))


class FakeSwitch(ofproto_protocol.ProtocolDesc):
    """A datapath stub with an OpenFlow 1.3 switch behind it (see the module docstring).

    ``refuse(decoded) -> (type, code) | None`` makes the switch refuse a message;
    ``fail_send(decoded) -> bool`` makes send_msg raise as a broken connection would.
    """

    def __init__(self, app: TrainbedController, dpid: int):
        super().__init__(version=ofp.OFP_VERSION)
        self.app, self.id, self.xid = app, dpid, 0
        self.seen: list[SimpleNamespace] = []  # every message delivered, decoded, in order
        self.flows: dict[tuple, SimpleNamespace] = {}
        self.groups: dict[int, SimpleNamespace] = {}
        self.meters: dict[int, SimpleNamespace] = {}
        self.refuse = lambda m: None
        self.fail_send = lambda m: False
        self.closed = False

    # os_ken.controller.controller.Datapath's two methods the app calls, minus the socket
    def set_xid(self, msg):
        self.xid = (self.xid + 1) & self.ofproto.MAX_XID
        msg.set_xid(self.xid)
        return self.xid

    def send_msg(self, msg, close_socket=False):
        assert isinstance(msg, self.ofproto_parser.MsgBase)
        if msg.xid is None:
            self.set_xid(msg)
        msg.serialize()
        m = decode(msg)
        if self.fail_send(m):
            raise OSError(f"switch {self.id:#x}: connection reset")
        self.seen.append(m)
        self._receive(m, msg)
        return True

    def close(self):
        """As os-ken's: the connection is dead to the app (its state-change event), and the switch reconnects."""
        self.closed = True
        self.app.switch_gone(ofp_event.EventOFPStateChange(self))

    def kinds(self) -> list[str]:
        return [m.kind for m in self.seen]

    def policy_flows(self) -> dict:
        return {k: f for k, f in self.flows.items() if k[0] == 0 and k[1] != 0}

    # the switch
    def _receive(self, m, msg) -> None:
        if m.kind == "barrier":
            reply = from_switch(self, ofp.OFPT_BARRIER_REPLY, xid=m.xid)
            self.app.barrier_reply(ofp_event.EventOFPBarrierReply(reply))
            return
        if m.kind == "packet_out":
            return
        error = self.refuse(m) or self._apply(m)
        if error:
            body = struct.pack(ofp.OFP_ERROR_MSG_PACK_STR, *error) + bytes(msg.buf[:64])
            self.app.error_msg(ofp_event.EventOFPErrorMsg(from_switch(self, ofp.OFPT_ERROR, body, m.xid)))

    def _apply(self, m):
        if m.kind == "flow":
            key = flow_key(m.table, m.priority, m.match)
            if m.command == ofp.OFPFC_ADD:
                self.flows[key] = m
            elif m.command == ofp.OFPFC_DELETE_STRICT:
                if key in self.flows and (self.flows[key].cookie & m.cookie_mask) == (m.cookie & m.cookie_mask):
                    del self.flows[key]
            else:
                return ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND
            return None
        if m.kind == "group":
            table, ident = self.groups, m.group_id
            exists, unknown = ((ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_GROUP_EXISTS),
                               (ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_UNKNOWN_GROUP))
            add, modify, delete = ofp.OFPGC_ADD, ofp.OFPGC_MODIFY, ofp.OFPGC_DELETE
        else:
            table, ident = self.meters, m.meter_id
            exists, unknown = ((ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_METER_EXISTS),
                               (ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_UNKNOWN_METER))
            add, modify, delete = ofp.OFPMC_ADD, ofp.OFPMC_MODIFY, ofp.OFPMC_DELETE
        if m.command == add and ident in table:
            return exists
        if m.command == modify and ident not in table:
            return unknown
        if m.command == delete:
            table.pop(ident, None)
        else:
            table[ident] = m
        return None


def refuse_kind(kind: str, error: tuple):
    return lambda m: error if m.kind == kind else None


TABLE_FULL = (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_TABLE_FULL)


# --- the app --------------------------------------------------------------------------------

class FakeServer:
    """Stands in for hub.StreamServer: records what the app would serve, opens nothing."""

    created: ClassVar[list[FakeServer]] = []

    def __init__(self, listen_info, handle):
        self.listen_info, self.handle = listen_info, handle
        self.umask = os.umask(0)  # reading the umask means setting it: put it straight back
        os.umask(self.umask)
        FakeServer.created.append(self)

    def serve_forever(self):
        raise AssertionError("the tests never serve a socket")


class Connection:
    """An accepted management connection, in memory: ``makefile("rwb")`` is itself."""

    def __init__(self, lines: list[bytes]):
        self.rx, self.tx, self.closed = io.BytesIO(b"".join(lines)), io.BytesIO(), False

    def makefile(self, mode):
        assert mode == "rwb"
        return self

    def __iter__(self):
        return iter(self.rx.readline, b"")

    def write(self, data):
        self.tx.write(data)

    def flush(self):
        pass

    def close(self):
        self.closed = True


class Harness:
    def __init__(self, app: TrainbedController, spawned: list, state: str):
        self.app, self.spawned, self.state = app, spawned, state
        self.switches: dict[int, FakeSwitch] = {}

    def connect(self, dpid: int, switch: FakeSwitch | None = None) -> FakeSwitch:
        """The switch's features reply reaches the app, then the installation it spawned runs."""
        dp = switch or FakeSwitch(self.app, dpid)
        dp.app = self.app  # a switch that outlived a controller talks to the new one
        body = struct.pack(ofp.OFP_SWITCH_FEATURES_PACK_STR, dpid, 0, 254, 0, 0, 0)
        features = from_switch(dp, ofp.OFPT_FEATURES_REPLY, body, xid=dp.xid)
        assert features.datapath_id == dpid
        self.app.switch_features(ofp_event.EventOFPSwitchFeatures(features))
        (func, args), = self.spawned  # the handler itself must not wait for barriers
        self.spawned.clear()
        assert func == self.app._install_forwarding and args == (dp, dpid)
        func(*args)
        self.switches[dpid] = dp
        return dp

    def connect_all(self) -> None:
        for dpid in ALL:
            self.connect(dpid)
        for dp in self.switches.values():
            dp.seen.clear()

    def call(self, **request) -> dict:
        return self.app._handle(request)

    def serve(self, *requests) -> list[dict]:
        """Requests (dicts, or raw bytes lines) through the socket handler; its replies."""
        lines = [r if isinstance(r, bytes) else (json.dumps(r) + "\n").encode() for r in requests]
        conn = Connection(lines)
        self.app._serve_client(conn, None)
        assert conn.closed
        out = conn.tx.getvalue().decode()
        assert out.endswith("\n") and out.count("\n") == len(lines), out  # one line per request
        return [json.loads(line) for line in out.splitlines()]

    def sent(self) -> dict[int, list[str]]:
        return {dpid: dp.kinds() for dpid, dp in self.switches.items() if dp.seen}

    def state_text(self) -> str | None:
        return Path(self.state).read_text() if os.path.exists(self.state) else None


@pytest.fixture
def make_app(tmp_path, monkeypatch):
    spawned: list = []
    monkeypatch.setattr(hub, "StreamServer", FakeServer)
    monkeypatch.setattr(hub, "spawn", lambda func, *args, **kwargs: spawned.append((func, args)))
    monkeypatch.setattr(FakeServer, "created", [])
    state = str(tmp_path / "controller-state")
    socket_path = str(tmp_path / "ctl.sock")
    monkeypatch.setattr(TrainbedController, "config",
                        {"fabric": FABRIC.to_dict(), "socket": socket_path, "state": state})

    def make() -> Harness:
        app = TrainbedController()
        assert [func for func, _ in spawned] == [FakeServer.created[-1].serve_forever]
        spawned.clear()
        return Harness(app, spawned, state)

    return make


@pytest.fixture
def ready(make_app) -> Harness:
    h = make_app()
    h.connect_all()
    return h


@pytest.fixture
def tc(monkeypatch):
    """Host tc batches, recorded instead of run (``fail`` makes the next one fail)."""
    calls = SimpleNamespace(batches=[], fail=None)

    def run_tc_batch(cmds, netns_pid=None, where="", tolerate_missing_deletes=False):
        calls.batches.append(SimpleNamespace(cmds=list(cmds), pid=netns_pid, where=where,
                                             tolerate=tolerate_missing_deletes))
        if calls.fail:
            raise TcError(calls.fail)

    monkeypatch.setattr(app_mod, "run_tc_batch", run_tc_batch)
    return calls


# --- start-up -------------------------------------------------------------------------------

def test_the_management_socket_is_served_by_the_handler_and_created_0600(make_app, tmp_path):
    stale = tmp_path / "ctl.sock"
    stale.write_text("left by a killed controller")
    before = os.umask(0o022)
    try:
        h = make_app()
        after = os.umask(0o022)
    finally:
        os.umask(before)
    server, = FakeServer.created
    assert server.listen_info == (str(stale),) and server.handle == h.app._serve_client
    assert server.umask == 0o177  # the socket file comes out rw------- (root only)
    assert after == 0o022  # and the process's umask is put back
    assert not stale.exists()  # a stale socket file is removed first
    assert h.app.recovered is False and h.call(op="status") == {
        "ok": True, "switches_ready": 0, "switches_expected": 4, "hosts_registered": 0}


# --- switch features: forwarding and groups -------------------------------------------------

@pytest.mark.parametrize("dpid, local", [(LEAF1, (1, 2)), (LEAF2, (3, 4))])
def test_a_leaf_gets_its_uplink_select_group_then_the_table_miss_and_forwarding(make_app, dpid, local):
    h = make_app()
    dp = h.connect(dpid)

    # Whether a (re)connecting switch still has the group is unknown: modify, and on the
    # switch's UNKNOWN_GROUP error add it; each step confirmed by a barrier.
    groups = [m for m in dp.seen if m.kind == "group"]
    assert [g.command for g in groups] == [ofp.OFPGC_MODIFY, ofp.OFPGC_ADD]
    assert dp.kinds()[:4] == ["group", "barrier", "group", "barrier"]
    group = groups[1]
    assert group.type == ofp.OFPGT_SELECT and group.group_id == 1
    # one bucket per spine: leaf ports 3 and 4 go to spines 1 and 2
    assert [(b.weight, b.watch_port, b.watch_group, b.actions) for b in group.buckets] == [
        (1, 3, ofp.OFPG_ANY, [("output", 3)]), (1, 4, ofp.OFPG_ANY, [("output", 4)])]
    assert list(dp.groups) == [1]

    flows = [m for m in dp.seen if m.kind == "flow"]
    assert all(f.command == ofp.OFPFC_ADD and f.cookie == 0 for f in flows)
    first_flow = dp.kinds().index("flow")  # the group exists before a rule uses it
    assert all(i < first_flow for i, m in enumerate(dp.seen) if m.kind == "group")
    a, b = local
    assert {k: f.instructions for k, f in dp.flows.items()} == {
        # table-miss of the policy table: no policy matched, go on to forwarding
        flow_key(0, 0, {}): [("goto", FORWARD)],
        flow_key(FORWARD, 200, {"eth_type": ETH_ARP}): [("apply", [CONTROLLER])],
        flow_key(FORWARD, 100, {"eth_type": ETH_IP, "ipv4_dst": IP[a]}): [("apply", [("output", 1)])],
        flow_key(FORWARD, 100, {"eth_type": ETH_IP, "ipv4_dst": IP[b]}): [("apply", [("output", 2)])],
        flow_key(FORWARD, 10, {"eth_type": ETH_IP, "ipv4_dst": ("10.0.0.0", "255.255.0.0")}):
            [("apply", [("group", 1)])],
    }
    assert len(flows) == len(dp.flows)  # nothing sent twice, nothing overwritten
    assert dp.kinds()[-1] == "barrier"  # the installation is confirmed before the switch counts as ready
    assert h.app.datapaths == {dpid: dp}


@pytest.mark.parametrize("dpid", [SPINE1, SPINE2])
def test_a_spine_routes_each_host_down_its_leaf_and_has_no_group(make_app, dpid):
    h = make_app()
    dp = h.connect(dpid)
    assert "group" not in dp.kinds() and dp.groups == {}
    assert {k: f.instructions for k, f in dp.flows.items()} == {
        flow_key(0, 0, {}): [("goto", FORWARD)],
        flow_key(FORWARD, 200, {"eth_type": ETH_ARP}): [("apply", [CONTROLLER])],
        flow_key(FORWARD, 100, {"eth_type": ETH_IP, "ipv4_dst": IP[1]}): [("apply", [("output", 1)])],
        flow_key(FORWARD, 100, {"eth_type": ETH_IP, "ipv4_dst": IP[2]}): [("apply", [("output", 1)])],
        flow_key(FORWARD, 100, {"eth_type": ETH_IP, "ipv4_dst": IP[3]}): [("apply", [("output", 2)])],
        flow_key(FORWARD, 100, {"eth_type": ETH_IP, "ipv4_dst": IP[4]}): [("apply", [("output", 2)])],
    }
    assert dp.kinds() == ["flow"] * 6 + ["barrier"]


def test_every_rule_goes_to_its_own_switch_and_the_fabric_becomes_ready(make_app):
    h = make_app()
    for n, dpid in enumerate(ALL, 1):
        reply = h.call(op="set_policy", policy={**POLICY, "queue": 2})
        assert reply == {"ok": False, "error": f"fabric not ready: {n - 1}/4 switches"}
        h.connect(dpid)
    assert h.call(op="status")["switches_ready"] == 4
    every = set(IP.values())
    expected = {SPINE1: every, SPINE2: every, LEAF1: {IP[1], IP[2]}, LEAF2: {IP[3], IP[4]}}
    for dpid, dp in h.switches.items():
        host_rules = {dict(k[2])["ipv4_dst"] for k in dp.flows if k[:2] == (FORWARD, 100)}
        assert host_rules == expected[dpid]


def test_a_reconnecting_switch_keeps_its_group_modified_in_place(make_app):
    h = make_app()
    dp = h.connect(LEAF1)
    dp.seen.clear()
    h.connect(LEAF1, dp)  # the same switch again (e.g. after a controller restart): it has group 1
    assert [m.command for m in dp.seen if m.kind == "group"] == [ofp.OFPGC_MODIFY]
    assert dp.kinds()[:2] == ["group", "barrier"] and "flow" in dp.kinds()
    assert h.app.datapaths == {LEAF1: dp} and h.app.of_errors == {}


def test_an_unknown_switch_is_ignored(make_app):
    h = make_app()
    dp = FakeSwitch(h.app, 0x9999)
    body = struct.pack(ofp.OFP_SWITCH_FEATURES_PACK_STR, 0x9999, 0, 254, 0, 0, 0)
    h.app.switch_features(ofp_event.EventOFPSwitchFeatures(from_switch(dp, ofp.OFPT_FEATURES_REPLY, body)))
    assert h.spawned == [] and dp.seen == [] and h.app.datapaths == {}


def test_a_refused_group_leaves_the_switch_out_of_the_fabric(make_app, caplog):
    h = make_app()
    dp = FakeSwitch(h.app, LEAF2)
    dp.refuse = refuse_kind("group", (ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_BAD_BUCKET))
    h.connect(LEAF2, dp)
    assert dp.kinds() == ["group", "barrier"]  # no fallback for an error other than "unknown", no rules
    assert LEAF2 not in h.app.datapaths
    assert "switch 0x2002: group" in caplog.text and "(6, 12)" in caplog.text
    for dpid in (SPINE1, SPINE2, LEAF1):
        h.connect(dpid)
    assert h.call(op="set_policy", policy={**POLICY, "queue": 2}) == {
        "ok": False, "error": "fabric not ready: 3/4 switches"}


def test_a_switch_whose_installation_timed_out_is_installed_again(make_app, monkeypatch, caplog):
    """Its first barrier reply is lost (a loaded box): the installation runs again and
    the switch joins the fabric; one that never answers stays out after every attempt."""
    monkeypatch.setattr(app_mod, "BARRIER_TIMEOUT_S", 0.1)
    monkeypatch.setattr(app_mod, "INSTALL_RETRY_S", 0.0)
    h = make_app()
    late, silent = FakeSwitch(h.app, LEAF1), FakeSwitch(h.app, LEAF2)
    lost = []
    for dp in (late, silent):
        receive = dp._receive

        def answer(m, msg, dp=dp, receive=receive):
            if m.kind == "barrier" and (dp is silent or not lost):
                lost.append(dp.id)  # the reply never comes
                return None
            return receive(m, msg)
        dp._receive = answer
    h.connect(LEAF1, late)
    assert LEAF1 in h.app.datapaths and lost == [LEAF1] and "installation 1 of" in caplog.text
    assert late.kinds()[:2] == ["group", "barrier"] and late.kinds()[2:4] == ["group", "barrier"]  # from the start
    h.connect(LEAF2, silent)
    assert LEAF2 not in h.app.datapaths and silent.kinds().count("barrier") == app_mod.INSTALL_ATTEMPTS
    assert f"installation {app_mod.INSTALL_ATTEMPTS} of {app_mod.INSTALL_ATTEMPTS}" in caplog.text
    assert silent.closed and not late.closed  # it reconnects, and is installed afresh


# --- proxy ARP ------------------------------------------------------------------------------

def arp_packet(opcode: int, src: int, dst_ip: str) -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src=MAC[src], ethertype=ETH_ARP))
    pkt.add_protocol(arp.arp_ip(opcode, MAC[src], IP[src], "00:00:00:00:00:00", dst_ip))
    pkt.serialize()
    return bytes(pkt.data)


def packet_in(dp, in_port: int, data: bytes):
    match = bytearray()
    parser.OFPMatch(in_port=in_port).serialize(match, 0)
    body = struct.pack(ofp.OFP_PACKET_IN_PACK_STR, ofp.OFP_NO_BUFFER, len(data), ofp.OFPR_ACTION, FORWARD, 0)
    msg = from_switch(dp, ofp.OFPT_PACKET_IN, body + bytes(match) + b"\0\0" + data)
    assert msg.match["in_port"] == in_port and bytes(msg.data) == data
    return ofp_event.EventOFPPacketIn(msg)


@pytest.mark.parametrize("dpid, asker, port, target", [(LEAF1, 1, 1, 4), (LEAF2, 4, 2, 3), (LEAF1, 2, 2, 1)])
def test_an_arp_request_for_a_host_is_answered_from_the_address_plan(ready, dpid, asker, port, target):
    dp = ready.switches[dpid]
    ready.app.packet_in(packet_in(dp, port, arp_packet(arp.ARP_REQUEST, asker, IP[target])))
    out, = dp.seen
    assert out.kind == "packet_out" and out.buffer_id == ofp.OFP_NO_BUFFER and out.in_port == ofp.OFPP_CONTROLLER
    assert out.actions == [("output", port)]  # back out of the port it came in on
    reply = packet.Packet(out.data)
    eth, = reply.get_protocols(ethernet.ethernet)
    assert (eth.dst, eth.src, eth.ethertype) == (MAC[asker], MAC[target], ETH_ARP)
    a, = reply.get_protocols(arp.arp)
    assert (a.opcode, a.src_mac, a.src_ip, a.dst_mac, a.dst_ip) == (
        arp.ARP_REPLY, MAC[target], IP[target], MAC[asker], IP[asker])
    assert ready.sent() == {dpid: ["packet_out"]}


def _ipv4_packet() -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=MAC[2], src=MAC[1], ethertype=ETH_IP))
    pkt.add_protocol(ipv4.ipv4(src=IP[1], dst=IP[2], proto=17))
    pkt.serialize()
    return bytes(pkt.data)


@pytest.mark.parametrize("data", [
    pytest.param(arp_packet(arp.ARP_REQUEST, 1, "10.0.9.9"), id="request-for-no-host"),
    pytest.param(arp_packet(arp.ARP_REQUEST, 1, "192.168.1.2"), id="request-off-the-fabric"),
    pytest.param(arp_packet(arp.ARP_REPLY, 1, IP[2]), id="a-reply"),
    pytest.param(_ipv4_packet(), id="not-arp"),
])
def test_nothing_else_that_reaches_the_controller_is_answered(ready, data):
    ready.app.packet_in(packet_in(ready.switches[LEAF1], 1, data))
    assert ready.sent() == {}


# --- policies through the API ---------------------------------------------------------------

@pytest.mark.parametrize("queue, dscp", [(1, 48), (2, 40), (7, 0)])  # queue q carries CS(7-q)
def test_set_policy_marks_the_flow_at_its_ingress_leaf_and_confirms_with_a_barrier(ready, queue, dscp):
    assert ready.call(op="set_policy", policy={**POLICY, "queue": queue}) == {"ok": True, "id": 1}
    assert ready.sent() == {LEAF2: ["flow", "barrier"]}  # tbh3's leaf only
    fm = ready.switches[LEAF2].seen[0]
    assert (fm.table, fm.command, fm.priority, fm.cookie) == (0, ofp.OFPFC_ADD, POLICY_PRIORITY, 1)
    assert fm.match == POLICY_MATCH
    assert fm.instructions == [("apply", [("set_field", "ip_dscp", dscp)]), ("goto", FORWARD)]
    assert ready.app.of_errors == {} and ready.app.barriers == {}
    listed = [{"id": 1, **POLICY, "src_port": None, "queue": queue, "rate_mbps": None, "rate_mechanism": "host",
               "host_queue": None}]
    assert ready.call(op="list_policies") == {"ok": True, "policies": listed}
    assert json.loads(ready.state_text())["policies"] == listed  # persisted before the reply


def test_an_update_keeps_the_id_and_overwrites_the_rule_in_place(ready):
    ready.call(op="set_policy", policy={**POLICY, "queue": 2})
    assert ready.call(op="set_policy", policy={**POLICY, "queue": 5}) == {"ok": True, "id": 1}
    leaf = ready.switches[LEAF2]
    assert leaf.kinds() == ["flow", "barrier", "flow", "barrier"]  # never a delete: the flow is never unmarked
    assert leaf.seen[2].command == ofp.OFPFC_ADD and leaf.seen[2].cookie == 1
    assert [f.instructions for f in leaf.policy_flows().values()] == [
        [("apply", [("set_field", "ip_dscp", 16)]), ("goto", FORWARD)]]


def test_remove_policy_deletes_exactly_that_rule(ready):
    ready.call(op="set_policy", policy={**POLICY, "queue": 2})
    other = ready.call(op="set_policy", policy={**POLICY, "dst_port": 5202, "queue": 3})["id"]
    leaf = ready.switches[LEAF2]
    leaf.seen.clear()
    assert ready.call(op="remove_policy", id=1) == {"ok": True}
    assert leaf.kinds() == ["flow", "barrier"] and ready.sent() == {LEAF2: ["flow", "barrier"]}
    fm = leaf.seen[0]
    assert (fm.table, fm.command, fm.priority, fm.cookie) == (0, ofp.OFPFC_DELETE_STRICT, POLICY_PRIORITY, 1)
    assert fm.match == POLICY_MATCH and (fm.out_port, fm.out_group) == (ofp.OFPP_ANY, ofp.OFPG_ANY)
    assert [k[2] for k in leaf.policy_flows()] == [tuple(sorted({**POLICY_MATCH, "tcp_dst": 5202}.items()))]
    assert [p["id"] for p in ready.call(op="list_policies")["policies"]] == [other]
    assert [p["id"] for p in json.loads(ready.state_text())["policies"]] == [other]


def test_a_meter_policy_adds_the_meter_before_the_rule_that_uses_it(ready):
    assert ready.call(op="set_policy", policy={**POLICY, "queue": 2, "rate_mbps": 40,
                                               "rate_mechanism": "meter"})["id"] == 1
    leaf = ready.switches[LEAF2]
    assert leaf.kinds() == ["meter", "flow", "barrier"]
    meter, fm = leaf.seen[0], leaf.seen[1]
    assert (meter.command, meter.flags, meter.meter_id) == (ofp.OFPMC_ADD, ofp.OFPMF_KBPS, 1)
    assert meter.bands == [("OFPMeterBandDrop", 40_000, 0)]
    assert fm.instructions == [("meter", 1), ("apply", [("set_field", "ip_dscp", 40)]), ("goto", FORWARD)]

    leaf.seen.clear()  # a rate-only change: the meter is modified, the rule left alone
    ready.call(op="set_policy", policy={**POLICY, "queue": 2, "rate_mbps": 25, "rate_mechanism": "meter"})
    assert leaf.kinds() == ["meter", "barrier"]
    assert (leaf.seen[0].command, leaf.seen[0].bands) == (ofp.OFPMC_MODIFY, [("OFPMeterBandDrop", 25_000, 0)])

    leaf.seen.clear()  # removing: the rule goes first, then its meter
    ready.call(op="remove_policy", id=1)
    assert leaf.kinds() == ["flow", "meter", "barrier"]
    assert (leaf.seen[0].command, leaf.seen[1].command) == (ofp.OFPFC_DELETE_STRICT, ofp.OFPMC_DELETE)
    assert leaf.meters == {} and leaf.policy_flows() == {} and ready.app.of_errors == {}


def test_apply_sends_each_switch_its_part_with_one_barrier(ready):
    reply = ready.call(op="apply", changes=[
        {"set": {"src": "tbh1", "dst": "tbh3", "queue": 1}},
        {"set": {**POLICY, "queue": 2}},
        {"set": {"src": "tbh4", "dst": "tbh2", "proto": "udp", "src_port": 7000, "queue": 3}},
    ])
    assert reply == {"ok": True, "ids": [1, 2, 3]}
    assert ready.sent() == {LEAF1: ["flow", "barrier"], LEAF2: ["flow", "flow", "barrier"]}
    leaf2 = ready.switches[LEAF2].seen
    assert [f.cookie for f in leaf2[:2]] == [2, 3]
    assert leaf2[1].match == {"eth_type": ETH_IP, "ipv4_src": IP[4], "ipv4_dst": IP[2], "ip_proto": 17,
                              "udp_src": 7000}
    pair = ready.switches[LEAF1].seen[0]  # a host-pair policy ranks below a port-specific one
    assert pair.match == {"eth_type": ETH_IP, "ipv4_src": IP[1], "ipv4_dst": IP[3]}
    assert pair.priority < POLICY_PRIORITY

    ready.switches[LEAF1].seen.clear()
    ready.switches[LEAF2].seen.clear()
    assert ready.call(op="apply", changes=[{"remove": 1}, {"remove": 3}]) == {"ok": True, "ids": [1, 3]}
    assert ready.sent() == {LEAF1: ["flow", "barrier"], LEAF2: ["flow", "barrier"]}
    assert [p["id"] for p in ready.call(op="list_policies")["policies"]] == [2]


def test_a_sender_side_queue_is_one_tc_batch_in_the_senders_namespace(ready, tc):
    assert ready.call(op="register_hosts", pids={"tbh3": 4242}) == {"ok": True}
    assert ready.call(op="set_policy", policy={**POLICY, "host_queue": 1}) == {"ok": True, "id": 1}
    batch, = tc.batches
    assert (batch.pid, batch.where, batch.tolerate) == (4242, "host tbh3", True)
    assert batch.cmds and all(" dev tbh3-eth0 " in c for c in batch.cmds)
    assert any("match ip dst 10.0.0.1/32" in c and "dport 5201" in c for c in batch.cmds)
    # the switch rule of a policy with no switch queue only jumps to forwarding
    fm, _ = ready.switches[LEAF2].seen
    assert fm.instructions == [("goto", FORWARD)] and ready.sent() == {LEAF2: ["flow", "barrier"]}


def test_a_host_rate_change_is_one_tc_command_and_no_switch_message(ready, tc):
    ready.call(op="register_hosts", pids={"tbh3": 4242})
    ready.call(op="set_policy", policy={**POLICY, "rate_mbps": 40})
    ready.switches[LEAF2].seen.clear()
    assert ready.call(op="set_policy", policy={**POLICY, "rate_mbps": 30}) == {"ok": True, "id": 1}
    assert len(tc.batches) == 2 and len(tc.batches[1].cmds) == 1 and "rate 30mbit" in tc.batches[1].cmds[0]
    assert ready.sent() == {}  # not even a barrier


# --- bad requests: one line, nothing sent ---------------------------------------------------

VALID = {"set": {**POLICY, "queue": 2}}


@pytest.mark.parametrize("request_, error", [
    (b"{not json\n", "Expecting property name"),
    ({"op": "frobnicate"}, "op: unknown operation 'frobnicate'"),
    ({}, "op: unknown operation None"),
    ({"op": "set_policy"}, "policy: src and dst hosts are required"),
    ({"op": "set_policy", "policy": "tbh3->tbh1"}, "policy: must be a mapping of fields"),
    ({"op": "set_policy", "policy": {**POLICY, "colour": "red"}}, "policy.colour: unknown field"),
    ({"op": "set_policy", "policy": {**POLICY, "queue": 9}}, "policy.queue: must be a scheduler queue 1..7"),
    ({"op": "set_policy", "policy": {**POLICY, "queue": 0}}, "policy.queue: must be a scheduler queue 1..7"),
    ({"op": "set_policy", "policy": {**POLICY, "queue": "2"}}, "policy.queue: must be a scheduler queue 1..7"),
    ({"op": "set_policy", "policy": {**POLICY, "dst": "tbh9", "queue": 2}}, "policy.dst: 'tbh9' is not a host"),
    ({"op": "set_policy", "policy": {**POLICY, "dst": "tbh3", "queue": 2}}, "policy.dst: must differ from src"),
    ({"op": "set_policy", "policy": {**POLICY, "proto": None, "queue": 2}}, "policy.dst_port: a port needs proto"),
    ({"op": "set_policy", "policy": {**POLICY, "rate_mbps": 1e9}}, "policy.rate_mbps: must be a number in (0, 1000]"),
    ({"op": "set_policy", "policy": POLICY}, "policy: sets neither queue, host_queue nor rate_mbps"),
    ({"op": "set_policy", "policy": {**POLICY, "host_queue": 1}},
     "policy.src: host tbh3 has not been registered (register_hosts)"),
    ({"op": "remove_policy", "id": 99}, "policy.id: no policy with id 99"),
    ({"op": "remove_policy", "id": True}, "policy.id: must be an integer, got True"),
    ({"op": "remove_policy", "id": 1.0}, "policy.id: must be an integer, got 1.0"),
    ({"op": "set_policy", "policy": []}, "policy: must be a mapping of fields"),
    ({"op": "apply", "changes": VALID}, "changes: must be a list of {set: policy} or {remove: id}"),
    ({"op": "apply", "changes": [VALID, {"drop": 1}]}, "changes[1]: must be {set: policy} or {remove: id}"),
    ({"op": "apply", "changes": [VALID, {**VALID, "remove": 1}]}, "changes[1]: must be"),
    ({"op": "apply", "changes": [VALID, {"set": {**POLICY, "queue": 8}}]}, "policy.queue: must be"),
    ({"op": "apply", "changes": [VALID, {"remove": 5}]}, "policy.id: no policy with id 5"),
    ({"op": "register_hosts", "pids": {"tbh3": "not a pid"}}, "pids.tbh3: must be a process id > 1, got 'not a pid'"),
    ({"op": "register_hosts", "pids": {"tbh3": 1}}, "pids.tbh3: must be a process id > 1, got 1"),
    ({"op": "register_hosts", "pids": {"tbh3": True}}, "pids.tbh3: must be a process id > 1, got True"),
    ({"op": "register_hosts", "pids": {"tbh9": 4242}}, "pids.tbh9: not a host of the fabric"),
    ({"op": "register_hosts"}, "pids: must be a mapping of host name to namespace pid"),
])
def test_a_bad_request_gets_a_one_line_error_and_changes_nothing(ready, request_, error):
    ready.call(op="set_policy", policy={**POLICY, "dst_port": 6000, "queue": 4})  # something to keep
    ready.switches[LEAF2].seen.clear()
    table, state = ready.call(op="list_policies"), ready.state_text()
    reply, = ready.serve(request_)
    assert reply["ok"] is False and reply["error"].startswith(error), reply
    assert "\n" not in reply["error"]
    assert ready.sent() == {}  # the whole batch is refused before anything is sent
    assert ready.call(op="list_policies") == table and ready.state_text() == state
    assert ready.app.host_pids == {}


def test_one_connection_gets_one_reply_per_request_in_order(ready):
    replies = ready.serve({"op": "ping"}, {"op": "set_policy", "policy": {**POLICY, "queue": 9}},
                          {"op": "set_policy", "policy": {**POLICY, "queue": 2}}, {"op": "list_policies"})
    assert [r["ok"] for r in replies] == [True, False, True, True]
    assert replies[2] == {"ok": True, "id": 1} and [p["id"] for p in replies[3]["policies"]] == [1]


# --- a failed apply: the table, ids and state file stay as they were ------------------------

def test_a_rule_the_switch_refuses_fails_the_call_and_commits_nothing(ready):
    ready.call(op="set_policy", policy={**POLICY, "queue": 2})
    table, state = ready.call(op="list_policies"), ready.state_text()
    leaf = ready.switches[LEAF2]
    leaf.refuse = refuse_kind("flow", TABLE_FULL)
    with pytest.raises(PolicyError, match=r"^switch 0x2002: 1 message\(s\) refused, first with OpenFlow error "
                                          r"\(type, code\) \(5, 1\)$"):
        ready.call(op="set_policy", policy={**POLICY, "dst_port": 5202, "queue": 3})
    reply, = ready.serve({"op": "set_policy", "policy": {**POLICY, "dst_port": 5202, "queue": 3}})
    assert reply == {"ok": False, "error": "switch 0x2002: 1 message(s) refused, first with OpenFlow error "
                                           "(type, code) (5, 1)"}
    assert ready.call(op="list_policies") == table and ready.state_text() == state
    assert ready.app.of_errors == {}  # the refusals were consumed, not left behind
    leaf.refuse = lambda m: None
    assert ready.call(op="set_policy", policy={**POLICY, "dst_port": 5202, "queue": 3}) == {"ok": True, "id": 2}


def test_a_batch_refused_on_its_second_switch_commits_nothing_and_leaves_no_rule(ready):
    ready.switches[LEAF1].refuse = refuse_kind("flow", TABLE_FULL)
    with pytest.raises(PolicyError, match="switch 0x2001"):
        ready.call(op="apply", changes=[VALID, {"set": {"src": "tbh1", "dst": "tbh3", "queue": 1}}])
    assert ready.call(op="list_policies")["policies"] == [] and ready.state_text() is None
    # the first switch took its rule, then had it deleted: no rule of a flow no policy names
    assert [m.command for m in ready.switches[LEAF2].seen if m.kind == "flow" and m.table == 0 and m.priority] == [
        ofp.OFPFC_ADD, ofp.OFPFC_DELETE_STRICT]
    assert all(dp.policy_flows() == {} for dp in ready.switches.values())


def test_a_policy_a_failed_batch_removed_is_back_on_its_switch_with_its_meter(ready):
    """The batch removed a meter policy on one leaf, then another leaf refused its part:
    the rule and the meter are set again as committed, and a later rate change works."""
    metered = {**POLICY, "queue": 2, "rate_mbps": 40, "rate_mechanism": "meter"}
    assert ready.call(op="set_policy", policy=metered) == {"ok": True, "id": 1}
    leaf2 = ready.switches[LEAF2]
    before = {key: (f.cookie, f.instructions) for key, f in leaf2.policy_flows().items()}
    ready.switches[LEAF1].refuse = refuse_kind("flow", TABLE_FULL)
    with pytest.raises(PolicyError, match="switch 0x2001"):
        ready.call(op="apply", changes=[{"remove": 1}, {"set": {"src": "tbh1", "dst": "tbh3", "queue": 1}}])
    assert {key: (f.cookie, f.instructions) for key, f in leaf2.policy_flows().items()} == before
    assert list(leaf2.meters) == [1] and leaf2.meters[1].bands == [("OFPMeterBandDrop", 40_000, 0)]
    assert ready.call(op="set_policy", policy={**metered, "rate_mbps": 30}) == {"ok": True, "id": 1}
    assert leaf2.meters[1].bands == [("OFPMeterBandDrop", 30_000, 0)]


def test_a_switch_gone_during_a_call_is_a_fabric_not_ready_the_client_retries(ready):
    """Its connection closed after the call found the fabric ready: the reply says the
    fabric is not ready (what the client retries on), and what the call changed on the
    other switch is undone."""
    leaf1, leaf2 = ready.switches[LEAF1], ready.switches[LEAF2]

    def gone_after_its_turn(m):
        if m.kind == "barrier":  # LEAF2's part confirmed: LEAF1 goes before the call reaches it
            ready.app.switch_gone(ofp_event.EventOFPStateChange(leaf1))
        return False
    leaf2.fail_send = gone_after_its_turn
    [reply] = ready.serve({"op": "apply", "changes": [VALID, {"set": {"src": "tbh1", "dst": "tbh3", "queue": 1}}]})
    assert reply == {"ok": False, "error": f"fabric not ready: switch {LEAF1:#x} disconnected during the call"}
    assert leaf2.policy_flows() == {} and ready.app.policies.listing() == []


def test_a_datapath_raising_on_send_leaves_the_table_as_before(ready):
    ready.call(op="set_policy", policy={**POLICY, "queue": 2})
    table, state = ready.call(op="list_policies"), ready.state_text()
    leaf = ready.switches[LEAF2]
    leaf.fail_send = lambda m: m.kind == "flow"
    with pytest.raises(OSError, match="connection reset"):
        ready.call(op="apply", changes=[{"remove": 1}, {"set": {**POLICY, "dst_port": 5202, "queue": 3}}])
    assert leaf.closed  # a broken connection: closed, so that the switch reconnects
    leaf.fail_send = lambda m: False
    ready.connect(LEAF2, leaf)
    assert ready.call(op="list_policies") == table and ready.state_text() == state
    assert [f.cookie for f in leaf.policy_flows().values()] == [1]  # policy 1 back, as committed
    assert ready.call(op="set_policy", policy={**POLICY, "dst_port": 5202, "queue": 3}) == {"ok": True, "id": 2}


def test_a_failed_host_tc_batch_fails_before_any_switch_message(ready, tc):
    ready.call(op="register_hosts", pids={"tbh3": 4242})
    first = "host tbh3: `tc filter replace dev tbh3-eth0 ...` failed: RTNETLINK answers: Invalid argument"
    tc.fail = first + "\nWe have an error talking to the kernel"  # whatever an error says, the reply is one line
    reply, = ready.serve({"op": "set_policy", "policy": {**POLICY, "host_queue": 1}})
    assert reply == {"ok": False, "error": first}
    assert ready.sent() == {} and ready.call(op="list_policies")["policies"] == []


def test_a_batch_a_switch_refuses_puts_the_senders_back_as_the_table_has_them(ready, tc):
    """The senders took their part before the switch refused: the changed policy's
    class is rebuilt as committed, the new one's removed (its id is free again)."""
    ready.call(op="register_hosts", pids={"tbh3": 4242})
    ready.call(op="set_policy", policy={**POLICY, "rate_mbps": 40})  # id 1, a sender rate class
    table, state = ready.call(op="list_policies"), ready.state_text()
    ready.switches[LEAF2].refuse = refuse_kind("flow", TABLE_FULL)
    with pytest.raises(PolicyError, match="^switch 0x2002: "):
        ready.call(op="apply", changes=[{"set": {**POLICY, "rate_mbps": 30, "queue": 3}},
                                        {"set": {**POLICY, "dst_port": 5202, "rate_mbps": 20}}])
    committed, applied, restore = tc.batches
    assert any("rate 30mbit" in c for c in applied.cmds) and any("5202" in c for c in applied.cmds)
    slot1, slot2 = "1:101", "1:102"  # HOST_FLOW_MINOR_BASE 0x100 + id
    assert [c.split(" dev ")[0] for c in restore.cmds] == ["tc filter del", "tc qdisc del", "tc class del", *[
        c.split(" dev ")[0] for c in committed.cmds], "tc filter del", "tc qdisc del", "tc class del"]
    assert restore.cmds[3:-3] == committed.cmds  # id 1 exactly as committed: 40 Mbit/s
    assert f"classid {slot1}" in restore.cmds[2] and f"classid {slot2}" in restore.cmds[-1]
    assert (restore.pid, restore.tolerate) == (4242, True)
    assert ready.call(op="list_policies") == table and ready.state_text() == state


def test_a_disconnected_switch_is_not_ready_until_it_is_installed_again(ready):
    """Its connection closed: calls answer "fabric not ready" (the client retries)
    rather than each waiting for a barrier; a late notice of an old connection of a
    switch that already reconnected leaves the new one alone."""
    old = ready.switches[LEAF2]
    ready.app.switch_gone(ofp_event.EventOFPStateChange(old))
    assert ready.call(op="status")["switches_ready"] == 3
    reply = ready.call(op="set_policy", policy={**POLICY, "queue": 2})
    assert reply == {"ok": False, "error": "fabric not ready: 3/4 switches"} and old.seen == []
    new = ready.connect(LEAF2)
    ready.app.switch_gone(ofp_event.EventOFPStateChange(old))
    assert ready.app.datapaths[LEAF2] is new and ready.call(op="status")["switches_ready"] == 4
    assert ready.call(op="set_policy", policy={**POLICY, "queue": 2}) == {"ok": True, "id": 1}


# --- recovery from the state file -----------------------------------------------------------

def test_a_restarted_controller_reinstalls_every_policy_with_its_id(make_app):
    first = make_app()
    first.connect_all()
    first.call(op="set_policy", policy={"src": "tbh1", "dst": "tbh4", "queue": 1})
    first.call(op="set_policy", policy={**POLICY, "queue": 2, "rate_mbps": 40, "rate_mechanism": "meter"})
    leaf2 = first.switches[LEAF2]  # the switch outlives the controller, meter and all

    h = make_app()
    assert h.app.recovered is True
    assert h.app.policies.listing() == first.call(op="list_policies")["policies"]
    assert len(h.app.policies.listing()) == 2
    leaf2.seen.clear()
    h.connect(LEAF2, leaf2)
    meters = [m for m in leaf2.seen if m.kind == "meter"]
    assert [(m.command, m.meter_id) for m in meters] == [(ofp.OFPMC_MODIFY, 2)]  # upserted: it may still be there
    policy_rules = [m for m in leaf2.seen if m.kind == "flow" and m.table == 0 and m.priority]
    assert [(m.cookie, m.instructions) for m in policy_rules] == [
        (2, [("meter", 2), ("apply", [("set_field", "ip_dscp", 40)]), ("goto", FORWARD)])]
    assert leaf2.kinds()[-1] == "barrier" and LEAF2 in h.app.datapaths


# --- defects found by these tests (fixed, and the one still open) -------------------------

def test_a_recovered_meter_is_added_to_a_switch_that_lost_it(make_app):
    first = make_app()
    first.connect_all()
    first.call(op="set_policy", policy={**POLICY, "queue": 2, "rate_mbps": 40, "rate_mechanism": "meter"})
    h = make_app()
    fresh = h.connect(LEAF2)  # e.g. ovs-vswitchd restarted: no meter, no rules
    assert [m.command for m in fresh.seen if m.kind == "meter"] == [ofp.OFPMC_MODIFY, ofp.OFPMC_ADD]
    assert list(fresh.meters) == [1] and LEAF2 in h.app.datapaths


def test_a_batch_that_failed_halfway_is_rolled_back_and_succeeds_when_retried(ready):
    """The meter the switch accepted before it refused the batch's rule is deleted by
    the rollback; the retry adds it."""
    leaf = ready.switches[LEAF2]
    leaf.refuse = refuse_kind("flow", TABLE_FULL)
    request = {"op": "set_policy", "policy": {**POLICY, "queue": 2, "rate_mbps": 40, "rate_mechanism": "meter"}}
    assert ready.serve(request)[0]["ok"] is False
    assert leaf.meters == {} and leaf.policy_flows() == {}
    leaf.refuse = lambda m: None
    assert ready.serve(request) == [{"ok": True, "id": 1}]
    assert [m.command for m in leaf.meters.values()] == [ofp.OFPMC_ADD] and len(leaf.policy_flows()) == 1


def test_a_meter_a_failed_batch_left_behind_is_modified_by_the_retry(ready):
    """Where the rollback could not delete the meter either, it stays; the retry's add
    of it meets METER_EXISTS and modifies it."""
    leaf = ready.switches[LEAF2]
    leaf.refuse = lambda m: (TABLE_FULL if m.kind == "flow" else (ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_UNKNOWN)
                             if m.kind == "meter" and m.command == ofp.OFPMC_DELETE else None)
    request = {"op": "set_policy", "policy": {**POLICY, "queue": 2, "rate_mbps": 40, "rate_mechanism": "meter"}}
    assert ready.serve(request)[0]["ok"] is False
    assert len(leaf.meters) == 1  # the first attempt's meter stayed on the switch
    leaf.refuse = lambda m: None
    assert ready.serve(request) == [{"ok": True, "id": 1}]
    (meter,) = leaf.meters.values()
    assert meter.command == ofp.OFPMC_MODIFY and meter.bands == [("OFPMeterBandDrop", 40_000, 0)]  # modified in place


def test_a_request_that_is_not_an_object_gets_a_one_line_error(ready):
    replies = ready.serve(b"[1]\n", {"op": "ping"})
    assert replies[0]["ok"] is False and replies[1] == {"ok": True}


def test_a_datapath_failing_mid_call_still_gets_the_client_a_one_line_error(ready):
    ready.switches[LEAF2].fail_send = lambda m: m.kind == "flow"
    replies = ready.serve({"op": "set_policy", "policy": {**POLICY, "queue": 2}}, {"op": "ping"})
    assert replies[0]["ok"] is False and replies[1] == {"ok": True}


def test_a_switch_that_refuses_a_forwarding_rule_is_not_ready(make_app):
    h = make_app()
    dp = FakeSwitch(h.app, LEAF1)
    dp.refuse = lambda m: ((ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_FIELD)
                           if m.kind == "flow" and m.match.get("eth_type") == ETH_ARP else None)
    h.connect(LEAF1, dp)
    assert LEAF1 not in h.app.datapaths


def test_a_switch_that_never_answers_a_barrier_fails_the_call_within_the_timeout(ready, monkeypatch):
    monkeypatch.setattr(app_mod, "BARRIER_TIMEOUT_S", 0.2)
    leaf = ready.switches[LEAF2]
    receive = leaf._receive
    leaf._receive = lambda m, msg: None if m.kind == "barrier" else receive(m, msg)  # replies lost
    began = time.monotonic()
    [reply] = ready.serve({"op": "set_policy", "policy": {**POLICY, "queue": 2}})
    assert reply == {"ok": False, "error": f"switch {LEAF2:#x}: no barrier reply within 0.2 s"}
    assert time.monotonic() - began < 5 and ready.app.policies.listing() == []
    assert leaf.closed and LEAF2 not in ready.app.datapaths  # it reconnects, and is installed afresh


def test_a_batch_that_timed_out_on_a_switch_is_undone_there_when_it_is_installed_again(ready, monkeypatch):
    """LEAF2 took a batch's rule and never answered its barrier: the call fails, LEAF2's
    connection is closed, and when it reconnects (rules and all: fail-secure) the undo
    comes first, so it holds no rule of the uncommitted policy."""
    monkeypatch.setattr(app_mod, "BARRIER_TIMEOUT_S", 0.2)
    leaf = ready.switches[LEAF2]
    receive = leaf._receive
    leaf._receive = lambda m, msg: None if m.kind == "barrier" else receive(m, msg)
    [reply] = ready.serve({"op": "set_policy", "policy": {**POLICY, "queue": 2}})
    assert reply["ok"] is False and leaf.closed and len(leaf.policy_flows()) == 1  # the switch applied it
    leaf._receive = receive
    leaf.seen.clear()
    ready.connect(LEAF2, leaf)
    assert LEAF2 in ready.app.datapaths and leaf.policy_flows() == {} and ready.app.undo_on_install == {}
    assert [m.command for m in leaf.seen if m.kind == "flow" and m.table == 0 and m.priority] == [
        ofp.OFPFC_DELETE_STRICT]
