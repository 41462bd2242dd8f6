"""Markdown tables: one renderer for every Markdown file the package writes (``power.md``,
``plan.md``, ``bayesrc report --format md``, ``bayesrc compare``'s ``summary.md``); each caller
passes its own cell formatter."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


def markdown_table(
    header: Sequence[object],
    rows: Iterable[Sequence[object]],
    cell: Callable[[object], str] = str,
    *,
    align: str | None = None,
) -> str:
    """A GitHub-flavoured Markdown table: ``header``, a rule, one line per row (cells through ``cell``).

    ``align``: one letter per column, ``"l"`` (the default rule ``---``) or ``"r"`` (``---:``,
    right-aligned: counts).

    Examples
    --------
    >>> print(markdown_table(["model", "accuracy"], [["a", 0.71], ["b", 0.6]],
    ...                      cell=lambda v: v if isinstance(v, str) else f"{v:.2f}"))
    | model | accuracy |
    |---|---|
    | a | 0.71 |
    | b | 0.60 |
    >>> print(markdown_table(["", "items"], [["a", 12]], align="lr"))
    | | items |
    |---|---:|
    | a | 12 |
    """
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one of 'l' / 'r' per column ({len(header)}), got {align!r}")
    lines = [_table_line(map(str, header)), "|" + "".join("---:|" if a == "r" else "---|" for a in align)]
    lines += [_table_line(cell(v) for v in row) for row in rows]
    return "\n".join(lines)


def _table_line(cells: Iterable[str]) -> str:
    # An empty cell is one space wide ("| |"), as hand-written tables have it.
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"
