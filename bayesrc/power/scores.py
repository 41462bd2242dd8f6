"""Per-item scores of each version from item counts, the resolution report's input (:mod:`bayesrc.power.report`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.power import analytic as an

AGGREGATES = ("auto", "majority", "mean")
MISSING = ("drop", "incorrect")


def scores_from_counts(
    counts: xr.Dataset,
    *,
    aggregate: str = "auto",
    missing: str = "drop",
) -> tuple[pd.DataFrame, pd.Series, dict]:
    """Per-item scores (items x versions) from item counts (:func:`bayesrc.data.item_counts`).

    aggregate
        ``"auto"``: the single score of a single-shot (greedy) file, the majority of
        K samples otherwise; ``"majority"``: 1 iff more than half of the item's
        responses are correct (a tie counts as 0); ``"mean"``: the per-item accuracy
        ``y / n`` (not binary: McNemar does not apply, a paired t-test is reported).
    missing
        ``"drop"`` (default): analyse items scored in every version (an unparsed
        answer has no score; as the greedy comparison of SPEC 2 does);
        ``"incorrect"``: a missing answer counts as wrong, as leaderboards score it.

    Returns ``(scores, domain, info)``; ``info`` says what was done (for the report).

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(100, 10, seed=1)
    >>> scores, domain, info = scores_from_counts(item_counts(sim.trials_v1, sim.trials_v2))
    >>> sorted(scores)
    ['model-v1', 'model-v2']
    """
    if aggregate not in AGGREGATES:
        raise an.ParameterError(f"aggregate must be one of {AGGREGATES}", field="aggregate")
    if missing not in MISSING:
        raise an.ParameterError(f"missing must be one of {MISSING}", field="missing")
    n_valid = counts["n_valid"].values.astype(float)
    n_trials = counts["n_trials"].values.astype(float)
    y = counts["n_correct"].values.astype(float)
    max_k = int(n_trials.max()) if n_trials.size else 0
    if aggregate == "auto":
        aggregate = "single" if max_k <= 1 else "majority"
    denom = n_valid if missing == "drop" else n_trials
    with np.errstate(invalid="ignore", divide="ignore"):
        if aggregate == "mean":
            s = np.where(denom > 0, y / np.where(denom > 0, denom, 1), np.nan)
        else:  # single shot is the K = 1 case of the majority rule
            s = np.where(denom > 0, (y > denom / 2).astype(float), np.nan)
    keep = ~np.isnan(s).any(axis=1)
    versions = [str(v) for v in counts["version"].values]
    scores = pd.DataFrame(s[keep], index=pd.Index(counts["item"].values[keep], name="item"), columns=versions)
    domain = pd.Series(counts["domain"].values[keep], index=scores.index, name="domain")
    info = {
        "aggregate": aggregate,
        "missing": missing,
        "k_max": max_k,
        "items_in_counts": int(len(keep)),
        "items_dropped_missing": int((~keep).sum()),
        "binary": aggregate != "mean",
    }
    return scores, domain, info
