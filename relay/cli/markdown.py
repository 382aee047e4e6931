"""Markdown tables that ``relay settings-docs`` writes into the docs (the settings, Edge's
options, the Proxy's variables), each a row per entry of the table the code reads, so the
docs say what the code does."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

EMPTY = '""'


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """The table's lines, a cell's ``|`` escaped (no newline after the last)."""
    lines = [_line(header), "|" + "---|" * len(header)]
    lines += [_line(row) for row in rows]
    return "\n".join(lines)


def default(value: str | None) -> str:
    """A default as code: ``""`` for an empty one, nothing for none."""
    return "" if value is None else f"`{value or EMPTY}`"


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
