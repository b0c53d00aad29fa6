"""The policy interface: per-flow queue and rate decisions, turned into switch ops.

A scheduler (Grouper stage priorities, OES flow rates, a baseline) speaks only in
``FlowPolicy``: which flow (source/destination host, protocol, ports), which
queue (1..7, by DSCP marking at the ingress leaf) and which rate limit. The
``PolicyTable`` keeps the current policy of each flow and plans the ordered ops
that move the fabric from the old state to the new one. Forwarding is never
touched: policies live in their own OpenFlow table (``POLICY_TABLE``) and jump
to the forwarding table afterwards.

Rate limits have two mechanisms:
- ``meter``: an OpenFlow 1.3 meter (drop band, no burst flag) at the ingress leaf;
- ``host``: an htb class with rate = ceil = target on the sender's interface, in
  the sender's namespace.
``DEFAULT_RATE_MECHANISM`` is the one that tracked its target better when
measured (docs/emulation.md, "Rate limits: host htb is the default").
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from controller.rules import (
    ETH_IP,
    FORWARD_TABLE,
    POLICY_TABLE,
    FlowRule,
    Meter,
)
from topologies import queues
from topologies.fabric import MAX_LINK_MBPS, Fabric, host_interface

RATE_MECHANISMS = ("host", "meter")
DEFAULT_RATE_MECHANISM = "host"
PRIO_POLICY_BASE = 1000  # policy rules: 1,000 to 16,999 (``rule_for``)
MAX_POLICIES = queues.MAX_POLICY_SLOTS


class PolicyError(ValueError):
    """A policy request is invalid; the message is one line naming the field."""


@dataclass(frozen=True)
class FlowPolicy:
    src: str
    dst: str
    proto: str | None = None
    src_port: int | None = None
    dst_port: int | None = None
    queue: int | None = None  # switch queue, by DSCP marked at the ingress leaf
    rate_mbps: float | None = None
    rate_mechanism: str = DEFAULT_RATE_MECHANISM
    host_queue: int | None = None  # the sender NIC's queue (Grouper's sender-side priority, Fig. 8)

    @property
    def key(self) -> tuple:
        return (self.src, self.dst, self.proto, self.src_port, self.dst_port)

    @classmethod
    def from_dict(cls, data: dict) -> "FlowPolicy":
        if not isinstance(data, dict):
            raise PolicyError(f"policy: must be a mapping of fields, got {data!r}")
        allowed = set(cls.__dataclass_fields__)
        for k in data:
            if k not in allowed:
                known = f"(allowed: {', '.join(sorted(allowed))})"
                if not (isinstance(k, str) and k.isidentifier()):  # keep the field path one plain line
                    raise PolicyError(f"policy: unknown field {k!r} {known}")
                raise PolicyError(f"policy.{k}: unknown field {known}")
        if "src" not in data or "dst" not in data:
            raise PolicyError("policy: src and dst hosts are required")
        pol = cls(**data)
        if pol.rate_mechanism is None:
            pol = replace(pol, rate_mechanism=DEFAULT_RATE_MECHANISM)
        return pol

    def to_dict(self) -> dict:
        return asdict(self)


def validate(policy: FlowPolicy, fabric: Fabric) -> None:
    """The one check of a policy, whoever made it (a scheduler over the management
    API, a spec). Any field of any type gets a one-line ``policy.<field>: must be
    ..., got ...`` rather than a TypeError; specs re-home these to their own paths."""
    for end in ("src", "dst"):
        name = getattr(policy, end)
        if not isinstance(name, str):
            raise PolicyError(f"policy.{end}: must be a host name (string), got {name!r}")
        if not any(h.name == name for h in fabric.hosts):
            raise PolicyError(f"policy.{end}: {name!r} is not a host of the fabric")
    if policy.src == policy.dst:
        raise PolicyError("policy.dst: must differ from src")
    if policy.proto not in (None, "tcp", "udp"):
        raise PolicyError(f"policy.proto: must be tcp, udp or null, got {policy.proto!r}")
    for port_field in ("src_port", "dst_port"):
        port = getattr(policy, port_field)
        if port is None:
            continue
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise PolicyError(f"policy.{port_field}: must be a port number 1..65535, got {port!r}")
        if policy.proto is None:
            raise PolicyError(f"policy.{port_field}: a port needs proto tcp or udp")
    queue = policy.queue
    for queue_field in ("queue", "host_queue"):
        value = getattr(policy, queue_field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value not in queues.SCHEDULER_QUEUES):
            raise PolicyError(f"policy.{queue_field}: must be a scheduler queue {queues.SCHEDULER_QUEUES[0]}.."
                              f"{queues.SCHEDULER_QUEUES[-1]} (0 is reserved for control), got {value!r}")
    rate = policy.rate_mbps
    # The comparison also turns away nan, inf and a rate no link could carry.
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                             or not 0 < rate <= MAX_LINK_MBPS):
        raise PolicyError(f"policy.rate_mbps: must be a number in (0, {MAX_LINK_MBPS:g}] (Mbit/s), got {rate!r}")
    if policy.rate_mechanism not in RATE_MECHANISMS:
        raise PolicyError(f"policy.rate_mechanism: must be one of {', '.join(RATE_MECHANISMS)}, "
                          f"got {policy.rate_mechanism!r}")
    if rate is not None and policy.rate_mechanism == "meter" and round(rate * 1000) < 1:
        raise PolicyError(f"policy.rate_mbps: a meter counts whole kbit/s: at least 0.001 Mbit/s, got {rate!r}")
    if queue is None and rate is None and policy.host_queue is None:
        raise PolicyError("policy: sets neither queue, host_queue nor rate_mbps (use remove to drop a policy)")
    if policy.host_queue is not None and rate is not None and policy.rate_mechanism == "host":
        raise PolicyError("policy.host_queue: a flow's sender NIC class is either a queue or a host rate limit; "
                          "use rate_mechanism meter with host_queue")


def of_match(policy: FlowPolicy, fabric: Fabric) -> dict:
    match = {"eth_type": ETH_IP, "ipv4_src": fabric.host(policy.src).ip, "ipv4_dst": fabric.host(policy.dst).ip}
    if policy.proto:
        match["ip_proto"] = queues.IP_PROTO[policy.proto]
        if policy.src_port is not None:
            match[f"{policy.proto}_src"] = policy.src_port
        if policy.dst_port is not None:
            match[f"{policy.proto}_dst"] = policy.dst_port
    return match


def rule_for(policy: FlowPolicy, policy_id: int, fabric: Fabric) -> FlowRule:
    match = of_match(policy, fabric)
    actions = ()
    if policy.queue is not None:
        actions = (("set_dscp", queues.DSCP_OF_QUEUE[policy.queue]),)
    meter = policy_id if policy.rate_mbps is not None and policy.rate_mechanism == "meter" else None
    # Where two policies' flows overlap, the match naming more fields (protocol, ports)
    # wins, then the lower id: the order the senders' filters keep (queues.host_flow_pref),
    # and no two overlapping rules of one priority, whose order OVS leaves undefined.
    named = queues.named_fields(policy.proto, policy.src_port, policy.dst_port)
    priority = PRIO_POLICY_BASE + named * MAX_POLICIES + (MAX_POLICIES - policy_id)
    return FlowRule(fabric.switch(fabric.host(policy.src).switch).dpid, POLICY_TABLE, priority, match, actions,
                    goto=FORWARD_TABLE, meter=meter, cookie=policy_id)


def _rule_place(rule: FlowRule) -> tuple:
    """What names a rule on its switch (OpenFlow: table, priority and match; not its cookie)."""
    return rule.dpid, rule.table, rule.priority, tuple(sorted(rule.match.items()))


def _meter_for(policy: FlowPolicy, policy_id: int, fabric: Fabric) -> Meter | None:
    if policy.rate_mbps is None or policy.rate_mechanism != "meter":
        return None
    return Meter(fabric.switch(fabric.host(policy.src).switch).dpid, policy_id, int(round(policy.rate_mbps * 1000)))


def _host_part(policy: FlowPolicy) -> bool:
    """Whether the policy has a class or filter on the sender's NIC."""
    return policy.host_queue is not None or (policy.rate_mbps is not None and policy.rate_mechanism == "host")


