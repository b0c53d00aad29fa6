"""Transfers that crossed faster than their sender's class allows (its installed rate
and a full 15 KB bucket): when do they happen?"""
import sys, bisect, numpy as np, pandas as pd
sys.path.insert(0,'/tmp/oesdrops'); import fluid
ev,de=fluid.load()
hist={}; host_dec={}
for d in de:
    for s in d['set']:
        hist.setdefault(tuple(s[:5]),[]).append((d['t'],d['t']-d['apply_s'],s[5]))
        host_dec.setdefault(s[0],[]).append((d['t']-d['apply_s'],d['t']))
starts={e['flow']:e for e in ev if e['kind']=='flow_start'}
ends={e['flow']:e['t'] for e in ev if e['kind']=='flow_end'}
prev_end={}
rows=[]
for f,e in sorted(starts.items(),key=lambda kv:kv[1]['t']):
    k=(e['src'],e['dst'],'tcp',e['src_port'],e['dst_port'])
    if f not in ends: continue
    h=hist.get(k,[]); ts=[x[0] for x in h]
    i=bisect.bisect_right(ts,e['t'])-1
    r0=h[i][2] if i>=0 else None
    j=bisect.bisect_right(ts,ends[f])-1
    rmax=max([x[2] for x in h[max(i,0):j+1]]) if (h and j>=0) else None
    in_life=sum(1 for x in h if e['t']<=x[1] and x[0]<=ends[f])  # a change of this key applied during the flow
    hd=host_dec.get(e['src'],[])
    host_in_life=sum(1 for a,b in hd if e['t']<=b and a<=ends[f])
    w=fluid.wire(e['bytes']); dur=ends[f]-e['t']
    need=(max(0,w-fluid.bucket_bytes(rmax))*8/(rmax*1e6)) if rmax else np.nan
    rows.append(dict(flow=f,src=e['src'],dst=e['dst'],phase=e['phase'].rstrip('0123456789'),bytes=e['bytes'],t=e['t'],dur_ms=dur*1e3,
        r0=r0,rmax=rmax,need_ms=need*1e3,key_change_in_life=in_life,host_change_in_life=host_in_life,
        since_key_change_ms=(e['t']-h[i][0])*1e3 if i>=0 else np.nan,
        idle_ms=(e['t']-prev_end[k])*1e3 if k in prev_end else np.nan))
    prev_end[k]=ends[f]
df=pd.DataFrame(rows)
df['fast']=(df.dur_ms<0.5*df.need_ms)&(df.need_ms>2)
s=df[df.need_ms>2]
print('flows needing >2 ms at their class:',len(s),'fast (under half):',int(s.fast.sum()))
print(s.groupby('phase').agg(n=('flow','size'),fast=('fast','sum')).to_string())
print(s.groupby('fast').agg(n=('flow','size'),key_chg=('key_change_in_life','mean'),host_chg=('host_change_in_life','mean'),
      since_chg=('since_key_change_ms','median'),idle=('idle_ms','median'),bytes=('bytes','median'),r0=('r0','median')).round(2).to_string())
print(pd.crosstab(s.fast, s.key_change_in_life>0))
print(pd.crosstab(s.fast, s.r0.isna()))
print('fast by dst: n, MB', s[s.fast].groupby('dst').agg(n=('flow','size'),MB=('bytes',lambda x:x.sum()/1e6)).to_string())
df.to_csv('/tmp/oesdrops/fast_flows.csv',index=False)
