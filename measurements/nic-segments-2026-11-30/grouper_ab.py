"""The Grouper testbed cell with the host NICs as they are (one segment per packet)
and as they were until 2026-11-30 (GSO super-packets), side by side on one box (as
root: ``python measurements/nic-segments-2026-11-30/grouper_ab.py`` from the
checkout's root, nothing else running; writes grouper_ab/<round>-<nic>-<scheduler>/
run directories and grouper_ab.jsonl beside itself).

experiments/specs/grouper-testbed-paper.yaml, seed 1, FS and Grouper, ROUNDS rounds,
the four runs of a round interleaved. Per run: its summary's average SCT, the model's,
TCP's timeouts and retransmitted share, the box's CPU idle share."""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.platform.net import Emulation  # noqa: E402
from experiments.reports.run import without_console_summary  # noqa: E402
from experiments.results import load_summary  # noqa: E402
from experiments.runner import read_spec, run_any_spec  # noqa: E402
from topologies import queues  # noqa: E402

ROUNDS = 2
one_segment = queues.host_nic_cmds
checked = Emulation.__dict__["_check_one_segment_per_packet"]


def superpackets(intf, segmentation, mtu=queues.MIN_MTU):
    return [cmd for cmd in one_segment(intf, segmentation, mtu) if "gso_max_segs" not in cmd]


def use(nic: str) -> None:
    queues.host_nic_cmds = one_segment if nic == "one-segment" else superpackets
    Emulation._check_one_segment_per_packet = checked if nic == "one-segment" else staticmethod(
        lambda host, pid, intf: None)


if __name__ == "__main__":
    base = read_spec(ROOT / "experiments/specs/grouper-testbed-paper.yaml")
    with open(HERE / "grouper_ab.jsonl", "a") as out:
        for i in range(ROUNDS):
            for nic in ("superpackets", "one-segment"):
                for scheduler in ("fs", "grouper"):
                    use(nic)
                    spec = {**base, "seed": 1, "scheduler": {**base.get("scheduler", {}), "name": scheduler}}
                    with without_console_summary():
                        run = run_any_spec(spec, str(HERE / "grouper_ab" / f"{i}-{nic}-{scheduler}"))
                    s = load_summary(run)
                    line = json.dumps({"round": i, "nic": nic, "scheduler": scheduler,
                                       "avg_sct_s": s.get("avg_sct_s"), "model_avg_sct_s": s.get("model_avg_sct_s"),
                                       "tcp_timeouts": s.get("tcp_timeouts"),
                                       "tcp_retransmitted_share": s.get("tcp_retransmitted_share"),
                                       "cpu_idle_share": s.get("cpu_idle_share"),
                                       "trustworthy": s.get("trustworthy")})
                    print(line, flush=True)
                    out.write(line + "\n")
