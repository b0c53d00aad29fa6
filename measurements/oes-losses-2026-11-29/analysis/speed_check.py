"""Did flows go faster than the class installed at their start allows (rate and a
full bucket)?"""
import sys, numpy as np, pandas as pd, bisect
sys.path.insert(0,'/tmp/oesdrops'); import fluid
ev,de=fluid.load()
hist={}
for d in de:
    for s in d['set']:
        hist.setdefault(tuple(s[:5]),[]).append((d['t'],s[5]))
starts={e['flow']:e for e in ev if e['kind']=='flow_start'}
ends={e['flow']:e['t'] for e in ev if e['kind']=='flow_end'}
rows=[]
for f,e in starts.items():
    if f not in ends: continue
    k=(e['src'],e['dst'],'tcp',e['src_port'],e['dst_port'])
    h=hist.get(k,[])
    ts=[t for t,_ in h]
    i=bisect.bisect_right(ts,e['t'])-1
    r0=h[i][1] if i>=0 else None
    # max rate over the flow's life (any later decision before its end)
    j=bisect.bisect_right(ts,ends[f])-1
    rmax=max([x for _,x in h[max(i,0):j+1]] or [None]) if h and j>=0 else None
    w=fluid.wire(e['bytes'])
    dur=ends[f]-e['t']
    rows.append(dict(flow=f,src=e['src'],dst=e['dst'],phase=e['phase'].rstrip('0123456789'),bytes=e['bytes'],dur_ms=dur*1e3,r0=r0,rmax=rmax,
                     mbps=w*8/dur/1e6, need_ms=(max(0,w-fluid.bucket_bytes(rmax))*8/(rmax*1e6)*1e3) if rmax else np.nan))
df=pd.DataFrame(rows)
df['fast']=df.dur_ms<df.need_ms*0.9
print(df.groupby(['dst','phase']).agg(n=('flow','size'),unshaped=('r0',lambda x:x.isna().sum()),fast=('fast','sum'),
      med_mbps=('mbps','median'),med_r0=('r0','median')).to_string())
x=df[df.fast]
print(x.groupby(['src','dst','phase']).agg(n=('flow','size'),bytes_med=('bytes','median'),dur=('dur_ms','median'),need=('need_ms','median'),mbps=('mbps','median'),rmax=('rmax','median')).round(2).to_string())
df.to_csv('/tmp/oesdrops/speed_check.csv',index=False)
