"""``make colocate-gpu`` resumes: its command on the CPU with tiny graphs, stopped
halfway (as when a session's device time runs out) and run again into the same
directory, runs only the parts it had not measured."""
import json

import pytest

from experiments.colocation.gpu_validation import main
from experiments.errors import SpecError
from hosts.colocation.executor import Executor


def test_a_rerun_into_the_same_directory_runs_only_what_was_not_measured(tmp_path, monkeypatch, capsys):
    calls, stop_at = [], {"call": 3}
    real_run = Executor.run

    def run_until_time_runs_out(self, method, plan):
        calls.append(method)
        if len(calls) == stop_at["call"]:
            raise RuntimeError("device time ran out")
        return real_run(self, method, plan)

    monkeypatch.setattr(Executor, "run", run_until_time_runs_out)
    root = tmp_path / "campaign"
    # --force: others may commit to this checkout while the test runs; the code check is tested below
    args = ["--device", "cpu", "--part", "training", "--queues", "gcn", "--epochs", "1", "--scale", "0.01",
            "--repeats", "2", "--training-methods", "pipeswitch", "bmc", "--out", str(root), "--force"]
    with pytest.raises(RuntimeError, match="device time ran out"):
        main(args)
    run = root / "train-gcn"
    assert calls == ["pipeswitch", "bmc", "pipeswitch"]  # repeat 0 of both methods, then repeat 1 stopped
    assert [e["repeat"] for e in json.loads((run / "records-pipeswitch.json").read_text())["runs"]] == [0]
    assert json.loads((run / "summary.json").read_text())["completed"] is False
    profile = (run / "tasks.json").read_text()

    stop_at["call"] = None
    calls.clear()  # a short session's call: no repeat past the first, so nothing to run here
    assert main([*args, "--repeats-now", "1"]) == 0 and calls == []
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] is False and summary["left"] == ["pipeswitch repeat 2", "bmc repeat 2"]
    assert summary["methods"]["bmc"]["repeats"] == 1 and "error" not in summary
    assert "Not complete: runs measured per method, of 2 planned: pipeswitch 1, bmc 1" in (run / "table.md").read_text()
    assert main([*args, "--methods-now", "bmc"]) == 0 and calls == ["bmc"]  # the slow method for a later call
    assert json.loads((run / "summary.json").read_text())["left"] == ["pipeswitch repeat 2"]
    calls.clear()
    assert main(args) == 0
    assert calls == ["pipeswitch"]  # repeat 1 of the method left
    assert (run / "tasks.json").read_text() == profile  # the arrivals, QTs and caps the first parts ran with
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] is True
    for method in ("pipeswitch", "bmc"):
        assert [e["repeat"] for e in json.loads((run / f"records-{method}.json").read_text())["runs"]] == [0, 1]
        assert summary["methods"][method]["repeats"] == 2 and summary["methods"][method]["makespan_s_sd"] > 0
    table = (root / "table-v-training.md").read_text()
    assert "## Makespan / PipeSwitch's, beside Table V's (V100)" in table
    bmc = next(line for line in table.split("## Makespan / PipeSwitch's")[1].splitlines() if line.startswith("| bmc"))
    assert " ± " in bmc and bmc.endswith("| 0.98 |")  # Table V: BMC 3.47 min over PipeSwitch's 3.54 on GCN

    calls.clear()
    assert main([*args, "--repeats-now", "1"]) == 0 and calls == []  # everything measured: nothing runs again,
    assert json.loads((run / "summary.json").read_text())["completed"] is True  # and what was kept all counts
    capsys.readouterr()
    assert main([*args, "--epochs", "2"]) == 2  # one line, no traceback
    assert "holds a run of another spec" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--methods-now", "lmfc"])
    assert "argument --methods-now: unknown method 'lmfc' (known: " in capsys.readouterr().err
    environment = json.loads((run / "environment.json").read_text())
    assert len(environment["resumes"]) == 4  # the four runs that continued it
    (run / "environment.json").write_text(json.dumps({**environment, "git_commit": "0" * 40}))
    assert main(args[:-1]) == 2  # without --force
    assert "started under commit 000000000000" in capsys.readouterr().err
    assert calls == []


@pytest.mark.parametrize("flag, value, problem", [("--epochs", "0", "must be at least 1, got 0"),
                                                  ("--repeats", "two", "must be a whole number, got 'two'"),
                                                  ("--scale", "1.5", "must be in (0, 1]"),
                                                  ("--loads", "medium", "invalid choice: 'medium'")])
