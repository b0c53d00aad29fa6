"""Replay the run's flow events through the project's RateCoordinator and check that
the decision log's rates are what the coordinator computes at each decision."""
import gzip, json, sys, bisect
sys.path.insert(0, '/work/main')
from experiments.gnn.coordinator import RateCoordinator, installed_mbps
from controller.schedulers import oes
C='/work/main/measurements/oes-losses-2026-11-29/cell/'
ev=[json.loads(l) for l in gzip.open(C+'events.jsonl.gz','rt')]
de=[json.loads(l) for l in gzip.open(C+'decisions.jsonl.gz','rt')]
fl=[e for e in ev if e['kind'] in('flow_start','flow_end')]
# map trigger time -> index in fl
times={}
for i,e in enumerate(fl): times.setdefault(round(e['t'],5),[]).append(i)
last_idx=[]
ft=sorted(e['t'] for e in fl)
miss=0
for d in de:
    idx=[]
    for lat in d['latency_s']:
        tt=d['t']-lat
        # nearest event time within 2e-5
        c=[i for i,e in enumerate(fl[max(0,pos-400):pos+400],max(0,pos-400)) if abs(e['t']-tt)<3e-5] if (pos:=bisect.bisect_left(ft,tt)) is not None else []
        if not c: miss+=1; print('miss',d['t'],lat); continue
        idx.append(min(c,key=lambda i:abs(fl[i]['t']-tt)))
    last_idx.append(max(idx) if idx else None)
print('unmatched triggers',miss, 'monotone', all(a<b for a,b in zip(last_idx,last_idx[1:]) if a is not None and b is not None))
M=[oes.Machine(h,m,m) for h,m in [('tbh1',100),('tbh2',100),('tbh3',20),('tbh4',20)]]
co=RateCoordinator(M)
installed={}
j=0; bad=0; nchk=0; extra=0
for i,e in enumerate(fl):
    co.on_flow_event(e)
    while j<len(de) and last_idx[j]==i:
        dec=co.decide()
        want={k:installed_mbps(v) for k,v in dec.rates.items()}
        changed={k:v for k,v in want.items() if installed.get(k)!=v}
        got={tuple(s[:5]):s[5] for s in de[j]['set']}
        if got!=changed:
            bad+=1
            if bad<5: print('mismatch',j,got,changed)
        nchk+=1
        installed.update(got)
        j+=1
print('none',sum(x is None for x in last_idx),'j',j);print('decisions checked',nchk,'mismatches',bad)
