"""Mbit/s and bytes: the one copy of their conversions, for every layer but hosts/ (whose
programs run on emulated hosts and import from no other layer).

Mbit/s is 1e6 bit/s and a byte 8 bits. Each function keeps the arithmetic order its
callers always used (``x * 8 / s / 1e6`` and ``x * 8 / 1e6 / s`` can differ in the
last bit), so kept summaries and exact tests read the same numbers.
"""
from __future__ import annotations


def mbps_to_bytes_per_s(mbps: float) -> float:
    """A rate in Mbit/s as bytes/s."""
    return mbps * 1e6 / 8


def bytes_to_mbit(nbytes: float) -> float:
    """A volume in bytes as Mbit."""
    return nbytes * 8 / 1e6


def mbps_of_bytes(nbytes: float, seconds: float) -> float:
    """The Mbit/s of ``nbytes`` moved in ``seconds``."""
    return nbytes * 8 / seconds / 1e6


def transfer_s(nbytes: float, mbps: float) -> float:
    """The seconds ``nbytes`` take at ``mbps``."""
    return nbytes * 8 / (mbps * 1e6)
