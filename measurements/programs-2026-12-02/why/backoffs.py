"""The TCP sampler's view of the same-queue DDP runs (stdlib; run from the repo root):
per run, the iterations beside the bulk flow, and every retransmission-timeout backoff
stretch of a connection (raw/tcp_backoffs.csv) named by sender -> receiver and what it
carries (the bulk flow's port, gloo's ring, the c10d store), with the RTO and the
smoothed RTT the sender held just before the stretch (raw/tcp_sockets.csv).

    python3 measurements/programs-2026-12-02/why/backoffs.py measurements/programs-2026-12-02/same-queue-tcp-*
"""
import csv
import gzip
import json
import sys
from pathlib import Path

# 2026-11-30's rule for the ring's stalls (0.5 s samples in which neither tbh3 nor tbh4 received 1 Mbit/s)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "programs-2026-11-30" / "why"))
from stalls import analyse  # noqa: E402


def host_of(address: str) -> str:
    return "tbh" + address.rsplit(":", 1)[0].rsplit(".", 1)[1]


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def what(local: str, peer: str, bulk_port: int, store_port: int) -> str:
    ports = {port_of(local), port_of(peer)}
    return "bulk" if bulk_port in ports else "c10d store" if store_port in ports else "gloo"


for run in map(Path, sys.argv[1:]):
    summary = json.loads((run / "summary.json").read_text())
    # program i of the spec owns ports 20000 + 100 i..: ddp's first is MASTER_PORT (c10d's store), bulk-server's next
    store_port, bulk_port = 20000, 20100
    sockets = list(csv.DictReader(gzip.open(run / "raw" / "tcp_sockets.csv.gz", "rt")))  # gzipped when kept
    before: dict = {}
    for r in sockets:
        before.setdefault((r["host"], r["local"], r["peer"]), []).append(r)
    spans = list(csv.DictReader(open(run / "raw" / "tcp_backoffs.csv")))
    stalls = analyse(run.resolve())
    timeouts = {h: c.get("TcpExtTCPTimeouts", 0) for h, c in stalls["tcp"].items() if c.get("TcpExtTCPTimeouts")}
    print(f"{run.name}: trustworthy {summary.get('trustworthy')}, iteration alone {summary.get('iteration_s_alone'):.2f} s,"
          f" beside the bulk flow (median) {stalls['median']:.2f} s, all-reduce/ideal beside it {stalls['allreduce']:.2f}, "
          f"stalled {stalls['stalled']:.1f} s (longest {stalls['longest']:.1f}), queue 2 drops {stalls['q2_drops']}, "
          f"TCP timeouts by host {timeouts}, {len(spans)} backoff stretches, "
          f"sampler CPU share {summary['fidelity'].get('tcp_sampler_cpu_share', 0):.4f}")
    total: dict = {}
    for s in spans:
        kind = what(s["local"], s["peer"], bulk_port, store_port)
        link = f"{host_of(s['local'])} -> {host_of(s['peer'])}"
        prior = [r for r in before[(s["host"], s["local"], s["peer"])] if float(r["time_s"]) < float(s["start_s"])]
        last = prior[-1] if prior else {}
        total.setdefault((kind, link), [0, 0.0])
        total[(kind, link)][0] += 1
        seconds = float(s["end_s"]) - float(s["start_s"])  # first to last sample: one sample reads 0
        total[(kind, link)][1] += seconds
        print(f"  {float(s['start_s']):7.2f} s  {seconds:5.2f} s ({s['samples']} samples)  {kind:10s} {link}  "
              f"backoff up to {s['backoff_max']}, RTO up to {float(s['rto_ms_max']):.0f} ms; before it: "
              f"srtt {last.get('srtt_ms', '-')} ms, RTO {last.get('rto_ms', '-')} ms, cwnd {last.get('cwnd', '-')}, "
              f"unacked {last.get('unacked', '-')}, send_q {last.get('send_q', '-')}")
    for (kind, link), (n, seconds) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        print(f"  total {kind:10s} {link}: {n} stretches, {seconds:.2f} s")
