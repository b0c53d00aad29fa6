"""The trainbed os-ken app: proactive forwarding, proxy ARP, and the policy API.

Kept thin: forwarding comes from ``controller.routing``, policies from
``controller.policy``; this module only turns their data into OpenFlow messages
and serves the management socket. The fabric, the management socket path and
the state file are passed by ``controller.main`` through ``TrainbedController.config``.

Management API: JSON lines over a unix socket (mode 0600: only root opens it; never
on the emulated data network). Requests: {"op": "ping"}, {"op": "status"},
{"op": "register_hosts", "pids": {host: pid}}, {"op": "set_policy", "policy": {...}},
{"op": "remove_policy", "id": N}, {"op": "apply", "changes": [{"set": {...}} |
{"remove": N}, ...]}, {"op": "list_policies"}. Replies: {"ok": true, ...} or
{"ok": false, "error": "one line"}. A policy call returns after every switch it
touched answered a barrier with no OpenFlow error for its messages and every
host's tc batch succeeded; only then is the policy table committed.

Crash recovery: every committed change (and the hosts' namespaces) is written to
the state file before the reply. A controller started on an existing state file
loads it, and reinstalls forwarding, groups and every policy (same ids) on each
switch as it reconnects; switches keep forwarding meanwhile (fail-secure). Host
tc classes live in the hosts' namespaces and survive the controller.
"""
from __future__ import annotations

import json
import os
import threading
from collections import defaultdict

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.lib.packet import arp, ethernet, packet
from os_ken.ofproto import ofproto_v1_3

from controller import routing
from controller.hostnet import TcError, run_tc_batch
from controller.policy import FlowPolicy, PolicyError, PolicyTable
from controller.rules import ETH_ARP, FlowRule, Meter, SelectGroup
from topologies.fabric import Fabric

BARRIER_TIMEOUT_S = 5.0
# A switch whose installation timed out (a loaded box: a controller restart upserts
# every group and meter, a barrier each) is installed again this many times in all,
# this long apart; a refusal is not retried (the switch would refuse again).
INSTALL_ATTEMPTS = 3
INSTALL_RETRY_S = 1.0
# OpenFlow errors (type, code) that mean "not there": an upsert that tried a modify then adds.
_UNKNOWN = {(ofproto_v1_3.OFPET_GROUP_MOD_FAILED, ofproto_v1_3.OFPGMFC_UNKNOWN_GROUP): "group",
            (ofproto_v1_3.OFPET_METER_MOD_FAILED, ofproto_v1_3.OFPMMFC_UNKNOWN_METER): "meter"}
# A meter add the switch refuses because the meter is there: a batch that failed
# halfway left it (the table commits nothing then), so the retry modifies it instead.
_METER_EXISTS = (ofproto_v1_3.OFPET_METER_MOD_FAILED, ofproto_v1_3.OFPMMFC_METER_EXISTS)


def _split(ops: list) -> tuple[dict[str, list[str]], dict[int, list]]:
    """A batch's ops as each host's tc commands and each switch's ops, in order."""
    by_host: dict[str, list[str]] = defaultdict(list)
    by_switch: dict[int, list] = defaultdict(list)
    for op in ops:
        if op[0] == "host_tc":
            by_host[op[1]] += op[2]
        else:
            by_switch[op[1].dpid].append(op)
    return by_host, by_switch


class BarrierTimeout(PolicyError):
    """Switch ``dpid`` did not answer a barrier in time: it may still apply what it was sent."""

    def __init__(self, dpid: int):
        super().__init__(f"switch {dpid:#x}: no barrier reply within {BARRIER_TIMEOUT_S} s")
        self.dpid = dpid


