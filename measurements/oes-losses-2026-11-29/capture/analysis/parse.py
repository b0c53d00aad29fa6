"""Parse the receivers' classic pcaps (Ethernet, IPv4, TCP, snap 128) into pickled DataFrames."""
import struct, sys, socket
import pandas as pd
RUN = "/tmp/oes-capture-run/raw/"
def parse(path):
    rows = []
    with open(path, "rb") as f:
        data = f.read()
    magic, vmaj, vmin, _, _, snap, link = struct.unpack_from("<IHHiIII", data, 0)
    assert magic == 0xa1b2c3d4 and link == 1, (hex(magic), link)
    off = 24; n = len(data); other = 0
    while off + 16 <= n:
        sec, usec, incl, orig = struct.unpack_from("<IIII", data, off); off += 16
        pkt = data[off:off + incl]; off += incl
        eth = struct.unpack_from("!H", pkt, 12)[0]; p = 14
        if eth == 0x8100:
            eth = struct.unpack_from("!H", pkt, 16)[0]; p = 18
        if eth != 0x0800:
            other += 1; continue
        vihl, tos, iplen, ipid, frag, ttl, proto = struct.unpack_from("!BBHHHBB", pkt, p)
        ihl = (vihl & 15) * 4
        if proto != 6:
            other += 1; continue
        src = pkt[p + 12:p + 16]; dst = pkt[p + 16:p + 20]
        t = p + ihl
        sport, dport, seq, ack, offfl, win = struct.unpack_from("!HHIIHH", pkt, t)
        doff = (offfl >> 12) * 4; flags = offfl & 0x1ff
        plen = iplen - ihl - doff
        # options
        tsval = tsecr = -1; sack = ""
        o = t + 20; end = min(t + doff, len(pkt))
        while o < end:
            kind = pkt[o]
            if kind == 0: break
            if kind == 1: o += 1; continue
            if o + 1 >= end: break
            ln = pkt[o + 1]
            if ln < 2: break
            if kind == 8 and o + 10 <= end:
                tsval, tsecr = struct.unpack_from("!II", pkt, o + 2)
            elif kind == 5:
                nb = (ln - 2) // 8
                bl = []
                for b in range(nb):
                    if o + 2 + 8 * b + 8 <= end:
                        bl.append("%d-%d" % struct.unpack_from("!II", pkt, o + 2 + 8 * b))
                sack = ";".join(bl)
            o += ln
        rows.append((sec + usec * 1e-6, socket.inet_ntoa(src), socket.inet_ntoa(dst), sport, dport, seq, ack, flags,
                     plen, iplen, orig, ipid, tos >> 2, tsval, tsecr, sack, win))
    df = pd.DataFrame(rows, columns=["ts", "src", "dst", "sport", "dport", "seq", "ack", "flags", "plen", "iplen",
                                     "wirelen", "ipid", "dscp", "tsval", "tsecr", "sack", "win"])
    print(path, len(df), "non-tcp/ip skipped", other, file=sys.stderr)
    return df
if __name__ == "__main__":
    for h in ("tbh3", "tbh4"):
        df = parse(RUN + f"capture-{h}.pcap")
        df.to_pickle(f"/tmp/oesdrops2/pkts-{h}.pkl")
