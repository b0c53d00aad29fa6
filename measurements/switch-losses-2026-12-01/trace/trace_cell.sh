#!/usr/bin/env bash
# Run one cell of a sweep and record every sendmmsg of the cell's own ovs-vswitchd
# instances (perf tracepoints, attached by PID once both have started).
# usage: trace_cell.sh SWEEP OUT ONLY
set -u
sweep=$1 out=$2 only=$3
cd /work/main
mkdir -p "$out"
before=$(ls /run/trainbed/*/ovs*/run/ovs-vswitchd.pid 2>/dev/null | sort)
.venv/bin/python -m experiments.cli sweep "$sweep" --out "$out/sweep" --only "$only" > "$out/sweep.log" 2>&1 &
cell=$!
echo "cell pid $cell"
pids=""
for i in $(seq 1 600); do
  now=$(ls /run/trainbed/*/ovs*/run/ovs-vswitchd.pid 2>/dev/null | sort)
  pids=$(for f in $(comm -13 <(echo "$before") <(echo "$now")); do cat $f; done | paste -sd, -)
  [ "$(echo "$pids" | tr ',' '\n' | grep -c .)" -ge 2 ] && break
  sleep 0.5
done
echo "ovs pids $pids"
perf record -q -o "$out/perf.data" -e syscalls:sys_enter_sendmmsg -e syscalls:sys_exit_sendmmsg -p "$pids" > "$out/perf.log" 2>&1 &
perfpid=$!
wait $cell
echo "cell rc $?"
kill -INT $perfpid; wait $perfpid
perf script -i "$out/perf.data" -F tid,event,trace > "$out/sendmmsg.txt" 2>/dev/null
gzip -f "$out/sendmmsg.txt"
rm -f "$out/perf.data"
