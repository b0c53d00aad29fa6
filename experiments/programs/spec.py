"""Specs of the ``programs`` workload kind: the user's own commands on the emulated hosts.

Format (docs/programs.md)::

    name: programs-ddp
    topology: {kind: star, hosts: 5, host_mbps: 100}
    time_limit_s: 300                  # every program is stopped past this (completed: false)
    workload:
      kind: programs
      programs:
        - name: ddp                    # one process per host, rank = its index in hosts
          hosts: [tbh1, tbh2, tbh3, tbh4]
          command: python3 -m hosts.ddp_example --iterations 40   # sh -c, in the checkout
          start_s: 0
          role: main                   # the run ends when every main program has exited
        - name: bulk
          hosts: [tbh5]
          command: iperf3 -c $TRAINBED_IP_tbh1 -p $TRAINBED_PORT_BULK_SERVER -t 600
          start_s: 10
          role: background             # stopped when the main programs are done
      policies:                        # static, by 5-tuple, port range or program
        - {name: bulk-low, src: tbh5, dst: tbh1, proto: tcp, dst_ports: [20100, 20163], queue: 7}
        - {name: ddp-high, program: ddp, queue: 1}
      policy_changes:                  # at times: a named policy's new fields, or remove
        - {at_s: 30, policy: bulk-low, queue: 2}
      analysis: {allreduce: {program: ddp, competing: bulk}}

Every process gets an environment that says who it is (``program_env``): its host,
rank and world size, its program's hosts' addresses in rank order, its program's
port range, every host's address and every program's first port, PyTorch's
``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE``, and a directory for its files.

A policy names its flows by a 5-tuple (``src``, ``dst``, optional ``proto``,
``src_port``, ``dst_port``), a port range (``dst_ports`` or ``src_ports``: [low,
high], one policy per port, at most ``MAX_PORTS_PER_POLICY``) or a ``program``:
every ordered pair of the program's hosts, any protocol and port (a program such
as gloo connects on ports it picks itself, so its host pairs are what names its
flows). Two policies may not name the same flow.
"""
from __future__ import annotations

import re
import shlex

from controller.policy import FlowPolicy
from experiments.errors import SpecError
from experiments.platform.spec import (
    COMMON_FIELDS,
    POLICY_FIELDS,
    fabric_host,
    fabric_of,
    policy_fields,
    validate_common,
    validate_time_limit,
)
from experiments.validation import (
    ROOT,
    at,
    boolean,
    choice,
    describe,
    integer,
    items,
    mapping,
    number,
    string,
    word,
)
from topologies import fabric as fabric_mod
from topologies.fabric import host_interface

TOP_FIELDS = COMMON_FIELDS | {"time_limit_s", "workload"}
WORKLOAD_FIELDS = {"kind", "programs", "policies", "policy_changes", "analysis"}
PROGRAM_FIELDS = {"name", "hosts", "command", "start_s", "role", "env"}
ROLES = ("main", "background")
MATCH_FIELDS = ("src", "dst", "proto", "src_port", "dst_port", "src_ports", "dst_ports", "program")
CHANGE_FIELDS = {"at_s", "policy", "remove", *POLICY_FIELDS}
ANALYSIS_FIELDS = {"allreduce": ("program", "competing")}
PORT_BASE, PORTS_PER_PROGRAM = 20000, 100
MAX_PORTS_PER_POLICY = 64
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_name(name: str) -> str:
    """A program's name as it appears in variable names: ``bulk-server`` -> ``BULK_SERVER``."""
    return name.upper().replace("-", "_")


def port_base(index: int) -> int:
    """The first port of the program at ``index`` in the spec; it owns ``PORTS_PER_PROGRAM``."""
    return PORT_BASE + PORTS_PER_PROGRAM * index


def _command(path: str, value) -> str:
    """A shell command line: a string, or a list of words (quoted for the shell)."""
    if isinstance(value, list):
        words = [string(at(path, i), word_, what="a word of the command") for i, word_ in enumerate(value)]
        if not words:
            raise SpecError(path, "must not be empty")
        return shlex.join(words)
    return string(path, value, what="a command line (string) or a list of words")


