"""Workloads as pure data: what the training jobs of a run are, where they run, and when they arrive."""
