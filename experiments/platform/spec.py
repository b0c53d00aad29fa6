"""The spec fields every emulated workload kind shares, and what they resolve to.

``validate_common`` checks name, description, topology, TCP congestion control,
fidelity thresholds and the ``emulation:`` section (one-line ``SpecError``s naming
the field); ``validate_seed`` and ``validate_time_limit`` the fields of the kinds
that have them; ``fabric_host`` and ``policy_fields`` a flow's hosts and policy
fields; ``fabric_of`` and ``options_of`` turn a resolved spec into the fabric and
the options ``Emulation`` realises it with.
"""
from __future__ import annotations

from controller.policy import FlowPolicy, PolicyError
from controller.policy import validate as validate_policy
from experiments.errors import SpecError
from experiments.platform.capture import validate_capture
from experiments.platform.net import EmulationOptions
from experiments.platform.ovs import SWITCH_DROPS
from experiments.validation import at, choice, host_name, integer, mapping, number, relocate, string, word
from topologies import fabric as fabric_mod
from topologies import queues

CONGESTION_CONTROLS = ("cubic", "bbr", "reno")
# max_cpu_lost_share: steal plus quota-throttled time over the run (experiments.platform.cpu).
FIDELITY_DEFAULTS = {"min_cpu_idle": 0.05, "min_link_goodput_ratio": 0.85, "max_cpu_lost_share": 0.05}
EMULATION_FIELDS = {"ovs_instances", "segmentation", "mtu", "tcp_rto_min_ms", "switch_buffer_bytes", "queue_weights",
                    "switch_drop"}
# The top-level fields ``validate_common`` reads: every kind's spec allows them.
COMMON_FIELDS = {"name", "description", "topology", "tcp_congestion", "fidelity", "emulation", "capture"}
# What a spec may set of a flow's policy (controller.policy.FlowPolicy); the rest names the flow.
POLICY_FIELDS = ("queue", "host_queue", "rate_mbps", "rate_mechanism")


def emulation_options(raw) -> dict:
    """The ``emulation:`` section: how the fabric is realised (defaults: what measured best)."""
    section = mapping("emulation", raw, allowed=EMULATION_FIELDS, optional=True)
    defaults = EmulationOptions()
    instances = section.get("ovs_instances", defaults.ovs_instances)
    if isinstance(instances, str) and instances != "per_switch":
        raise SpecError("emulation.ovs_instances", f"must be an integer >= 1 or \"per_switch\", got {instances!r}")
    if instances != "per_switch":
        instances = integer("emulation.ovs_instances", instances, minimum=1)
    segmentation = choice("emulation.segmentation", section.get("segmentation", defaults.segmentation),
                          queues.SEGMENTATIONS)
    mtu = integer("emulation.mtu", section.get("mtu", defaults.mtu), minimum=queues.MIN_MTU, maximum=queues.MAX_MTU)
    rto_min = section.get("tcp_rto_min_ms")
    if rto_min is not None:
        rto_min = number("emulation.tcp_rto_min_ms", rto_min, minimum=1, maximum=1000)
    buffer = integer("emulation.switch_buffer_bytes", section.get("switch_buffer_bytes", defaults.switch_buffer_bytes),
                     minimum=queues.MIN_SWITCH_BUFFER_BYTES, maximum=queues.MAX_SWITCH_BUFFER_BYTES)
    switch_drop = choice("emulation.switch_drop", section.get("switch_drop", defaults.switch_drop), SWITCH_DROPS)
    weights = section.get("queue_weights")
    if weights is not None:
        try:
            weights = list(queues.check_weights(weights))
        except ValueError as err:
            raise SpecError("emulation.queue_weights", str(err)) from None
    return {"ovs_instances": instances, "segmentation": segmentation, "mtu": mtu, "tcp_rto_min_ms": rto_min,
            "switch_buffer_bytes": buffer, "queue_weights": weights, "switch_drop": switch_drop}


