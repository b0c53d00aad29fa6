"""Fabrics as pure data: switches, hosts, links, addresses. No root, no Mininet.

Naming and addressing invariants (every other module relies on them):

- Every node name starts with ``PREFIX`` ("tb") so that interface names, which are
  global on the machine, never collide with anything the project did not create,
  and cleanup can tell its own links from everyone else's.
- Spines are ``tbs1..tbsS`` with dpid ``0x1000 + i``; leaves ``tbl1..tblL`` with
  dpid ``0x2000 + i``; the star's single switch is ``tbx1`` with dpid ``0x3001``.
  Dpids are explicit because Mininet would otherwise derive them from digits.
- Hosts are numbered ``tbh1..tbhN`` in leaf order (leaf 1's hosts first). Host
  ``tbh<n>`` has IP ``10.0.<n // 256>.<n % 256>/16`` (n = 1..65023) and MAC
  ``02:7b:00:00:<n hi>:<n lo>`` (locally administered).
- Interface ``<node>-eth<port>``; port numbers are the OpenFlow port numbers. On a
  leaf, ports ``1..H`` face its hosts in order and ports ``H+1..H+S`` face spines
  1..S. On a spine, port ``l`` faces leaf ``l``. On the star, port ``n`` faces
  host ``n``. A host's only interface is ``eth0`` (port 0).
- Rates are Mbit/s. Each link has one rate, applied to both directions.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import inspect
from dataclasses import dataclass, field

PREFIX = "tb"
# A 2-core box emulates a few hundred Mbit/s of shaped traffic in aggregate; one
# link above this cannot be shaped faithfully (measured: ~3-5 Gbit/s unshaped).
MAX_LINK_MBPS = 1000.0
# A simulated fabric is not shaped by this box: up to 1 Tbit/s a link (``simulated_rates``).
MAX_SIMULATED_LINK_MBPS = 1e6
_link_limit_mbps = contextvars.ContextVar("link_limit_mbps", default=MAX_LINK_MBPS)
MIN_LINK_MBPS = 1.0
MAX_HOSTS = 65023
# Interface names are limited to 15 characters by the kernel (IFNAMSIZ - 1).
MAX_IFNAME = 15


class TopologyError(ValueError):
    """An impossible or unemulatable topology; the message names the field."""


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int
    role: str  # "spine", "leaf" or "star"


@dataclass(frozen=True)
class Host:
    name: str
    index: int
    ip: str
    mac: str
    switch: str  # the leaf (or star) it hangs off
    port: int  # that switch's port facing the host


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int
    b: str
    b_port: int
    mbps: float

    def intf(self, end: str) -> str:
        port = self.a_port if end == self.a else self.b_port
        return f"{end}-eth{port}"


@dataclass
class Fabric:
    """A built topology. ``switches``/``hosts``/``links`` are in a stable order."""

    kind: str
    switches: list[Switch] = field(default_factory=list)
    hosts: list[Host] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise TopologyError(f"host: no host named {name!r} (have {self.hosts[0].name}..{self.hosts[-1].name})")

    def switch(self, name: str) -> Switch:
        for s in self.switches:
            if s.name == name:
                return s
        raise TopologyError(f"switch: no switch named {name!r}")

    def spines(self) -> list[Switch]:
        return [s for s in self.switches if s.role == "spine"]

    def uplinks(self, leaf: str) -> list[tuple[int, str]]:
        """(leaf port, spine name) of each uplink of ``leaf``, in spine order."""
        ups = []
        for link in self.links:
            if link.a == leaf and self.switch(link.b).role == "spine":
                ups.append((link.a_port, link.b))
        return ups

    def port_towards(self, switch: str, neighbour: str) -> int:
        for link in self.links:
            if link.a == switch and link.b == neighbour:
                return link.a_port
            if link.b == switch and link.a == neighbour:
                return link.b_port
        raise TopologyError(f"link: {switch} has no link to {neighbour}")

    def host_links(self) -> list[Link]:
        """Each host's one link; the host is always end ``a``."""
        hosts = {h.name for h in self.hosts}
        return [link for link in self.links if link.a in hosts]

    def host_mbps(self) -> dict[str, float]:
        """Host -> its link's Mbit/s (its NIC's rate, each way), in host order."""
        rates = {link.a: link.mbps for link in self.host_links()}
        return {h.name: rates[h.name] for h in self.hosts}

    def switch_ports(self) -> list[tuple[str, str, float]]:
        """(switch, interface, Mbit/s) of every switch egress port."""
        hosts = {h.name for h in self.hosts}
        return [(end, link.intf(end), link.mbps) for link in self.links for end in (link.a, link.b)
                if end not in hosts]

    def interface_names(self) -> list[str]:
        return [link.intf(end) for link in self.links for end in (link.a, link.b)]

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "switches": [vars(s) for s in self.switches],
            "hosts": [vars(h) for h in self.hosts],
            "links": [vars(link) for link in self.links],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Fabric":
        return cls(
            kind=data["kind"],
            switches=[Switch(**s) for s in data["switches"]],
            hosts=[Host(**h) for h in data["hosts"]],
            links=[Link(**link) for link in data["links"]],
        )


