"""diag9 with ovs-vswitchd's EEVDF slice set short (sched_setattr sched_runtime), nice kept."""
import ctypes, os, runpy, sys
class Attr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                ("nice", ctypes.c_int32), ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64), ("umin", ctypes.c_uint32), ("umax", ctypes.c_uint32)]
libc = ctypes.CDLL(None, use_errno=True)
SLICE_NS = int(float(os.environ.get("SLICE_US", "100")) * 1000)
from experiments.platform import net as netmod
orig = netmod.Emulation.size_socket_buffers
def patched(self, *a, **k):
    orig(self, *a, **k)
    for inst in self.ovs:
        pid = inst.pids()["ovs-vswitchd"]
        for t in os.listdir(f"/proc/{pid}/task"):
            attr = Attr(size=56, policy=0, flags=0, nice=-10, runtime=SLICE_NS)
            if libc.syscall(314, int(t), ctypes.byref(attr), 0) != 0:
                print("sched_setattr failed", ctypes.get_errno(), file=sys.stderr)
netmod.Emulation.size_socket_buffers = patched
sys.argv = ["diag9.py"] + sys.argv[1:]
runpy.run_path("/tmp/diag/diag9.py", run_name="__main__")
