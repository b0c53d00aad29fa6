"""Are BBR's pacing waits late? (as root: ``python measurements/nic-segments-2026-11-30/pacing.py``
from the checkout's root, nothing else running; writes pacing.jsonl beside itself).

``segments.py``'s all-to-all (9 hosts x 100 Mbit/s, BBR, 10 s) with the host NICs at
one segment per packet (the fabric's default) and at any number (GSO super-packets),
ROUNDS rounds interleaved (pacing-first.jsonl: a first pass, 3 rounds, before the
intervals were told apart by what held them; pacing-second*: 4 rounds before the RTTs
were read; pacing-third*: 4 rounds before the queues were read). Meanwhile, every SAMPLE_S, ``ss -tin`` in three senders'
namespaces reads each connection's ``pacing_rate``, ``bytes_sent``, ``cwnd``,
``unacked``, ``notsent``, its smoothed and least RTT, and what the watched hosts'
root qdiscs hold (``tc -s qdisc``), ``/proc/net/packet`` what the switches' port
sockets hold, and ``/proc/softirqs`` the box's HRTIMER and NET_TX counts
(TCP's pacing timer runs as an HRTIMER softirq on this kernel, no fq qdisc). Between two
samples a connection is *pacing-bound* when it had unsent bytes and fewer packets in
flight than its window at both, and the receiver's window did not hold it in between:
nothing but its pacing held it back. Over those
intervals, the bytes it sent over what its pacing rate allowed (the mean of the two
samples' rates) is how well the timers kept time: 1 if each wait ended on time, less
by the share of time they were late. Every sample is kept (pacing-samples.jsonl.gz:
per run, [monotonic s, softirq counts, {pid:local>peer: ss fields}])."""
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import experiments.bench as bench  # noqa: E402
from experiments.platform.net import EmulationOptions  # noqa: E402
from topologies.fabric import leaf_spine  # noqa: E402

sys.path.insert(0, str(HERE))
from segments import use  # noqa: E402

ROUNDS = 4
SAMPLE_S = 0.5
WATCHED = 3  # sender hosts read by ss
FIELDS = {"pacing_rate": r"pacing_rate (\d+(?:\.\d+)?)([KMG]?)bps", "bytes_sent": r"bytes_sent:(\d+)",
          "cwnd": r"cwnd:(\d+)", "unacked": r"unacked:(\d+)", "notsent": r"notsent:(\d+)", "rwnd_limited": r"rwnd_limited:(\d+)ms",
          "rtt_ms": r" rtt:(\d+(?:\.\d+)?)/", "minrtt_ms": r"minrtt:(\d+(?:\.\d+)?)"}
UNIT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def own_mesh_pids() -> list[int]:
    """The hosts.mesh processes this process started (its descendants), one per host."""
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if b"hosts.mesh" not in cmd:
                continue
            pid = int(entry)
            while pid > 1:
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                if pid == me:
                    pids.append(int(entry))
                    break
        except (OSError, ValueError, IndexError):
            continue
    return sorted(pids)


def connections(pid: int) -> dict[str, dict]:
    out = subprocess.run(["nsenter", "-t", str(pid), "-n", "ss", "-tinH", "state", "established"],
                         capture_output=True, text=True, timeout=5).stdout
    conns, key = {}, None
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            parts = line.split()
            key = f"{parts[-2]}>{parts[-1]}" if len(parts) >= 2 else None
            continue
        if key is None:
            continue
        info = {}
        for name, pattern in FIELDS.items():
            m = re.search(pattern, line)
            if m:
                info[name] = (float(m.group(1)) * UNIT[m.group(2)] if name == "pacing_rate"
                              else float(m.group(1)) if name.endswith("_ms") else int(m.group(1)))
        info.setdefault("unacked", 0)
        info.setdefault("notsent", 0)
        info.setdefault("rwnd_limited", 0)
        if "bytes_sent" in info and "pacing_rate" in info:
            conns[key] = info
    return conns


def root_backlog_bytes(pid: int) -> int:
    """Bytes queued in the root qdiscs of a host's interfaces (its NIC's rate classes)."""
    out = subprocess.run(["nsenter", "-t", str(pid), "-n", "tc", "-s", "qdisc", "show"],
                         capture_output=True, text=True, timeout=5).stdout
    total, root = 0, False
    for line in out.splitlines():
        if line.startswith("qdisc "):
            root = " root " in line
        elif root and line.strip().startswith("backlog "):
            value = line.split()[1]
            total += int(float(value.rstrip("bKM")) * {"b": 1, "K": 1024, "M": 1024 ** 2}[value[-1]])
            root = False
    return total


def switch_socket_bytes() -> int:
    """Bytes waiting in the box's packet sockets: the userspace switches' port sockets."""
    return sum(int(line.split()[6]) for line in Path("/proc/net/packet").read_text().splitlines()[1:])


