"""Does BBR lose aggregate in proportion to the packets it paces? (as root: ``python
measurements/nic-segments-2026-11-30/segments.py`` from the checkout's root, nothing
else running; writes segments.jsonl beside itself).

``make bench``'s all-to-all (``experiments.bench.all_to_all``: every host sends bulk
TCP to every other for 10 s through the default fabric, leaf-spine 2 x 3, 9 hosts at
100 Mbit/s) with the host NICs taking at most 1, 2 or 4 segments per packet
(``gso_max_segs``; the fabric's default is 1) or as many as TCP builds (``0``: the
NICs until 2026-11-30, GSO super-packets of up to 7 jumbo frames), under BBR and, at
1 and 0, CUBIC; ROUNDS rounds, the variants interleaved. Without an fq qdisc (this
kernel has none) BBR paces inside TCP, one timer wait per packet it sends, so a loss
that shrinks with the segments per packet would point at those waits; CUBIC does not
pace. (segments-first.jsonl: a first pass of 2 rounds, CUBIC once.)"""
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

ROUNDS = 5
one_segment = queues.host_nic_cmds
checked = Emulation.__dict__["_check_one_segment_per_packet"]


def use(segments: int) -> None:
    """Host NICs of at most ``segments`` segments per packet (0: no limit) in the
    fabrics brought up from now on (the bring-up's read-back, which asks for 1, is
    bypassed otherwise)."""
    def cmds(intf, segmentation, mtu=queues.MIN_MTU):
        return [cmd[:-1] + [str(segments)] if "gso_max_segs" in cmd else cmd
                for cmd in one_segment(intf, segmentation, mtu) if segments or "gso_max_segs" not in cmd]
    queues.host_nic_cmds = cmds
    Emulation._check_one_segment_per_packet = checked if segments == 1 else staticmethod(
        lambda host, pid, intf: None)


if __name__ == "__main__":
    work = Path(tempfile.mkdtemp(prefix="segments-"))
    fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=3, host_mbps=100.0, fabric_mbps=600.0)
    runs = [(s, c, i) for i in range(ROUNDS) for s, c in
            ((1, "bbr"), (2, "bbr"), (4, "bbr"), (0, "bbr"), (1, "cubic"), (0, "cubic"))]
    with open(HERE / "segments.jsonl", "w") as out:
        for segments, congestion, i in runs:
            use(segments)
            r = all_to_all(EmulationOptions(), fabric, work / f"{segments}-{congestion}-{i}", congestion=congestion)
            line = json.dumps({"segments": segments, "congestion": congestion, "round": i,
                               **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}})
            print(line, flush=True)
            out.write(line + "\n")
