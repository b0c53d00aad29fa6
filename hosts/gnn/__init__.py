"""GNN training on emulated hosts with DGL: synthetic datasets, METIS partitions.

DGL is imported only through ``hosts.gnn.dglenv.import_dgl`` (it works around the
GraphBolt import failure of dgl 2.1.0 with torch 2.13); it is installed by
``scripts/install-gnn.sh``, so importing this package itself needs no DGL.
"""
