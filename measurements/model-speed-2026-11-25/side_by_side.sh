#!/bin/bash
# usage: side_by_side.sh OLD_TREE NEW_TREE SCHEDULER ITERATIONS ROUNDS
# Alternates the two checkouts, one run at a time: timed.py (papers100M, DistDGL's placement).
here=$(cd "$(dirname "$0")" && pwd)
for r in $(seq "$5"); do
  for tree in "$1" "$2"; do
    (cd "$tree" && PYTHONPATH="$tree" python "$here/timed.py" "$4" "$3" | sed "s|^|$tree |")
  done
done
