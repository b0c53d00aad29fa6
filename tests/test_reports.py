"""Reports of runs and sweeps (``experiments.reports``), on recorded run directories
of every kind, a simulated run, and in a real headless browser (Debian's Chromium)."""
from __future__ import annotations

import base64
import io
import csv
import json
import os
import re
import shutil
import struct
import subprocess
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from experiments.cli import main
from experiments.platform.run import RunError, finish_run
from experiments.reports import (
    run_summary,
    sweep_summary,
    write_run_report,
    write_sweep_report,
)
from experiments.reports.figures import QUEUE_OCCUPANCY
from experiments.reports.rundata import load, verdict
from experiments.store import start_run

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "runs"
MEASURED = ROOT / "measurements"
SWEEP = MEASURED / "grouper-2026-11-23b" / "tb-fix"
RUNS = {  # name: (recorded run directory, kind, trustworthy, figures in its report)
    "timetable": (RECORDED / "timetable-priority", "timetable", True, 2),  # goodput.png, CPU
    "gnn": (RECORDED / "gnn-untrustworthy", "gnn", False, 3),  # bandwidth, loss/accuracy, CPU
    # kept gzipped (flows.csv.gz), its last transfers unfinished: bandwidth, loss/accuracy
    "gnn-kept": (MEASURED / "gnn-dgtp-reddit-2026-11-24" / "cells" / "sched-default_seed-1", "gnn", True, 2),
    "cojob": (SWEEP / "cells" / "sched-fs_seed-1", "cojob", True, 2),  # no spec.yaml, events.jsonl.gz
    "colocation": (MEASURED / "colocate-h100-2026-11-23" / "infer-gcn-low", "colocation", None, 1),
    "colocation-interrupted": (MEASURED / "colocate-h100-2026-11-23" / "train-gat-interrupted", "colocation",
                               False, 1),
    "programs": (MEASURED / "programs-2026-11-24" / "lower-queue", "programs", True, 2),  # host bandwidth, CPU
}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Page(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.images: list[dict] = []
        self.links: list[str] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs)
        elif tag == "a":
            self.links.append(attrs["href"])

    def handle_data(self, data):
        self.text.append(data)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def check_page(path: Path) -> Page:
    """A report page that stands alone: every image an embedded PNG, every link a
    relative path to a file or folder that exists."""
    page = Page(path.read_text())
    for image in page.images:
        head, _, data = image["src"].partition(",")
        assert head == "data:image/png;base64"
        assert min(png_size(base64.b64decode(data))) > 0
        assert image["alt"]
    for href in page.links:
        assert "://" not in href and not href.startswith("/")
        assert (path.parent / unquote(href)).exists(), href
    return page


@pytest.mark.parametrize("name", list(RUNS))
def test_a_recorded_run_of_every_kind_gets_its_report(name, tmp_path):
    source, kind, trusted, figures = RUNS[name]
    run = copy(source, tmp_path)
    report = write_run_report(run)
    assert report == run / "report.html"
    page = check_page(report)
    text = " ".join(page.text)
    data = load(run)
    assert data.kind == kind
    assert verdict(data).trustworthy is trusted
    assert len(page.images) == figures
    assert {"Headline", "Summary", "Resolved spec", "Files"} <= set(page.text)
    assert "summary.json" in page.links and "report.html" not in page.links
    for reason in verdict(data).reasons:
        assert reason in text


def test_the_console_says_what_happened_and_why_a_run_is_not_trusted(tmp_path):
    run = copy(RECORDED / "gnn-untrustworthy", tmp_path)
    write_run_report(run)
    lines = run_summary(run).splitlines()
    assert lines[0].startswith("bench-gnn-oes-old: gnn · emulated · completed")
    assert any(line.split() == ["iterations", "12"] for line in lines)
    # 12 iterations x 2 workers x 1 sampler each x 32 seeds over the 240 training nodes
    assert any(line.split() == ["epochs", "3.2"] for line in lines)
    assert any(line.startswith("  iteration time") and "median" in line for line in lines)
    assert any(line.startswith("  validation accuracy") for line in lines)
    at = lines.index(next(line for line in lines if line.startswith("trustworthy:")))
    assert lines[at].startswith("trustworthy: NO")
    assert lines[at + 1] == "  - CPU idle share 0.03 < 0.05"
    assert lines[-2] == f"report: {run / 'report.html'}"
    assert lines[-1].startswith(f"files:  {run}/ (")


