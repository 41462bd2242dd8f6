"""Building blocks of report sections: :class:`Section` and its blocks (:class:`Text`, :class:`Table`,
:class:`Figure`), and the number formatting every section builder shares (a null or NaN reads "n/a").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesrc.report import figures as F


@dataclass
class Text:
    text: str  # plain text; ``**bold**`` is the only markup


@dataclass
class Table:
    frame: pd.DataFrame
    caption: str
    latex: bool = False  # also emitted as a booktabs table
    label: str = ""


@dataclass
class Figure:
    """A figure, drawn only when rendered (LaTeX output never draws)."""

    make: Callable[[], object]  # -> matplotlib Figure
    caption: str
    name: str

    @property
    def png(self) -> bytes:
        if not hasattr(self, "_png"):
            self._png = F.to_png(self.make())
        return self._png


@dataclass
class Section:
    key: str
    title: str
    blocks: list = field(default_factory=list)
    status: str = "ok"  # "ok" or "waiting" (placeholder: inputs not in the run directory)


def _fig(make: Callable[[], object], caption: str, name: str) -> Figure:
    return Figure(make, caption, name)


def _known(x: float | None) -> bool:
    """True for a finite number (a null or NaN field reads as unknown)."""
    return x is not None and bool(np.isfinite(x))


def _num(x: float | None, spec: str) -> str:
    """``x`` formatted with ``spec``, or "n/a" when it is unknown (null in a result file, or not finite)."""
    return format(x, spec) if _known(x) else "n/a"


def _count(x: int | None) -> str:
    """A count from a result file as written, or "n/a" when it is null (a file edited by hand or a tool)."""
    return _num(x, "")


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if _known(x) else "n/a"
