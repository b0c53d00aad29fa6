"""The pieces of a self-contained report page: no script, no stylesheet or image
from elsewhere (plots are base64 PNG), every link relative, so a run directory can
be copied or archived and its ``report.html`` still opens."""
from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from urllib.parse import quote

from experiments.reports.rundata import Verdict

MAX_FILES = 300  # a gnn job's partitions can hold thousands; the rest is counted

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } .meta { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } tr.bad td { background: #fde8e8; }
.verdict { padding: 0.6em 1em; border-radius: 4px; margin: 1em 0; }
.yes { background: #e6f4ea; border-left: 6px solid #1e8e3e; } .no { background: #fde8e8; border-left: 6px solid #d93025; }
.unjudged { background: #f1f3f4; border-left: 6px solid #80868b; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
pre { background: #f8f8f8; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.scroll { overflow-x: auto; }
"""


def write(path: Path, text: str) -> Path:
    """Write a page whole (through a temporary name): a reader never sees half a report."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def page(title: str, subtitle: str, parts: Iterable[str]) -> str:
    # the empty icon keeps the browser from asking for a favicon.ico that is not there
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{escape(title)}</title><style>{STYLE}</style></head>\n'
            f'<body><h1>{escape(title)}</h1><p class="meta">{escape(subtitle)}</p>\n' + "\n".join(parts)
            + "\n</body></html>\n")


def section(heading: str, *content: str) -> str:
    return f"<section><h2>{escape(heading)}</h2>\n" + "\n".join(content) + "</section>"


def paragraph(text: str) -> str:
    return f"<p>{escape(text)}</p>"


def table(header: Sequence[str], rows: Iterable[Sequence], bad: Iterable[bool] = ()) -> str:
    bad = list(bad)
    marked = ' class="bad"'
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join(
        f"<tr{marked if i < len(bad) and bad[i] else ''}>"
        + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>"
        for i, row in enumerate(rows))
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def figure(caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(caption)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def preformatted(text: str, summary: str | None = None) -> str:
    block = f"<pre>{escape(text)}</pre>"
    return f"<details><summary>{escape(summary)}</summary>{block}</details>" if summary else block


def link(href: str, text: str) -> str:
    return f'<a href="{escape(quote(href))}">{escape(text)}</a>'


def verdict(v: Verdict) -> str:
    if v.trustworthy is None:
        css, head = "unjudged", "Trustworthy: not judged"
    else:
        css, head = ("yes", "Trustworthy: yes") if v.trustworthy else ("no", "Trustworthy: NO")
    reasons = "".join(f"<li>{escape(r)}</li>" for r in v.reasons)
    return (f'<div class="verdict {css}"><strong>{head}</strong>'
            + (f" ({escape(v.note)})" if v.note else "") + (f"<ul>{reasons}</ul>" if reasons else "") + "</div>")


def file_list(root: Path, skip: Sequence[str] = ()) -> str:
    """Every file under ``root`` as a relative link with its size."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.relative_to(root).as_posix() not in skip)
    items = [f"<li>{link(p.relative_to(root).as_posix(), p.relative_to(root).as_posix())} "
             f"<small>({_size(p.stat().st_size)})</small></li>" for p in files[:MAX_FILES]]
    if len(files) > MAX_FILES:
        items.append(f"<li>... and {len(files) - MAX_FILES} more</li>")
    return f"<ul>{''.join(items)}</ul>"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
