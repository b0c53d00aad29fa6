"""GSO-burst ('chunk') structure of the data arriving at tbh3/tbh4: per connection, maximal runs of
data frames with consecutive IP IDs, equal TSval and contiguous sequence numbers (one TCP super-packet
cut into wire frames after the sender's qdisc). Writes chunks-<host>.pkl."""
import numpy as np, pandas as pd
HOSTIP = {"tbh3": "10.0.0.3", "tbh4": "10.0.0.4"}
def chunks(host):
    d = pd.read_pickle(f"pkts-{host}.pkl")
    d = d[(d.dst == HOSTIP[host])].sort_values("ts", kind="stable").reset_index()
    d["order"] = np.arange(len(d))
    x = d[d.plen > 0].copy()
    x["conn"] = x.src + ":" + x.sport.astype(str) + ">" + x.dport.astype(str)
    out = []
    for c, g in x.groupby("conn", sort=False):
        ipid = g.ipid.values.astype(int); tsv = g.tsval.values; seq = g.seq.values.astype(np.int64); pl = g.plen.values
        new = np.ones(len(g), bool)
        new[1:] = ~(((ipid[1:] - ipid[:-1]) % 65536 == 1) & (tsv[1:] == tsv[:-1]) & (((seq[1:] - seq[:-1]) % 2**32) == pl[:-1]))
        cid = np.cumsum(new)
        g = g.assign(chunk=cid)
        out.append(g)
    x = pd.concat(out)
    return d, x
if __name__ == "__main__":
    for host in ("tbh3", "tbh4"):
        d, x = chunks(host)
        ch = x.groupby(["conn", "chunk"]).agg(n=("plen", "size"), bytes=("plen", "sum"), t0=("ts", "min"), t1=("ts", "max"),
                                              o0=("order", "min"), o1=("order", "max"))
        ch["contig"] = (ch.o1 - ch.o0 + 1) == ch.n   # no other packet between its frames at the port
        print(host, "data frames", len(x), "chunks", len(ch), "frames per chunk:", ch.n.value_counts().sort_index().to_dict())
        print("  chunk bytes max", ch.bytes.max(), " share of data bytes in chunks of >=5 frames", round(ch.bytes[ch.n >= 5].sum() / ch.bytes.sum(), 3),
              " contiguous at the port output", round(ch.contig.mean(), 3), " mean frames", round(ch.n.mean(), 2))
        x.to_pickle(f"chunks-{host}.pkl"); ch.reset_index().to_pickle(f"chunktab-{host}.pkl")