class TrainbedController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    config: dict = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric = Fabric.from_dict(self.config["fabric"])
        self.rules, self.groups = routing.forwarding(self.fabric)
        self.policies = PolicyTable(self.fabric)
        self.datapaths: dict[int, object] = {}
        # dpid -> ops undoing a failed batch on a switch it reached that went (or stopped
        # answering) before they could be sent: sent first when it is installed again
        self.undo_on_install: dict[int, list] = {}
        self.host_pids: dict[str, int] = {}
        # threading.Event, not hub.Event: under os-ken's default native hub the latter's
        # wait ignores its timeout, so a switch that never answers would hang a call.
        self.barriers: dict[tuple[int, int], threading.Event] = {}
        # One policy change (plan, apply, commit) or switch install at a time: the API
        # serves each client in a thread of its own, and two plans from the same table
        # would hand out the same id.
        self.changing = threading.Lock()
        # (dpid, xid) -> (type, code) of an OpenFlow error reply; xids are per switch.
        self.of_errors: dict[tuple[int, int], tuple[int, int]] = {}
        self.expected = {s.dpid for s in self.fabric.switches}
        self.state_file = self.config.get("state")
        self.recovered = self._load_state()
        socket_path = self.config["socket"]
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        old_umask = os.umask(0o177)  # the socket is created 0600: root only
        try:
            self.server = hub.StreamServer((socket_path,), self._serve_client)
        finally:
            os.umask(old_umask)
        hub.spawn(self.server.serve_forever)

    # --- persisted state --------------------------------------------------------
    def _load_state(self) -> bool:
        if not self.state_file or not os.path.exists(self.state_file):
            return False
        with open(self.state_file) as f:
            state = json.load(f)
        self.host_pids = {str(k): int(v) for k, v in state["host_pids"].items()}
        self.policies.restore(state["policies"])
        self.logger.info("recovered %d policies and %d hosts from %s", len(state["policies"]),
                         len(self.host_pids), self.state_file)
        return True

    def _save_state(self) -> None:
        if not self.state_file:
            return
        tmp = f"{self.state_file}.tmp"
        with open(tmp, "w") as f:
            json.dump({"host_pids": self.host_pids, "policies": self.policies.listing()}, f)
        os.replace(tmp, self.state_file)

    # --- OpenFlow -------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features(self, ev):
        dpid = ev.msg.datapath_id
        if dpid not in self.expected:
            self.logger.warning("ignoring unknown switch dpid %#x", dpid)
            return
        # The barrier reply arrives through this app's event loop: wait elsewhere.
        hub.spawn(self._install_forwarding, ev.msg.datapath, dpid)

    def _install_forwarding(self, dp, dpid: int) -> None:
        """Forwarding, groups and this switch's policies; a reconnecting switch (after a
        controller restart) still has them, so groups and meters are upserted. One that
        times out is installed again (``INSTALL_ATTEMPTS``) while its connection lasts,
        then dropped to reconnect (``_drop``); one that refuses stays out (logged). A
        failed batch's undo kept for it (``undo_on_install``) goes first."""
        for attempt in range(1, INSTALL_ATTEMPTS + 1):
            try:
                with self.changing:
                    for group in self.groups:
                        if group.dpid == dpid:
                            self._upsert(dp, "group", group)
                    xids = [self._send(dp, self._rule_msg(dp, rule, dp.ofproto.OFPFC_ADD))
                            for rule in self.rules if rule.dpid == dpid]
                    undo = self.undo_on_install.get(dpid, [])
                    self._apply_switch_ops(dp, undo + self.policies.switch_state(dpid), xids)
                    self.undo_on_install.pop(dpid, None)
                    self.datapaths[dpid] = dp
                break
            except BarrierTimeout as err:
                self.logger.error("%s (installation %d of %d)", err, attempt, INSTALL_ATTEMPTS)
                if not getattr(dp, "is_active", True):
                    return
                if attempt == INSTALL_ATTEMPTS:
                    self._drop(dp)  # it reconnects, and is installed afresh
                    return
                hub.sleep(INSTALL_RETRY_S)
            except (PolicyError, OSError) as err:
                self.logger.error("switch %#x: %s", dpid, err)
                return
        self.logger.info("switch %#x ready (%d/%d)%s", dpid, len(self.datapaths), len(self.expected),
                         " after recovery" if self.recovered else "")

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def switch_gone(self, ev):
        """A switch whose connection closed is not ready until it reconnects and is
        installed again: calls answer "fabric not ready" (the client retries) instead of
        each waiting out a barrier that a closed connection never answers."""
        dp = ev.datapath
        if dp.id is not None and self.datapaths.get(dp.id) is dp:  # not a newer connection of it
            del self.datapaths[dp.id]
            self.logger.warning("switch %#x disconnected (%d/%d ready)", dp.id, len(self.datapaths),
                                len(self.expected))

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error_msg(self, ev):
        self.of_errors[(ev.msg.datapath.id, ev.msg.xid)] = (ev.msg.type, ev.msg.code)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def barrier_reply(self, ev):
        event = self.barriers.pop((ev.msg.datapath.id, ev.msg.xid), None)
        if event is not None:
            event.set()

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        pkt = packet.Packet(msg.data)
        req = pkt.get_protocol(arp.arp)
        if req is None or req.opcode != arp.ARP_REQUEST:
            return
        mac = routing.arp_reply_for(self.fabric, req.dst_ip)
        if mac is None:
            return
        reply = packet.Packet()
        reply.add_protocol(ethernet.ethernet(ethertype=ETH_ARP, dst=req.src_mac, src=mac))
        reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=mac, src_ip=req.dst_ip,
                                   dst_mac=req.src_mac, dst_ip=req.src_ip))
        reply.serialize()
        dp = msg.datapath
        parser, ofp = dp.ofproto_parser, dp.ofproto
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(msg.match["in_port"])], data=reply.data))

    def _actions(self, dp, actions: tuple) -> list:
        parser, ofp = dp.ofproto_parser, dp.ofproto
        out = []
        for action in actions:
            if action[0] == "output":
                out.append(parser.OFPActionOutput(action[1]))
            elif action[0] == "group":
                out.append(parser.OFPActionGroup(action[1]))
            elif action[0] == "controller":
                out.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER))
            elif action[0] == "set_dscp":
                out.append(parser.OFPActionSetField(ip_dscp=action[1]))
            else:
                raise ValueError(f"unknown action {action!r}")
        return out

    def _rule_msg(self, dp, rule: FlowRule, command):
        parser, ofp = dp.ofproto_parser, dp.ofproto
        inst = []
        if rule.meter is not None:
            inst.append(parser.OFPInstructionMeter(rule.meter, ofp.OFPIT_METER))
        if rule.actions:
            inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, self._actions(dp, rule.actions)))
        if rule.goto is not None:
            inst.append(parser.OFPInstructionGotoTable(rule.goto))
        return parser.OFPFlowMod(datapath=dp, table_id=rule.table, priority=rule.priority, command=command,
                                 cookie=rule.cookie, match=parser.OFPMatch(**rule.match), instructions=inst,
                                 out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)

    def _group_msg(self, dp, group: SelectGroup, command):
        parser, ofp = dp.ofproto_parser, dp.ofproto
        buckets = [parser.OFPBucket(weight=1, watch_port=port, watch_group=ofp.OFPG_ANY,
                                    actions=[parser.OFPActionOutput(port)]) for port in group.ports]
        return parser.OFPGroupMod(dp, command, ofp.OFPGT_SELECT, group.group_id, buckets)

    def _meter_msg(self, dp, meter: Meter, command):
        parser, ofp = dp.ofproto_parser, dp.ofproto
        bands = [parser.OFPMeterBandDrop(rate=meter.kbps, burst_size=0)] if command != ofp.OFPMC_DELETE else []
        return parser.OFPMeterMod(dp, command=command, flags=ofp.OFPMF_KBPS, meter_id=meter.meter_id, bands=bands)

    def _send(self, dp, msg) -> int:
        dp.set_xid(msg)
        dp.send_msg(msg)
        return msg.xid

    def _barrier(self, dp) -> bool:
        req = dp.ofproto_parser.OFPBarrierRequest(dp)
        event = threading.Event()
        dp.set_xid(req)
        self.barriers[(dp.id, req.xid)] = event
        dp.send_msg(req)
        return event.wait(timeout=BARRIER_TIMEOUT_S)

    def _confirm(self, dp, xids: list[int]) -> dict[int, tuple[int, int]]:
        """Barrier, then the OpenFlow errors (by xid) the switch sent for ``xids``."""
        if not self._barrier(dp):
            raise BarrierTimeout(dp.id)
        return {xid: self.of_errors.pop((dp.id, xid)) for xid in xids if (dp.id, xid) in self.of_errors}

    def _upsert(self, dp, what: str, item) -> None:
        """Add or modify a group or meter whose presence on the switch is unknown: modify
        it, and add it on the switch's "unknown group/meter" error."""
        ofp = dp.ofproto
        add, modify = ((ofp.OFPGC_ADD, ofp.OFPGC_MODIFY) if what == "group" else (ofp.OFPMC_ADD, ofp.OFPMC_MODIFY))
        build = self._group_msg if what == "group" else self._meter_msg
        item_id = item.group_id if what == "group" else item.meter_id
        xid = self._send(dp, build(dp, item, modify))
        error = self._confirm(dp, [xid]).get(xid)
        if error is None:
            return
        if _UNKNOWN.get(error) != what:
            raise PolicyError(f"switch {dp.id:#x}: {what} {item_id} modify refused with OpenFlow error {error}")
        xid = self._send(dp, build(dp, item, add))
        error = self._confirm(dp, [xid]).get(xid)
        if error is not None:
            raise PolicyError(f"switch {dp.id:#x}: {what} {item_id} add refused with OpenFlow error {error}")

    # --- policies -------------------------------------------------------------
    def _apply_switch_ops(self, dp, ops: list, xids: list[int] | None = None) -> None:
        """Send one switch's ops in order, then confirm them (and the messages ``xids``
        already sent) with one barrier."""
        ofp = dp.ofproto
        xids = list(xids or [])
        added: dict[int, Meter] = {}  # xid -> the meter it adds
        for op in ops:
            kind = op[0]
            if kind == "meter_set":
                if op[2] is None:
                    self._upsert(dp, "meter", op[1])
                else:
                    xids.append(self._send(dp, self._meter_msg(dp, op[1], ofp.OFPMC_MODIFY if op[2]
                                                               else ofp.OFPMC_ADD)))
                    if not op[2]:
                        added[xids[-1]] = op[1]
            elif kind == "meter_del":
                xids.append(self._send(dp, self._meter_msg(dp, op[1], ofp.OFPMC_DELETE)))
            elif kind == "rule_set":
                xids.append(self._send(dp, self._rule_msg(dp, op[1], ofp.OFPFC_ADD)))
            elif kind == "rule_del":
                xids.append(self._send(dp, self._rule_msg(dp, op[1], ofp.OFPFC_DELETE_STRICT)))
        errors = self._confirm(dp, xids)
        stale = [xid for xid, error in errors.items() if error == _METER_EXISTS and xid in added]
        if stale:  # the meters a failed batch left: modify them, then confirm those
            retried = [self._send(dp, self._meter_msg(dp, added[xid], ofp.OFPMC_MODIFY)) for xid in stale]
            errors = {xid: e for xid, e in errors.items() if xid not in stale} | self._confirm(dp, retried)
        if errors:
            raise PolicyError(f"switch {dp.id:#x}: {len(errors)} message(s) refused, first with OpenFlow error "
                              f"(type, code) {next(iter(errors.values()))}")

    def _apply_host(self, host: str, cmds: list[str]) -> None:
        """One host's tc commands, in one batch in its namespace."""
        pid = self.host_pids.get(host)
        if pid is None:
            raise PolicyError(f"policy.src: host {host} has not been registered (register_hosts)")
        try:
            run_tc_batch(cmds, pid, where=f"host {host}", tolerate_missing_deletes=True)
        except TcError as err:
            raise PolicyError(str(err)) from None

    def _switch(self, dpid: int):
        dp = self.datapaths.get(dpid)
        if dp is None:  # its connection closed since the call began: the client retries
            raise PolicyError(f"fabric not ready: switch {dpid:#x} disconnected during the call")
        return dp

    def _apply(self, ops: list, reached: set) -> None:
        """Host tc changes in one batch per host, then switch changes with one barrier
        per switch; the first failure stops it. ``reached`` gets each host and switch
        (dpid) as it is sent its part: what may have taken it."""
        by_host, by_switch = _split(ops)
        for host, cmds in by_host.items():
            reached.add(host)
            self._apply_host(host, cmds)
        for dpid, switch_ops in by_switch.items():
            dp = self._switch(dpid)
            reached.add(dpid)
            self._apply_switch_ops(dp, switch_ops)

    def _drop(self, dp) -> None:
        """Out of the fabric, and its connection closed: a switch that does not answer
        reconnects (the switch retries) and is installed afresh."""
        if self.datapaths.get(dp.id) is dp:
            del self.datapaths[dp.id]
        self.logger.warning("switch %#x: connection closed, to be installed again", dp.id)
        dp.close()

    def _roll_back(self, by_key: dict, reached: set, silent: int | None) -> None:
        """Undo on the hosts and switches ``reached`` what a failed batch planned as
        ``by_key`` changed (``PolicyTable.rollback``), each tried whatever another
        answers. A switch gone, or not answering (``silent``: the one whose barrier the
        batch timed out on), gets its part when it is installed again
        (``undo_on_install``), before the committed table."""
        by_host, by_switch = _split(self.policies.rollback(by_key))
        problems = []
        for host in reached & by_host.keys():
            try:
                self._apply_host(host, by_host[host])
            except (PolicyError, OSError) as err:
                problems.append(str(err))
        for dpid in reached & by_switch.keys():
            dp = self.datapaths.get(dpid)
            if dp is None:
                unanswered = f"switch {dpid:#x}: disconnected"
            elif dpid == silent:
                unanswered = str(BarrierTimeout(dpid))
            else:
                try:
                    self._apply_switch_ops(dp, by_switch[dpid])
                    continue
                except (BarrierTimeout, OSError) as err:
                    unanswered = str(err)
                except PolicyError as err:  # refused: it answered, and holds what it took
                    problems.append(str(err))
                    continue
            # what it holds is unknown: its part is sent when it is installed again
            self.undo_on_install.setdefault(dpid, []).extend(by_switch[dpid])
            if dp is not None:
                self._drop(dp)
            problems.append(f"{unanswered} (undone when it is installed again)")
        if problems:
            self.logger.error("a failed batch was not wholly undone: %s", "; ".join(problems))

    def _change(self, changes: list[tuple[str, object]]) -> list[int]:
        """Plan, apply, and only then commit and persist a batch of policy changes. A
        batch that fails part-way is rolled back, on the senders and switches it
        reached, to the committed table (``PolicyTable.rollback``)."""
        with self.changing:
            ids, ops, by_key = self.policies.plan(changes)
            reached: set = set()
            try:
                self._apply(ops, reached)
            except Exception as err:
                self._roll_back(by_key, reached, err.dpid if isinstance(err, BarrierTimeout) else None)
                raise
            self.policies.commit(by_key)
            self._save_state()
        return ids

    def _handle(self, req) -> dict:
        if not isinstance(req, dict):
            return {"ok": False, "error": "request: must be a JSON object with an op"}
        op = req.get("op")
        if op == "ping":
            return {"ok": True}
        if op == "status":
            return {"ok": True, "switches_ready": len(self.datapaths), "switches_expected": len(self.expected),
                    "hosts_registered": len(self.host_pids)}
        if op == "register_hosts":
            pids = req.get("pids")
            if not isinstance(pids, dict):
                return {"ok": False, "error": "pids: must be a mapping of host name to namespace pid"}
            hosts = {h.name for h in self.fabric.hosts}
            for host, pid in pids.items():
                if host not in hosts:
                    return {"ok": False, "error": f"pids.{host}: not a host of the fabric"}
                # 0 or 1 would put a host's tc in the root namespace (netns_cmd's pid-less case, or init's)
                if not isinstance(pid, int) or isinstance(pid, bool) or pid < 2:
                    return {"ok": False, "error": f"pids.{host}: must be a process id > 1, got {pid!r}"}
            with self.changing:  # the state file is written under it by every change
                self.host_pids.update(pids)
                self._save_state()
            return {"ok": True}
        if len(self.datapaths) < len(self.expected):
            return {"ok": False, "error": f"fabric not ready: {len(self.datapaths)}/{len(self.expected)} switches"}
        if op == "set_policy":
            return {"ok": True, "id": self._change([("set", FlowPolicy.from_dict(req.get("policy", {})))])[0]}
        if op == "remove_policy":
            self._change([("remove", req.get("id"))])
            return {"ok": True}
        if op == "apply":
            return {"ok": True, "ids": self._change(_parse_changes(req.get("changes")))}
        if op == "list_policies":
            return {"ok": True, "policies": self.policies.listing()}
        return {"ok": False, "error": f"op: unknown operation {op!r}"}

    def _serve_client(self, sock, _addr) -> None:
        stream = sock.makefile("rwb")
        try:
            for line in stream:
                try:
                    reply = self._handle(json.loads(line))
                except (PolicyError, ValueError, TypeError, KeyError) as err:
                    reply = {"ok": False, "error": str(err).splitlines()[0] if str(err) else type(err).__name__}
                except Exception as err:  # noqa: BLE001 - a client always gets its one-line answer
                    self.logger.exception("request failed")
                    first = str(err).splitlines()[0] if str(err) else ""
                    reply = {"ok": False, "error": f"{type(err).__name__}: {first}".rstrip(": ")}
                stream.write((json.dumps(reply) + "\n").encode())
                stream.flush()
        finally:
            stream.close()
            sock.close()


def _parse_changes(raw) -> list[tuple[str, object]]:
    if not isinstance(raw, list):
        raise PolicyError("changes: must be a list of {set: policy} or {remove: id}")
    changes = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in ("set", "remove"):
            raise PolicyError(f"changes[{i}]: must be {{set: policy}} or {{remove: id}}")
        kind, arg = next(iter(entry.items()))
        changes.append((kind, FlowPolicy.from_dict(arg) if kind == "set" else arg))
    return changes
