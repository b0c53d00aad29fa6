#!/bin/bash
# usage: PY=$PWD/.venv/bin/python side_by_side.sh OLD_TREE NEW_TREE ROUNDS ARGS...   (ARGS: timed.py's)
# Alternates the two checkouts, one run at a time, each run a fresh process
# (the compiled filling loads from numba's on-disk cache after a checkout's first run).
here=$(cd "$(dirname "$0")" && pwd)
old=$1; new=$2; rounds=$3; shift 3
for r in $(seq "$rounds"); do
  for tree in "$old" "$new"; do
    (cd "$tree" && PYTHONPATH="$tree" "${PY:-python}" "$here/timed.py" "$@" | sed "s|^|$(basename "$tree") |")
  done
done
