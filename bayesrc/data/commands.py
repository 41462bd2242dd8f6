"""Command-line options for reading runs: ``--allow-pin`` and ``--force`` (standard library only).

Loaded by :mod:`bayesrc.cli` before the commands that take them, without :mod:`bayesrc.data`'s
``__init__``, so ``bayesrc --help`` stays light.
"""

from __future__ import annotations

import argparse


def add_pin_arguments(p: argparse.ArgumentParser, what: str = "analyse") -> None:
    """``--allow-pin`` and ``--force``: an analysis of runs whose pins differ
    (:func:`bayesrc.data.provenance.check_comparable`).

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> add_pin_arguments(parser)
    >>> parser.parse_args(["--allow-pin", "prompt", "--force"])
    Namespace(allow_pin=['prompt'], force=True)
    """
    p.add_argument(
        "--allow-pin",
        action="append",
        default=[],
        metavar="FIELD",
        help="a run pin (or category, e.g. prompt) that may differ between the runs (repeatable)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=f"{what} runs whose pins differ (item bank, sampling, evaluation scheme, ...), with a warning",
    )