def _programs(raw, fab: fabric_mod.Fabric, time_limit: float) -> list[dict]:
    programs, names = [], set()
    for where, entry in items("workload.programs", raw, non_empty=True):
        # port_base is the resolved spec's (a run's spec.yaml): its place in the list decides it
        entry = mapping(where, entry, allowed=PROGRAM_FIELDS | {"port_base"}, required=("name", "hosts", "command"))
        if "port_base" in entry and entry["port_base"] != port_base(len(programs)):
            raise SpecError(at(where, "port_base"), f"is the program's place in the list: "
                                                    f"{port_base(len(programs))}, got {describe(entry['port_base'])}")
        name = word(at(where, "name"), entry["name"])
        if name in names or env_name(name) in {env_name(n) for n in names}:
            raise SpecError(at(where, "name"), f"duplicate program name {name!r}")
        names.add(name)
        # rank r runs on hosts[r]; a host named again runs another rank (a server's GPUs)
        hosts = [fabric_host(p, v, fab) for p, v in items(at(where, "hosts"), entry["hosts"], non_empty=True)]
        env = {}
        for key, value in mapping(at(where, "env"), entry.get("env"), optional=True).items():
            if not (isinstance(key, str) and _ENV_NAME.fullmatch(key)):
                raise SpecError(at(where, "env"), f"{key!r} is not a variable name")
            env[key] = string(at(at(where, "env"), key), str(value) if isinstance(value, (int, float)) else value,
                              non_empty=False)
        start = number(at(where, "start_s"), entry.get("start_s", 0), minimum=0)
        if start >= time_limit:
            raise SpecError(at(where, "start_s"), f"{start:g} s is not before time_limit_s {time_limit:g}")
        programs.append({"name": name, "hosts": hosts, "command": _command(at(where, "command"), entry["command"]),
                         "start_s": start, "role": choice(at(where, "role"), entry.get("role", "main"), ROLES),
                         "env": env, "port_base": port_base(len(programs))})
    if not any(p["role"] == "main" for p in programs):
        raise SpecError("workload.programs", "needs at least one program with role main (the run ends with them)")
    return programs


def _port_range(path: str, value) -> list[int]:
    bounds = [integer(where, v, minimum=1, maximum=65535) for where, v in items(path, value, non_empty=True)]
    if len(bounds) != 2 or bounds[0] > bounds[1]:
        raise SpecError(path, f"must be [low, high] with low <= high, got {value!r}")
    if bounds[1] - bounds[0] + 1 > MAX_PORTS_PER_POLICY:
        raise SpecError(path, f"at most {MAX_PORTS_PER_POLICY} ports (one switch rule each), "
                              f"got {bounds[1] - bounds[0] + 1}")
    return list(range(bounds[0], bounds[1] + 1))


def _matches(where: str, entry: dict, programs: dict[str, dict], fab: fabric_mod.Fabric) -> list[dict]:
    """The flows a policy names, as FlowPolicy match fields."""
    if "program" in entry:
        if any(key in entry for key in MATCH_FIELDS if key != "program"):
            raise SpecError(at(where, "program"), "names its flows alone; leave out src, dst, proto and ports")
        program = string(at(where, "program"), entry["program"], what="a program name")
        if program not in programs:
            raise SpecError(at(where, "program"), f"{program!r} is not a program of this spec")
        hosts = list(dict.fromkeys(programs[program]["hosts"]))  # ranks sharing a host share its flows
        if len(hosts) < 2:
            raise SpecError(at(where, "program"), f"{program!r} runs on one host: name its flows by src and dst")
        return [{"src": a, "dst": b} for a in hosts for b in hosts if a != b]
    if "src" not in entry or "dst" not in entry:
        raise SpecError(where, "names its flows by program, or by src and dst (with optional proto and ports)")
    match = {"src": fabric_host(at(where, "src"), entry["src"], fab),
             "dst": fabric_host(at(where, "dst"), entry["dst"], fab)}
    if match["src"] == match["dst"]:
        raise SpecError(at(where, "dst"), "must differ from src")
    if "proto" in entry:
        match["proto"] = choice(at(where, "proto"), entry["proto"], ("tcp", "udp"))
    for side in ("src", "dst"):
        if f"{side}_port" in entry and f"{side}_ports" in entry:
            raise SpecError(at(where, f"{side}_ports"), f"give {side}_port or {side}_ports, not both")
        if f"{side}_port" in entry:
            match[f"{side}_port"] = integer(at(where, f"{side}_port"), entry[f"{side}_port"], minimum=1,
                                            maximum=65535)
    if ("src_port" in match or "dst_port" in match or "src_ports" in entry or "dst_ports" in entry) \
            and "proto" not in match:
        raise SpecError(at(where, "proto"), "is required with ports (tcp or udp)")
    matches = [match]
    for side in ("src", "dst"):
        if f"{side}_ports" in entry:
            matches = [{**m, f"{side}_port": port} for m in matches
                       for port in _port_range(at(where, f"{side}_ports"), entry[f"{side}_ports"])]
    if len(matches) > MAX_PORTS_PER_POLICY:
        raise SpecError(where, f"names {len(matches)} flows: at most {MAX_PORTS_PER_POLICY}")
    return matches


