"""The one way this project imports DGL: ``import_dgl()``.

Why: dgl 2.1.0 (the newest DGL with a Linux cp311 wheel) ships its C++ GraphBolt
library only for torch 2.0-2.2.1, and ``dgl/graphbolt/__init__.py`` raises at import
time when the library for the running torch (2.13.0 here) is missing. ``import dgl``
reaches it through ``dgl.distributed``, so plain ``import dgl`` fails.

How: before DGL is first imported, a stub module is registered in ``sys.modules`` as
``dgl.graphbolt``; Python then never runs the real package. The stub defines
``FusedCSCSamplingGraph`` as a class nothing is an instance of (``dgl.distributed``
only asks ``isinstance(g, gb.FusedCSCSamplingGraph)`` on its classic-graph paths), and
any other attribute raises ``AttributeError`` naming GraphBolt.

What stops working: everything GraphBolt (``dgl.graphbolt``, the
``use_graphbolt=True`` options of ``dgl.distributed``, GraphBolt
partition formats). What keeps working, and is all the project uses: graphs,
``dgl.dataloading`` (NeighborSampler, DataLoader), ``dgl.nn``, and
``dgl.distributed.partition_graph`` with its default DGL format.

Nothing else in the project imports ``dgl``: call ``import_dgl()`` instead.
"""
from __future__ import annotations

import os
import sys
import types

_GRAPHBOLT = "dgl.graphbolt"


def import_dgl() -> types.ModuleType:
    """Import DGL past the GraphBolt import failure and return the ``dgl`` module."""
    if "dgl" in sys.modules:
        return sys.modules["dgl"]
    stub = sys.modules.setdefault(_GRAPHBOLT, _graphbolt_stub())
    # Named here, DGL neither guesses the backend nor writes ~/.dgl/config.json.
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl  # pylint: disable=import-outside-toplevel  # only after the stub is in place

    dgl.graphbolt = stub  # Python sets this only for submodules it loads itself
    return dgl


def _graphbolt_stub() -> types.ModuleType:
    stub = types.ModuleType(_GRAPHBOLT, "Stand-in for GraphBolt, unusable with this torch (see hosts.gnn.dglenv).")

    class FusedCSCSamplingGraph:  # pylint: disable=too-few-public-methods
        """Never instantiated: without its C++ library no GraphBolt graph can exist."""

    def missing(name: str):
        raise AttributeError(f"{_GRAPHBOLT}.{name} is unavailable: DGL's GraphBolt library does not "
                             f"support this torch; see hosts.gnn.dglenv")

    FusedCSCSamplingGraph.__module__ = _GRAPHBOLT
    stub.FusedCSCSamplingGraph = FusedCSCSamplingGraph
    stub.__getattr__ = missing
    return stub
