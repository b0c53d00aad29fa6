"""Scheduler algorithms as pure modules over plain data; nothing here talks to a switch.

- ``grouper`` / ``baselines``: cojob stage schedulers. They take ``Stage`` records
  (per-port remaining loads) and return a global order of stage ids, which
  ``grouper.local_priorities`` / ``grouper.to_queues`` turn into a queue per stage
  per machine.
- ``oes``: per-flow rates for distributed GNN training (min of the ingress and
  egress shares) and the per-pair pipelining of its Alg. 1; ``coflow_rates``: the
  DGTP paper's rate baselines (MRTF, OMCoflow).
- ``max_min``: max-min fair progressive filling over any shared resources, the one
  copy (``oes.max_min_fair_rates``'s NICs, the timetable metrics' host links).
- ``placement``: DGTP's task placement (IFS, then ETP over Eq. 27's critical path).

The drivers in ``experiments/`` build these inputs from the events of the running
tasks and apply the decisions through the policy interface.
"""