def _topology(raw) -> tuple[dict, fabric_mod.Fabric]:
    """The topology section and its fabric; the builders check their own parameters."""
    topo = mapping("topology", raw)
    if "kind" not in topo:
        raise SpecError("topology.kind", f"is required (one of {', '.join(fabric_mod.BUILDERS)})")
    params = {key: value for key, value in topo.items() if key != "kind"}
    try:
        fab = fabric_mod.build(topo["kind"], **params)
    except fabric_mod.TopologyError as err:
        raise relocate(err, "topology", "topology") from None
    resolved = {**fabric_mod.defaults(topo["kind"]), **params}  # defaults filled in, as every section's
    return {"kind": topo["kind"], **{k: v for k, v in resolved.items() if v is not None}}, fab


def validate_common(spec: dict) -> dict:
    """The fields every emulated workload kind shares: name, description, topology,
    TCP congestion control, fidelity thresholds, how the fabric is realised, and what
    to capture (``capture:``, only when the spec has one)."""
    name = word("name", spec["name"])
    description = string("description", spec.get("description", ""), non_empty=False)
    topology, fab = _topology(spec["topology"])
    congestion = choice("tcp_congestion", spec.get("tcp_congestion", "bbr"), CONGESTION_CONTROLS)
    fidelity = dict(FIDELITY_DEFAULTS)
    for key, value in mapping("fidelity", spec.get("fidelity"), allowed=FIDELITY_DEFAULTS, optional=True).items():
        fidelity[key] = number(at("fidelity", key), value, minimum=0, maximum=1)
    capture = {"capture": validate_capture(spec["capture"], fab)} if spec.get("capture") is not None else {}
    return {"name": name, "description": description, "topology": topology, "tcp_congestion": congestion,
            "fidelity": fidelity, "emulation": emulation_options(spec.get("emulation")), **capture}


def check_rate_binds(where: str, rate_mbps, src: str, fab: fabric_mod.Fabric) -> None:
    """A flow's rate limit above its sender's link could never bind (the NIC is slower):
    a one-line SpecError at ``where``.rate_mbps, which is likely a slip of a digit."""
    link = fab.host_mbps()[src]
    if isinstance(rate_mbps, (int, float)) and rate_mbps > link:
        raise SpecError(at(where, "rate_mbps"), f"{rate_mbps:g} Mbit/s is above {src}'s link ({link:g} Mbit/s): "
                                                f"the limit could never bind")


def policy_fields(where: str, entry: dict, flows: list[dict], fab: fabric_mod.Fabric) -> dict:
    """The entry's policy fields (null ones left out; none: an empty dict) for each of
    ``flows`` (FlowPolicy match fields: src, dst, optional proto and ports), checked by
    the controller's own validator, the one definition of a valid policy, with its
    errors at ``where``; a rate comes back a float."""
    fields = {key: entry[key] for key in POLICY_FIELDS if entry.get(key) is not None}
    if not fields:
        return {}
    for flow in flows:
        try:
            validate_policy(FlowPolicy(**flow, **fields), fab)
        except PolicyError as err:
            raise relocate(err, "policy", where) from None
        check_rate_binds(where, fields.get("rate_mbps"), flow["src"], fab)
    if "rate_mbps" in fields:  # only once validated: float(True) would pass as 1 Mbit/s
        fields["rate_mbps"] = float(fields["rate_mbps"])
    return fields


def fabric_host(path: str, value, fab: fabric_mod.Fabric) -> str:
    """The name of one of the fabric's hosts."""
    return host_name(path, value, [h.name for h in fab.hosts])


def validate_seed(spec: dict) -> int:
    return integer("seed", spec.get("seed", 0), minimum=0)


def validate_time_limit(spec: dict, default: float) -> float:
    """``time_limit_s``: the run is stopped past it (completed: false); kinds differ in
    how long their runs take, so each gives its default."""
    return number("time_limit_s", spec.get("time_limit_s", default), minimum=0, strict=True)


def options_of(spec: dict) -> EmulationOptions:
    """How to realise the fabric: the ``emulation:`` section, and the spec's TCP
    congestion control for every host's route."""
    section = spec["emulation"]
    weights = section.get("queue_weights")  # a spec resolved before queue weights existed has none
    return EmulationOptions(**{**section, "queue_weights": tuple(weights) if weights else None},
                            tcp_congestion=spec["tcp_congestion"])


def fabric_of(spec: dict) -> fabric_mod.Fabric:
    topo = dict(spec["topology"])
    return fabric_mod.build(topo.pop("kind"), **topo)
