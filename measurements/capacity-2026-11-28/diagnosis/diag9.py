"""One 9x100 all-to-all on the default fabric, with the counters the bench does not read."""
import json, subprocess, sys, time
from pathlib import Path
from experiments import bench
from experiments.platform import cpu
from controller.hostnet import netns_cmd
from topologies.fabric import leaf_spine

def softnet():
    rows = [l.split() for l in open("/proc/net/softnet_stat")]
    return [sum(int(r[i], 16) for r in rows) for i in (0, 1, 2)]  # processed, dropped, time_squeeze

import glob
def schedstat(pid):
    on = wait = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            a, b, _ = open(f).read().split()
        except (OSError, ValueError):
            continue
        on, wait = on + int(a), wait + int(b)
    return on / 1e9, wait / 1e9

def schedstat_t(pid, tid):
    try:
        a, b, _ = open(f"/proc/{pid}/task/{tid}/schedstat").read().split()
        return int(a) / 1e9, int(b) / 1e9
    except (OSError, ValueError):
        return 0.0, 0.0

orig = bench.what_packets_did
orig_cpu = bench.cpu_idle_during
def cpu_with_sched(action):
    em = EM[0]
    pids = [i.pids()["ovs-vswitchd"] for i in em.ovs]
    import os
    if os.environ.get("OVS_RR"):
        for p in pids:
            for t in os.listdir(f"/proc/{p}/task"):
                os.sched_setscheduler(int(t), os.SCHED_RR, os.sched_param(int(os.environ["OVS_RR"])))
    SCHED["threads"] = {p: {t: open(f"/proc/{p}/task/{t}/comm").read().strip() for t in os.listdir(f"/proc/{p}/task")} for p in pids}
    tb = {(p, t): schedstat_t(p, t) for p in pids for t in SCHED["threads"][p]}
    hosts = [p.pid for p in em.children]
    before = [schedstat(p) for p in pids]; hb = [schedstat(p) for p in hosts]
    t0 = time.monotonic()
    res = orig_cpu(action)
    el = time.monotonic() - t0
    SCHED["per_thread"] = {f"{SCHED['threads'][p][t]}": tuple(round((a - b) / el, 3) for a, b in zip(schedstat_t(p, t), tb[(p, t)])) for (p, t) in tb if schedstat_t(p, t)[0] - tb[(p, t)][0] > 0.01 * el}
    del SCHED["threads"]
    SCHED["ovs_on_wait_share"] = [(round((a[0]-b[0])/el, 3), round((a[1]-b[1])/el, 3)) for b, a in zip(before, [schedstat(p) for p in pids])]
    return res
bench.cpu_idle_during = cpu_with_sched
EM, SCHED = [], {}
from experiments.platform import net as netmod
_enter = netmod.Emulation.__enter__
def enter(self):
    r = _enter(self); EM[:] = [self]; return r
netmod.Emulation.__enter__ = enter
def richer(em, fabric):
    out = orig(em, fabric)
    out["sched"] = dict(SCHED)
    out["balance"] = em.switch_packet_balance()
    out["ovs"] = em.ovs_reports()
    nst = {}
    for h in fabric.hosts:
        txt = subprocess.run(netns_cmd(em.host(h.name).pid, ["nstat", "-az"]), capture_output=True, text=True).stdout
        for line in txt.splitlines()[1:]:
            f = line.split()
            if len(f) >= 2 and f[1].isdigit():
                nst[f[0]] = nst.get(f[0], 0) + int(f[1])
    out["nstat"] = nst
    out["ss_packet"] = subprocess.run(["ss", "-0", "-a", "-m", "-p"], capture_output=True, text=True).stdout
    links = json.loads(subprocess.run(["ip", "-s", "-j", "link", "show"], capture_output=True, text=True).stdout)
    out["link_drops"] = {l["ifname"]: {"rx_dropped": l["stats64"]["rx"]["dropped"], "tx_dropped": l["stats64"]["tx"]["dropped"]}
                         for l in links if l["ifname"].startswith("tb") and (l["stats64"]["rx"]["dropped"] or l["stats64"]["tx"]["dropped"])}
    hostdrops = {}
    for h in fabric.hosts:
        j = json.loads(subprocess.run(netns_cmd(em.host(h.name).pid, ["ip", "-s", "-j", "link", "show"]), capture_output=True, text=True).stdout)
        for l in j:
            if l["ifname"] != "lo":
                hostdrops[h.name] = (l["stats64"]["rx"]["dropped"], l["stats64"]["tx"]["dropped"])
        q = subprocess.run(netns_cmd(em.host(h.name).pid, ["tc", "-s", "qdisc", "show"]), capture_output=True, text=True).stdout
        out.setdefault("host_qdisc", {})[h.name] = q
    out["host_link_drops"] = hostdrops
    return out
bench.what_packets_did = richer

label = sys.argv[1]
n_hosts, mbps = int(sys.argv[2]), float(sys.argv[3])
hpl = n_hosts // 3
fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=hpl, host_mbps=mbps, fabric_mbps=min(1000.0, mbps * hpl * 2))
b0, s0 = cpu.box_times(), softnet()
r = bench.all_to_all(bench.MODES["new"], fabric, Path(f"/tmp/diag/{label}"))
b1, s1 = cpu.box_times(), softnet()
r["steal"] = cpu.stolen_share(b0, b1)
r["softnet_delta"] = [b - a for a, b in zip(s0, s1)]
Path(f"/tmp/diag/{label}.json").write_text(json.dumps(r, indent=1, default=str))
print(label, r["sched"], {k: r[k] for k in ("min", "median", "cpu_idle", "steal", "trustworthy", "retransmitted_share", "queue_drops", "segments_per_drop", "softnet_delta", "link_drops", "host_link_drops")})
print({k: v for k, v in r["nstat"].items() if v and any(s in k for s in ("Retrans", "Lost", "Spurious", "Reorder", "Timeout", "Probe", "Drop", "Recovery", "SACK", "DSACK"))})
print(r["balance"])
