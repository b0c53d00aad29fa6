"""The GNN kind's rate coordinator as a pure object: flow events in, per-flow rates out.

One copy of the rate logic the emulated driver (``driver.OesRates``) carries out and
a simulator would drive: it tracks the inter-machine transfers the tasks report
(``flow_start`` / ``flow_end``, the ``hosts.messages`` schema), with OES's per-pair
pipelining (Alg. 1 lines 8-17: a task pair's transfers share one connection, so a
transfer reported while its pair's previous one is still on the wire waits behind
it, pending, with no rate and not counted in Δ), and turns the active ones into one
rate per flow 5-tuple (``decide``). It reads no clock and touches no socket.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.schedulers import oes
from experiments.platform.channel import DriverError

FlowKey = tuple  # (src host, dst host, "tcp", src port, dst port)
RatePolicy = Callable[[Sequence[oes.Machine], Sequence[oes.Flow]], dict[str, float]]


@dataclass(frozen=True)
class RateDecision:
    active: list[oes.Flow]  # the flows the rates were computed over, in the pipeline's order
    pending: int  # transfers waiting behind their pair's previous one
    triggers: list[float]  # the event times this decision answers
    rates: dict[FlowKey, float]  # Mbit/s per flow 5-tuple, in flow id order


class RateCoordinator:
    def __init__(self, machines: Sequence[oes.Machine], policy: RatePolicy = oes.oes_rates):
        self.machines, self.policy = list(machines), policy
        self.pipeline = oes.PairPipeline()  # F_act and F_pend of Alg. 1
        self.started: dict[str, dict] = {}  # flow id -> its flow_start event, while active or pending
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
        if message["kind"] == "flow_start":
            if message["src"] == message["dst"]:
                self.local.add(flow_id)
                return False
            if flow_id in self.ended_early:
                self.ended_early.discard(flow_id)
                return False
            self.started[flow_id] = message
            if not self.pipeline.start(self._flow(message)):
                return False
        elif flow_id in self.local:
            self.local.discard(flow_id)
            return False
        elif flow_id not in self.started:
            self.ended_early.add(flow_id)
            return False
        else:
            start = self.started.pop(flow_id)
            if flow_id not in {f.flow_id for f in self.pipeline.active}:
                raise DriverError(f"flow {flow_id} ended while pending behind its pair's previous flow")
            self.pipeline.end(self._flow(start))
        self.pending_triggers.append(message["t"])
        return True

    def decide(self) -> RateDecision:
        """The policy's rates of the active flows, keyed by 5-tuple."""
        flows = self.pipeline.active
        rates = {}
        for fid, mbps in sorted(self.policy(self.machines, flows).items()):
            f = self.started[fid]
            rates[(f["src"], f["dst"], "tcp", f["src_port"], f["dst_port"])] = mbps
        triggers, self.pending_triggers = self.pending_triggers, []
        return RateDecision(list(flows), len(self.pipeline.pending), triggers, rates)

    @staticmethod
    def _flow(message: dict) -> oes.Flow:
        return oes.Flow(message["flow"], message["src"], message["dst"], message["iteration"],
                        pair=(message["src_task"], message["dst_task"]))
