"""The kind-agnostic platform: the emulated fabric (net, ovs, records), the management
channel, the spec fields every kind shares, the one run lifecycle, the driver base,
the policy sync, the fidelity verdict and CPU accounting."""
