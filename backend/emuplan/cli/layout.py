"""What the CLI prints fits the terminal (``COLUMNS``; 80 when the output is not a terminal): tables drop their
optional columns and then wrap their text columns, long lines wrap at spaces, numbers are never cut or split.
``--wide`` lifts the limit (one line per row, for grep), ``--json`` has every figure."""

import shutil
import sys
import textwrap
from dataclasses import dataclass
from typing import Annotated

import typer

# The narrowest a text column is squeezed to before the table is left wider than the terminal.
MIN_TEXT_WIDTH = 8
GAP = "  "

_wide = False

WideOption = Annotated[
    bool, typer.Option("--wide", help="Every column, one line per row, however wide (the default fits the terminal).")
]


def set_wide(wide: bool) -> None:
    """Called by a command with its ``--wide``: every line whole from then on."""
    global _wide
    _wide = wide


def width() -> int:
    return sys.maxsize if _wide else shutil.get_terminal_size().columns


@dataclass(frozen=True)
class Column:
    header: str
    # A number: right-aligned and never wrapped, cut or dropped.
    numeric: bool = False
    # Dropped (rightmost first) when the table is wider than the terminal; --wide and --json keep it.
    optional: bool = False


def wrap(text: str, indent: str = "", hanging: str | None = None) -> list[str]:
    """``text`` in lines that fit, wrapped at spaces only: a word (a number, a path) is never split."""
    if _wide:
        return [indent + text]
    return textwrap.wrap(
        text,
        width(),
        initial_indent=indent,
        subsequent_indent=indent + "  " if hanging is None else hanging,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def table(columns: list[Column], rows: list[list[str]], indent: str = "  ", rule: bool = False) -> list[str]:
    """The rows under their headers, aligned; fitted to the terminal: optional columns dropped right to left,
    then the widest text column wrapped, until it fits. Says which columns were left out."""
    kept = list(range(len(columns)))
    natural = [max(len(row[i]) for row in [[c.header for c in columns], *rows]) for i in range(len(columns))]
    available = width() - len(indent)

    def total(widths: dict[int, int]) -> int:
        return sum(widths[i] for i in kept) + len(GAP) * (len(kept) - 1)

    widths = dict(enumerate(natural))
    for i in reversed(range(len(columns))):
        if total(widths) <= available:
            break
        if columns[i].optional:
            kept.remove(i)
    while total(widths) > available:
        text = [i for i in kept if not columns[i].numeric and widths[i] > MIN_TEXT_WIDTH]
        if not text:
            break
        widest = max(text, key=lambda i: widths[i])
        widths[widest] -= 1

    def lines_of(cells: list[str]) -> list[str]:
        wrapped = {
            i: [cells[i]] if columns[i].numeric else textwrap.wrap(cells[i], widths[i], break_on_hyphens=False) or [""]
            for i in kept
        }
        height = max(len(parts) for parts in wrapped.values())
        return [
            (
                indent
                + GAP.join(
                    (part.rjust if columns[i].numeric else part.ljust)(widths[i])
                    for i in kept
                    for part in [wrapped[i][line] if line < len(wrapped[i]) else ""]
                )
            ).rstrip()
            for line in range(height)
        ]

    lines = lines_of([c.header for c in columns])
    if rule:
        lines.append(indent + GAP.join("-" * widths[i] for i in kept))
    for row in rows:
        lines += lines_of(row)
    left_out = [columns[i].header for i in range(len(columns)) if i not in kept]
    if left_out:
        lines += wrap(f"(left out to fit {width()} columns: {', '.join(left_out)}; --wide or --json has them)", indent)
    return lines
