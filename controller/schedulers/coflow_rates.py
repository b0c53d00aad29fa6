"""The DGTP paper's flow-scheduling baselines (§VI-B): MRTF and OMCoflow as rate
policies of ``oes.oes_rates``'s signature (machines and the active flows in, Mbit/s
per flow id out), for the model and for the fabric alike.

The network is OES's: only NICs constrain (the core is non-blocking), a flow m -> m'
uses m's egress and m''s ingress. Both policies read each flow's remaining volume
(``Flow.remaining_mbit``, > 0: the caller hands in what is left at the moment of
the call) and are recomputed at every call, so they are online and preemptive. A
rate of 0 means the flow waits.

The paper gives one sentence for each and there is no public code for either; what
follows are our readings, also in docs/gnn-oes.md.

- ``mrtf_rates``, "minimum remaining time first": a flow's remaining time is its
  remaining volume over the rate it would get alone, the smaller of its sender's
  egress and its receiver's ingress. In that order (ties: the order given), each
  flow takes everything its two ports have left (strict priority, the rate is the
  smaller leftover). Work-conserving: afterwards every flow has a full port.
- ``omcoflow_rates``, OMCoflow (Tan et al., "Joint Online Coflow Routing and
  Scheduling in Data Center Networks", IEEE/ACM ToN 2019, the paper's [53]) as
  DGTP uses it: "groups flows to the same task as one coflow, and sets the flow
  rates in each coflow inversely proportional to predicted flow finish time
  (supposing it is the only coflow in the network)". Readings:
  - a coflow is every transfer into one task in one iteration (``Flow.coflow_key``);
  - a coflow alone finishes at best at its bottleneck time Γ = the largest, over
    the ports it uses, of its remaining volume through the port over the port's
    rate; every flow at remaining / Γ finishes exactly then, together (Tan et al.'s
    single-coflow optimum without routing: one path per flow here). "Inversely
    proportional to the predicted finish time" is this 1 / Γ, the same for every
    flow of the coflow, times the flow's remaining volume;
  - coflows are served in order of Γ, smallest first (Smith's rule for total coflow
    completion time with equal weights, which Tan et al. minimise; ties: order of
    first appearance), recomputed from the remaining volumes at every call;
  - in that order each coflow is paced on what the coflows before it left: Γ' over
    the leftover port rates, every flow at remaining / Γ'. So the first coflow gets
    its lone rates, and a later one is slowed as a whole, its flows still finishing
    together; a coflow with a full port waits;
  - work conservation is the coflows': afterwards every coflow has a full port, so
    none could go faster as a whole. Leftover that only some of a coflow's flows
    could use stays unused: taking it would break the pacing the rule asks for
    (Varys-style per-flow backfilling would be the other reading).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence

from controller.schedulers.oes import _EPS, Flow, Machine, _by_name, _check_flows

def _port_rates(machines: Iterable[Machine], flows: Sequence[Flow], policy: str) -> tuple[dict, dict]:
    """Every machine's egress and ingress rate (its two ports), once the machines and the
    flows (remaining volumes included) are checked."""
    table = _by_name(machines)
    _check_flows(flows, table)
    for f in flows:
        if f.remaining_mbit is None or not f.remaining_mbit > 0:
            raise ValueError(f"flow {f.flow_id}: {policy} needs remaining_mbit > 0, got {f.remaining_mbit!r}")
    return {n: m.egress_mbps for n, m in table.items()}, {n: m.ingress_mbps for n, m in table.items()}


def mrtf_rates(machines: Iterable[Machine], active_flows: Sequence[Flow]) -> dict[str, float]:
    """flow id -> Mbit/s: minimum remaining time first, strict priority."""
    out_rate, in_rate = _port_rates(machines, active_flows, "mrtf")
    out_left, in_left = dict(out_rate), dict(in_rate)
    rates: dict[str, float] = {}
    for f in sorted(active_flows, key=lambda f: f.remaining_mbit / min(out_rate[f.src], in_rate[f.dst])):
        mbps = rates[f.flow_id] = min(out_left[f.src], in_left[f.dst])
        # rounding must not leave a negative leftover
        out_left[f.src] = max(0.0, out_left[f.src] - mbps)
        in_left[f.dst] = max(0.0, in_left[f.dst] - mbps)
    return rates


def omcoflow_rates(machines: Iterable[Machine], active_flows: Sequence[Flow]) -> dict[str, float]:
    """flow id -> Mbit/s: coflows smallest bottleneck first, each paced so its flows finish together."""
    out_rate, in_rate = _port_rates(machines, active_flows, "omcoflow")
    coflows: dict[Hashable, list[Flow]] = defaultdict(list)  # in order of first appearance
    for f in active_flows:
        coflows[f.coflow_key].append(f)

    def volumes(flows: list[Flow]) -> tuple[dict[str, float], dict[str, float]]:
        """The remaining Mbit of ``flows`` through each egress and each ingress."""
        out_volume: dict[str, float] = defaultdict(float)
        in_volume: dict[str, float] = defaultdict(float)
        for f in flows:
            out_volume[f.src] += f.remaining_mbit
            in_volume[f.dst] += f.remaining_mbit
        return out_volume, in_volume

    def bottleneck_s(volume: tuple[dict, dict], out_left: dict[str, float], in_left: dict[str, float]) -> float:
        """When a coflow of ``volume`` would be done at the best pace the leftover port
        rates allow (inf if a port is full)."""
        out_volume, in_volume = volume
        return max(max(v / out_left[m] if out_left[m] > _EPS * out_rate[m] else math.inf for m, v in out_volume.items()),
                   max(v / in_left[m] if in_left[m] > _EPS * in_rate[m] else math.inf for m, v in in_volume.items()))

    out_left, in_left = dict(out_rate), dict(in_rate)
    rates: dict[str, float] = {}
    ranked = [(flows, volumes(flows)) for flows in coflows.values()]
    for flows, volume in sorted(ranked, key=lambda c: bottleneck_s(c[1], out_rate, in_rate)):
        finish_s = bottleneck_s(volume, out_left, in_left)
        for f in flows:
            mbps = rates[f.flow_id] = f.remaining_mbit / finish_s  # 0 when the coflow waits
            out_left[f.src] = max(0.0, out_left[f.src] - mbps)
            in_left[f.dst] = max(0.0, in_left[f.dst] - mbps)
    return rates
