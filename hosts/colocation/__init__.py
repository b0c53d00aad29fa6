"""What runs on a GPU host that co-locates GNN tasks (CoGNN training, GNNSched inference).

Synthetic graphs, PyG models, tasks, the peak-memory estimator (PMC), scheduling
policies, and the executor. The same code paths run on CPU, where the device's
memory capacity is a declared number.
"""
