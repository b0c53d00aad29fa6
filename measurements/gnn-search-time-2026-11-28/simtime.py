"""One 20-iteration simulation of IFS's placement on the tight star, timed under the
320 KB and the 1.66 MB send backlog in turn, three times (README: why both searches
took longer than on 2026-11-24). Alternating, so both backlogs see the same load.

    nice -n 19 .venv/bin/python measurements/gnn-search-time-2026-11-28/simtime.py > simtime.out

Each line: repeat, backlog in bytes, the model's makespan (s), wall seconds.
"""
import time

from experiments.gnn import search, searchbench, simulated

profile = simulated.load_profile(searchbench.PROFILE)
spec, _ = searchbench.headline()  # the tight star, as Fig. 9's run reads it
placement = search.ifs_placement(spec, profile)
simulate = search.makespan(spec, profile)
for repeat in range(3):
    for backlog in (320_000, 1_660_000):
        simulated.SEND_BACKLOG_BYTES = backlog
        started = time.perf_counter()
        makespan = simulate(placement)
        print(repeat, backlog, round(makespan, 2), f"{time.perf_counter() - started:.2f} s", flush=True)
