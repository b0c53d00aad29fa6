"""What OVS's batch sends did, from a perf script of its sendmmsg enter/exit events.

OVS 3.1 netdev_linux_sock_batch_send: sendmmsg from ofs; a call that sends k < n
(the qdisc refused message k) is followed by one from the refused packet; a call that
fails (-1: its first message refused) ends the batch, the rest never sent.
Each refusal is one tc drop. So, against rx - tx - tc drops, a batch contributes:
  a failed call of n messages right after a short call:  n - 2 (the packet refused
     twice is lost once but counted twice; the n - 1 after it lost, uncounted);
  a failed call that starts a batch: n - 1;
  a short call followed by a call that sends: -1 (counted, delivered after all)."""
import gzip, re, sys
from collections import Counter
calls = []  # (tid, vlen, ret)
pending = {}
for line in gzip.open(sys.argv[1], "rt"):
    m = re.match(r"\s*(\d+)\s+syscalls:sys_(enter|exit)_sendmmsg:\s+(.*)", line)
    if not m:
        continue
    tid, kind, rest = m.groups()
    if kind == "enter":
        pending[tid] = int(re.search(r"vlen: (0x[0-9a-f]+|\d+)", rest).group(1), 0)
    elif tid in pending:
        ret = int(re.search(r"0x[0-9a-f]+|-?\d+", rest).group(0), 0)
        if ret >= 2**63:
            ret -= 2**64
        calls.append((tid, pending.pop(tid), ret))
last = {}
contrib = Counter()
errnos = Counter()
for tid, n, ret in calls:
    prev = last.get(tid)
    after_short = prev is not None and 0 <= prev[1] < prev[0]
    if ret < 0:
        errnos[-ret] += 1
        contrib["failed after a short call (n-2)" if after_short else "failed first call (n-1)"] += n - 2 if after_short else n - 1
        contrib["failed calls"] += 1
        contrib["failed calls right after a short call"] += after_short
    elif after_short:
        contrib["refused then sent (-1)"] -= 1
    last[tid] = (n, ret)
sent = sum(r for _, _, r in calls if r > 0)
print(f"sendmmsg calls {len(calls)}, packets sent {sent}, mean batch {sum(n for _, n, _ in calls) / max(len(calls), 1):.2f}")
print(f"short calls {sum(1 for _, n, r in calls if 0 <= r < n)}, errnos of failed calls {dict(errnos)}")
for k, v in contrib.items():
    print(f"  {k}: {v}")
print("predicted received - transmitted - tc drops:",
      sum(v for k, v in contrib.items() if not k.startswith("failed calls")))
