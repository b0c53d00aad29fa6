"""All numbers of the report, from the cell's files (run: nice -n 19 python analyze.py)."""
import sys, json, gzip, bisect, math
from collections import defaultdict, Counter
import numpy as np, pandas as pd
sys.path.insert(0, '/tmp/oesdrops'); import fluid2 as F
ev, de = F.load()
C = F.CELL
starts = {e['flow']: e for e in ev if e['kind'] == 'flow_start' and e['src'] != e['dst']}
ends = {e['flow']: e['t'] for e in ev if e['kind'] == 'flow_end'}
qc = json.load(open(C + 'raw/queue_counters.json')); tcp = json.load(open(C + 'raw/tcp_counters.json'))
summ = json.load(open(C + 'summary.json'))
w0, w1 = summ['cpu_window_s']; span = w1 - w0
print('## port load (port counters, queue 7) over the iteration window %.1f s' % span)
for port, host in [('tbx1-eth3', 'tbh3'), ('tbx1-eth4', 'tbh4'), ('tbx1-eth1', 'tbh1'), ('tbx1-eth2', 'tbh2')]:
    q = qc[port]['7']; mbps = q['bytes'] * 8 / span / 1e6
    rep = sum(F.wire(e['bytes']) for e in starts.values() if e['dst'] == host)
    print(f"{host}: {q['bytes']/1e6:.1f} MB, {q['packets']} pkts, dropped {q['dropped']}, mean {mbps:.2f} Mbit/s = {mbps/F.NIC[host]:.1%} of link; reported transfers (wire) {rep/1e6:.1f} MB, rest {(q['bytes']-rep)/1e6:.1f} MB")

print('\n## decisions: latency (flow event -> rates applied)')
lat = np.array([x for d in de for x in d['latency_s']]) * 1e3
print('decisions', len(de), 'latency p50/p90/p99 ms', np.percentile(lat, [50, 90, 99]).round(2), 'apply p50', np.median([d['apply_s'] for d in de]) * 1e3)

print('\n## per receiver: flow starts, unshaped first flows, stale windows')
hist = defaultdict(list)
for d in de:
    for s in d['set']:
        hist[tuple(s[:5])].append((d['t'], s[5]))
first_set = {k: v[0][0] for k, v in hist.items()}
# decision answering each flow_start: the recorded decision whose trigger list holds its time
trig = []
for j, d in enumerate(de):
    for l in d['latency_s']:
        trig.append((d['t'] - l, j))
trig.sort(); tt = [x[0] for x in trig]
for host in ('tbh3', 'tbh4'):
    fs = [e for e in starts.values() if e['dst'] == host]
    unshaped = [e for e in fs if (k := (e['src'], e['dst'], 'tcp', e['src_port'], e['dst_port'])) not in first_set or first_set[k] > e['t']]
    ans = []
    for e in fs:
        i = bisect.bisect_left(tt, e['t'] - 3e-5)
        if i < len(tt) and abs(tt[i] - e['t']) < 3e-5:
            ans.append(de[trig[i][1]]['t'] - e['t'])
    print(f"{host}: {len(fs)} transfers in; {len(unshaped)} started with no class on their connection "
          f"({sum(e['bytes'] for e in unshaped)/1e3:.0f} KB: " + ", ".join(f"{e['flow']}" for e in unshaped) + ")")
    print(f"   {len(ans)} answered by a decision that changed some rate; stale window (start -> applied) ms p50/p90/max "
          f"{np.percentile(np.array(ans)*1e3,[50,90,100]).round(1)}")

print('\n## requests (unshaped, unreported), from the stores\' compute events')
host_of = next(e['tasks'] for e in ev if e['kind'] == 'tasks_started')
rq = [e for e in ev if e['kind'] == 'compute' and 'peer' in e and host_of[e['peer']] != host_of[e['task']]]
for host in ('tbh3', 'tbh4'):
    r = [e['request_bytes'] for e in rq if host_of[e['task']] == host]
    print(f"into {host}: {len(r)} requests, {sum(r)/1e6:.2f} MB, median {np.median(r):.0f} B, max {max(r)} B")

