"""Per cell of a sweep directory: the switch queues' drops, what the switches lost
besides them (received - transmitted - queue drops, unclamped), per queue drop, and
the drops by queue.  usage: losses_per_drop.py SWEEP_DIR"""
import glob
import json
import sys

for cell in sorted(glob.glob(sys.argv[1] + "/cells/*")):
    queues = json.load(open(cell + "/raw/queue_counters.json"))
    balance = json.load(open(cell + "/raw/switch_packets.json"))
    by_queue = {}
    for port in queues.values():
        for q, c in port.items():
            by_queue[q] = by_queue.get(q, 0) + c["dropped"]
    drops = sum(by_queue.values())
    lost = sum(s["received"] - s["transmitted"] for s in balance.values()) - drops
    print(f"{cell.split('/')[-1]:<75} drops {drops:6d} lost {lost:6d} lost/drop {lost / max(drops, 1):5.2f}"
          f"  by queue {({q: n for q, n in by_queue.items() if n})}")
