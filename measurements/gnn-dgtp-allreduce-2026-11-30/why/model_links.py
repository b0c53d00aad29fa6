"""The job's model (experiments.gnn.simulated: loss-free, max-min fluid) for a cell's own
placement, scheduler and profile (its own events, as the summary's predicted_iteration_s):
the slow links' busy/idle and delivered rate in the MODEL's flows, beside the fabric's.
Copies the cell's files into a temporary directory (events uncompressed).
Run (no .pyc into the repository): python3 -B model_links.py DATE:CELL ..."""
import gzip, json, shutil, sys, tempfile, time
from pathlib import Path
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from experiments.gnn import simulated, metrics  # noqa: E402
from experiments.validation import read_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]  # measurements/
RATE = {"tbh1": 100e6, "tbh2": 100e6, "tbh3": 20e6, "tbh4": 20e6}
WIRE = simulated.wire_factor(9000)


def links(flows, lo, hi, n):
    out = {}
    for h in ("tbh3", "tbh4"):
        for d, key in (("up", "src"), ("down", "dst")):
            mine = [f for f in flows if f[key] == h and f["src"] != f["dst"] and f["b"] is not None]
            busy, end, nb = 0.0, lo, 0.0
            for f in sorted(mine, key=lambda f: f["a"]):
                a, b = max(f["a"], lo), min(f["b"], hi)
                if b > end:
                    busy += b - max(a, end); end = b
                inside = max(0.0, min(f["b"], hi) - max(f["a"], lo))
                nb += f["bytes"] * (inside / (f["b"] - f["a"]) if f["b"] > f["a"] else float(lo <= f["a"] <= hi))
            need = nb * WIRE * 8 / RATE[h]
            out[f"{h}-{d}"] = (need / n, hi - lo - busy, need / (hi - lo), need / busy if busy else 0)
    return out


def flows_of(events):
    starts = {e["flow"]: e for e in events if e["kind"] == "flow_start" and e["src"] != e["dst"]}
    ends = {e["flow"]: e["t"] for e in events if e["kind"] == "flow_end"}
    return [{"src": e["src"], "dst": e["dst"], "a": e["t"], "b": ends.get(k), "bytes": e["bytes"]} for k, e in starts.items()]


def window(events):
    ends = sorted(e["t"] for e in events if e["kind"] == "iteration_end" and e["task"] == "worker0")
    return ends[0], ends[-1], len(ends) - 1


for arg in sys.argv[1:]:
    date, cell = arg.split(":")
    src = ROOT / f"gnn-dgtp-allreduce-{date}/cells/{cell}"
    dst = Path(tempfile.mkdtemp()) / date / cell
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("spec.yaml", "summary.json", "environment.json"):
        shutil.copy(src / name, dst / name)
    with gzip.open(src / "events.jsonl.gz", "rb") as f:
        (dst / "events.jsonl").write_bytes(f.read())
    t0 = time.time()
    spec = read_yaml(dst / "spec.yaml", "spec.yaml", "run spec")
    events = [json.loads(l) for l in (dst / "events.jsonl").read_text().splitlines()]
    measured = metrics.training(events, None)
    profile = simulated.run_profile(dst)
    result = simulated.GnnSimulation(spec, profile, measured["iterations"]).run()
    mev = result.events
    pm = metrics.training(mev, None)["iteration_s_mean"]
    lo, hi, n = window(mev)
    ml = links(flows_of(mev), lo, hi, n)
    lo2, hi2, n2 = window(events)
    fl = links(flows_of(events), lo2, hi2, n2)
    print(f"{date} {cell}: measured {measured['iteration_s_mean']} model {pm} (summary {json.loads((dst/'summary.json').read_text())['predicted_iteration_s']}) [{time.time()-t0:.1f}s]")
    for k in ml:
        m, f = ml[k], fl[k]
        print(f"   {k:10} need/it {m[0]:.2f}|{f[0]:.2f}  idle s {m[1]:5.1f}|{f[1]:5.1f} of {hi-lo:.0f}|{hi2-lo2:.0f}  util {m[2]:.3f}|{f[2]:.3f}  rate-when-busy {m[3]:.3f}|{f[3]:.3f}   (model|fabric)")
