"""The Markdown pieces of the tables written beside the data (``table.md``, ``figure-N.md``),
as ``html`` has the report page's."""
from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_table(header: Sequence, rows: Iterable[Sequence]) -> str:
    """A pipe table: the header, its rule, one line a row (no trailing newline)."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])
