"""The priority test's scenario with the low sender's TCP state sampled by ``ss -tin``.

    python measurements/bbr-starvation-2026-11-25/probe.py bbr|cubic OUT   (root; one fabric)
    python measurements/bbr-starvation-2026-11-25/probe.py --summarize OUT...   (OUT.ss.txt or .ss.txt.gz)

A run: low flow tbh3 -> tbh1 in queue 7 for 18 s, high flow tbh5 -> tbh1 in queue 1 from
4 s to 10 s (tests/test_emulation_runs.py without the rate change). Writes the run
directory OUT, ``OUT.ss.txt`` (``T <epoch>`` then ``ss -tin``, every ~65 ms, run on tbh3)
and ``OUT.t0`` (the schedule's start, epoch seconds). ``--summarize`` prints, per run,
the stretches where BBR paced at <= 3 Mbit/s with pacing gain 1.0 for over 0.5 s (its
lt_bw "policer" mode: otherwise the gain cycle shows 1.25 or 0.75 within 8 phases) and
when its bandwidth estimate first exceeds 20 Mbit/s after the high flow left.
"""
import gzip
import re
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
HIGH_ENDS_S = 10.0


def run(cc: str, out: Path) -> None:
    from experiments.timetable import runner, spec as spec_mod
    raw = yaml.safe_load((REPO / "experiments/specs/priority-demo.yaml").read_text())
    raw.update(name=f"bbr-probe-{cc}", duration_s=18, tcp_congestion=cc, policy_changes=[],
               analysis={"priority": {"high": "high", "low": "low"}})
    raw["flows"] = [{"name": "low", "src": "tbh3", "dst": "tbh1", "start_s": 0, "duration_s": 18, "queue": 7},
                    {"name": "high", "src": "tbh5", "dst": "tbh1", "start_s": 4, "duration_s": 6, "queue": 1}]
    workload, sampler = runner.TimetableWorkload, {}
    start, play = workload.start, workload.run

    def start_sampling(self, em, events_path):
        start(self, em, events_path)
        sampler["file"] = open(out.with_suffix(".ss.txt"), "w")
        loop = "while true; do echo T $(date +%s.%N); ss -tin dport ge :5200; sleep 0.05; done"
        sampler["proc"] = em.popen("tbh3", ["bash", "-c", loop], stdout=sampler["file"], stderr=sampler["file"])

    def play_then_stop(self):
        try:
            play(self)
        finally:
            out.with_suffix(".t0").write_text(str(time.time() - (time.monotonic() - self.t0)))
            sampler["proc"].kill()
            sampler["proc"].wait()
            sampler["file"].close()

    workload.start, workload.run = start_sampling, play_then_stop
    runner.run_spec(spec_mod.validate(raw), out=str(out))


def samples(base: Path) -> list[tuple[float, float, float]]:
    """(run time, bw Mbit/s, pacing gain) of the bulk connection under BBR, from OUT.ss.txt."""
    t0, t, rows = float(base.with_suffix(".t0").read_text()), None, []
    trace = base.with_suffix(".ss.txt")
    text = trace.read_text() if trace.exists() else gzip.decompress(Path(f"{trace}.gz").read_bytes()).decode()
    for line in text.splitlines():
        if line.startswith("T "):
            t = float(line.split()[1]) - t0
        elif "bbr:(" in line and (m := re.search(r"bytes_acked:(\d+)", line)) and int(m.group(1)) > 1e6:
            rows.append((t, int(re.search(r"bw:(\d+)bps", line).group(1)) / 1e6,
                         float(re.search(r"pacing_gain:([\d.]+)", line).group(1))))
    return rows


def summarize(base: Path) -> str:
    stretches, current = [], None
    for t, bw, gain in samples(base):
        if bw <= 3.0 and gain == 1.0:
            current = [current[0] if current else t, t]
        elif current:
            stretches.append(current)
            current = None
    stretches += [current] if current else []
    locked = [f"{a:.2f}-{b:.2f}" for a, b in stretches if b - a > 0.5]
    back = next((t for t, bw, _ in samples(base) if t > HIGH_ENDS_S and bw > 20), None)
    if back is None:
        return f"{base.name}: no BBR samples"
    return f"{base.name}: lt_bw stretches {locked or 'none'}; bw > 20 Mbit/s again at {back:.2f} s"


if __name__ == "__main__":
    if sys.argv[1] == "--summarize":
        print("\n".join(summarize(Path(p)) for p in sys.argv[2:]))
    else:
        run(sys.argv[1], Path(sys.argv[2]))