def host_interface(host: str) -> str:
    """A host's only interface (port 0): the one spelling of ``<host>-eth0``."""
    return f"{host}-eth0"


HOST_PREFIX_LEN = 16
HOST_SUBNET = f"10.0.0.0/{HOST_PREFIX_LEN}"  # every host's address is in it


def host_ip(n: int) -> str:
    return f"10.0.{n // 256}.{n % 256}"


def host_mac(n: int) -> str:
    return f"02:7b:00:00:{n // 256:02x}:{n % 256:02x}"


@contextlib.contextmanager
def simulated_rates():
    """Within it, fabrics are built for the simulator: link rates up to
    ``MAX_SIMULATED_LINK_MBPS`` instead of what this box can emulate."""
    token = _link_limit_mbps.set(MAX_SIMULATED_LINK_MBPS)
    try:
        yield
    finally:
        _link_limit_mbps.reset(token)


def _check_rate(field_name: str, mbps) -> float:
    if isinstance(mbps, bool) or not isinstance(mbps, (int, float)):
        raise TopologyError(f"{field_name}: must be a number of Mbit/s, got {mbps!r}")
    limit = _link_limit_mbps.get()
    if not mbps >= MIN_LINK_MBPS:  # NaN too
        raise TopologyError(f"{field_name}: must be at least {MIN_LINK_MBPS:g} Mbit/s, got {mbps!r}")
    if mbps > limit:
        emulated = limit == MAX_LINK_MBPS
        hint = ("; the simulator takes it: backend: simulated, trainbed simulate "
                "(trainbed validate --simulated checks it)") if emulated else ""
        raise TopologyError(f"{field_name}: {mbps} Mbit/s cannot be {'emulated on this box' if emulated else 'simulated'} "
                            f"(allowed {MIN_LINK_MBPS:g}..{limit:g}){hint}")
    return float(mbps)


