"""What the tests know of the shipped specs (experiments/specs)."""

# Written for the simulator: rates no box emulates (10 Gbit/s links). Every other
# shipped spec validates for an emulated run.
SIMULATOR_ONLY = frozenset({"grouper-sim-60", "grouper-sim-paper", "grouper-sim-paper-smoke"})