def test_a_bad_flag_is_refused_in_one_line_naming_it(tmp_path, capsys, flag, value, problem):
    with pytest.raises(SystemExit) as exited:
        main(["--device", "cpu", flag, value, "--out", str(tmp_path / "campaign")])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err and problem in err
    assert not (tmp_path / "campaign").exists()  # refused before anything was made


@pytest.mark.parametrize("args, problem", [
    (["--out", "FILE"], "argument --out: FILE: is a file, not a directory"),
    (["--part", "inference", "--queues", "gat"], "argument --queues: gat: no inference queue (inference queues: "),
])
def test_a_campaign_that_could_not_run_is_refused_before_any_work(tmp_path, capsys, args, problem):
    (tmp_path / "file").write_text("")
    args = [a.replace("FILE", str(tmp_path / "file")) for a in args]
    with pytest.raises(SystemExit) as exited:
        main(["--device", "cpu", *args, *([] if "--out" in args else ["--out", str(tmp_path / "campaign")])])
    assert exited.value.code == 2
    assert problem.replace("FILE", str(tmp_path / "file")) in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "campaign").exists()


def test_trainbed_colocate_into_its_own_run_continues_it_and_refuses_another_spec(tmp_path, monkeypatch, capsys):
    """``trainbed colocate SPEC --out DIR`` where DIR holds a run: this spec's run is
    continued (its measured parts kept, none run again); another spec's is refused,
    as is any run directory given without resuming (its parts would be kept unchecked)."""
    import yaml

    from experiments.cli import main as trainbed
    from experiments.colocation.runner import run_colocate_file
    from tests.test_sweep_colocate import TINY

    spec, out = tmp_path / "tiny.yaml", tmp_path / "run"
    spec.write_text(yaml.safe_dump({**TINY, "name": "tiny"}))
    assert trainbed(["colocate", str(spec), "--out", str(out), "--force"]) == 0
    assert f"if stopped, trainbed colocate {spec} --device cpu --out {out} continues it" in capsys.readouterr().out
    first = json.loads((out / "summary.json").read_text())
    calls = []
    monkeypatch.setattr(Executor, "run", lambda self, method, plan: calls.append(method))
    assert trainbed(["colocate", str(spec), "--out", str(out), "--force"]) == 0
    assert calls == [] and json.loads((out / "summary.json").read_text())["methods"] == first["methods"]
    assert len(json.loads((out / "environment.json").read_text())["resumes"]) == 1
    spec.write_text(yaml.safe_dump({**TINY, "name": "tiny", "seed": 4}))
    capsys.readouterr()
    assert trainbed(["colocate", str(spec), "--out", str(out), "--force"]) == 2
    assert capsys.readouterr().err.startswith(f"trainbed: error: --out: {out} holds a run of another spec")
    with pytest.raises(SpecError, match=r"^--out: .* holds a co-location run \(spec.yaml\); choose a new directory$"):
        run_colocate_file(spec, out=out)
    # measured with other threads (another machine of the same CPU): refused, not mixed
    spec.write_text(yaml.safe_dump({**TINY, "name": "tiny"}))
    environment = json.loads((out / "environment.json").read_text())
    environment["device"]["threads"] += 1
    (out / "environment.json").write_text(json.dumps(environment))
    assert trainbed(["colocate", str(spec), "--out", str(out), "--force"]) == 2
    threads = environment["device"]["threads"]
    assert capsys.readouterr().err == (f"trainbed: error: --device: {out} was measured on another device "
                                       f"(threads {threads} there, {threads - 1} here)\n")
    assert calls == []


def test_methods_now_on_a_new_queue_leaves_the_others_whole_and_skips_a_queue_with_none_of_them(
        tmp_path, monkeypatch, capsys):
    """The session script's order: a queue's first call measures only the chosen methods
    (the primary among those left: no headline yet); a queue none of whose methods is
    chosen is not even profiled."""
    calls = []
    real_run = Executor.run
    monkeypatch.setattr(Executor, "run", lambda self, method, plan: calls.append(method) or real_run(self, method, plan))
    root = tmp_path / "campaign"
    args = ["--device", "cpu", "--part", "training", "--queues", "gcn", "--epochs", "1", "--scale", "0.01",
            "--repeats", "2", "--training-methods", "pipeswitch", "bmc", "--out", str(root), "--force"]
    assert main([*args, "--methods-now", "pipeswitch", "--repeats-now", "1"]) == 0 and calls == ["pipeswitch"]
    run = root / "train-gcn"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] is False and list(summary["methods"]) == ["pipeswitch"]
    assert summary["left"] == ["bmc repeat 1", "pipeswitch repeat 2", "bmc repeat 2"]
    assert summary["primary"] == "bmc" and summary["makespan_s"] is None  # the primary is left whole
    table = (run / "table.md").read_text()
    assert "Not complete: runs measured per method, of 2 planned: pipeswitch 1, bmc 0" in table
    calls.clear()
    capsys.readouterr()
    assert main([*args, "--methods-now", "sqtf"]) == 0 and calls == []  # an inference method: no training queue's
    assert "colocate-train-gcn: not run now: none of its methods (pipeswitch, bmc) is chosen" in capsys.readouterr().out


