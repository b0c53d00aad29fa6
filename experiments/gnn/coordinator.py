"""The GNN kind's rate coordinator as a pure object: flow events in, per-flow rates out.

One copy of the rate logic the emulated driver (``driver.OesRates``) carries out and
the job's model (``simulated.GnnSimulation``) drives: it tracks the inter-machine transfers the tasks report
(``flow_start`` / ``flow_end``, the ``hosts.messages`` schema), with OES's per-pair
pipelining (Alg. 1 lines 8-17: a task pair's transfers share one connection, so a
transfer reported while its pair's previous one is still on the wire waits behind
it, pending, with no rate and not counted in Δ), and turns the active ones into one
rate per flow 5-tuple (``decide``) by a rate policy of ``oes.rate_policies``. It
reads no clock and touches no socket: time is the events' ``t``.

The baselines (``coflow_rates``) need each flow's remaining volume, which the tasks
do not report; it is the fluid estimate: the reported bytes less what the decided
rates would have sent since (each rate counted from the latest event before its
decision), floored at ``MIN_REMAINING_SHARE`` of the transfer, so a transfer that
TCP has not finished yet keeps a positive volume. A flow's coflow is its receiving
task and iteration.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.schedulers import oes
from experiments.platform.channel import DriverError
from experiments.platform.policysync import flow_key
from topologies.units import bytes_to_mbit

FlowKey = tuple  # (src host, dst host, "tcp", src port, dst port)
MIN_REMAINING_SHARE = 0.01  # of a transfer: the least remaining volume estimated while it is active
WAITING_MBPS = 0.1  # the least rate installed: for a flow its policy holds at (or near) 0


def installed_mbps(mbps: float) -> float:
    """The rate a decided one is installed as, on the fabric and in the model: a flow
    policy needs a positive rate (a waiting flow's 0 becomes ``WAITING_MBPS``), to 3 decimals."""
    return round(max(mbps, WAITING_MBPS), 3)


@dataclass(frozen=True)
class RateDecision:
    active: list[oes.Flow]  # the flows the rates were computed over, in the pipeline's order
    pending: int  # transfers waiting behind their pair's previous one
    triggers: list[float]  # the event times this decision answers
    rates: dict[FlowKey, float]  # Mbit/s per flow 5-tuple, in flow id order


def oes_machines(fabric) -> list[oes.Machine]:
    """The fabric's hosts as OES sees them: each NIC's rate in and out (the emulated
    driver, the simulator and the bench alike)."""
    return [oes.Machine(host, mbps, mbps) for host, mbps in fabric.host_mbps().items()]


class RateCoordinator:
    def __init__(self, machines: Sequence[oes.Machine], policy: oes.RatePolicy = oes.oes_rates):
        self.machines, self.policy = list(machines), policy
        self.pipeline = oes.PairPipeline()  # F_act and F_pend of Alg. 1
        self.reads_remaining = oes.reads_remaining(policy)  # else no volume sent is counted
        self.started: dict[str, dict] = {}  # flow id -> its flow_start event, while active or pending
        self.keys: dict[str, FlowKey] = {}  # flow id -> its 5-tuple, while active or pending
        self.total_mbit: dict[str, float] = {}  # flow id -> its reported Mbit, while active or pending (baselines)
        self.sent_mbit: dict[str, float] = {}  # flow id -> estimated Mbit sent, while it has a rate
        self.rates_by_id: dict[str, float] = {}  # the latest decision's Mbit/s per active flow id
        self.clock: float | None = None  # the latest event time heard
        self.ended_early: set[str] = set()  # flow_end heard before its flow_start
        self.local: set[str] = set()  # same-machine transfers in flight (profiling runs report them)
        # Event times the next decision answers: not empty exactly when the active flows
        # changed since the last decision.
        self.pending_triggers: list[float] = []

    def on_flow_event(self, message: dict) -> bool:
        """Take a flow_start or flow_end; True if the set of active network flows changed.
        One receiver reports a pair's ends in order, and a flow whose end overtook its
        start is dropped on arrival of the start."""
        flow_id = message["flow"]
        self._advance(message["t"])
        if message["kind"] == "flow_start":
            if message["src"] == message["dst"]:
                self.local.add(flow_id)
                return False
            if flow_id in self.ended_early:
                self.ended_early.discard(flow_id)
                return False
            self.started[flow_id] = message
            self.keys[flow_id] = flow_key(message)
            if self.reads_remaining:
                self.total_mbit[flow_id] = bytes_to_mbit(message["bytes"])
            if not self.pipeline.start(self._flow(message)):
                return False
        elif flow_id in self.local:
            self.local.discard(flow_id)
            return False
        elif flow_id not in self.started:
            self.ended_early.add(flow_id)
            return False
        else:
            flow = self._flow(self.started.pop(flow_id))
            del self.keys[flow_id]
            self.total_mbit.pop(flow_id, None)
            if not self.pipeline.is_active(flow):
                raise DriverError(f"flow {flow_id} ended while pending behind its pair's previous flow")
            self.pipeline.end(flow)
            self.sent_mbit.pop(flow_id, None)
            self.rates_by_id.pop(flow_id, None)
        self.pending_triggers.append(message["t"])
        return True

    def decide(self) -> RateDecision:
        """The policy's rates of the active flows, keyed by 5-tuple: a connection
        carrying several active flows (a sampler's mini-batch and evaluation batch of one
        iteration) gets the sum of their rates. Its bytes leave in the order they were
        sent, whichever flow the policy favours, so the connection must carry all the
        policy gave its flows; one flow's rate alone would hold a favoured flow behind
        a waiting one (MRTF: the evaluation batch behind a mini-batch at 0.1 Mbit/s)."""
        flows = self.pipeline.active
        by_id = self.policy(self.machines, self._with_remaining(flows) if self.reads_remaining else flows)
        self.rates_by_id = by_id
        rates: dict[FlowKey, float] = {}
        keys = self.keys
        for fid, mbps in sorted(by_id.items()):
            key = keys[fid]
            rates[key] = rates.get(key, 0.0) + mbps
        triggers, self.pending_triggers = self.pending_triggers, []
        return RateDecision(flows, self.pipeline.pending_count, triggers, rates)

    def _advance(self, t: float) -> None:
        """Count what the decided rates sent up to ``t`` (events may arrive slightly out of order)."""
        if self.clock is not None and t > self.clock and self.reads_remaining:
            for fid, mbps in self.rates_by_id.items():
                self.sent_mbit[fid] = self.sent_mbit.get(fid, 0.0) + mbps * (t - self.clock)
        self.clock = t if self.clock is None else max(self.clock, t)

    def _with_remaining(self, flows: list[oes.Flow]) -> list[oes.Flow]:
        """``flows``, each with its remaining Mbit."""
        total, sent = self.total_mbit, self.sent_mbit
        return [f.with_remaining(max(total[f.flow_id] - sent.get(f.flow_id, 0.0),
                                     MIN_REMAINING_SHARE * total[f.flow_id])) for f in flows]

    @staticmethod
    def _flow(message: dict) -> oes.Flow:
        return oes.Flow(message["flow"], message["src"], message["dst"], message["iteration"],
                        pair=(message["src_task"], message["dst_task"]),
                        coflow=(message["dst_task"], message["iteration"]))
