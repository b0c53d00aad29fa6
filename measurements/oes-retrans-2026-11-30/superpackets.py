"""What a sender's NIC queue is handed, and what it does to a paced flow (as root:
``python measurements/oes-retrans-2026-11-30/superpackets.py`` from the checkout's
root, nothing else running; writes superpackets.jsonl beside itself).

Two namespaces of this script's own (``tbqS``, ``tbqR``, recorded and deleted at the
end) joined by one veth pair: the sender gets the project's tc tree
(``host_base_cmds``, 100 Mbit/s, jumbo frames) and one flow an OES rate class at
HIGH Mbit/s; iperf3 (cubic) sends one TCP connection through it for SECONDS s.
Each combination of:

- NIC: ``superpackets`` = MTU 9000 with TSO and GSO off (``host_nic_cmds`` "wire"
  until 2026-11-30); ``one segment`` = the same plus ``gso_max_segs 1``;
- shaper: ``htb`` = the flow's class (rate = ceil) with a bfifo leaf (the tree at
  HEAD); ``htb+tbf`` = the same class with a tbf leaf at the same rate and bucket
  (46e53bf, reverted);
- rate: fixed at HIGH, or changed every PERIOD_S between HIGH and LOW as OES does
  (class and, for htb+tbf, the tbf replaced, as 46e53bf did).

Per run: the sender's TCP counters (a fresh namespace: absolute = this run's), the
frames its NIC sent and the receiver's NIC got, the leaf's drops, and how the frames
left the sender (its own capture, stamped as the qdisc releases them): the share of
frames that left less than half a frame-time (at HIGH) after the one before."""
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from topologies.queues import (HOST_FLOW_MINOR_BASE, HOST_FLOW_PREF_BASE, LEAF_LIMIT_BYTES,  # noqa: E402
                               host_base_cmds, host_flow_match, host_flow_rate_cmds)

SENDER, RECEIVER = "tbqS", "tbqR"
S_IP, R_IP = "10.250.0.1", "10.250.0.2"
S_INTF, R_INTF = "tbqs0", "tbqr0"
MINOR = f"{HOST_FLOW_MINOR_BASE + 1:x}"
LINK_MBPS, HIGH, LOW, MTU = 100, 20.0, 8.0, 9000
SECONDS, PERIOD_S = 20, 0.1
COUNTERS = ("TcpOutSegs", "TcpRetransSegs", "TcpExtTCPRetransFail", "TcpExtTCPTimeouts", "TcpExtTCPFastRetrans",
            "TcpExtTCPSackRecovery", "TcpExtTCPDSACKRecv", "TcpExtTCPSpuriousRTOs")


def nic_cmds(intf: str, one_segment: bool) -> list[list[str]]:
    cmds = [["ip", "link", "set", "dev", intf, "mtu", str(MTU)], ["ethtool", "-K", intf, "tso", "off", "gso", "off"]]
    return cmds + ([["ip", "link", "set", "dev", intf, "gso_max_segs", "1"]] if one_segment else [])


def shaper_cmds(shaper: str, mbps: float, first: bool) -> list[str]:
    cmds = host_flow_rate_cmds(S_INTF, 1, mbps)
    if shaper == "htb+tbf":
        burst = max(int(mbps * 1e6 / 8 * 0.002), 15_000)
        cmds.append(f"tc qdisc replace dev {S_INTF} parent 1:{MINOR} handle {MINOR}: tbf rate {mbps:g}mbit "
                    f"burst {burst} limit {LEAF_LIMIT_BYTES}")
    elif first:
        cmds.append(f"tc qdisc replace dev {S_INTF} parent 1:{MINOR} handle {MINOR}: bfifo limit {LEAF_LIMIT_BYTES}")
    if first:
        cmds.append(f"tc filter replace dev {S_INTF} parent 1: protocol ip prio {HOST_FLOW_PREF_BASE + 1} u32 "
                    f"{host_flow_match(R_IP, 'tcp', None, 5201)} flowid 1:{MINOR}")
    return cmds


def sh(ns: str, args: list[str], **kwargs) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *args], check=True, capture_output=True, text=True,
                          **kwargs).stdout


def tc_batch(cmds: list[str]) -> None:  # htb's "quantum is big" warnings go to stderr, unread
    sh(SENDER, ["tc", "-batch", "-"], input="".join(c.removeprefix("tc ") + "\n" for c in cmds))


