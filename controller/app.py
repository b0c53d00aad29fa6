"""The trainbed os-ken app: proactive forwarding, proxy ARP, and the policy API.

Kept thin: forwarding comes from ``controller.routing``, policies from
``controller.policy``; this module only turns their data into OpenFlow messages
and serves the management socket. The fabric, the management socket path and
the ready file are passed by ``controller.main`` through ``TrainbedController.config``.

Management API: JSON lines over a unix socket (a file in the run directory, never
on the emulated data network). Requests: {"op": "ping"}, {"op": "status"},
{"op": "register_hosts", "pids": {host: pid}}, {"op": "set_policy", "policy": {...}},
{"op": "remove_policy", "id": N}, {"op": "list_policies"}. Replies: {"ok": true, ...}
or {"ok": false, "error": "one line"}. A policy call returns after the switch
confirmed the change with a barrier reply.
"""
from __future__ import annotations

import json
import os
import subprocess

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.lib.packet import arp, ethernet, packet
from os_ken.ofproto import ofproto_v1_3

from controller import routing
from controller.policy import FlowPolicy, PolicyError, PolicyTable
from controller.rules import FlowRule, Meter, SelectGroup
from topologies.fabric import Fabric

BARRIER_TIMEOUT_S = 5.0


class TrainbedController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    config: dict = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric = Fabric.from_dict(self.config["fabric"])
        self.rules, self.groups = routing.forwarding(self.fabric)
        self.policies = PolicyTable(self.fabric)
        self.datapaths: dict[int, object] = {}
        self.host_pids: dict[str, int] = {}
        self.barriers: dict[int, hub.Event] = {}
        self.expected = {s.dpid for s in self.fabric.switches}
        socket_path = self.config["socket"]
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        self.server = hub.StreamServer((socket_path,), self._serve_client)
        hub.spawn(self.server.serve_forever)

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
        for group in self.groups:
            if group.dpid == dpid:
                self._send_group(dp, group)
        for rule in self.rules:
            if rule.dpid == dpid:
                self._send_rule(dp, rule, dp.ofproto.OFPFC_ADD)
        if not self._barrier(dp):
            self.logger.error("switch %#x: no barrier reply after installing forwarding", dpid)
            return
        self.datapaths[dpid] = dp
        self.logger.info("switch %#x ready (%d/%d)", dpid, len(self.datapaths), len(self.expected))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        event = self.barriers.pop(ev.msg.xid, None)
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
        reply.add_protocol(ethernet.ethernet(ethertype=0x0806, dst=req.src_mac, src=mac))
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

    def _send_rule(self, dp, rule: FlowRule, command) -> None:
        parser, ofp = dp.ofproto_parser, dp.ofproto
        inst = []
        if rule.meter is not None:
            inst.append(parser.OFPInstructionMeter(rule.meter, ofp.OFPIT_METER))
        if rule.actions:
            inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, self._actions(dp, rule.actions)))
        if rule.goto is not None:
            inst.append(parser.OFPInstructionGotoTable(rule.goto))
        dp.send_msg(parser.OFPFlowMod(datapath=dp, table_id=rule.table, priority=rule.priority, command=command,
                                      cookie=rule.cookie, match=parser.OFPMatch(**rule.match), instructions=inst,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))

    def _send_group(self, dp, group: SelectGroup) -> None:
        parser, ofp = dp.ofproto_parser, dp.ofproto
        buckets = [parser.OFPBucket(weight=1, watch_port=port, watch_group=ofp.OFPG_ANY,
                                    actions=[parser.OFPActionOutput(port)]) for port in group.ports]
        dp.send_msg(parser.OFPGroupMod(dp, ofp.OFPGC_ADD, ofp.OFPGT_SELECT, group.group_id, buckets))

    def _send_meter(self, dp, meter: Meter, command) -> None:
        parser, ofp = dp.ofproto_parser, dp.ofproto
        bands = [parser.OFPMeterBandDrop(rate=meter.kbps, burst_size=0)] if command != ofp.OFPMC_DELETE else []
        dp.send_msg(parser.OFPMeterMod(dp, command=command, flags=ofp.OFPMF_KBPS, meter_id=meter.meter_id,
                                       bands=bands))

    def _barrier(self, dp) -> bool:
        dp.set_xid(req := dp.ofproto_parser.OFPBarrierRequest(dp))
        event = hub.Event()
        self.barriers[req.xid] = event
        dp.send_msg(req)
        return event.wait(timeout=BARRIER_TIMEOUT_S)

    # --- policies -------------------------------------------------------------
    def _apply(self, ops: list) -> None:
        touched = {}
        for op in ops:
            kind = op[0]
            if kind == "host_tc":
                self._host_tc(op[1], op[2])
                continue
            dp = self.datapaths[op[1].dpid]
            ofp = dp.ofproto
            touched[op[1].dpid] = dp
            if kind == "meter_set":
                self._send_meter(dp, op[1], ofp.OFPMC_ADD)
                self._send_meter(dp, op[1], ofp.OFPMC_MODIFY)
            elif kind == "meter_del":
                self._send_meter(dp, op[1], ofp.OFPMC_DELETE)
            elif kind == "rule_set":
                self._send_rule(dp, op[1], ofp.OFPFC_ADD)
            elif kind == "rule_del":
                self._send_rule(dp, op[1], ofp.OFPFC_DELETE_STRICT)
        for dpid, dp in touched.items():
            if not self._barrier(dp):
                raise PolicyError(f"switch {dpid:#x}: no barrier reply within {BARRIER_TIMEOUT_S} s")

    def _host_tc(self, host: str, cmds: list[str]) -> None:
        pid = self.host_pids.get(host)
        if pid is None:
            raise PolicyError(f"policy.src: host {host} has not been registered (register_hosts)")
        for cmd in cmds:
            proc = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", *cmd.split()],
                                  capture_output=True, text=True)
            # Removing a filter or class that is already gone is not an error.
            if proc.returncode != 0 and " del " not in cmd:
                raise PolicyError(f"host {host}: `{cmd}` failed: {proc.stderr.strip()}")

    def _handle(self, req: dict) -> dict:
        op = req.get("op")
        if op == "ping":
            return {"ok": True}
        if op == "status":
            return {"ok": True, "switches_ready": len(self.datapaths), "switches_expected": len(self.expected),
                    "hosts_registered": len(self.host_pids)}
        if op == "register_hosts":
            self.host_pids.update({str(k): int(v) for k, v in req["pids"].items()})
            return {"ok": True}
        if len(self.datapaths) < len(self.expected):
            return {"ok": False, "error": f"fabric not ready: {len(self.datapaths)}/{len(self.expected)} switches"}
        if op == "set_policy":
            policy = FlowPolicy.from_dict(req.get("policy") or {})
            pid, ops = self.policies.set(policy)
            self._apply(ops)
            return {"ok": True, "id": pid}
        if op == "remove_policy":
            self._apply(self.policies.remove(req.get("id")))
            return {"ok": True}
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
                stream.write((json.dumps(reply) + "\n").encode())
                stream.flush()
        finally:
            stream.close()
            sock.close()
