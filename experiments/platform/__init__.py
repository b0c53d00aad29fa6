"""What every workload kind's driver and runner share: the driver loop, policy sync, the fidelity verdict."""
