"""What sets the runs: the HTB flow class's burst, or the class itself? (as root:
``python measurements/oes-bursts-2026-11-30/variants.py`` from the checkout's root;
the setup of ``pacing.py``, 20 Mbit/s, cubic, 3 s each.)

1. The flow's HTB class (rate = ceil = 20 Mbit/s, as ``host_flow_rate_cmds`` makes
   it) with a burst of 9,014, 15,000, 30,000 and 90,000 bytes.
2. The flow shaped instead by a TBF leaf (20 Mbit/s, burst 15,000 bytes) under an
   HTB class at the link's rate."""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import pacing  # noqa: E402
from topologies.queues import HOST_FLOW_MINOR_BASE  # noqa: E402


def htb_class(burst: int):
    def cmds(intf, slot, pref, mbps, match):
        minor = f"{HOST_FLOW_MINOR_BASE + slot:x}"
        return [f"tc class replace dev {intf} parent 1:1 classid 1:{minor} htb rate {mbps:g}mbit "
                f"ceil {mbps:g}mbit burst {burst} cburst {burst}",
                f"tc qdisc replace dev {intf} parent 1:{minor} handle {minor}: bfifo limit 150000",
                f"tc filter replace dev {intf} parent 1: protocol ip prio {pref} u32 "
                f"{match} flowid 1:{minor}"]
    return cmds


def tbf_leaf(intf, slot, pref, mbps, match):
    minor = f"{HOST_FLOW_MINOR_BASE + slot:x}"
    return [f"tc class replace dev {intf} parent 1:1 classid 1:{minor} htb rate {pacing.LINK_MBPS}mbit "
            f"ceil {pacing.LINK_MBPS}mbit",
            f"tc qdisc replace dev {intf} parent 1:{minor} handle {minor}: tbf rate {mbps:g}mbit burst 15000 "
            f"limit 150000",
            f"tc filter replace dev {intf} parent 1: protocol ip prio {pref} u32 "
            f"{match} flowid 1:{minor}"]


if __name__ == "__main__":
    for name, cmds in [*((f"htb class, burst {b}", htb_class(b)) for b in (9014, 15000, 30000, 90000)),
                       ("tbf leaf, burst 15000", tbf_leaf)]:
        pacing.host_flow_set_cmds = cmds
        result = pacing.measure(20, "cubic", seconds=3)
        print(json.dumps({"shaper": name, "sent": result["sent"], "received": result["received"]}), flush=True)