def softirqs() -> dict[str, int]:
    counts = {}
    for line in Path("/proc/softirqs").read_text().splitlines()[1:]:
        name, *values = line.split()
        counts[name.rstrip(":")] = sum(int(v) for v in values)
    return counts


class Sampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.samples, self.stop = [], threading.Event()

    def run(self):
        pids = []
        while not self.stop.wait(SAMPLE_S):
            pids = pids or own_mesh_pids()[:WATCHED]
            t = time.monotonic()
            irq = {**softirqs(), "switch_socket_bytes": switch_socket_bytes(), "host_backlog_bytes": 0}
            conns = {}
            for pid in pids:
                try:
                    conns.update({f"{pid}:{k}": v for k, v in connections(pid).items()})
                    irq["host_backlog_bytes"] += root_backlog_bytes(pid)
                except (subprocess.SubprocessError, OSError):
                    pass
            self.samples.append((t, irq, conns))


def judge(samples) -> dict:
    """Bytes sent over what pacing allowed on pacing-bound intervals; what held the
    other sending intervals (a window: packets in flight at the window at either
    sample; nothing unsent at either: the sending process; the receiver's window);
    the windows' median; softirqs a second."""
    sent = allowed = 0
    held = {"pacing": 0, "cwnd": 0, "nothing_unsent": 0, "rwnd": 0}
    cwnds, rtts, rtt_over_min = [], [], []
    for (t0, _, a), (t1, _, b) in zip(samples, samples[1:]):
        for key, x in a.items():
            y = b.get(key)
            if y is None or y["bytes_sent"] <= x["bytes_sent"]:
                continue
            cwnds.append(y["cwnd"])
            if y.get("rtt_ms") and y.get("minrtt_ms"):  # the smoothed RTT over the least seen
                rtts.append(y["rtt_ms"])
                rtt_over_min.append(y["rtt_ms"] / y["minrtt_ms"])
            if x["unacked"] >= x["cwnd"] or y["unacked"] >= y["cwnd"]:
                held["cwnd"] += 1
            elif x["notsent"] == 0 or y["notsent"] == 0:
                held["nothing_unsent"] += 1
            elif y["rwnd_limited"] != x["rwnd_limited"]:
                held["rwnd"] += 1
            else:
                held["pacing"] += 1
                sent += y["bytes_sent"] - x["bytes_sent"]
                allowed += (x["pacing_rate"] + y["pacing_rate"]) / 2 / 8 * (t1 - t0)
    intervals = sum(held.values())
    busy = [(t, irq) for t, irq, conns in samples if conns]
    span = busy[-1][0] - busy[0][0] if len(busy) > 1 else 0.0
    rates = {name: (busy[-1][1][name] - busy[0][1][name]) / span if span else None for name in ("HRTIMER", "NET_TX")}
    queued = {name: statistics.fmean(irq[name] for _, irq in busy) / 1e3 if busy else None
              for name in ("switch_socket_bytes", "host_backlog_bytes")}
    return {"sent_over_paced": sent / allowed if allowed else None, "sending_intervals": intervals,
            "switch_sockets_kb_mean": queued["switch_socket_bytes"],
            "watched_hosts_backlog_kb_mean": queued["host_backlog_bytes"],
            **{f"{k}_share": v / intervals if intervals else None for k, v in held.items()},
            "cwnd_median": statistics.median(cwnds) if cwnds else None,
            "rtt_over_min_median": statistics.median(rtt_over_min) if rtt_over_min else None,
            "rtt_ms_median": statistics.median(rtts) if rtts else None,
            "hrtimer_per_s": rates["HRTIMER"], "net_tx_per_s": rates["NET_TX"]}


if __name__ == "__main__":
    work = Path(tempfile.mkdtemp(prefix="pacing-"))
    fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=3, host_mbps=100.0, fabric_mbps=600.0)
    measured = bench.cpu_idle_during
    with open(HERE / "pacing.jsonl", "w") as out, gzip.open(HERE / "pacing-samples.jsonl.gz", "wt") as raw:
        for i in range(ROUNDS):
            for segments in (1, 0):
                use(segments)
                sampler = Sampler()

                def watched(action):
                    sampler.start()
                    try:
                        return measured(action)
                    finally:
                        sampler.stop.set()
                        sampler.join()
                bench.cpu_idle_during = watched
                r = bench.all_to_all(EmulationOptions(), fabric, work / f"{segments}-{i}")
                line = json.dumps({"segments": segments, "round": i, "aggregate_mbps": round(r["aggregate_mbps"], 1),
                                   "min": round(r["min"], 4), "cpu_idle": round(r["cpu_idle"], 4),
                                   **{k: (round(v, 4) if isinstance(v, float) else v)
                                      for k, v in judge(sampler.samples).items()}})
                print(line, flush=True)
                out.write(line + "\n")
                raw.write(json.dumps({"segments": segments, "round": i, "samples": sampler.samples}) + "\n")