def _check_count(field_name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TopologyError(f"{field_name}: must be an integer >= {minimum}, got {value!r}")
    return value


def _host_rates(n_hosts: int, default: float, overrides: dict | None) -> list[float]:
    rates = [default] * (n_hosts + 1)
    if overrides is None:
        return rates
    if not isinstance(overrides, dict):
        raise TopologyError(f"host_mbps_overrides: must be a mapping of host name to Mbit/s, got {overrides!r}")
    index = {f"{PREFIX}h{n}": n for n in range(1, n_hosts + 1)}
    for name, mbps in overrides.items():
        if name not in index:
            raise TopologyError(f"host_mbps_overrides: {name!r} is not a host of this fabric (tbh1..tbh{n_hosts})")
        rates[index[name]] = _check_rate(f"host_mbps_overrides.{name}", mbps)
    return rates


def leaf_spine(spines: int = 2, leaves: int = 3, hosts_per_leaf: int = 2, host_mbps: float = 100.0,
               fabric_mbps: float = 100.0, host_mbps_overrides: dict | None = None) -> Fabric:
    """A two-tier leaf-spine: every leaf links to every spine."""
    _check_count("spines", spines)
    _check_count("leaves", leaves)
    _check_count("hosts_per_leaf", hosts_per_leaf)
    host_mbps = _check_rate("host_mbps", host_mbps)
    fabric_mbps = _check_rate("fabric_mbps", fabric_mbps)
    # interface names carry port and switch numbers of three digits
    if max(spines, leaves) > 999:
        raise TopologyError(f"{'spines' if spines > 999 else 'leaves'}: switch numbers must stay below 1000 "
                            f"(interface names)")
    if hosts_per_leaf + spines > 999:  # a leaf's ports: its hosts, then one uplink per spine
        field = "hosts_per_leaf" if hosts_per_leaf >= spines else "spines"
        raise TopologyError(f"{field}: a leaf's {hosts_per_leaf} host ports and {spines} uplinks must number "
                            f"below 1000 (interface names)")
    n_hosts = leaves * hosts_per_leaf
    if n_hosts > MAX_HOSTS:  # the larger factor is the one to cut
        field = "hosts_per_leaf" if hosts_per_leaf >= leaves else "leaves"
        raise TopologyError(f"{field}: {leaves} leaves x {hosts_per_leaf} hosts = {n_hosts} hosts exceed the "
                            f"address plan ({MAX_HOSTS})")
    rates = _host_rates(n_hosts, host_mbps, host_mbps_overrides)
    fab = Fabric(kind="leaf_spine")
    fab.switches = [Switch(f"{PREFIX}s{i}", 0x1000 + i, "spine") for i in range(1, spines + 1)]
    fab.switches += [Switch(f"{PREFIX}l{i}", 0x2000 + i, "leaf") for i in range(1, leaves + 1)]
    n = 0
    for leaf in range(1, leaves + 1):
        for port in range(1, hosts_per_leaf + 1):
            n += 1
            name = f"{PREFIX}h{n}"
            fab.hosts.append(Host(name, n, host_ip(n), host_mac(n), f"{PREFIX}l{leaf}", port))
            fab.links.append(Link(name, 0, f"{PREFIX}l{leaf}", port, rates[n]))
    for leaf in range(1, leaves + 1):
        for spine in range(1, spines + 1):
            fab.links.append(Link(f"{PREFIX}l{leaf}", hosts_per_leaf + spine, f"{PREFIX}s{spine}", leaf, fabric_mbps))
    _check_names(fab)
    return fab


def star(hosts: int = 4, host_mbps: float = 100.0, host_mbps_overrides: dict | None = None) -> Fabric:
    """One switch with every host on it: the papers' non-blocking "big switch"."""
    _check_count("hosts", hosts)
    host_mbps = _check_rate("host_mbps", host_mbps)
    if hosts > 999:
        raise TopologyError(f"hosts: {hosts} exceeds 999 ports on one switch")
    rates = _host_rates(hosts, host_mbps, host_mbps_overrides)
    sw = f"{PREFIX}x1"
    fab = Fabric(kind="star", switches=[Switch(sw, 0x3001, "star")])
    for n in range(1, hosts + 1):
        name = f"{PREFIX}h{n}"
        fab.hosts.append(Host(name, n, host_ip(n), host_mac(n), sw, n))
        fab.links.append(Link(name, 0, sw, n, rates[n]))
    _check_names(fab)
    return fab


def _check_names(fab: Fabric) -> None:
    seen: set[str] = set()
    for name in [s.name for s in fab.switches] + [h.name for h in fab.hosts]:
        if name in seen:
            raise TopologyError(f"names: duplicate node name {name!r}")
        seen.add(name)
    for intf in fab.interface_names():
        if len(intf) > MAX_IFNAME:
            raise TopologyError(f"names: interface name {intf!r} is longer than {MAX_IFNAME} characters")


BUILDERS = {"leaf_spine": leaf_spine, "star": star}


def defaults(kind: str) -> dict:
    """A builder's parameters with their defaults (a spec's topology resolved: the
    fabric it ran on, whatever the defaults become)."""
    return {name: p.default for name, p in inspect.signature(BUILDERS[kind]).parameters.items()}


def build(kind: str, **params) -> Fabric:
    """Build a fabric by kind name from spec parameters (unknown keys are errors)."""
    if not isinstance(kind, str) or kind not in BUILDERS:
        raise TopologyError(f"topology.kind: unknown {kind!r} (choose from {', '.join(BUILDERS)})")
    allowed = set(inspect.signature(BUILDERS[kind]).parameters)
    for key in params:
        if key not in allowed:
            known = f"for {kind} (allowed: {', '.join(sorted(allowed))})"
            if not key.isidentifier():  # keep the field path one plain line
                raise TopologyError(f"topology: unknown field {key!r} {known}")
            near = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.75)  # as the specs' checks
            raise TopologyError(f"topology.{key}: unknown field {known}{f'; did you mean {near[0]}?' if near else ''}")
    return BUILDERS[kind](**params)
