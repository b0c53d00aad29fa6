"""DGTP's task placement (paper 000, §V) as pure modules over plain data (no DGL, no emulation).

- ``problem``: machines, tasks, transfers and a placement, validated (one-line errors).
- ``dag``: the execution DAG of §V-B over a window of K iterations (Eqs. 8-12), its
  vertex weights (Eq. 26), the critical path and the cost of Eq. 27.
- ``ifs``: Alg. 2, a dynamic programme over per-machine task counts.
- ``etp``: Alg. 3, MCMC over placements from IFS's.

There is no public code for DGTP; every reading of an ambiguous line of the paper is
stated in a comment where the code makes it.
"""
