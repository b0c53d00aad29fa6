"""Commands in an emulated host's network namespace: the one place tc runs there.

The emulation applies the queue plan through it and the controller applies
sender-side policies through it, so both see the same errors; runs read the
installed classes back through it (``tc_show_cmd``). A namespace is
entered by the pid of a process living in it (``nsenter --net``); no pid means
the machine's own namespace, where the switch ports live.
"""
from __future__ import annotations

import re
import subprocess

_FAILED_LINE = re.compile(r"Command failed -:(\d+)")


class TcError(RuntimeError):
    """A tc batch failed; the message is one line naming the first failed command."""


def netns_cmd(netns_pid: int | None, args: list[str]) -> list[str]:
    """``args`` run inside the network namespace of ``netns_pid`` (or here when None)."""
    return ["nsenter", f"--net=/proc/{netns_pid}/ns/net", *args] if netns_pid else list(args)


def tc_show_cmd(netns_pid: int | None, what: str, intf: str, stats: bool = False) -> list[str]:
    """``tc [-s] <what> show dev <intf>`` in the namespace of ``netns_pid``: read-only."""
    return netns_cmd(netns_pid, ["tc", *(["-s"] if stats else []), what, "show", "dev", intf])


def run_tc_batch(cmds: list[str], netns_pid: int | None = None, where: str = "",
                 tolerate_missing_deletes: bool = False) -> None:
    """Apply tc commands in one ``tc -force -batch`` (every line runs even if one fails).

    With ``tolerate_missing_deletes``, a ``del`` of something already gone is not an
    error, so that removing a policy twice (a retried call) is harmless.
    """
    if not cmds:
        return
    body = "\n".join(c.removeprefix("tc ") for c in cmds) + "\n"
    proc = subprocess.run(netns_cmd(netns_pid, ["tc", "-force", "-batch", "-"]), input=body,
                          capture_output=True, text=True)
    if proc.returncode == 0:
        return
    failed = {n: message for n, message in _failures(proc.stderr).items() if 0 < n <= len(cmds)}
    fatal = [n for n in failed if not (tolerate_missing_deletes and " del " in f" {cmds[n - 1]} ")]
    if fatal or not failed:
        command = cmds[fatal[0] - 1] if fatal else "tc -batch"
        message = (failed[fatal[0]] if fatal else proc.stderr.strip().splitlines()[0] if proc.stderr.strip()
                   else "") or f"exit {proc.returncode}"
        raise TcError(f"{where + ': ' if where else ''}`{command}` failed: {message}")


def _failures(stderr: str) -> dict[int, str]:
    """Each failed line's number and the first line of its own error: tc prints a
    command's error, then ``Command failed -:N`` (so an earlier tolerated delete's
    error is not blamed on a later command)."""
    failures, pending = {}, []
    for line in stderr.splitlines():
        found = _FAILED_LINE.search(line)
        if found:
            failures[int(found.group(1))] = pending[0] if pending else ""
            pending = []
        elif line.strip():
            pending.append(line.strip())
    return failures