def _policies(raw, programs: dict[str, dict], fab: fabric_mod.Fabric) -> list[dict]:
    policies, names, owner = [], set(), {}
    for where, entry in items("workload.policies", raw, optional=True):
        entry = mapping(where, entry, allowed={"name", "flows", *MATCH_FIELDS, *POLICY_FIELDS})
        name = word(at(where, "name"), entry.get("name", f"policy-{len(policies)}"))
        if name in names:
            raise SpecError(at(where, "name"), f"duplicate policy name {name!r}")
        names.add(name)
        matches = _resolved_matches(where, entry, programs, fab) if "flows" in entry else \
            _matches(where, entry, programs, fab)
        fields = policy_fields(where, entry, matches, fab)
        if not fields:
            raise SpecError(where, "sets neither queue, host_queue nor rate_mbps")
        for match in matches:
            key = FlowPolicy(**match).key
            if key in owner:
                raise SpecError(where, f"flow {_shown_match(match)} is also policy {owner[key]!r}'s")
            owner[key] = name
        policies.append({"name": name, "flows": matches, **fields})
    return policies


def _resolved_matches(where: str, entry: dict, programs: dict[str, dict], fab: fabric_mod.Fabric) -> list[dict]:
    """A resolved spec's policy (a run's spec.yaml) names its flows one by one (``flows``),
    each checked as a policy naming one flow."""
    if any(key in entry for key in MATCH_FIELDS):
        raise SpecError(at(where, "flows"), "names the flows one by one; leave out program, src, dst, proto and ports")
    matches = []
    for flow_where, flow in items(at(where, "flows"), entry["flows"], non_empty=True):
        flow = mapping(flow_where, flow, allowed={"src", "dst", "proto", "src_port", "dst_port"})
        matches += _matches(flow_where, flow, programs, fab)
    return matches  # as many as a program's host pairs (no cap: the program form has none)


def _shown_match(match: dict) -> str:
    ports = "".join(f" {k}={match[k]}" for k in ("proto", "src_port", "dst_port") if k in match)
    return f"{match['src']}->{match['dst']}{ports}"


def _policy_changes(raw, policies: list[dict], time_limit: float, fab: fabric_mod.Fabric) -> list[dict]:
    by_name = {p["name"]: p for p in policies}
    changes = []
    for where, entry in items("workload.policy_changes", raw, optional=True):
        entry = mapping(where, entry, allowed=CHANGE_FIELDS, required=("at_s", "policy"))
        name = string(at(where, "policy"), entry["policy"], what="a policy name")
        if name not in by_name:
            raise SpecError(at(where, "policy"), f"{name!r} is not a policy of this spec")
        at_s = number(at(where, "at_s"), entry["at_s"], minimum=0)
        if at_s >= time_limit:
            raise SpecError(at(where, "at_s"), f"{at_s:g} s is not before time_limit_s {time_limit:g}")
        change = {"at_s": at_s, "policy": name, "remove": boolean(at(where, "remove"), entry.get("remove", False))}
        fields = policy_fields(where, entry, by_name[name]["flows"], fab)
        if change["remove"] and fields:
            raise SpecError(at(where, "remove"), "drops the policy; leave out its fields")
        if not change["remove"] and not fields:
            raise SpecError(where, "sets neither queue, host_queue, rate_mbps nor remove")
        changes.append({**change, **fields})
    return sorted(changes, key=lambda c: c["at_s"])


