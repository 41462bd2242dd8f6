"""The upgrade gate inside a test suite: ``assert_no_regression`` for teams that gate in pytest.

It runs :func:`bayesrc.compare.compare` with its defaults (the change model, its convergence gate,
the default margin) on two versions' trials and fails the test with the gate's own summary when the
gate fails, when the fit fails its convergence gate, or, unless allowed, when the comparison cannot
decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from bayesrc.compare import CompareResult, compare, markdown_summary
from bayesrc.config import DEFAULT_MARGIN
from bayesrc.data import check_comparable, item_counts, load_counts, trials_file

__all__ = ["GateFailure", "assert_no_regression", "check_gate"]


class GateFailure(AssertionError):
    """The gate did not pass: ``result`` holds the :class:`~bayesrc.compare.CompareResult` behind it."""

    def __init__(self, message: str, result: CompareResult) -> None:
        super().__init__(message)
        self.result = result


def assert_no_regression(
    baseline: str | Path | pd.DataFrame,
    candidate: str | Path | pd.DataFrame,
    *,
    fail_on: str = "deteriorated",
    margin: float | None = DEFAULT_MARGIN,
    q: float = 0.10,
    allow_inconclusive: bool = False,
    allow_pin: Iterable[str] = (),
    config=None,
) -> CompareResult:
    """Pass when the candidate is shown not to regress against the baseline; raise :class:`GateFailure` otherwise.

    Parameters
    ----------
    baseline, candidate : trials files (or collection run folders) or trials DataFrames of the two versions.
    fail_on, margin, q, config : as :func:`bayesrc.compare.compare` (its defaults).
    allow_inconclusive : let an inconclusive comparison (exit 4: too little data to decide) pass the test.
    allow_pin : pins that may differ between two collected runs (``bayesrc compare --allow-pin``, e.g. ``prompt``
        for a prompt change); other differing pins (item bank, sampling, scheme, ...) raise ``InputError``
        before any fit.

    Returns
    -------
    CompareResult
        The passing gate's result (decision, flagged items, resolution).

    Examples
    --------
    >>> from bayesrc.testing import assert_no_regression
    >>> def test_upgrade_does_not_regress():  # in the team's test suite
    ...     assert_no_regression("runs/base/trials.parquet", "runs/candidate/trials.parquet")
    """
    if isinstance(baseline, pd.DataFrame) and isinstance(candidate, pd.DataFrame):
        counts = item_counts(baseline, candidate)
    else:
        v1, v2 = trials_file(baseline), trials_file(candidate)
        check_comparable(v1, v2, allow=allow_pin)  # as `bayesrc compare`: runs whose pins differ are no comparison
        counts = load_counts([v1, v2])
    return check_gate(
        compare(counts, fail_on=fail_on, q=q, margin=margin, config=config), allow_inconclusive=allow_inconclusive
    )


def check_gate(res: CompareResult, *, allow_inconclusive: bool = False) -> CompareResult:
    """``res`` if its decision passes the test (a pass; an inconclusive one if allowed), else :class:`GateFailure`
    with its summary.

    Examples
    --------
    >>> check_gate(bayesrc.load("gate"), allow_inconclusive=True)  # a saved gate's result  # doctest: +SKIP
    """
    if res.decision == "pass" or (res.decision == "inconclusive" and allow_inconclusive):
        return res
    raise GateFailure(f"bayesrc gate: {res.decision} (exit {res.exit_code})\n{markdown_summary(res)}", res)
