"""The `programs` workload kind: the user's own commands on the emulated hosts."""
