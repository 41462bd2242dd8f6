"""Markdown tables: one renderer for every Markdown file the package writes (``power.md``,
``plan.md``, ``bayesrc report --format md``); each caller passes its own cell formatter."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]], cell: Callable[[object], str] = str) -> str:
    """A GitHub-flavoured Markdown table: ``header``, a rule, one line per row (cells through ``cell``).

    Examples
    --------
    >>> print(markdown_table(["model", "accuracy"], [["a", 0.71], ["b", 0.6]], cell=lambda v: v if isinstance(v, str) else f"{v:.2f}"))
    | model | accuracy |
    |---|---|
    | a | 0.71 |
    | b | 0.60 |
    """
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
