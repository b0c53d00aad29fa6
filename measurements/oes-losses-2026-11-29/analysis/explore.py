import gzip, json, collections
import pandas as pd
C='/work/main/measurements/oes-losses-2026-11-29/cell/'
ev=[json.loads(l) for l in gzip.open(C+'events.jsonl.gz','rt')]
de=[json.loads(l) for l in gzip.open(C+'decisions.jsonl.gz','rt')]
print(collections.Counter(e['kind'] for e in ev))
fs=pd.DataFrame([e for e in ev if e['kind']=='flow_start'])
fe=pd.DataFrame([e for e in ev if e['kind']=='flow_end'])
fs['remote']=fs.src!=fs.dst
print(fs.remote.value_counts())
fs=fs[fs.remote]
m=fs.merge(fe[['flow','t','bytes']].rename(columns={'t':'t_end','bytes':'bytes_end'}),on='flow',how='left')
m['dur']=m.t_end-m.t
m['ph']=m.phase.str.replace(r'\d+$','',regex=True)
print(m.groupby(['dst','src','src_task','dst_task']).agg(n=('flow','size'),MB=('bytes',lambda x:x.sum()/1e6),med=('bytes','median'),mx=('bytes','max'),ports=('src_port','nunique')).to_string())
print(m.groupby(['dst','ph']).agg(n=('flow','size'),MB=('bytes',lambda x:x.sum()/1e6),med=('bytes','median'),mx=('bytes','max'),dur=('dur','median')).to_string())
print('missing end', m.t_end.isna().sum())
co=pd.DataFrame([e for e in ev if e['kind']=='compute' and 'peer' in e])
print(co.groupby(['task','peer']).agg(n=('request_bytes','size'),reqMB=('request_bytes',lambda x:x.sum()/1e6),reqmed=('request_bytes','median'),reqmax=('request_bytes','max')).to_string())
print(de[0].keys(), len(de))
import numpy as np
print('apply_s', np.percentile([d['apply_s'] for d in de],[50,90,99,100]))
lat=[x for d in de for x in d['latency_s']]
print('lat', np.percentile(lat,[50,90,99,100]), len(lat))
print('t range', ev[0]['t'], ev[-1]['t'], fs.t.min(), m.t_end.max())
