"""controller/hostnet.py's tc batches, run by the real tc on devices that do not exist
(nothing is changed): which failures are fatal, and whose error a failure reports."""
from __future__ import annotations

import pytest

from controller.hostnet import TcError, run_tc_batch, tc_show_cmd

DELETES = ["tc qdisc del dev tbnosuch1 root", "tc qdisc del dev tbnosuch2 root"]
ADD = "tc qdisc replace dev tbnosuch3 root handle 1: prio"


def test_a_failed_command_is_named_with_its_own_error_not_an_earlier_tolerated_one():
    with pytest.raises(TcError, match=rf'^host tbh1: `{ADD}` failed: Cannot find device "tbnosuch3"$'):
        run_tc_batch([*DELETES, ADD], where="host tbh1", tolerate_missing_deletes=True)


def test_deletes_of_what_is_gone_are_tolerated_only_when_asked():
    run_tc_batch(DELETES, tolerate_missing_deletes=True)
    with pytest.raises(TcError, match=rf'^`{DELETES[0]}` failed: Cannot find device "tbnosuch1"$'):
        run_tc_batch(DELETES)


def test_a_show_command_reads_the_host_namespace_or_here():
    assert tc_show_cmd(42, "class", "tbh1-eth0", stats=True) == [
        "nsenter", "--net=/proc/42/ns/net", "tc", "-s", "class", "show", "dev", "tbh1-eth0"]
    assert tc_show_cmd(None, "qdisc", "s1-eth1") == ["tc", "qdisc", "show", "dev", "s1-eth1"]
