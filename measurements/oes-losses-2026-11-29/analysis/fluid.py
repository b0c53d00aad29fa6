"""Fluid reconstruction of what the senders offered each switch port under OES, from
the run's events and decision log (oes-losses-2026-11-29/cell), and what a 150 KB
port queue would have done with it.

Model (open loop, no TCP feedback):
- every reported transfer is a frame of `bytes` on its pair's one TCP connection
  (5-tuple); a connection sends its bytes FIFO, from the sender's flow_start on;
  wire bytes = payload + 66 B per 8948 B segment (jumbo 9000 MTU, TCP ts options);
- a connection's rate: the rate of its htb class as the decision log installed it
  (from the decision's `t`, after the apply; option --apply-at-start: t - apply_s);
  no class yet: unshaped, the sender NIC's rate left by its shaped classes (shared
  equally by its unshaped connections, at least htb's 2% guarantee);
- shaped classes are not capped by the NIC (an htb leaf under its own rate sends
  without asking its parent);
- htb bucket of a class: max(2 ms of rate, 15 KB), full when created, refilled at
  the rate while the connection is idle, sent at once when the connection gets data;
- requests (sampler -> store, not shaped, not reported): from the stores' compute
  events (request_bytes), sent at once, at the reply's flow_start less the store's compute;
- a flow's bytes still unsent in the model at its flow_end (receiver got everything)
  are removed (counted as `forced`);
- the port: 20 or 100 Mbit/s, a 150,000 B bfifo, and its htb class's 150,000 B cburst
  (the port may send faster than its rate after idling; --no-port-bucket: off).
The "ideal" rate of a connection at time t: the project's own RateCoordinator fed the
events up to t (zero-latency OES); excess above the port rate is split, in this order,
into (b) unshaped connections, (a) stale surplus sum(max(0, installed - ideal)),
(c) rest (installed rates above the link with no stale surplus), plus impulses
(c-bucket, c-request).
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections import defaultdict, deque

sys.path.insert(0, "/work/main")
from controller.schedulers import oes  # noqa: E402
from experiments.gnn.coordinator import RateCoordinator  # noqa: E402
from experiments.platform.policysync import flow_key  # noqa: E402

CELL = "/work/main/measurements/oes-losses-2026-11-29/cell/"
NIC = {"tbh1": 100.0, "tbh2": 100.0, "tbh3": 20.0, "tbh4": 20.0}
PAYLOAD, HDR = 8948, 66
WIRE_PKT = 9014
B_PORT = 150_000


def wire(nbytes: int) -> float:
    return nbytes + HDR * math.ceil(nbytes / PAYLOAD)


def bucket_bytes(mbps: float) -> float:
    return max(int(mbps * 1e6 / 8 * 0.002), 15_000)


def load(cell=CELL):
    ev = [json.loads(line) for line in gzip.open(cell + "events.jsonl.gz", "rt")]
    de = [json.loads(line) for line in gzip.open(cell + "decisions.jsonl.gz", "rt")]
    return ev, de


def ideal_timeline(ev):
    """[(t, {key: ideal Mbit/s})] after every flow event (zero-latency OES)."""
    machines = [oes.Machine(h, m, m) for h, m in NIC.items()]
    co = RateCoordinator(machines)
    out, clock = [], -1.0
    for e in ev:
        if e["kind"] not in ("flow_start", "flow_end"):
            continue
        co.on_flow_event(e)
        clock = max(clock, e["t"])
        dec = co.decide()
        out.append((clock, dict(dec.rates)))
    return out


def build(ev, de, apply_at_start=False, with_requests=True):
    starts = {e["flow"]: e for e in ev if e["kind"] == "flow_start" and e["src"] != e["dst"]}
    ends = {e["flow"]: e["t"] for e in ev if e["kind"] == "flow_end"}
    host_of = {}
    for e in ev:
        if e["kind"] == "tasks_started":
            host_of = e["tasks"]
    ext = []  # (t, order, kind, payload)
    for fid, e in starts.items():
        ext.append((e["t"], 1, "start", (fid, flow_key(e), wire(e["bytes"]))))
        if fid in ends:
            ext.append((ends[fid], 3, "end", (fid, flow_key(e))))
    for d in de:
        t = d["t"] - d["apply_s"] if apply_at_start else d["t"]
        ext.append((t, 2, "dec", [(tuple(s[:5]), s[5]) for s in d["set"]]))
    nreq = 0
    req_bytes = defaultdict(float)
    if with_requests:
        reply_start = {}
        for fid, e in starts.items():
            reply_start[(e["src_task"], e["dst_task"], e["iteration"], e["phase"])] = e["t"]
        for e in ev:
            if e["kind"] == "compute" and "peer" in e:
                src_h, dst_h = host_of[e["peer"]], host_of[e["task"]]
                if src_h == dst_h:
                    continue
                t0 = reply_start.get((e["task"], e["peer"], e["iteration"], e["step"]))
                if t0 is None:
                    continue
                ext.append((t0 - e["seconds"], 0, "req", (src_h, dst_h, wire(e["request_bytes"]))))
                nreq += 1
                req_bytes[dst_h] += wire(e["request_bytes"])
    ext.sort(key=lambda x: (x[0], x[1]))
    return ext, nreq, dict(req_bytes)


class Conn:
    __slots__ = ("key", "src", "dst", "fifo", "rate", "tokens", "backlog")

    def __init__(self, key):
        self.key, self.src, self.dst = key, key[0], key[1]
        self.fifo = deque()  # [flow id, remaining wire bytes]
        self.rate = None  # installed Mbit/s; None: no class
        self.tokens = 0.0
        self.backlog = 0.0


CAUSES = ("b_unshaped", "a_stale", "c_rates", "c_bucket", "c_request")


def simulate(ev, de, apply_at_start=False, port_bucket=True, with_requests=True, buffer=B_PORT):
    ext, nreq, req_bytes = build(ev, de, apply_at_start, with_requests)
    ideal_tl = ideal_timeline(ev)
    # merge ideal changes as external events too
    for t, rates in ideal_tl:
        ext.append((t, 4, "ideal", rates))
    ext.sort(key=lambda x: (x[0], x[1]))
    T0 = ext[0][0]
    ext = [(t - T0, o, k, pl) for t, o, k, pl in ext]
    conns: dict[tuple, Conn] = {}
    ideal: dict[tuple, float] = {}
    ports = list(NIC)
    cap = {p: NIC[p] * 1e6 / 8 for p in ports}  # B/s
    T = {p: (B_PORT if port_bucket else 0.0) for p in ports}
    v = {p: -T[p] for p in ports}  # virtual backlog: queue - port tokens
    st = {p: dict(offered=0.0, overflow=0.0, impulses=defaultdict(float), excess=defaultdict(float),
                  forced=0.0, episodes=[], cur=None, xint=[], curx=None, max_q=0.0) for p in ports}
    flow_done = {}  # flow id -> model time its last byte left the sender
    forced_left = {}  # flow id -> model's unsent wire bytes at its flow_end

    def new_episode(p, t):
        return dict(t0=t, t1=None, peak=0.0, overflow=0.0, contrib=defaultdict(float),
                    overflow_by=defaultdict(float))

    def add_to_port(p, t, nbytes_by_cause, tau, rate_excess):
        """Apply arrivals to port p over [t, t+tau): rate_excess: {cause: B/s above cap}
        (sums to a-C when a > C, else empty with net rate given by nbytes_by_cause['_net'])."""
        pass

    def port_step(p, t, tau, a):
        """Advance port p by tau seconds with arrival rate a (B/s); returns contributions."""
        s = st[p]
        s["offered"] += a * tau
        net = a - cap[p]
        v0 = v[p]
        v1 = v0 + net * tau
        of = 0.0
        if v1 > buffer:
            of = v1 - buffer
            v1 = buffer
        if v1 < -T[p]:
            v1 = -T[p]
        contrib = max(0.0, v0 + net * tau) - max(0.0, v0) if net > 0 else 0.0
        v[p] = v1
        return contrib, of, v0

    def track(p, t, tau, v0, contrib_by, of, of_by):
        s = st[p]
        q0, q1 = max(v0, 0.0), max(v[p], 0.0)
        if s["cur"] is None and (q1 > 0 or contrib_by and sum(contrib_by.values()) > 0):
            s["cur"] = new_episode(p, t)
        ep = s["cur"]
        if ep is not None:
            for c, x in contrib_by.items():
                ep["contrib"][c] += x
            ep["overflow"] += of
            for c, x in of_by.items():
                ep["overflow_by"][c] += x
            ep["peak"] = max(ep["peak"], q1 + of)
            s["max_q"] = max(s["max_q"], q1)
            if q1 <= 0:
                ep["t1"] = t + tau
                s["episodes"].append(ep)
                s["cur"] = None

    def impulse(p, t, nbytes, cause):
        s = st[p]
        s["offered"] += nbytes
        s["impulses"][cause] += nbytes
        v0 = v[p]
        v1 = v0 + nbytes
        of = max(0.0, v1 - buffer)
        v[p] = min(v1, buffer)
        contrib = max(0.0, v0 + nbytes) - max(0.0, v0)
        s["overflow"] += of
        track(p, t, 0.0, v0, {cause: contrib}, of, {cause: of} if of else {})
        # excess-rate intervals: an impulse is excess
        cx = s["curx"]
        if cx is None:
            s["xint"].append(dict(t0=t, t1=t, excess=defaultdict(float, {cause: nbytes})))
        else:
            cx["excess"][cause] += nbytes

    def rates_now():
        """Per connection output B/s (backlogged ones), by the htb model."""
        out = {}
        shaped_sum = defaultdict(float)
        unshaped = defaultdict(list)
        for c in conns.values():
            if c.backlog <= 1e-9:
                continue
            if c.rate is not None:
                out[c.key] = c.rate * 1e6 / 8
                shaped_sum[c.src] += c.rate
            else:
                unshaped[c.src].append(c.key)
        for h, keys in unshaped.items():
            left = max(NIC[h] * 0.02, NIC[h] - shaped_sum[h])
            for k in keys:
                out[k] = left / len(keys) * 1e6 / 8
        return out

    def get(key):
        c = conns.get(key)
        if c is None:
            c = conns[key] = Conn(key)
        return c

    def send_burst(c, t):
        """Class bucket sent at once when the connection has data."""
        if c.rate is None or c.tokens <= 0 or c.backlog <= 0:
            return
        x = min(c.tokens, c.backlog)
        c.tokens -= x
        drain(c, x, t)
        impulse(c.dst, t, x, "c_bucket")

    def drain(c, x, t):
        c.backlog -= x
        while x > 1e-9 and c.fifo:
            head = c.fifo[0]
            take = min(head[1], x)
            head[1] -= take
            x -= take
            if head[1] <= 1e-9:
                flow_done[head[0]] = t
                c.fifo.popleft()
        if c.backlog < 1e-6:
            c.backlog = 0.0

    now = ext[0][0]
    i = 0
    n = len(ext)
    while i < n or any(c.backlog > 0 for c in conns.values()):
        out = rates_now()
        # next internal event: a connection empties
        t_int = math.inf
        for k, r in out.items():
            t_int = min(t_int, now + conns[k].backlog / r)
        t_ext = ext[i][0] if i < n else math.inf
        t_next = max(now, min(t_int, t_ext))
        tau = t_next - now
        if tau > 0:
            # per port arrival and its causes
            arr = defaultdict(float)
            parts = defaultdict(lambda: defaultdict(float))
            for k, r in out.items():
                c = conns[k]
                arr[c.dst] += r
                if c.rate is None:
                    parts[c.dst]["b_unshaped"] += r
                else:
                    idl = ideal.get(k)
                    idl_bps = 0.0 if idl is None else idl * 1e6 / 8
                    parts[c.dst]["a_stale"] += max(0.0, r - idl_bps)
            for p in ports:
                a = arr.get(p, 0.0)
                contrib, of, v0 = port_step(p, now, tau, a)
                s = st[p]
                s["overflow"] += of
                by = {}
                of_by = {}
                if a > cap[p] + 1e-6:
                    e_tot = a - cap[p]
                    rem = e_tot
                    split = {}
                    for cause in ("b_unshaped", "a_stale"):
                        x = min(rem, parts[p].get(cause, 0.0))
                        split[cause] = x
                        rem -= x
                    split["c_rates"] = rem
                    for cause, x in split.items():
                        if x > 0:
                            s["excess"][cause] += x * tau
                            by[cause] = contrib * x / e_tot
                            if of:
                                of_by[cause] = of * x / e_tot
                    cx = s["curx"]
                    if cx is None:
                        cx = s["curx"] = dict(t0=now, t1=None, excess=defaultdict(float))
                    for cause, x in split.items():
                        cx["excess"][cause] += x * tau
                else:
                    if s["curx"] is not None:
                        s["curx"]["t1"] = now
                        s["xint"].append(s["curx"])
                        s["curx"] = None
                track(p, now, tau, v0, by, of, of_by)
            for k, r in out.items():
                drain(conns[k], r * tau, t_next)
            for c in conns.values():
                if c.backlog <= 0 and c.rate is not None:
                    c.tokens = min(bucket_bytes(c.rate), c.tokens + c.rate * 1e6 / 8 * tau)
        now = t_next
        if tau <= 0 and t_int <= t_ext:
            for k, r in out.items():
                if conns[k].backlog / r <= 1e-9:
                    drain(conns[k], conns[k].backlog, now)
        if t_int <= t_ext and t_int < math.inf and tau >= 0 and (i >= n or t_int < t_ext):
            continue
        if i >= n:
            break
        t, _o, kind, pay = ext[i]
        i += 1
        if kind == "start":
            fid, key, wb = pay
            c = get(key)
            was_idle = c.backlog <= 0
            c.fifo.append([fid, wb])
            c.backlog += wb
            if was_idle:
                send_burst(c, now)
        elif kind == "end":
            fid, key = pay
            c = conns.get(key)
            if c is not None:
                for j, (f, rem) in enumerate(c.fifo):
                    if f == fid:
                        # everything before it and it was delivered: the sender sent it
                        left = sum(x[1] for x in list(c.fifo)[: j + 1])
                        st[c.dst]["forced"] += left
                        for _ in range(j + 1):
                            f2, _r = c.fifo.popleft()
                            forced_left[f2] = _r
                        c.backlog = max(0.0, c.backlog - left)
                        break
        elif kind == "dec":
            for key, mbps in pay:
                c = get(key)
                if c.rate is None:
                    c.tokens = bucket_bytes(mbps)
                    c.rate = mbps
                    send_burst(c, now)
                else:
                    c.rate = mbps
                    c.tokens = min(c.tokens, bucket_bytes(mbps))
        elif kind == "req":
            src_h, dst_h, wb = pay
            impulse(dst_h, now, wb, "c_request")
        elif kind == "ideal":
            ideal = pay
    for p in ports:
        s = st[p]
        if s["cur"] is not None:
            s["cur"]["t1"] = now
            s["episodes"].append(s["cur"])
        if s["curx"] is not None:
            s["curx"]["t1"] = now
            s["xint"].append(s["curx"])
    st['_forced_left'] = forced_left
    return st, {f: t + T0 for f, t in flow_done.items()}, nreq, req_bytes


def summarize(st, label, buffer=B_PORT):
    print(f"== {label}")
    for p, s in st.items():
        if p.startswith('_'):
            continue
        xs = s["xint"]
        tot_x = defaultdict(float)
        for x in xs:
            for c, b in x["excess"].items():
                tot_x[c] += b
        big = [x for x in xs if sum(x["excess"].values()) > buffer]
        eps = [e for e in s["episodes"] if e["overflow"] > 0]
        ofc = defaultdict(float)
        dom = defaultdict(int)
        for e in eps:
            for c, b in e["overflow_by"].items():
                ofc[c] += b
            dom[max(e["contrib"].items(), key=lambda kv: kv[1])[0]] += 1
        print(f"{p}: offered {s['offered']/1e6:.1f} MB, excess intervals {len(xs)} "
              f"(excess {sum(tot_x.values())/1e3:.0f} KB: "
              + ", ".join(f"{c} {tot_x[c]/1e3:.0f}" for c in CAUSES if tot_x[c]) + ")"
              f", intervals with excess >150KB {len(big)}; max queue {s['max_q']/1e3:.0f} KB; "
              f"overflow {s['overflow']/1e3:.0f} KB = {s['overflow']/WIRE_PKT:.0f} pkts in {len(eps)} episodes "
              f"(by cause: " + ", ".join(f"{c} {ofc[c]/1e3:.0f}" for c in CAUSES if ofc[c]) + "; dominant: "
              + ", ".join(f"{c} {n}" for c, n in sorted(dom.items())) + f"); forced {s['forced']/1e6:.2f} MB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--apply-at-start", action="store_true")
    ap.add_argument("--no-port-bucket", action="store_true")
    ap.add_argument("--no-requests", action="store_true")
    a = ap.parse_args()
    ev, de = load()
    st, done, nreq, rb = simulate(ev, de, a.apply_at_start, not a.no_port_bucket, not a.no_requests)
    summarize(st, f"apply_at_start={a.apply_at_start} port_bucket={not a.no_port_bucket} requests={not a.no_requests}")
    print("requests", nreq, {k: round(v / 1e6, 2) for k, v in rb.items()})
