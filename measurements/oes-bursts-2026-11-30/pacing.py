"""Does a sender's per-flow OES class release runs of frames? (``python
measurements/oes-bursts-2026-11-30/pacing.py`` as root, from the checkout's root.)

Two namespaces of this script's own (``tbqS``, ``tbqR``, recorded and deleted at the
end) joined by one veth pair, no switch between: the sender's NIC gets the project's
own tc tree (``host_base_cmds`` at 100 Mbit/s, jumbo frames, ``host_nic_cmds`` wire:
TSO/GSO off) and one flow its OES rate class (``host_flow_set_cmds``); iperf3 sends
one TCP connection through it for 4 s, and the receiver's capture times every data
frame. If the class paces as its bucket allows (at most 15 KB, two jumbo frames, at
once), frames arrive one frame-time-at-the-class-rate apart after the first two; a
run of frames closer together than half that would be the class releasing a burst."""
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from topologies.queues import (host_base_cmds, host_flow_match, host_flow_pref, host_flow_set_cmds,  # noqa: E402
                               host_nic_cmds)

SENDER, RECEIVER = "tbqS", "tbqR"
S_IP, R_IP = "10.250.0.1", "10.250.0.2"
LINK_MBPS = 100


def sh(ns: str, cmd) -> None:
    args = cmd.split() if isinstance(cmd, str) else cmd
    subprocess.run(["ip", "netns", "exec", ns, *args], check=True)


def measure(class_mbps: float, congestion: str = "bbr", seconds: int = 4) -> dict:
    made = []
    procs = []
    try:
        for ns in (SENDER, RECEIVER):
            subprocess.run(["ip", "netns", "add", ns], check=True)
            made.append(ns)
        subprocess.run(["ip", "link", "add", "tbqs0", "netns", SENDER, "type", "veth", "peer", "name", "tbqr0",
                        "netns", RECEIVER], check=True)
        for ns, intf, ip in ((SENDER, "tbqs0", S_IP), (RECEIVER, "tbqr0", R_IP)):
            for cmd in host_nic_cmds(intf, "wire", 9000):
                sh(ns, cmd)
            sh(ns, f"ip addr add {ip}/24 dev {intf}")
            sh(ns, f"ip link set {intf} up")
            sh(ns, "ip link set lo up")
        match = host_flow_match(R_IP, "tcp", None, 5201)
        for cmd in host_base_cmds("tbqs0", LINK_MBPS) + host_flow_set_cmds(
                "tbqs0", 1, host_flow_pref(1, "tcp", None, 5201), class_mbps, match):
            sh(SENDER, cmd)
        shown = subprocess.run(["ip", "netns", "exec", SENDER, "tc", "-d", "class", "show", "dev", "tbqs0"],
                               capture_output=True, text=True).stdout
        flow_class = next(line for line in shown.split("class ") if line.startswith("htb 1:101 "))
        pcap = Path(tempfile.mkdtemp()) / "r.pcap"
        server = subprocess.Popen(["ip", "netns", "exec", RECEIVER, "iperf3", "-s", "-1", "-B", R_IP],
                                  stdout=subprocess.DEVNULL)
        procs.append(server)
        spcap = pcap.with_name("s.pcap")
        dumps = [subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", intf, "-s", "96", "-w", str(path), "-n",
                                   "--time-stamp-precision=nano", f"tcp and src host {S_IP}"], stderr=subprocess.DEVNULL)
                 for ns, intf, path in ((RECEIVER, "tbqr0", pcap), (SENDER, "tbqs0", spcap))]
        procs += dumps
        import time
        time.sleep(1.0)
        subprocess.run(["ip", "netns", "exec", SENDER, "iperf3", "-c", R_IP, "-t", str(seconds), "-C", congestion,
                        "-M", "8948"], check=True, stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        for dump in dumps:
            dump.terminate()
            dump.wait(timeout=10)
        texts = {side: subprocess.run(["tcpdump", "-r", str(path), "-n", "-tt", "--time-stamp-precision=nano"],
                                      capture_output=True, text=True).stdout
                 for side, path in (("received", pcap), ("sent", spcap))}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "delete", ns], check=False)
    return {"class_mbps": class_mbps, "congestion": congestion, "class": " ".join(flow_class.split()),
            **{side: runs_of(text, class_mbps) for side, text in texts.items()}}


def runs_of(text: str, class_mbps: float) -> dict:
    """Data frames' arrival pattern in a capture's text: runs of frames closer together
    than half a frame-time at the class's rate."""
    times = []
    for line in text.splitlines():
        fields = line.split()
        if "length" in fields and int(fields[fields.index("length") + 1].rstrip(":,")) > 8000:
            times.append(float(fields[0]))
    frame_s = 9014 * 8 / (class_mbps * 1e6)
    gaps = [b - a for a, b in zip(times, times[1:])]
    runs, run = [], 1
    for gap in gaps:
        if gap < frame_s / 2:
            run += 1
        else:
            runs.append(run)
            run = 1
    runs.append(run)
    span = times[-1] - times[0] if len(times) > 1 else 0
    return {"frames": len(times), "frame_time_ms": round(frame_s * 1e3, 3),
            "median_gap_ms": round(statistics.median(gaps) * 1e3, 3) if gaps else None,
            "achieved_mbps": round(len(times) * 9014 * 8 / span / 1e6, 3) if span else None,
            "longest_run": max(runs), "runs_of_3_or_more": sum(r >= 3 for r in runs),
            "frames_in_runs_of_3_or_more": sum(r for r in runs if r >= 3)}


if __name__ == "__main__":
    for congestion in ("bbr", "cubic"):
        for mbps in (10, 20):
            print(json.dumps(measure(mbps, congestion)), flush=True)