def _host_set(policy: FlowPolicy, policy_id: int, fabric: Fabric) -> list:
    if not _host_part(policy):
        return []
    intf, pref = host_interface(policy.src), _host_pref(policy, policy_id)
    match = queues.host_flow_match(fabric.host(policy.dst).ip, policy.proto, policy.src_port, policy.dst_port)
    if policy.host_queue is not None:
        return [("host_tc", policy.src, queues.host_flow_queue_cmds(intf, pref, policy.host_queue, match))]
    return [("host_tc", policy.src, queues.host_flow_set_cmds(intf, policy_id, pref, policy.rate_mbps, match))]


def _host_pref(policy: FlowPolicy, policy_id: int) -> int:
    return queues.host_flow_pref(policy_id, policy.proto, policy.src_port, policy.dst_port)


def _host_rate_only_change(old: FlowPolicy, new: FlowPolicy) -> bool:
    """Both are sender-side rate classes of the same flow (same key, hence same filter)."""
    return (old.key == new.key and old.rate_mechanism == new.rate_mechanism == "host"
            and old.rate_mbps is not None and new.rate_mbps is not None
            and old.host_queue is None and new.host_queue is None)


def _host_remove(policy: FlowPolicy, policy_id: int) -> list:
    if not _host_part(policy):
        return []
    return [("host_tc", policy.src, queues.host_flow_remove_cmds(host_interface(policy.src), policy_id,
                                                                 _host_pref(policy, policy_id)))]


