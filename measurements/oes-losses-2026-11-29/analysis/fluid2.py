"""Fluid reconstruction of what the senders offered each switch port under OES, from the
events and decision log of measurements/oes-losses-2026-11-29/cell, and what each port's
150 KB queue would have done with it. Open loop: no TCP feedback, no retransmissions.

Senders (per TCP connection = per task pair = one 5-tuple, FIFO over its transfers):
- a transfer's bytes enter its connection at its flow_start (sender's stamp, before the
  first byte); wire bytes = payload + 66 B per 8948 B segment (MTU 9000, TCP timestamps);
- a connection with an htb class sends at the class's installed rate (decision log `set`,
  in force from the decision's `t`, i.e. after the apply; --timing start: from t - apply_s;
  --timing permissive: increases from t - apply_s, decreases from t); shaped classes are
  not held to the NIC (an htb leaf under its own rate does not ask its parent);
- htb bucket of a class: max(2 ms of its rate, 15 KB) (+ one 9014 B frame with --slack:
  htb sends a packet whenever its tokens are >= 0), full when the class is created, refilled
  at the rate while the connection is idle, sent at once when data arrives;
- a connection without a class yet: unshaped, the sender NIC's rate less its backlogged
  classes' rates (at least htb's 2% guarantee), shared by its unshaped connections;
- requests (sampler -> store, never shaped, never reported): the stores' compute events
  (request_bytes), sent at once at the reply's flow_start less the store's compute seconds;
- at a transfer's flow_end (receiver has every byte) whatever the model has not sent yet
  of it is dropped from the model and counted (`ahead`: reality was faster than the classes
  allow); --escape FILE: those bytes (from a first pass) are sent at once at the start.
Port: 20/100 Mbit/s, a 150,000 B bfifo; --port-tokens B: the port class's htb cburst
(150,000 on the fabric: after idling the port may send above its rate).
Causes of each byte above the port rate (in this order): b_unshaped (connections without
class), a_stale (sum over classes of max(0, installed - zero-latency OES rate, from the
project's RateCoordinator fed the same events)), c_rates (the rest of the rate excess),
and the bursts c_bucket, c_request, c_escape.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections import Counter, defaultdict, deque

sys.path.insert(0, "/work/main")
from controller.schedulers import oes  # noqa: E402
from experiments.gnn.coordinator import RateCoordinator  # noqa: E402
from experiments.platform.policysync import flow_key  # noqa: E402

CELL = "/work/main/measurements/oes-losses-2026-11-29/cell/"
NIC = {"tbh1": 100.0, "tbh2": 100.0, "tbh3": 20.0, "tbh4": 20.0}
PAYLOAD, HDR, FRAME = 8948, 66, 9014
B_PORT = 150_000
CAUSES = ("b_unshaped", "a_stale", "c_rates", "c_bucket", "c_request", "c_escape")


def wire(nbytes: int) -> float:
    return nbytes + HDR * math.ceil(nbytes / PAYLOAD)


def bucket_bytes(mbps: float, slack: bool) -> float:
    return max(int(mbps * 1e6 / 8 * 0.002), 15_000) + (FRAME if slack else 0)


def load(cell=CELL):
    ev = [json.loads(line) for line in gzip.open(cell + "events.jsonl.gz", "rt")]
    de = [json.loads(line) for line in gzip.open(cell + "decisions.jsonl.gz", "rt")]
    return ev, de


def ideal_timeline(ev):
    """[(t, {5-tuple: Mbit/s})]: zero-latency OES after every flow event (arrival order)."""
    co = RateCoordinator([oes.Machine(h, m, m) for h, m in NIC.items()])
    out, clock = [], -math.inf
    for e in ev:
        if e["kind"] in ("flow_start", "flow_end"):
            co.on_flow_event(e)
            clock = max(clock, e["t"])
            out.append((clock, dict(co.decide().rates)))
    return out


def external_events(ev, de, timing="done", requests=True, escape=None):
    starts = {e["flow"]: e for e in ev if e["kind"] == "flow_start" and e["src"] != e["dst"]}
    ends = {e["flow"]: e["t"] for e in ev if e["kind"] == "flow_end"}
    host_of = next(e["tasks"] for e in ev if e["kind"] == "tasks_started")
    ext = []  # (t, order, kind, payload)
    for fid, e in starts.items():
        ext.append((e["t"], 1, "start", (fid, flow_key(e), wire(e["bytes"]))))
        if fid in ends:
            ext.append((ends[fid], 3, "end", (fid, flow_key(e))))
    last = {}
    for d in de:
        for s in d["set"]:
            key, mbps = tuple(s[:5]), s[5]
            early = d["t"] - d["apply_s"]
            if timing == "start" or (timing == "permissive" and (key not in last or mbps > last[key])):
                t = early
            else:
                t = d["t"]
            last[key] = mbps
            ext.append((t, 2, "rate", (key, mbps)))
    if requests:
        reply_start = {(e["src_task"], e["dst_task"], e["iteration"], e["phase"]): e["t"] for e in starts.values()}
        for e in ev:
            if e["kind"] == "compute" and "peer" in e and host_of[e["peer"]] != host_of[e["task"]]:
                t0 = reply_start.get((e["task"], e["peer"], e["iteration"], e["step"]))
                if t0 is not None:
                    ext.append((t0 - e["seconds"], 0, "req", (host_of[e["peer"]], host_of[e["task"]],
                                                             wire(e["request_bytes"]))))
    for t, rates in ideal_timeline(ev):
        ext.append((t, 4, "ideal", rates))
    ext.sort(key=lambda x: (x[0], x[1]))
    t0 = ext[0][0]
    return [(t - t0, o, k, p) for t, o, k, p in ext], t0


class Conn:
    __slots__ = ("key", "src", "dst", "fifo", "rate", "tokens", "backlog")

    def __init__(self, key):
        self.key, self.src, self.dst = key, key[0], key[1]
        self.fifo = deque()  # [flow id, remaining wire bytes]
        self.rate = None
        self.tokens = 0.0
        self.backlog = 0.0


class Port:
    def __init__(self, name, tokens):
        self.name, self.cap, self.T = name, NIC[name] * 1e6 / 8, tokens
        self.v = -tokens  # queue less the port's htb tokens
        self.offered = 0.0
        self.excess = defaultdict(float)  # bytes above the port rate, by cause
        self.overflow = 0.0
        self.periods = []  # busy periods of the queue
        self.cur = None
        self.ahead = 0.0
        self.t_full = 0.0  # seconds with arrivals at the link rate or above
        self.t_over = 0.0  # seconds above it
        self.t_queue = 0.0  # seconds with a queue (time-weighted by the end of each step)

    def _track(self, t, tau, entered, of, of_by):
        q = max(self.v, 0.0)
        if self.cur is None and (q > 0 or sum(entered.values()) > 0):
            self.cur = dict(t0=t, t1=None, peak=0.0, overflow=0.0, entered=defaultdict(float),
                            of_by=defaultdict(float))
        p = self.cur
        if p is None:
            return
        for c, x in entered.items():
            p["entered"][c] += x
        for c, x in of_by.items():
            p["of_by"][c] += x
        p["overflow"] += of
        p["peak"] = max(p["peak"], q)
        if q <= 0:
            p["t1"] = t + tau
            self.periods.append(p)
            self.cur = None

    def flow(self, t, tau, a, parts):
        """Arrivals at a (B/s) over tau; parts: {cause: B/s of the excess}."""
        self.offered += a * tau
        net = a - self.cap
        if a >= self.cap * (1 - 1e-6):
            self.t_full += tau
        if net > 1e-9:
            self.t_over += tau
        v0 = self.v
        v1 = v0 + net * tau
        of = max(0.0, v1 - B_PORT)
        v1 = min(max(v1, -self.T), B_PORT)
        self.v = v1
        if v1 > 0:
            self.t_queue += tau
        self.overflow += of
        entered, of_by = {}, {}
        if net > 1e-9:
            into_q = max(0.0, v0 + net * tau) - max(0.0, v0)
            for c, x in parts.items():
                self.excess[c] += x * tau
                entered[c] = into_q * x / net
                if of:
                    of_by[c] = of * x / net
        self._track(t, tau, entered, of, of_by)

    def burst(self, t, nbytes, cause):
        self.offered += nbytes
        self.excess[cause] += nbytes
        v0 = self.v
        v1 = v0 + nbytes
        of = max(0.0, v1 - B_PORT)
        self.v = min(v1, B_PORT)
        self.overflow += of
        self._track(t, 0.0, {cause: max(0.0, v1) - max(0.0, v0)}, of, {cause: of} if of else {})

    def close(self, t):
        if self.cur is not None:
            self.cur["t1"] = t
            self.periods.append(self.cur)
            self.cur = None


def simulate(ev, de, timing="done", port_tokens=B_PORT, slack=False, requests=True, escape=None):
    ext, t0 = external_events(ev, de, timing, requests)
    conns: dict[tuple, Conn] = {}
    ports = {p: Port(p, port_tokens) for p in NIC}
    ideal: dict = {}
    ahead: dict[str, float] = {}
    done: dict[str, float] = {}

    def get(key):
        c = conns.get(key)
        if c is None:
            c = conns[key] = Conn(key)
        return c

    def drain(c, x, t):
        c.backlog = max(0.0, c.backlog - x)
        while x > 1e-9 and c.fifo:
            head = c.fifo[0]
            take = min(head[1], x)
            head[1] -= take
            x -= take
            if head[1] <= 1e-9:
                done[head[0]] = t
                c.fifo.popleft()
        if not c.fifo:
            c.backlog = 0.0

    def send_bucket(c, t):
        if c.rate is not None and c.tokens > 0 and c.backlog > 0:
            x = min(c.tokens, c.backlog)
            c.tokens -= x
            drain(c, x, t)
            ports[c.dst].burst(t, x, "c_bucket")

    def rates_now():
        out, shaped, unshaped = {}, defaultdict(float), defaultdict(list)
        for c in conns.values():
            if c.backlog > 0:
                if c.rate is not None:
                    out[c.key] = c.rate * 1e6 / 8
                    shaped[c.src] += c.rate
                else:
                    unshaped[c.src].append(c.key)
        for h, keys in unshaped.items():
            left = max(NIC[h] * 0.02, NIC[h] - shaped[h])
            for k in keys:
                out[k] = left / len(keys) * 1e6 / 8
        return out

    now, i, n = ext[0][0], 0, len(ext)
    while True:
        out = rates_now()
        t_int = min((now + conns[k].backlog / r for k, r in out.items()), default=math.inf)
        t_ext = ext[i][0] if i < n else math.inf
        if t_int == math.inf and t_ext == math.inf:
            break
        t_next = max(now, min(t_int, t_ext))
        tau = t_next - now
        if tau > 0:
            arr, unsh, stale = defaultdict(float), defaultdict(float), defaultdict(float)
            for k, r in out.items():
                c = conns[k]
                arr[c.dst] += r
                if c.rate is None:
                    unsh[c.dst] += r
                else:
                    stale[c.dst] += max(0.0, r - ideal.get(k, 0.0) * 1e6 / 8)
            for name, port in ports.items():
                a = arr.get(name, 0.0)
                parts = {}
                e = a - port.cap
                if e > 1e-9:
                    x = min(e, unsh[name])
                    parts["b_unshaped"] = x
                    y = min(e - x, stale[name])
                    parts["a_stale"] = y
                    parts["c_rates"] = e - x - y
                port.flow(now, tau, a, {c: x for c, x in parts.items() if x > 0})
            for k, r in out.items():
                drain(conns[k], r * tau, t_next)
            for c in conns.values():
                if c.backlog <= 0 and c.rate is not None:
                    c.tokens = min(bucket_bytes(c.rate, slack), c.tokens + c.rate * 1e6 / 8 * tau)
        now = t_next
        if t_int < t_ext:
            for k, r in out.items():
                if conns[k].backlog / r <= 1e-9:
                    drain(conns[k], conns[k].backlog, now)
            continue
        t, _o, kind, pay = ext[i]
        i += 1
        if kind == "start":
            fid, key, wb = pay
            c = get(key)
            idle = c.backlog <= 0
            if escape and escape.get(fid, 0) > 0:
                x = min(escape[fid], wb)
                ports[c.dst].burst(now, x, "c_escape")
                wb -= x
                if wb <= 0:
                    done[fid] = now
                    continue
            c.fifo.append([fid, wb])
            c.backlog += wb
            if idle:
                send_bucket(c, now)
        elif kind == "end":
            fid, key = pay
            c = conns.get(key)
            if c is None:
                continue
            ids = [f for f, _ in c.fifo]
            if fid in ids:
                j = ids.index(fid)
                for _ in range(j + 1):
                    f2, rem = c.fifo.popleft()
                    ahead[f2] = rem
                    ports[c.dst].ahead += rem
                    c.backlog = max(0.0, c.backlog - rem)
                if not c.fifo:
                    c.backlog = 0.0
        elif kind == "rate":
            key, mbps = pay
            c = get(key)
            if c.rate is None:
                c.rate, c.tokens = mbps, bucket_bytes(mbps, slack)
                send_bucket(c, now)
            else:
                c.rate = mbps
                c.tokens = min(c.tokens, bucket_bytes(mbps, slack))
        elif kind == "req":
            ports[pay[1]].burst(now, pay[2], "c_request")
        elif kind == "ideal":
            ideal = pay
    for port in ports.values():
        port.close(now)
    return ports, ahead, {f: t + t0 for f, t in done.items()}, t0


def report(ports, label, t0=0.0, out=sys.stdout):
    print(f"== {label}", file=out)
    for name in ("tbh3", "tbh4", "tbh1", "tbh2"):
        p = ports[name]
        ex = p.excess
        per = [q for q in p.periods if q["peak"] + q["overflow"] > 0]
        big = [q for q in per if q["peak"] + q["overflow"] >= 50_000]
        full = [q for q in per if q["overflow"] > 0]
        of_by = defaultdict(float)
        ent_full = defaultdict(float)
        for q in full:
            for c, x in q["of_by"].items():
                of_by[c] += x
            for c, x in q["entered"].items():
                ent_full[c] += x
        tot_ent = sum(ent_full.values()) or 1
        dom_big = Counter(max(q["entered"].items(), key=lambda kv: kv[1])[0] for q in big if q["entered"])
        dom_full = Counter(max(q["entered"].items(), key=lambda kv: kv[1])[0] for q in full if q["entered"])
        print(f"{name}: offered {p.offered / 1e6:.1f} MB; excess above the port rate {sum(ex.values()) / 1e3:.0f} KB ("
              + ", ".join(f"{c} {ex[c] / 1e3:.0f}" for c in CAUSES if ex[c] >= 500) + ")"
              f"; queue busy periods {len(per)}, peak >=50 KB {len(big)}, overflowing {len(full)}; "
              f"overflow {p.overflow / 1e3:.0f} KB = {p.overflow / FRAME:.0f} frames"
              + (" (what filled them: " + ", ".join(f"{c} {100 * ent_full[c] / tot_ent:.0f}%" for c in CAUSES
                                                    if ent_full[c] / tot_ent >= 0.005) + ")" if full else "")
              + f"; ahead of the classes {p.ahead / 1e6:.2f} MB; time at/above the rate {p.t_full:.1f} s, above {p.t_over:.1f} s, "
              f"with a queue {p.t_queue:.1f} s; dominant cause of periods >=50 KB {dict(dom_big)}, of overflowing {dict(dom_full)}",
              file=out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--timing", choices=("done", "start", "permissive"), default="done")
    ap.add_argument("--port-tokens", type=float, default=B_PORT)
    ap.add_argument("--slack", action="store_true")
    ap.add_argument("--no-requests", action="store_true")
    ap.add_argument("--escape", action="store_true", help="second pass: send the first pass's `ahead` bytes at the start")
    a = ap.parse_args()
    ev, de = load()
    ports, ahead, done, t0 = simulate(ev, de, a.timing, a.port_tokens, a.slack, not a.no_requests)
    label = f"timing={a.timing} port_tokens={a.port_tokens:g} slack={a.slack} requests={not a.no_requests}"
    if a.escape:
        ports, _, done, t0 = simulate(ev, de, a.timing, a.port_tokens, a.slack, not a.no_requests, escape=ahead)
        label += " escape=first pass's ahead bytes at flow start"
    report(ports, label, t0)
