"""The multi-queue tables beside the papers' numbers, over the H100 runs kept in measurements/."""
from pathlib import Path

from experiments.colocation.report import table_v

H100 = Path(__file__).resolve().parents[1] / "measurements" / "colocate-h100-2026-11-23"


def _rows(text: str, section: str) -> dict[str, list[str]]:
    lines = text.split(f"## {section}")[1].split("\n## ")[0].strip().splitlines()
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}


def test_training_queues_as_ratios_to_pipeswitch_beside_table_v():
    text = table_v([H100 / "train-sage", H100 / "train-gat"])
    assert "NVIDIA H100 80GB HBM3" in text
    makespan = _rows(text, "Makespan / PipeSwitch's, beside Table V's (V100)")
    assert list(makespan) == ["pipeswitch", "base", "lmcf", "bmc"]  # baselines first, as Table V
    # ours over PipeSwitch's, then Table V's: SAGE BMC 11.6 s / 14.7 s here, 3.29 / 3.53 min there
    assert makespan["bmc"] == ["0.791", "0.932", "0.761", "0.912"] and makespan["pipeswitch"] == ["1"] * 4
    assert _rows(text, "Average JCT / PipeSwitch's, beside Table V's (V100)")["lmcf"][:2] == ["0.452", "0.199"]


def test_inference_queues_beside_what_gnnsched_states():
    text = table_v([H100 / "infer-gcn-low", H100 / "infer-mix-low"])
    assert "at low load" in text
    violations = _rows(text, "QoS violation rate (Fig. 5)")
    assert violations["sqtf"] == ["0.24", "0.76", "0"] and violations["mps-base"] == ["0.2", "0.38", "< 0.20"]
    assert _rows(text, "p99 latency / QT (Fig. 6)")["default"][-1] == "GIN: 17.3"
    # BQT's average JCT against MPS-Base's, ours (31% above it here) then the paper's (26.8% below)
    assert "| avg_jct_qt | bqt | mps-base | -31.1% | 26.8% |" in text.splitlines()
