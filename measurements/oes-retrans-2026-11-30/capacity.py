"""What one segment per packet costs the box (as root: ``python
measurements/oes-retrans-2026-11-30/capacity.py`` from the checkout's root, nothing
else running; writes capacity.jsonl beside itself).

``make bench``'s all-to-all (``experiments.bench.all_to_all``: every host sends bulk
TCP (BBR) to every other for 10 s through the default fabric, leaf-spine 2 x 3) with
the host NICs as ``host_nic_cmds`` "wire" makes them now (``one segment``:
``gso_max_segs 1``) and as it made them until 2026-11-30 (``superpackets``: TSO and
GSO off only), for 6 and 9 hosts at 100 Mbit/s, ROUNDS rounds with the two
interleaved. Per run: the lowest and median receiver goodput over its link's rate,
the box's CPU idle share, what the switches queued (mean bytes) and dropped, and
the share of TCP segments retransmitted on the wire."""
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from experiments.bench import all_to_all  # noqa: E402
from experiments.platform.net import Emulation, EmulationOptions  # noqa: E402
from topologies import queues  # noqa: E402
from topologies.fabric import leaf_spine  # noqa: E402

ROUNDS = 3
one_segment = queues.host_nic_cmds
checked = Emulation.__dict__["_check_one_segment_per_packet"]  # the staticmethod itself


def superpackets(intf, segmentation, mtu=queues.MIN_MTU):
    return [cmd for cmd in one_segment(intf, segmentation, mtu) if "gso_max_segs" not in cmd]


def use(label: str) -> None:
    """The host NICs of ``label`` in the fabrics brought up from now on (the
    bring-up's read-back, since d11adbb, would refuse super-packets)."""
    queues.host_nic_cmds = one_segment if label == "one segment" else superpackets
    Emulation._check_one_segment_per_packet = checked if label == "one segment" else staticmethod(
        lambda host, pid, intf: None)


if __name__ == "__main__":
    work = Path(tempfile.mkdtemp(prefix="capacity-"))
    with open(HERE / "capacity.jsonl", "w") as out:
        for n_hosts in (6, 9):
            fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=n_hosts // 3, host_mbps=100.0,
                                fabric_mbps=min(1000.0, 100.0 * n_hosts // 3 * 2))
            for i in range(ROUNDS):
                for label in ("superpackets", "one segment"):
                    use(label)
                    r = all_to_all(EmulationOptions(), fabric, work / f"{n_hosts}-{label.replace(' ', '-')}-{i}")
                    line = json.dumps({"hosts": n_hosts, "nic": label, "round": i,
                                       **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}})
                    print(line, flush=True)
                    out.write(line + "\n")
