"""A scheduler's flow policies, kept installed in the fabric (``ControllerClient.apply``).

A scheduler says what it wants per flow (``PolicySync.sync``: flow 5-tuple -> the
policy's fields: ``queue``/``host_queue``, ``rate_mbps``/``rate_mechanism``, ...);
only the difference to what is installed goes to the controller, as one batch.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple

FLOW_FIELDS = ("src", "dst", "proto", "src_port", "dst_port")


def flow_key(start: Mapping) -> tuple:
    """The 5-tuple a per-flow policy matches, of a host program's ``flow_start`` event
    (its ports are the TCP connection's, in the flow's direction)."""
    return start["src"], start["dst"], "tcp", start["src_port"], start["dst_port"]


def flow_match(key: tuple) -> dict:
    """A flow 5-tuple (src, dst, proto, src_port, dst_port) as a policy's match fields."""
    return dict(zip(FLOW_FIELDS, key))


class SyncedBatch(NamedTuple):
    """One sync: the changes sent (none: nothing was sent), the id of each flow set, in
    the batch's order, and the flows whose policies were removed."""

    changes: list[dict]
    ids: dict[tuple, int]
    removed: list[tuple]


class PolicySync:
    """The policies installed through ``client``: per flow 5-tuple, its fields and its id.

    Invariants: ``installed`` and ``ids`` have the same keys, and hold what the
    controller accepted: a batch that fails (``client.apply`` raises) changes neither,
    so the next sync sends its changes again. A flow keeps its id while it stays
    installed (the controller keeps a changed policy's id).
    """

    def __init__(self, client):
        self.client = client
        self.installed: dict[tuple, dict] = {}
        self.ids: dict[tuple, int] = {}

    def sync(self, desired: Mapping[tuple, Mapping], remove_unlisted: bool = True) -> SyncedBatch:
        """Install ``desired`` (flow 5-tuple -> policy fields) as one batch of changes.

        The batch: a set for every flow of ``desired`` whose fields differ from the
        installed ones, in ``desired``'s order (the order decides which free ids new
        policies get), then, with ``remove_unlisted``, a remove of every installed
        flow ``desired`` does not list, in 5-tuple order. Without it, such flows keep
        their policies. An empty batch is not sent.
        """
        sets = [(key, dict(fields)) for key, fields in desired.items() if self.installed.get(key) != fields]
        removed = sorted(set(self.installed) - set(desired)) if remove_unlisted else []
        changes = ([{"set": {**flow_match(key), **fields}} for key, fields in sets]
                   + [{"remove": self.ids[key]} for key in removed])
        if not changes:
            return SyncedBatch([], {}, [])
        ids = self.client.apply(changes)
        set_ids = {key: policy_id for (key, _fields), policy_id in zip(sets, ids)}
        for key, fields in sets:
            self.installed[key], self.ids[key] = fields, set_ids[key]
        for key in removed:
            del self.installed[key], self.ids[key]
        return SyncedBatch(changes, set_ids, removed)