def test_a_timetable_flow_shows_its_retransmissions(tmp_path):
    run = copy(RECORDED / "timetable-priority", tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    summary["flows"]["high"]["retransmits"] = 12  # recorded before runs counted them
    (run / "summary.json").write_text(json.dumps(summary))
    assert "97.3 Mbit/s mean goodput, 12 segments retransmitted (queue 1)" in run_summary(run)


def test_a_run_on_weighted_queues_says_so(tmp_path):
    run = copy(RECORDED / "timetable-priority", tmp_path)
    assert "queues 1..7" not in run_summary(run)  # strict priority, the default, goes without saying
    spec = yaml.safe_load((run / "spec.yaml").read_text())
    spec["emulation"]["queue_weights"] = [3, 1, 1, 1, 1, 1, 1.5]
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert re.search(r"^  queues 1..7 +weighted 3, 1, 1, 1, 1, 1, 1.5, not strict priority$", run_summary(run),
                     re.MULTILINE)


def test_timetable_and_colocation_headlines(tmp_path):
    timetable = run_summary(RECORDED / "timetable-priority")
    assert "flow high" in timetable and "97.3 Mbit/s mean goodput (queue 1)" in timetable
    assert re.search(r"^  high's share while both ran +98.0%$", timetable, re.MULTILINE)
    assert "39.7 Mbit/s of 40 Mbit/s (host)" in timetable
    assert "trustworthy: yes (CPU idle 38.5%" in timetable
    colocation = run_summary(MEASURED / "colocate-h100-2026-11-23" / "infer-gcn-low")
    assert re.search(r"^  bqt \(primary\) QoS violations +24.0%$", colocation, re.MULTILINE)
    # the methods table as table.md prints it: the QoS violation rate first, makespan (2.71 s) after the latencies
    assert any(line.split()[:2] == ["default", "0.68"] and line.split()[7] == "2.71"
               for line in colocation.splitlines())
    assert "trustworthy: not judged" in colocation


def test_a_simulated_run_prints_its_summary_and_writes_its_report(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", str(ROOT / "experiments" / "specs" / "grouper-smoke.yaml"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("grouper-smoke: cojob · simulated · completed")
    assert re.search(r"^  avg SCT +[0-9.]+ s$", printed, re.MULTILINE) and re.search(r"^  stages done +4 of 4$", printed, re.MULTILINE)
    assert "trustworthy: yes (simulated" in printed
    assert f"report: {out / 'report.html'}" in printed
    page = check_page(out / "report.html")
    assert [image["alt"].split(":")[0] for image in page.images] == ["Stage timeline", "Stage completion times (SCT), "
                                                                     "scheduler grouper (summary.json sct_s)"]


def test_a_failed_run_still_gets_its_summary_report_and_reasons(tmp_path, capsys):
    run = start_run({"name": "broken", "flows": []}, str(tmp_path / "run"))

    def analysis():
        raise KeyError("goodput.csv")

    with pytest.raises(RunError):
        finish_run(run, {"name": "broken", "backend": "emulated"}, RuntimeError("the fabric did not start"), analysis)
    printed = capsys.readouterr().out
    assert "broken: timetable · emulated · did NOT complete" in printed
    assert "trustworthy: NO" in printed
    assert "  - did not complete: RuntimeError: the fabric did not start" in printed
    assert "  - analysis failed: KeyError: 'goodput.csv'" in printed
    assert "traceback.txt" in check_page(run / "report.html").links


def test_a_plot_that_cannot_be_drawn_is_one_line_and_the_queue_sampler_is_drawn(tmp_path):
    gnn = copy(RECORDED / "gnn-untrustworthy", tmp_path)
    (gnn / "flows.csv").write_text("flow,src\nx,tbh1\n")
    page = check_page(write_run_report(gnn))
    assert any(line.startswith("gnn_bandwidth: not drawn (KeyError: ") for line in page.text)
    assert len(page.images) == 2
    timetable = copy(RECORDED / "timetable-priority", tmp_path)
    rows = [f"{t / 10:.1f},tbl1-eth1,{q},{(t * 1500 * q) % 150000}" for t in range(50) for q in (1, 7)]
    (timetable / QUEUE_OCCUPANCY).write_text("time_s,port,queue,backlog_bytes\n" + "\n".join(rows) + "\n")
    page = check_page(write_run_report(timetable))
    assert any(image["alt"].startswith("Queue occupancy over time, the 2 busiest") for image in page.images)


def make_sweep(tmp_path) -> Path:
    """The recorded testbed sweep with a figure beside it, one cell made untrustworthy
    and one failed without a summary."""
    sweep = copy(SWEEP, tmp_path)
    shutil.copy(MEASURED / "grouper-2026-11-23b" / "figures" / "figure-11.png", sweep)
    cell = sweep / "cells" / "sched-baraat_seed-1" / "summary.json"
    summary = json.loads(cell.read_text())
    summary["trustworthy"] = summary["fidelity"]["trustworthy"] = False
    summary["fidelity"]["untrustworthy_reasons"] = ["CPU idle share 0.03 < 0.05"]
    cell.write_text(json.dumps(summary))
    shutil.rmtree(sweep / "cells" / "sched-sincronia_seed-1")
    with open(sweep / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    rows[1]["trustworthy"] = "false"
    rows[2].update(completed="false", trustworthy="", error="RunError: run did not complete (Timeout)")
    with open(sweep / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for cell_dir in (sweep / "cells").iterdir():
        write_run_report(cell_dir)
    return sweep


def test_a_sweep_report_has_its_table_its_doubtful_cells_and_its_figures(tmp_path):
    sweep = make_sweep(tmp_path)
    page = check_page(write_sweep_report(sweep))
    text = " ".join(page.text)
    assert [image["alt"] for image in page.images] == [
        "avg SCT by scheduler: the mean (bar) and each completed cell (dot)", "figure-11.png"]
    assert "sched-baraat_seed-1" in text and "CPU idle share 0.03 < 0.05" in text
    assert "RunError: run did not complete (Timeout)" in text
    assert "cells/sched-fs_seed-1/report.html" in page.links and "results.csv" in page.links
    assert "cells/sched-sincronia_seed-1/report.html" not in page.links
    assert (sweep / "report.html").read_text().count('<tr class="bad">') == 2 + 2  # problem table + results rows
    # the results table's decimals at six significant digits, every digit kept in results.csv
    decimals = [cell for row in csv.DictReader(open(sweep / "results.csv")) for cell in row.values()
                if re.fullmatch(r"\d+\.\d{7,}", cell)]
    assert decimals and all(cell not in text and f"{float(cell):.6g}" in text for cell in decimals)
    lines = sweep_summary(sweep).splitlines()
    assert lines[0] == "sweep grouper-testbed-sendbuf: 4 cells, 3 completed, 2 trustworthy"
    assert lines[1] == "  avg SCT by scheduler: fs 66.7 s (1 cell), baraat 69 s (1 cell), grouper 60.8 s (1 cell)"
    assert "  sched-baraat_seed-1: CPU idle share 0.03 < 0.05" in lines
    assert any(line.startswith("  sched-sincronia_seed-1: RunError: run did not complete (Timeout); no summary.json")
               for line in lines)
    assert lines[-2:] == [f"report: {sweep / 'report.html'}", f"results: {sweep / 'results.csv'}"]


def test_a_sweep_compares_its_schedulers_at_each_grid_point_and_pools_a_large_grid(tmp_path):
    measured = MEASURED / "grouper-queues-2026-11-29" / "sweep"  # 2 schedulers x 3 queue weightings x 7 seeds
    lines = sweep_summary(measured).splitlines()
    assert lines[1:4] == ["  avg SCT by scheduler:", "    fs (emulation.queue_weights=default) 8.65 s (7 cells)",
                          "    grouper (emulation.queue_weights=default) 7.75 s (7 cells)"]
    assert "    grouper (emulation.queue_weights=[64, 32, 16, 8, 4, 2, 1]) 8.27 s (7 cells)" in lines
    sweep = tmp_path / "sweep"
    shutil.copytree(measured, sweep)
    with open(sweep / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    write_rows = lambda rows: (sweep / "results.csv").write_text(  # noqa: E731
        ",".join(rows[0]) + "\n" + "".join(",".join(f'"{v}"' for v in row.values()) + "\n" for row in rows))
    write_rows([dict(row, completed="false") if row["seed"] != "1" else row for row in rows])
    assert sweep_summary(sweep).splitlines()[2] == "    fs (emulation.queue_weights=default) 8.64 s (1 cell)"  # mid-sweep
    record = yaml.safe_load((sweep / "sweep.yaml").read_text())
    for k, (cell, row) in enumerate(zip(record["cells"], rows)):  # 42 grid points: more than compared one by one
        cell["overrides"]["emulation.queue_weights"] = row["emulation.queue_weights"] = [k // 2]
    (sweep / "sweep.yaml").write_text(yaml.safe_dump(record))
    write_rows(rows)
    assert sweep_summary(sweep).splitlines()[1] == ("  avg SCT by scheduler: fs 8.51 s (21 cells, pooled over "
                                                    "emulation.queue_weights), grouper 8.04 s (21 cells, pooled over "
                                                    "emulation.queue_weights)")


def test_reports_of_existing_directories_can_be_rewritten(tmp_path, capsys):
    from experiments.reports.__main__ import main as reports
    run, sweep = copy(RECORDED / "timetable-priority", tmp_path), make_sweep(tmp_path / "sweep")
    assert reports([str(run), str(sweep)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("bench-priority-new: timetable") and "\nsweep grouper-testbed-sendbuf: " in printed
    assert (run / "report.html").exists() and (sweep / "report.html").exists()
    (run / "report.html").unlink()
    assert reports([str(tmp_path / "none"), str(run)]) == 1  # one line for the bad one, the other written
    err = capsys.readouterr().err
    assert err == f"reports: {tmp_path / 'none'}: NotADirectoryError: not a run or sweep directory\n"
    assert (run / "report.html").exists()
    # a garbled file of the run is named, in one line
    for name, garbled, problem in (("spec.yaml", "a: [", f"spec.yaml: {tmp_path}/broken-spec.yaml/timetable-priority/"
                                                         f"spec.yaml is not valid YAML at line 1"),
                                   ("environment.json", "{", "not JSON (Expecting property name"),
                                   ("summary.json", "\xff", "not UTF-8 text (byte 0)")):
        broken = copy(RECORDED / "timetable-priority", tmp_path / f"broken-{name}")
        (broken / name).write_bytes(garbled.encode("latin-1"))
        assert reports([str(broken)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"reports: {broken}: SpecError: ") and problem in err, err
        assert str(broken / name) in err
        assert err.count("\n") == 1


# -- in a real browser ------------------------------------------------------------------

PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || (e.target && e.target.src) || e)), true);
window.addEventListener('load', () => {
  const images = [...document.images];
  const out = document.createElement('pre');
  out.id = 'trainbed-probe';
  out.textContent = JSON.stringify({images: images.length, errors: window.__errors,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt)});
  document.body.appendChild(out);
});
</script>"""


def browse(page: Path, tmp_path: Path) -> tuple[dict, list[str]]:
    """Load a page in headless Chromium with a probe script injected first in its
    head: what the probe found (images, broken images, errors) and every console
    message the browser logged."""
    probed = page.with_name(f"probed-{page.name}")
    probed.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'ud'}",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120)
    probed.unlink()
    assert result.returncode == 0, result.stderr[-2000:]
    found = Page(result.stdout)
    marker = result.stdout.index('id="trainbed-probe">')
    probe = json.loads(unescape(result.stdout[marker + len('id="trainbed-probe">'):].split("</pre>", 1)[0]))
    assert found.images, "the dumped DOM lost the page"
    return probe, [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary: `apt-get install chromium` (scripts/install.sh "
                                              "installs it)")
def test_reports_render_in_a_real_browser(tmp_path):
    pages = [write_run_report(copy(RUNS[name][0], tmp_path)) for name in ("timetable", "gnn", "cojob", "colocation")]
    pages.append(write_sweep_report(make_sweep(tmp_path / "sweep")))
    for page in pages:
        probe, console = browse(page, tmp_path)
        assert probe["images"] == len(Page(page.read_text()).images) > 0, page
        assert probe["broken"] == [], page
        assert probe["errors"] == [], page
        assert console == [], page


def test_trainbed_results_lists_the_store_newest_first_with_each_verdict(tmp_path, capsys, monkeypatch):
    root = tmp_path / "results"
    root.mkdir()
    for name in ("timetable", "gnn", "programs", "colocation"):
        copy(RUNS[name][0], root)
    shutil.copytree(SWEEP, root / "tb-fix", ignore=shutil.ignore_patterns("figure-*"))
    (root / "garbled").mkdir()
    (root / "garbled" / "summary.json").write_text("{")
    (root / "running").mkdir()  # a run under way (or killed): its spec, no summary yet
    shutil.copy(RUNS["timetable"][0] / "spec.yaml", root / "running" / "spec.yaml")
    (root / "starting").mkdir()  # a sweep before its first cell lands: its record, no results.csv
    shutil.copy(SWEEP / "sweep.yaml", root / "starting" / "sweep.yaml")
    (root / "bench").mkdir()  # neither a run nor a sweep: left out
    (root / "latest").symlink_to("garbled")
    made = ["timetable-priority", "gnn-untrustworthy", "lower-queue", "infer-gcn-low", "tb-fix", "garbled",
            "running", "starting"]
    for n, name in enumerate(made):  # in this order: the newest is the last
        marker = root / name / {"tb-fix": "results.csv", "running": ".", "starting": "sweep.yaml"}.get(
            name, "summary.json")
        os.utime(marker, (1_000_000 + n, 1_000_000 + n))
    monkeypatch.setenv("TRAINBED_RESULTS", str(root))
    assert main(["results", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["directory"] for r in rows] == made[::-1]
    by = {r["directory"]: r for r in rows}
    assert by["garbled"]["headline"].startswith("unreadable: ") and "not JSON" in by["garbled"]["headline"]
    cells = str(len(yaml.safe_load((SWEEP / "sweep.yaml").read_text())["cells"]))
    kept = list(csv.DictReader(open(SWEEP / "results.csv")))
    assert [by["tb-fix"][k] for k in ("type", "kind", "backend", "cells", "completed", "trustworthy")] == [
        "sweep", "cojob", "emulated", cells, str(sum(r["completed"] == "true" for r in kept)),
        str(sum(r["trustworthy"] == "true" for r in kept))]
    assert [by["starting"][k] for k in ("kind", "cells", "completed")] == ["cojob", cells, "0"]
    assert by["starting"]["headline"] == "grouper-testbed-sendbuf"  # no cell yet: the sweep's name
    assert by["tb-fix"]["headline"] == "avg SCT: fs 66.7 s, baraat 69 s, sincronia 61.1 s, grouper 60.8 s"
    assert [by["running"][k] for k in ("type", "kind", "completed", "trustworthy")] == [
        "run", "timetable", "running or killed", ""]
    gnn = by["gnn-untrustworthy"]  # a run not trusted says why, not its figures
    assert (gnn["completed"], gnn["trustworthy"], gnn["headline"]) == ("yes", "no", verdict(
        load(root / "gnn-untrustworthy")).reasons[0])
    assert by["timetable-priority"]["headline"].startswith("high's share while both ran 98.0%")
    assert by["lower-queue"]["headline"] == "all-reduce over the ring's ideal 1.07"
    assert by["infer-gcn-low"]["trustworthy"] == "-"  # co-location records no fidelity verdict
    assert main(["results", str(root), "--last", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["directory", "what", "completed", "trustworthy", "headline"]
    assert [line.split()[0] for line in lines[1:]] == ["starting", "running", "garbled"]
    assert lines[1].split()[1:6] == ["sweep", "of", "cojob", "·", "emulated"] and f"0/{cells} cells" in lines[1]
    # a sweep directory itself lists its cells; a run directory itself is its row
    assert main(["results", str(root / "tb-fix"), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted(r["directory"] for r in rows) == sorted(p.name for p in (SWEEP / "cells").iterdir())
    assert main(["results", str(root / "lower-queue"), "--csv"]) == 0
    assert [r["directory"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))] == ["lower-queue"]
    monkeypatch.chdir(root / "lower-queue")  # "." and the latest link name their directories
    for given, shown in ((".", "lower-queue"), (str(root / "latest"), "garbled")):
        assert main(["results", given, "--csv"]) == 0
        assert [r["directory"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))] == [shown]
    # a directory that cannot be looked into is a row saying why, the others listed as ever
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                        if self.parent.name == "lower-queue" else real_exists(self))
    assert main(["results", "--csv"]) == 0
    rows = {r["directory"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["lower-queue"]["headline"].startswith("unreadable: ") and len(rows) == len(made)
    assert main(["results", str(tmp_path / "none")]) == 2


def test_a_verdict_says_the_window_its_cpu_was_judged_over_and_what_a_run_has_left():
    from experiments.reports.rundata import RunData, verdict
    shares = {"cpu_idle_share": 0.42, "cpu_stolen_share": 0.01, "cpu_throttled_share": 0.0}
    judged = verdict(RunData(Path("run"), {**shares, "cpu_window_s": [22.74, 26.42], "trustworthy": True},
                             None, {}, "gnn"))
    assert judged.note == "CPU idle 42.0%, stolen or throttled 1.0% over 22.74-26.42 s, its traffic's window"
    whole = verdict(RunData(Path("run"), {**shares, "trustworthy": True}, None, {}, "gnn"))
    assert whole.note == "CPU idle 42.0%, stolen or throttled 1.0%"
    losses = {"switch_queues": 946, "switch_internal": 0, "interfaces": None, "host_queues": 68358}
    dropped = verdict(RunData(Path("run"), {**shares, "trustworthy": True, "packet_losses": losses}, None, {}, "gnn"))
    assert dropped.note.endswith("; packets dropped: 946 at switch queues, 68,358 refused by the senders' own queues")
    left = verdict(RunData(Path("run"), {"completed": False, "left": ["bmc repeat 2", "lmcf repeat 2"]},
                           None, {}, "colocation"))
    assert left.trustworthy is False and left.reasons == ["not yet complete: left bmc repeat 2, lmcf repeat 2"]


@pytest.mark.parametrize("value, digits, shown", [(999.7, 3, "1000 s"), (99.96, 2, "100 s"), (12.345, 3, "12.3 s"),
                                                  (-999.7, 3, "-1000 s"), (123456.7, 3, "123457 s"),
                                                  (0.000123, 3, "0.000123 s")])
def test_a_number_just_below_a_power_of_ten_is_not_shown_in_exponent_form(value, digits, shown):
    from experiments.reports.rundata import num
    assert num(value, "s", digits) == shown


def test_a_listed_sweep_names_the_backends_its_cells_run_on_and_a_colocation_sweep_none(tmp_path):
    from experiments.reports.listing import as_text, entries
    records = {
        "mixed": {"name": "m", "backend": "emulated", "base_spec": {"workload": {"kind": "cojob"}},
                  "parts": [{"name": "testbed"}, {"name": "model", "backend": "simulated"}],
                  "cells": [{"id": "a", "part": "testbed"}, {"id": "a_backend-simulated", "part": "model",
                                                             "backend": "simulated"}]},
        "model": {"name": "s", "backend": "simulated", "base_spec": {"workload": {"kind": "cojob"}},
                  "cells": [{"id": "b"}]},
        "queues": {"name": "c", "backend": "emulated", "base_spec": {"kind": "training"}, "cells": [{"id": "c"}]},
    }
    for name, record in records.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "sweep.yaml").write_text(yaml.safe_dump(record))
    rows = {row["directory"]: row for row in entries(tmp_path)}
    assert [(rows[n]["kind"], rows[n]["backend"], rows[n]["trustworthy"]) for n in records] == [
        ("cojob", "emulated+simulated", "0"), ("cojob", "simulated", "0"), ("colocation", "", "-")]
    lines = {line.split()[0]: line.split() for line in as_text(list(rows.values())).splitlines()[1:]}
    assert lines["queues"][1:7] == ["sweep", "of", "colocation", "0/1", "cells", "-"]
    assert lines["mixed"][1:6] == ["sweep", "of", "cojob", "·", "emulated+simulated"]
