"""Sensitivity analyses of the reliable-change conclusions, classical and Bayesian.

Each analysis re-runs the classification over a grid of one analysis choice and
returns a tidy table (one row per setting) and a figure:

* :func:`threshold_sensitivity` — the RCI threshold ``z`` (1.645 ... 3.0, incl. the
  paper's 1.96 and conservative 2.58) under both ``sd_basis`` choices;
* :func:`exclusion_sensitivity` — rule (a) ``min_valid`` over a grid, rule (b)
  floor/ceiling exclusion on or off (which changes the SD basis, hence S_diff);
* :func:`k_subsample_sensitivity` — "what would K = 3, 5, ... have concluded?":
  the full classical analysis (reliability included) on the first ``k`` samples of
  every item, with rule (a) scaled as ``ceil(0.6 k)`` (the paper's 6 of 10);
* :func:`prior_sensitivity` — the paired change model under a prior grid
  (:data:`PRIOR_GRID`: every scale halved / doubled, a flat and a sceptical prior on the
  share of changed items), selection at one FDR level: one fit, moved to each other prior by
  Pareto-smoothed importance weights where those pass a gate as strict as NUTS's, else refitted;
* :func:`fdr_sensitivity` — one change-model fit, items re-selected at several Bayesian
  FDR levels q and posterior-probability thresholds (plotted against the error each
  allows: q, or 1 - threshold per item), with the model's expected FDP.

Given the truth of a simulated pair (``bayesrc.data.simulate_pair``), every row also
carries the realized false-discovery proportion and the share of truly changed
items detected. Reproducible: every random step (MCMC included) is seeded from ``seed``.

The classical analyses are in :mod:`bayesrc.sensitivity.classical`, the Bayesian ones in
:mod:`bayesrc.sensitivity.bayesian`; this module runs them by name (:func:`run_sensitivity_analyses`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import xarray as xr

from bayesrc.bayes import shared_adaptation
from bayesrc.classical.rci import RCISettings
from bayesrc.sensitivity.bayesian import FDR_GRID, _change_fit, fdr_sensitivity, prior_sensitivity
from bayesrc.sensitivity.classical import (
    METHODS,
    MIN_VALID_GRID,
    Z_GRID,
    _pair,
    exclusion_sensitivity,
    k_subsample_sensitivity,
    threshold_sensitivity,
)

ANALYSES = {
    "threshold": threshold_sensitivity,
    "exclusion": exclusion_sensitivity,
    "k": k_subsample_sensitivity,
    "prior": prior_sensitivity,
    "fdr": fdr_sensitivity,
}


def run_sensitivity_analyses(
    counts: xr.Dataset,
    names: Sequence[str] = ("threshold", "exclusion", "k"),
    *,
    truth: pd.DataFrame | None = None,
    settings: RCISettings = RCISettings(),
    seed: int = 0,
    zs: Sequence[float] = Z_GRID,
    methods: Sequence[tuple[str, str]] = METHODS,
    null_replicates: int = 200,
    min_valid_grid: Sequence[int] = MIN_VALID_GRID,
    ks: Sequence[int] | None = None,
    qs: Sequence[float] = FDR_GRID,
    config=None,
    mapper=None,
    reweight: bool = True,
) -> dict[str, pd.DataFrame]:
    """Run the named analyses (one shared reliability estimate for threshold / exclusion, one
    default-prior change-model fit for prior / fdr; ``config``: its sampler settings).
    ``settings``: the RCI classification the exclusion and K analyses vary one part of
    (:class:`bayesrc.classical.rci.RCISettings`; default the paper's).

    ``mapper(fn, arg_tuples)``: how the prior grid's refits run (default serially here; e.g.
    :func:`bayesrc.scale.ray_map`); ``reweight``: :func:`prior_sensitivity`'s.

    Examples
    --------
    >>> tables = run_sensitivity_analyses(counts, ("threshold", "k"))   # doctest: +SKIP
    >>> sorted(tables)                                                    # doctest: +SKIP
    ['k', 'threshold']
    """
    pair, base, adaptation = None, None, None
    out: dict[str, pd.DataFrame] = {}
    for name in names:
        if name in ("prior", "fdr") and base is None:  # one fit for both; the prior grid reweights it
            with shared_adaptation() as adaptation:  # the prior grid's refits start from its adaptation
                base = _change_fit(counts, config, seed)
        if name in ("threshold", "exclusion") and pair is None:
            pair = _pair(counts, None, seed, settings)
        if name == "threshold":
            out[name] = threshold_sensitivity(
                counts, zs=zs, methods=methods, null_replicates=null_replicates, truth=truth, pair=pair, seed=seed
            )
        elif name == "exclusion":
            out[name] = exclusion_sensitivity(
                counts, min_valid_grid=min_valid_grid, settings=settings, truth=truth, pair=pair, seed=seed
            )
        elif name == "k":
            out[name] = k_subsample_sensitivity(counts, ks=ks, settings=settings, truth=truth, seed=seed)
        elif name == "prior":
            out[name] = prior_sensitivity(
                counts,
                result=base,
                config=config,
                truth=truth,
                seed=seed,
                mapper=mapper,
                reweight=reweight,
                adaptation=adaptation,
            )
        elif name == "fdr":
            out[name] = fdr_sensitivity(counts, qs=qs, result=base, truth=truth, seed=seed)
        else:
            raise ValueError(f"unknown sensitivity analysis {name!r}")
    return out
