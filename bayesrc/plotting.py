"""Figures without pyplot: a bare matplotlib ``Figure`` and its PNG bytes.

The package never picks or switches the caller's matplotlib backend (no
``matplotlib.use``): a bare Figure renders to PNG with the Agg canvas on save, and a
notebook displays it inline through its own backend. matplotlib is imported only when a
figure is drawn (it is heavy), so importing an analysis module stays light.
"""

from __future__ import annotations

import io


def new_figure(**kw):
    """A matplotlib Figure not tied to pyplot (no backend chosen, nothing global touched).

    Examples
    --------
    >>> type(new_figure(figsize=(2, 2))).__name__
    'Figure'
    """
    from matplotlib.figure import Figure  # matplotlib: heavy, imported when a figure is drawn

    return Figure(**kw)


def subplots(nrows: int = 1, ncols: int = 1, **kw):
    """``(fig, axes)`` on an explicit :class:`~matplotlib.figure.Figure`, outside pyplot.

    Examples
    --------
    >>> fig, axes = subplots(1, 2, figsize=(4, 2))
    >>> len(axes)
    2
    """
    fig = new_figure(**{k: kw.pop(k) for k in ("figsize", "dpi", "layout") if k in kw})
    return fig, fig.subplots(nrows, ncols, **kw)


def to_png(fig, dpi: int = 110) -> bytes:
    """PNG bytes of a figure (a pyplot-managed one, e.g. from arviz-plots, is closed afterwards).

    Examples
    --------
    >>> to_png(new_figure(figsize=(1, 1)))[:4]
    b'\\x89PNG'
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    if getattr(fig.canvas, "manager", None) is not None:  # registered with pyplot: release it
        import matplotlib.pyplot as plt  # matplotlib: heavy, and only pyplot-managed figures need it

        plt.close(fig)
    return buf.getvalue()
