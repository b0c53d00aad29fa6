"""The gnn workload kind (distributed GNN training with DGL): spec, task placement, job, driver, run."""