class PolicyTable:
    """Current policies by flow key, and the ops that realise each change.

    Invariant: a policy's id is its OpenFlow cookie, its meter id and its host
    class slot (``queues.host_flow_set_cmds``), so one number finds every piece of
    it in the switch and in the sender's namespace. A changed policy keeps its id,
    so its rule is overwritten in place and traffic is never left unmarked.

    Ops, executed in order by the controller app: ("meter_set", Meter, existed),
    ("rule_set", FlowRule), ("rule_del", FlowRule), ("meter_del", Meter),
    ("host_tc", host, [tc command, ...]). ``plan`` computes a whole batch of
    changes without touching the table; ``commit`` makes it current once the
    switches and hosts accepted it.
    """

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.by_key: dict[tuple, tuple[int, FlowPolicy]] = {}

    @staticmethod
    def _free_id(by_key: dict) -> int:
        used = {pid for pid, _ in by_key.values()}
        for pid in range(1, MAX_POLICIES + 1):
            if pid not in used:
                return pid
        raise PolicyError(f"policy: table full ({MAX_POLICIES} policies)")

    def _plan_set(self, by_key: dict, policy: FlowPolicy) -> tuple[int, list]:
        validate(policy, self.fabric)
        old = by_key.get(policy.key)
        pid = old[0] if old else self._free_id(by_key)
        ops: list = []
        meter = _meter_for(policy, pid, self.fabric)
        old_meter = _meter_for(old[1], pid, self.fabric) if old else None
        if meter:
            ops.append(("meter_set", meter, old_meter is not None))
        rule = rule_for(policy, pid, self.fabric)
        if not old or rule != rule_for(old[1], pid, self.fabric):  # a rate-only change leaves it
            ops.append(("rule_set", rule))
        if old_meter and not meter:
            ops.append(("meter_del", old_meter))
        if old and _host_rate_only_change(old[1], policy):
            # OES's common case: one class's rate, no filter or queue touched, no barrier.
            ops.append(("host_tc", policy.src, queues.host_flow_rate_cmds(host_interface(policy.src), pid,
                                                                         policy.rate_mbps)))
        else:
            if old:
                # A u32 filter cannot be replaced without its handle (a "replace" adds a second
                # one behind the first), so the sender's part is rebuilt, in the same tc batch.
                ops += _host_remove(old[1], pid)
            ops += _host_set(policy, pid, self.fabric)
        by_key[policy.key] = (pid, policy)
        return pid, ops

    def _plan_remove(self, by_key: dict, policy_id) -> list:
        for key, (pid, policy) in list(by_key.items()):
            if pid == policy_id:
                del by_key[key]
                ops: list = [("rule_del", rule_for(policy, pid, self.fabric))]
                meter = _meter_for(policy, pid, self.fabric)
                if meter:
                    ops.append(("meter_del", meter))
                return ops + _host_remove(policy, pid)
        raise PolicyError(f"policy.id: no policy with id {policy_id!r}")

    def plan(self, changes: list[tuple[str, object]]) -> tuple[list[int], list, dict]:
        """Plan ("set", FlowPolicy) / ("remove", policy id) changes as one batch.

        Returns (the id of each change, the ops, the table after the batch); the
        table itself is untouched, so a batch that fails anywhere changes nothing.
        """
        by_key = dict(self.by_key)
        ids, ops = [], []
        for kind, arg in changes:
            if kind == "set":
                pid, change_ops = self._plan_set(by_key, arg)
            elif kind == "remove":
                if not isinstance(arg, int) or isinstance(arg, bool):  # True == 1 would remove policy 1
                    raise PolicyError(f"policy.id: must be an integer, got {arg!r}")
                pid, change_ops = arg, self._plan_remove(by_key, arg)
            else:
                raise PolicyError(f"changes: unknown change {kind!r} (set or remove)")
            ids.append(pid)
            ops += change_ops
        return ids, ops, by_key

    def commit(self, by_key: dict) -> None:
        self.by_key = by_key

    def rollback(self, by_key: dict) -> list:
        """Ops that put the senders and the switches back as the committed table has
        them after a batch planned as ``by_key`` failed part-way (a host's tc or a
        switch refused it, after others took their part). Every policy whose entry the
        batch changed has its planned sender part and switch rule removed, and its
        committed ones set again: a leftover would steer its flow once its id is reused,
        and a rule of a flow no policy names would stay for good. Deletes of what is
        gone must be tolerated (tc's, and OpenFlow's, which are no errors)."""
        now = {pid: policy for pid, policy in self.by_key.values()}
        planned = {pid: policy for pid, policy in by_key.values()}
        ops: list = []
        for pid in sorted(now.keys() | planned.keys()):
            old, new = now.get(pid), planned.get(pid)
            if old == new:
                continue
            # an id the batch freed and gave to another flow: both flows' parts go
            gone = _host_remove(new, pid) if new else []
            ops += gone + [op for op in (_host_remove(old, pid) if old else []) if op not in gone]
            if old:
                ops += _host_set(old, pid, self.fabric)
            old_rule = rule_for(old, pid, self.fabric) if old else None
            old_meter = _meter_for(old, pid, self.fabric) if old else None
            rule = rule_for(new, pid, self.fabric) if new else None
            meter = _meter_for(new, pid, self.fabric) if new else None
            if rule and (old_rule is None or _rule_place(rule) != _rule_place(old_rule)):  # else overwritten below
                ops.append(("rule_del", rule))
            if old:
                if old_meter:
                    ops.append(("meter_set", old_meter, None))  # None: unknown whether the switch has it
                ops.append(("rule_set", old_rule))
            # last: no rule uses it any more (OVS deletes the rules of a meter it deletes)
            if meter and not (old_meter and old_meter.dpid == meter.dpid):
                ops.append(("meter_del", meter))
        return ops

    def switch_state(self, dpid: int) -> list:
        """Ops that (re)install every current policy's meter and rule on one switch."""
        ops: list = []
        for pid, policy in sorted(self.by_key.values(), key=lambda entry: entry[0]):
            rule = rule_for(policy, pid, self.fabric)
            if rule.dpid != dpid:
                continue
            meter = _meter_for(policy, pid, self.fabric)
            if meter:
                ops.append(("meter_set", meter, None))  # None: unknown whether the switch still has it
            ops.append(("rule_set", rule))
        return ops

    def listing(self) -> list[dict]:
        return [{"id": pid, **pol.to_dict()} for pid, pol in sorted(self.by_key.values(), key=lambda x: x[0])]

    def restore(self, listing: list[dict]) -> None:
        """Load a ``listing()`` (the controller's persisted copy), ids kept."""
        by_key = {}
        for entry in listing:
            entry = dict(entry)
            pid = entry.pop("id")
            policy = FlowPolicy.from_dict(entry)
            validate(policy, self.fabric)
            by_key[policy.key] = (pid, policy)
        self.by_key = by_key
