"""Per flow: the receiver's flow_end less the fluid model's time its last byte left the
sender (D). At a 20 Mbit/s port a full 150 KB queue adds 60 ms, so D well above that
means the sender fell behind its class (TCP loss recovery). Flows the model had not
finished by flow_end: their unsent bytes (reality ahead of the model)."""
import sys, numpy as np, pandas as pd
sys.path.insert(0,'/tmp/oesdrops'); import fluid
ev,de=fluid.load()
st,done,_,_=fluid.simulate(ev,de,port_bucket=True)
fl=st['_forced_left']
starts={e['flow']:e for e in ev if e['kind']=='flow_start'}
ends={e['flow']:e['t'] for e in ev if e['kind']=='flow_end'}
rows=[]
for f,e in starts.items():
    if f not in ends: continue
    rows.append(dict(flow=f,dst=e['dst'],src=e['src'],phase=e['phase'].rstrip('0123456789'),bytes=e['bytes'],t=e['t'],t_end=ends[f],
                     D=(ends[f]-done[f])*1e3 if f in done else np.nan, ahead=fl.get(f,np.nan)))
df=pd.DataFrame(rows)
df.to_csv('/tmp/oesdrops/flow_delays.csv',index=False)
print('flows model not finished at flow_end (reality ahead):')
print(df.groupby('dst').apply(lambda g: pd.Series(dict(n=len(g),ahead_n=g.ahead.notna().sum(),ahead_KB_med=g.ahead.median()/1e3,ahead_KB_p90=g.ahead.quantile(.9)/1e3))).round(1).to_string())
print('D (ms) of flows the model finished:')
print(df.dropna(subset=['D']).groupby('dst').D.describe(percentiles=[.5,.9,.99]).round(1).to_string())
for thr in (70,100,200):
    x=df[df.D>thr]
    print(f'D>{thr}ms:',x.groupby(['dst']).size().to_dict())
x=df[df.D>70]
print(x.groupby(['dst','src','phase']).agg(n=('flow','size'),Dmed=('D','median'),Dmax=('D','max')).round(0).to_string())