def leaf_drops() -> int:
    text = sh(SENDER, ["tc", "-s", "qdisc", "show", "dev", S_INTF])
    return int(re.search(rf"qdisc \S+ {MINOR}: parent 1:{MINOR} .*?dropped (\d+)", text, re.S).group(1))


def back_to_back_share(capture: str) -> float:
    times = [float(line.split()[0]) for line in capture.splitlines() if line[:1].isdigit()]
    gaps = [b - a for a, b in zip(times, times[1:])]
    frame_s = (MTU + 14) * 8 / (HIGH * 1e6)
    return round(sum(gap < frame_s / 2 for gap in gaps) / len(gaps), 3)


def measure(one_segment: bool, shaper: str, change: bool) -> dict:
    made, procs = [], []
    try:
        for ns in (SENDER, RECEIVER):
            subprocess.run(["ip", "netns", "add", ns], check=True)
            made.append(ns)
        subprocess.run(["ip", "link", "add", S_INTF, "netns", SENDER, "type", "veth", "peer", "name", R_INTF,
                        "netns", RECEIVER], check=True)
        for ns, intf, ip in ((SENDER, S_INTF, S_IP), (RECEIVER, R_INTF, R_IP)):
            for cmd in nic_cmds(intf, one_segment):
                sh(ns, cmd)
            sh(ns, ["ip", "addr", "add", f"{ip}/24", "dev", intf])
            sh(ns, ["ip", "link", "set", intf, "up"])
        tc_batch(host_base_cmds(S_INTF, LINK_MBPS) + shaper_cmds(shaper, HIGH, first=True))
        pcap = Path(tempfile.mkdtemp()) / "s.pcap"
        procs.append(subprocess.Popen(["ip", "netns", "exec", RECEIVER, "iperf3", "-s", "-1", "-B", R_IP],
                                      stdout=subprocess.DEVNULL))
        dump = subprocess.Popen(["ip", "netns", "exec", SENDER, "tcpdump", "-i", S_INTF, "-s", "96", "-w", str(pcap),
                                 "-n", "--time-stamp-precision=nano", "-c", "2000",
                                 f"tcp and src host {S_IP} and greater 4000"], stderr=subprocess.DEVNULL)
        procs.append(dump)
        time.sleep(1.0)
        stop, changes = threading.Event(), [0]

        def changer():
            mbps = HIGH
            while not stop.wait(PERIOD_S):
                mbps = LOW if mbps == HIGH else HIGH
                tc_batch(shaper_cmds(shaper, mbps, first=False))
                changes[0] += 1

        thread = threading.Thread(target=changer, daemon=True)
        if change:
            thread.start()
        client = sh(SENDER, ["iperf3", "-c", R_IP, "-t", str(SECONDS), "-C", "cubic", "-M", str(MTU - 52), "-J"])
        stop.set()
        if change:
            thread.join()
        time.sleep(0.5)
        if dump.poll() is None:
            dump.terminate()
        dump.wait(timeout=10)
        capture = subprocess.run(["tcpdump", "-r", str(pcap), "-n", "-tt", "--time-stamp-precision=nano"],
                                 capture_output=True, text=True).stdout
        counters = json.loads(sh(SENDER, ["nstat", "-a", "-z", "-j"]))["kernel"]
        sent = json.loads(client)["end"]["sum_sent"]
        return {"nic": "one segment" if one_segment else "superpackets", "shaper": shaper,
                "rate": f"changed {changes[0]} times" if change else "fixed",
                "mbps": round(sent["bits_per_second"] / 1e6, 2),
                "back_to_back_share": back_to_back_share(capture), "leaf_drops": leaf_drops(),
                "sender_nic_tx": int(sh(SENDER, ["cat", f"/sys/class/net/{S_INTF}/statistics/tx_packets"])),
                "receiver_nic_rx": int(sh(RECEIVER, ["cat", f"/sys/class/net/{R_INTF}/statistics/rx_packets"])),
                **{name: counters.get(name, 0) for name in COUNTERS}}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "delete", ns], check=False)


if __name__ == "__main__":
    with open(HERE / "superpackets.jsonl", "w") as out:
        for one_segment in (False, True):
            for shaper in ("htb", "htb+tbf"):
                for change in (False, True):
                    line = json.dumps(measure(one_segment, shaper, change))
                    print(line, flush=True)
                    out.write(line + "\n")
