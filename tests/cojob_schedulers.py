"""Cojob schedulers of a researcher's own, as a spec names them (``scheduler.name:
tests.cojob_schedulers:largest_first``), for tests/test_cojob_own_scheduler.py: each
takes (every remaining stage, the running stages) and returns stage ids, highest
priority first. Imports nothing but what such a module would."""
from __future__ import annotations

from controller.schedulers import grouper

CALLS: list[tuple[int, int]] = []  # (stages given, running stages given) per call of pda_again


def pda_again(every, running):
    """Grouper's own PDA, as a researcher would call it from outside the repository."""
    CALLS.append((len(every), len(running)))
    return grouper.pda(every)


def largest_first(every, running):
    """The opposite of Grouper's intuition: the stage with the most bytes left goes first."""
    return [s.stage_id for s in sorted(running, key=lambda s: -sum(s.loads.values()))]


def nothing(every, running):
    return []


def first_only(every, running):
    """Ranks one running stage; the others are left to the lowest queue."""
    return [min(s.stage_id for s in running)]


def pda_once(every, running):
    """PDA's order on its first call, nothing after (each test clears CALLS first)."""
    CALLS.append((len(every), len(running)))
    return grouper.pda(every) if len(CALLS) == 1 else []


def pda_emptying_loads(every, running):
    """PDA's order, after emptying the loads of every stage it was given."""
    ranked = grouper.pda(every)
    for stage in [*every, *running]:
        stage.loads.clear()
    return ranked


def fails(every, running):
    raise KeyError("no such port")


def unknown_stage(every, running):
    return ["c9/s9"]


def twice(every, running):
    return [running[0].stage_id] * 2


def not_a_list(every, running):
    return {s.stage_id: 1 for s in running}


NOT_A_FUNCTION = 3


def one_argument(running):
    return []
