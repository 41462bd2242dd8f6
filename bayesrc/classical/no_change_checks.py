"""One version pair's no-change checks: the sample-level null, the stratified no-change test
(:func:`pair_no_change_test`), and the warnings a pair's classes carry."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.classical import rci as _rci
from bayesrc.classical.calibration import (
    NO_CHANGE_ALPHA,
    no_change_test,
    not_rejected_phrase,
    null_warnings,
    sample_level_null,
)
from bayesrc.classical.graded import score_no_change_test
from bayesrc.classical.rci import RCISettings
from bayesrc.data.inputs import model_inputs


def pair_no_change_test(counts: xr.Dataset, v1: str, v2: str) -> dict:
    """:func:`bayesrc.classical.calibration.no_change_test` on the pair's counts, strata (domain,
    correct letter) where known; its fixed seed makes the p-value a function of the data, the same
    in ``rci.json`` and in a fit's cross-check.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(100, 10, pi_change=0.0, seed=2)
    >>> out = pair_no_change_test(item_counts(sim.trials_v1, sim.trials_v2), "model-v1", "model-v2")
    >>> 0 < out["p_value"] <= 1
    True
    """
    data = model_inputs(counts, v1, v2)
    return no_change_test(data.y, data.n, data.strata()[0])


def _null_settings(settings: RCISettings, items: pd.DataFrame, valid_share: float) -> RCISettings:
    """The sample-level null's settings: without a fixed ``min_valid``, each version's rule (a) follows the K its
    items were given."""
    if settings.min_valid is not None:
        return settings
    return replace(
        settings,
        min_valid=(
            _rci.min_valid_for(items["k_v1"].to_numpy(), valid_share),
            _rci.min_valid_for(items["k_v2"].to_numpy(), valid_share),
        ),
    )


def _no_change_checks(
    counts: xr.Dataset,
    versions: tuple[str, str],
    correct: tuple[np.ndarray, np.ndarray],
    null_settings: RCISettings,
    *,
    n_null: int,
    null_splits: int,
    seed: int,
) -> dict:
    """The sample-level null (the pair's samples re-dealt within item) and :func:`pair_no_change_test`; both None for
    ``n_null=0``."""
    if n_null <= 0:
        return {"null_samples": None, "no_change_test": None}
    s_sample_null = np.random.SeedSequence([seed, 7])  # a separate stream: adding it moves no earlier number
    return {
        "null_samples": sample_level_null(
            *correct, null_settings, n_replicates=n_null, n_splits=null_splits, seed=s_sample_null
        ),
        "no_change_test": (
            score_no_change_test(*correct, pd.factorize(counts["domain"].values)[0])
            if "graded" in counts.attrs
            else pair_no_change_test(counts, *versions)
        ),
    }


def _pair_warnings(
    samples: dict | None,
    no_change: dict | None,
    flagged: int,
    n_analysable: int,
    *,
    reliable: bool,
    s_diff: str,
    seeds: dict,
) -> list[str]:
    """What the reader must know before trusting the classes: the null's verdicts, an undefined
    reliability, and versions whose draws share seeds."""
    warnings = null_warnings(samples, flagged, n_analysable) if samples is not None else []
    if no_change is not None and no_change["p_value"] >= NO_CHANGE_ALPHA and flagged:
        warnings.append(
            f"{not_rejected_phrase(no_change).capitalize()}: the {flagged} reliable changes may all be chance."
        )
    if not reliable and s_diff == "reference":
        warnings.insert(
            0,
            "The split-half reliability of a version is undefined (too few items with varying accuracy): "
            "SEM and S_diff are NaN and no item is classified; use --s-diff binomial.",
        )
    if seeds.get("n_shared", 0) > 0 and seeds["share"] >= 0.5:
        warnings.append(
            f"{seeds['share']:.0%} of the (item, k) samples share their seed across the two versions: their draws are "
            "coupled, while this analysis assumes independent versions (collect with the version-specific seed rule)."
        )
    return warnings