def _analysis(raw, programs: dict[str, dict]) -> dict:
    analysis = mapping("workload.analysis", raw, allowed=ANALYSIS_FIELDS, optional=True)
    out = {}
    if "allreduce" in analysis:
        where = "workload.analysis.allreduce"
        part = mapping(where, analysis["allreduce"], allowed=ANALYSIS_FIELDS["allreduce"], required=("program",))
        for role in part:
            name = string(at(where, role), part[role], what="a program name")
            if name not in programs:
                raise SpecError(at(where, role), f"{name!r} is not a program of this spec")
        hosts = programs[part["program"]]["hosts"]
        if len(hosts) < 2:
            raise SpecError(at(where, "program"), "an all-reduce needs a program on two hosts or more")
        if len(set(hosts)) != len(hosts):  # the ideal below is one rank's per link
            raise SpecError(at(where, "program"), "the ring's ideal is of one rank per host; this program runs "
                                                  "several ranks on a host")
        out["allreduce"] = dict(part)
    return out


def validate(raw) -> dict:
    """Check a programs spec and return it resolved (defaults filled)."""
    spec = mapping(ROOT, raw, allowed=TOP_FIELDS, required=("name", "topology", "workload"))
    common = validate_common(spec)
    fab = fabric_of(common)
    workload = mapping("workload", spec["workload"], allowed=WORKLOAD_FIELDS, required=("kind", "programs"))
    choice("workload.kind", workload["kind"], ("programs",))
    time_limit = validate_time_limit(spec, 600)
    programs = _programs(workload["programs"], fab, time_limit)
    by_name = {p["name"]: p for p in programs}
    policies = _policies(workload.get("policies"), by_name, fab)
    return {**common, "time_limit_s": time_limit,
            "workload": {"kind": "programs", "programs": programs, "policies": policies,
                         "policy_changes": _policy_changes(workload.get("policy_changes"), policies, time_limit, fab),
                         "analysis": _analysis(workload.get("analysis"), by_name)}}


def program_env(spec: dict, program: dict, rank: int, out_dir: str) -> dict[str, str]:
    """The variables that tell rank ``rank`` of ``program`` who it is and where the others are."""
    fab = fabric_of(spec)
    ip = {h.name: h.ip for h in fab.hosts}
    peers = [ip[h] for h in program["hosts"]]
    host = program["hosts"][rank]
    local = [r for r, h in enumerate(program["hosts"]) if h == host]  # the ranks on this host
    env = {"TRAINBED_PROGRAM": program["name"], "TRAINBED_HOST": host,
           "LOCAL_RANK": str(local.index(rank)), "LOCAL_WORLD_SIZE": str(len(local)),
           "TRAINBED_RANK": str(rank), "TRAINBED_WORLD_SIZE": str(len(peers)), "TRAINBED_PEERS": " ".join(peers),
           "TRAINBED_PORT_BASE": str(program["port_base"]), "TRAINBED_PORTS": str(PORTS_PER_PROGRAM),
           "TRAINBED_OUT": out_dir,
           "MASTER_ADDR": peers[0], "MASTER_PORT": str(program["port_base"]), "RANK": str(rank),
           "WORLD_SIZE": str(len(peers)),
           # gloo binds to what the hostname resolves to (loopback here) unless told the interface
           "GLOO_SOCKET_IFNAME": host_interface(host)}
    env.update({f"TRAINBED_IP_{name}": address for name, address in ip.items()})
    env.update({f"TRAINBED_PORT_{env_name(p['name'])}": str(p["port_base"]) for p in spec["workload"]["programs"]})
    return {**env, **program["env"]}
