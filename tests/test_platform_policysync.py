"""experiments.platform.policysync against a fake controller that keeps a policy table
like the real one: a set of a known flow keeps its id, a new flow takes the lowest
free id, a remove frees one, and a bad batch changes nothing."""
from __future__ import annotations

import pytest

from experiments.platform.policysync import PolicySync, flow_match

A = ("h1", "h2", "tcp", 2000, 20000)
B = ("h1", "h3", "tcp", 2001, 20001)
C = ("h2", "h3", "tcp", 2002, 20002)


class FakeController:
    """``ControllerClient.apply`` over a policy table: flow key -> (id, fields)."""

    def __init__(self):
        self.table: dict[tuple, tuple[int, dict]] = {}
        self.batches: list[list[dict]] = []
        self.fail_next = False

    def apply(self, changes: list[dict]) -> list[int]:
        self.batches.append(changes)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("apply: switch did not answer")
        table, ids = dict(self.table), []
        for change in changes:
            if "set" in change:
                policy = dict(change["set"])
                key = tuple(policy.pop(name) for name in ("src", "dst", "proto", "src_port", "dst_port"))
                used = {pid for pid, _ in table.values()}
                pid = table[key][0] if key in table else min(set(range(1, len(used) + 2)) - used)
                table[key] = (pid, policy)
            else:
                [key] = [k for k, (pid, _) in table.items() if pid == change["remove"]]
                pid = table.pop(key)[0]
            ids.append(pid)
        self.table = table
        return ids


@pytest.fixture
def sync():
    return PolicySync(FakeController())


def test_a_first_sync_sets_every_flow_in_the_order_given_and_records_their_ids(sync):
    batch = sync.sync({B: {"queue": 2}, A: {"queue": 1}})
    assert batch.changes == [{"set": {**flow_match(B), "queue": 2}}, {"set": {**flow_match(A), "queue": 1}}]
    assert list(batch.ids.items()) == [(B, 1), (A, 2)] and batch.removed == []
    assert sync.installed == {A: {"queue": 1}, B: {"queue": 2}} and sync.ids == {A: 2, B: 1}
    assert flow_match(A) == {"src": "h1", "dst": "h2", "proto": "tcp", "src_port": 2000, "dst_port": 20000}


def test_what_is_installed_already_is_not_sent_again(sync):
    sync.sync({A: {"queue": 1}, B: {"queue": 2}})
    batch = sync.sync({A: {"queue": 1}, B: {"queue": 2}})
    assert batch == ([], {}, []) and len(sync.client.batches) == 1


def test_changed_flows_are_set_then_unlisted_flows_removed_in_five_tuple_order(sync):
    sync.sync({C: {"queue": 1}, B: {"queue": 1}, A: {"queue": 1}})  # ids: C 1, B 2, A 3
    batch = sync.sync({B: {"queue": 3}})
    assert batch.changes == [{"set": {**flow_match(B), "queue": 3}}, {"remove": 3}, {"remove": 1}]
    assert batch.ids == {B: 2} and batch.removed == [A, C]  # a changed policy keeps its id
    assert sync.installed == {B: {"queue": 3}} and sync.ids == {B: 2}
    assert sync.client.table == {B: (2, {"queue": 3})}


def test_without_removal_unlisted_flows_keep_their_policies(sync):
    sync.sync({A: {"rate_mbps": 50.0}, B: {"rate_mbps": 50.0}})
    batch = sync.sync({B: {"rate_mbps": 100.0}}, remove_unlisted=False)
    assert batch.changes == [{"set": {**flow_match(B), "rate_mbps": 100.0}}] and batch.removed == []
    assert sync.installed == {A: {"rate_mbps": 50.0}, B: {"rate_mbps": 100.0}}
    assert sync.sync({}, remove_unlisted=False).changes == []


def test_a_failed_batch_changes_nothing_and_is_sent_again(sync):
    sync.sync({A: {"queue": 1}})
    sync.client.fail_next = True
    with pytest.raises(RuntimeError, match="did not answer"):
        sync.sync({B: {"queue": 2}})
    assert sync.installed == {A: {"queue": 1}} and sync.ids == {A: 1}
    batch = sync.sync({B: {"queue": 2}})
    assert batch.changes == sync.client.batches[1] == [{"set": {**flow_match(B), "queue": 2}}, {"remove": 1}]
    assert sync.ids == {B: 2}  # A's id was still taken while B was set
