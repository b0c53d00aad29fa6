import json, statistics as st, sys
runs=json.load(open(sys.argv[1]))
print("| case | port receive sockets | min goodput / rate, each run | median | trustworthy | socket drops | queue drops | re-sent share | re-sent per queue drop | switch waited for CPU | CPU idle |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for case in ("6x100","9x100","24x25"):
    for label in ("default","sized"):
        rs=[r for r in runs if r["case"]==case and r["receive_buffers"]==label]
        med=lambda k: st.median(r[k] for r in rs)
        mins=", ".join("%.3f" % r["min"] for r in rs)
        print(f"| {case} | {label} | {mins} | {med('min'):.3f} | {sum(r['trustworthy'] for r in rs)} of {len(rs)} | {med('socket_drops'):,.0f} | {med('queue_drops'):,.0f} | {med('retransmitted_share'):.3f} | {st.median(r['segments_per_drop'] for r in rs):.2f} | {st.median(max(r['vswitchd_waited']) for r in rs):.2f} | {med('cpu_idle'):.2f} |")
print([(r["case"], r["receive_buffers"], r["round"], r["failed"]) for r in runs if r["failed"]])