FAKE_CAMPAIGN = """#!/usr/bin/env bash
# Stands in for python3 in gpu-session.sh: records each campaign step, measures a part
# into the campaign, and takes its time where the step is the inference at high load.
[ "$1" = -c ] && { echo "torch (stand-in)"; exit 0; }
shift 2  # -m experiments.colocation.gpu_validation
echo "$*" >> "$STEPS_FILE"
out=$(sed -n 's/.*--out \\([^ ]*\\).*/\\1/p' <<< "$*")
mkdir -p "$out/part-$(wc -l < "$STEPS_FILE")"
case "$*" in *"--loads high"*)
    sleep 60 &  # a background job ignores SIGINT: the trap stops it
    trap 'kill $!; echo "interrupted: $*" >> "$STEPS_FILE"; exit 130' INT
    wait ;;
esac
"""


def test_a_gpu_session_runs_the_steps_in_the_issues_order_stops_at_its_budget_and_returns_the_campaign(tmp_path):
    """scripts/gpu-session.sh, with a stand-in for the campaign command: inference at
    low load first, then the training queues' methods that need no process per task,
    then inference at high load, which the budget cuts short with SIGINT (the command
    keeps what it measured whole); the steps left are not started; the campaign comes
    back as one tarball in $OUT (device calls return files, not trees)."""
    import subprocess
    import tarfile
    from experiments.store import REPO_ROOT
    fake, steps, out = tmp_path / "python", tmp_path / "steps.txt", tmp_path / "out"
    fake.write_text(FAKE_CAMPAIGN)
    fake.chmod(0o755)
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "GPU_PY": str(fake), "STEPS_FILE": str(steps), "OUT": str(out),
           "CAMPAIGN": str(tmp_path / "results" / "colocate-gpu"), "MIN_STEP_S": "3", "DEVICE": "cpu"}
    done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "gpu-session.sh"), "8", "--force"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ran = steps.read_text().splitlines()
    assert ran[0] == f"--device cpu --out {env['CAMPAIGN']} --part inference --loads low --repeats-now 1 --force"
    assert ran[1].endswith("--part training --methods-now pipeswitch mps-base base lmcf bmc --repeats-now 1 "
                           "--force")
    assert ran[2].endswith("--part inference --loads high --repeats-now 1 --force")
    assert ran[3].startswith("interrupted: ") and len(ran) == 4  # cut by the budget; nothing started after
    log = (out / "gpu-session.log").read_text()
    assert "budget spent: not started: --part all" in log
    assert "== stopped, budget spent (what it measured whole is kept): --part inference --loads high" in log
    with tarfile.open(out / "colocate-gpu.tar.gz") as tar:
        names = tar.getnames()
    # unpacks under results/ as it was
    assert {"colocate-gpu/part-1", "colocate-gpu/part-2", "colocate-gpu/part-3"} <= set(names)


@pytest.mark.parametrize("scale, grid", [(["--scale", "0.01"], "cpu"), ([], "gpu")])
def test_the_estimator_grid_follows_the_graphs_scale(tmp_path, monkeypatch, scale, grid):
    """Shrunk graphs (a CPU check of the command) validate the scaled-down grid; real
    sizes the real one."""
    from experiments.colocation import gpu_validation
    ran = []

    def run_validation(device, grid_name, out):
        ran.append((device, grid_name))
        out.mkdir(parents=True)
        (out / "validation.md").write_text("table\n")

    monkeypatch.setattr(gpu_validation, "run_validation", run_validation)
    main(["--device", "cpu", "--part", "validation", *scale, "--out", str(tmp_path / "c")])
    assert ran == [("cpu", grid)]
