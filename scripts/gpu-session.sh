#!/usr/bin/env bash
# Issue 21's GPU campaign in one device call, within a budget of seconds:
#
#   device run: bash scripts/gpu-session.sh 520 [gpu_validation flags, e.g. --force]
#               carry: ["results/colocate-gpu"]   (once a session has brought one back)
#
# It continues the campaign in results/colocate-gpu (`make colocate-gpu`'s directory;
# a part measured already is not run again), in the order the issue needs its
# answers (steps, below), then the tables. A step that the budget cuts short is
# stopped with SIGINT (what it measured whole is kept). Then the campaign goes back as $OUT/colocate-gpu.tar.gz,
# beside the log: unpack it here with `tar xzf colocate-gpu.tar.gz -C results` and
# carry it next time. A call may run 600 s: a budget of 520 leaves the tarball time.
# On a machine without a device (a check of this script): DEVICE=cpu and flags such as
# --scale 0.01 --epochs 1.
set -uo pipefail
budget_s=${1:?usage: gpu-session.sh BUDGET_S [gpu_validation flags]}
shift
cd "$(dirname "$0")/.."
out=${OUT:?set OUT: the folder whose files come back}
campaign=${CAMPAIGN:-results/colocate-gpu}
device=${DEVICE:-cuda}
python=${GPU_PY:-python3}
min_step_s=${MIN_STEP_S:-90}  # a step with less left is not started: CUDA workers and a profile take a minute
deadline=$(($(date +%s) + budget_s))
export PYTHONUNBUFFERED=1
log=$out/gpu-session.log
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
    "$python" -c 'import torch, torch_geometric; print("torch", torch.__version__, "PyG", torch_geometric.__version__)'
} >>"$log" 2>&1
# The allocator cap on CUDA's own allocator first (its test is skipped on CI's CPU):
# a minute that says whether the budgets below can be trusted.
if [[ $device == cuda ]] && "$python" -c 'import pytest' 2>/dev/null; then
    timeout 120 "$python" -m pytest -q -p no:cacheprovider -k cuda tests/test_colocation_allocator.py 2>&1 | tail -5 | tee -a "$log"
fi

# The issue's open answers first (GNNSched at low load: its pipeline targets and
# the inference out-of-memory cases; GIN training's passed on 2026-11-30), each queue's
# first repeat before any queue's spread, and Default's and MPS-pair's training last:
# they start a process per task, about 6.5 min of a queue's repeat on an H200.
warm="--methods-now pipeswitch mps-base base lmcf bmc"
steps=("--part inference --loads low --repeats-now 1"
       "--part training $warm --repeats-now 1"
       "--part inference --loads high --repeats-now 1"
       "--part inference --loads low"
       "--part training $warm"
       "--part inference --loads high"
       "--part validation"
       "--part training --repeats-now 1"
       "--part all")
for step in "${steps[@]}"; do
    left=$((deadline - $(date +%s)))
    if ((left < min_step_s)); then
        echo "budget spent: not started: $step" | tee -a "$log"
        continue
    fi
    echo "== $step ($left s left)" | tee -a "$log"
    # shellcheck disable=SC2086  # a step is several flags
    timeout -s INT -k 30 "$left" "$python" -m experiments.colocation.gpu_validation --device "$device" \
        --out "$campaign" $step "$@" 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
    if ((status == 124 || status == 137)); then  # timeout's SIGINT, or its SIGKILL 30 s later
        echo "== stopped, budget spent (what it measured whole is kept): $step" | tee -a "$log"
    else
        echo "== exit $status: $step" | tee -a "$log"
    fi
done
mkdir -p "$(dirname "$campaign")"
tar czf "$out/colocate-gpu.tar.gz" -C "$(dirname "$campaign")" "$(basename "$campaign")" 2>>"$log" \
    && echo "campaign: \$OUT/colocate-gpu.tar.gz ($(du -h "$out/colocate-gpu.tar.gz" | cut -f1))" | tee -a "$log"