print('\n## transfers faster than their class allows (installed rate, 15 KB bucket + 1 frame, rate increases from t-apply_s)')
rows = []
for f, e in starts.items():
    if f not in ends: continue
    k = (e['src'], e['dst'], 'tcp', e['src_port'], e['dst_port'])
    h = hist.get(k, [])
    # rate in force over the flow's life: the max over the sets in force (permissive)
    ts = [x[0] for x in h]
    i = bisect.bisect_right(ts, e['t']) - 1
    j = bisect.bisect_right(ts, ends[f] + 0.02) - 1
    rs = [x[1] for x in h[max(i, 0):j + 1]] if (h and j >= 0) else []
    if not rs: continue
    r = max(rs); wb = F.wire(e['bytes']); dur = ends[f] - e['t']
    allow = F.bucket_bytes(r, True) + r * 1e6 / 8 * dur
    rows.append(dict(flow=f, src=e['src'], dst=e['dst'], phase=e['phase'].rstrip('0123456789'), bytes=e['bytes'], dur_ms=dur * 1e3,
                     r=r, esc=max(0.0, wb - allow), mbps=wb * 8 / dur / 1e6))
df = pd.DataFrame(rows)
df['over'] = df.esc > 0
print(df.groupby(['dst']).agg(n=('flow', 'size'), over=('over', 'sum'), esc_KB=('esc', lambda x: x.sum() / 1e3), esc_max_KB=('esc', lambda x: x.max() / 1e3)).round(1).to_string())
print(df[df.over].groupby('phase').agg(n=('flow', 'size'), esc_KB=('esc', lambda x: x.sum() / 1e3), med_mbps=('mbps', 'median'), med_rate=('r', 'median')).round(1).to_string())
o = df[df.over]
print('of those: achieved > 10x the class rate', int((o.mbps > 10 * o.r).sum()), ', above 100 Mbit/s', int((o.mbps > 100).sum()))
sm = df[df.phase.isin(['sample', 'eval-sample']) & (df.bytes * 1.0074 > df.r.apply(lambda r: F.bucket_bytes(r, True)))]
print('sampling replies larger than their bucket, share over their class, by receiver:')
print(sm.groupby('dst').agg(n=('flow', 'size'), over=('over', 'sum'), share=('over', 'mean')).round(3).to_string())
df.to_csv('/tmp/oesdrops/over_class.csv', index=False)

print('\n## TCP retransmissions on the wire by sender (RetransSegs - RetransFail), DSACKs; who can have lost at which port')
for h, c in tcp.items():
    print(h, 'on wire', c['TcpRetransSegs'] - c['TcpExtTCPRetransFail'], 'dsack', c['TcpExtTCPDSACKRecv'], 'timeouts', c['TcpExtTCPTimeouts'], 'TLP', c['TcpExtTCPLossProbes'])
dests = defaultdict(lambda: defaultdict(float))
for e in starts.values():
    dests[e['src']][e['dst']] += e['bytes']
for h in sorted(dests):
    print(h, 'sends to', {d: round(b / 1e6) for d, b in sorted(dests[h].items())}, 'MB')

print('\n## fluid model, per port: time with the installed rates of backlogged connections at/above the link')

for a in [dict(), dict(port_tokens=0)]:
    ports, ahead, done, t0 = F.simulate(ev, de, **a)
    for h in ('tbh3', 'tbh4'):
        p = ports[h]
        print(a, h, f"offered {p.offered/1e6:.1f} MB, at/above the link {p.t_full:.0f} s of {span:.0f} ({p.t_full/span:.0%}), above {p.t_over:.1f} s, queue>0 {p.t_queue:.0f} s")
