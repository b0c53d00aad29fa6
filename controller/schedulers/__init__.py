"""Scheduler algorithms as pure modules over plain data.

Each takes ``Stage`` records (per-port remaining loads, see ``grouper``) and
returns a global order of stage ids, then ``grouper.local_priorities`` /
``grouper.to_queues`` turn it into a queue per stage per machine. Nothing here
talks to a switch: the driver in ``experiments/`` builds the stages from its
jobs and applies the queue decisions through the policy interface.
"""
