"""The statistics :func:`bayesrc.classical.reliable_change` computes for one version pair: the item table and its
exclusions, split-half reliability and ICC, S_diff, the RCI and its classes, class counts, detection limits,
reliability against K, and majority-answer flips (:func:`flip_metrics`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.classical import rci as _rci
from bayesrc.classical.rci import RCISettings
from bayesrc.classical.reliability import (
    icc_1_1,
    icc_1_k,
    k_for_reliability,
    reliability_vs_k,
    split_half_reliability,
)


def flip_metrics(p_v1: np.ndarray, p_v2: np.ndarray) -> dict:
    """Negative / positive flips of the majority answer (SPEC 2.1).

    An item flips negatively when it is correct-majority in v1 (p > 0.5) and not in
    v2 (p <= 0.5), positively for the reverse; rates are per item scored in both.

    Examples
    --------
    >>> import numpy as np
    >>> f = flip_metrics(np.array([0.8, 0.3, 0.9, 0.6]), np.array([0.4, 0.7, 0.9, 0.7]))
    >>> f["negative_flips"], f["positive_flips"], f["negative_flip_rate"]
    (1, 1, 0.25)
    """
    p1, p2 = np.asarray(p_v1, float), np.asarray(p_v2, float)
    ok = ~(np.isnan(p1) | np.isnan(p2))
    neg = int(np.sum(ok & (p1 > 0.5) & (p2 <= 0.5)))
    pos = int(np.sum(ok & (p1 <= 0.5) & (p2 > 0.5)))
    n = int(ok.sum())
    return {
        "n": n,
        "negative_flips": neg,
        "positive_flips": pos,
        "negative_flip_rate": neg / n if n else float("nan"),
        "positive_flip_rate": pos / n if n else float("nan"),
    }


def _pair_items(counts: xr.Dataset, a: xr.Dataset, b: xr.Dataset) -> pd.DataFrame:
    """The pair's item table (p, n, delta per version) with the K each item was given (``k_v1``, ``k_v2``)."""
    items = _rci.pair_frame(
        a["p"].values,
        b["p"].values,
        a["n_valid"].values,
        b["n_valid"].values,
        counts["item"].values,
        counts["domain"].values,
    )
    items["k_v1"], items["k_v2"] = a["n_trials"].values.astype(np.int64), b["n_trials"].values.astype(np.int64)
    return items


def _exclusions(
    items: pd.DataFrame, min_valid: int | None, valid_share: float
) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """SPEC 2's exclusions on the pair's item table: rule (a) in force (text), each item's reason
    (``""`` if kept), the analysable items (kept) and the scored ones (an accuracy in both versions)."""
    rule = _rci.min_valid_rule(min_valid, valid_share, np.concatenate([items["k_v1"], items["k_v2"]]))
    reason = _rci.exclusion_reasons(
        items["n_v1"],
        items["n_v2"],
        items["p_v1"],
        items["p_v2"],
        min_valid,
        k_v1=items["k_v1"],
        k_v2=items["k_v2"],
        valid_share=valid_share,
    )
    scored = items[["p_v1", "p_v2"]].notna().all(axis=1).to_numpy()
    return rule, reason, reason == "", scored


def _reliability_and_icc(
    correct: tuple[np.ndarray, np.ndarray], keep: np.ndarray | None, *, n_splits: int, seeds: tuple
) -> dict:
    """Split-half reliability, ICC(1,1) and ICC(1,k) of each version's (item, sample) scores ``correct``, on the
    items ``keep`` (None: every paired item)."""
    c1, c2 = correct if keep is None else (correct[0][keep], correct[1][keep])
    return {
        "reliability": {
            "v1": split_half_reliability(c1, n_splits=n_splits, seed=seeds[0]),
            "v2": split_half_reliability(c2, n_splits=n_splits, seed=seeds[1]),
        },
        "icc": {"v1": icc_1_1(c1), "v2": icc_1_1(c2)},
        "icc_k": {"v1": icc_1_k(c1), "v2": icc_1_k(c2)},
    }


def _classify_items(
    items: pd.DataFrame,
    settings: RCISettings,
    z_conservative: float,
    r1: float,
    r2: float,
    *,
    analysable: np.ndarray,
    scored: np.ndarray,
    basis: np.ndarray,
    s_item: np.ndarray,
) -> dict:
    """S_diff, RCI and the three classifications (primary, conservative, all items), written into ``items``.

    Returns the scale: ``sem_v1``, ``sem_v2``, ``s_diff`` (the pair's: the paper's S_diff, or the
    median per-item one for "binomial") and ``s_diff_all`` (from the SD of every scored item).
    """
    # Full-set analysis (pre-exclusion): SD over every item with both accuracies.
    _, _, s_diff_all = _rci.s_diff_from_accuracies(items["p_v1"][scored], items["p_v2"][scored], r1, r2)
    sem1, sem2, s_ref = _rci.s_diff_from_accuracies(items["p_v1"][basis], items["p_v2"][basis], r1, r2)
    if settings.s_diff == "binomial":
        with np.errstate(invalid="ignore", divide="ignore"):
            rci = items["delta"].to_numpy() / s_item
            rci_all = rci
        s_pair = float(np.nanmedian(s_item[analysable])) if analysable.any() else float("nan")
    else:
        rci_all = _rci.reliable_change_index(items["delta"], s_diff_all)
        rci = _rci.reliable_change_index(items["delta"], s_ref)
        s_pair = s_ref
    items["s_diff_item"] = s_item if settings.s_diff == "binomial" else s_pair
    items["rci"] = np.where(scored, rci, np.nan)
    items["class"] = np.where(analysable, _rci.classify_rci(rci, settings.z), _rci.EXCLUDED)
    items["class_conservative"] = np.where(analysable, _rci.classify_rci(rci, z_conservative), _rci.EXCLUDED)
    items["rci_all_items"] = np.where(scored, rci_all, np.nan)
    items["class_all_items"] = np.where(scored, _rci.classify_rci(rci_all, settings.z), _rci.EXCLUDED)
    return {"sem_v1": sem1, "sem_v2": sem2, "s_diff": s_pair, "s_diff_all": s_diff_all}


def _exclusion_summary(
    items: pd.DataFrame, analysable: np.ndarray, reason: np.ndarray, min_valid: int | None, rule: str
) -> dict:
    """The ``exclusions`` block: how many items each rule removed, and the rule (a) in force."""
    n_before = len(items)
    return {
        "n_before": n_before,
        "n_after": int(analysable.sum()),
        "low_valid": int(np.sum(reason == "low_valid")),
        "floor_ceiling": int(np.sum(reason == "floor_ceiling")),
        "floor_v1": int(np.sum(items["p_v1"] == 0.0)),
        "ceiling_v1": int(np.sum(items["p_v1"] == 1.0)),
        "min_valid": min_valid,
        "min_valid_rule": rule,
        "share_excluded": float(1 - analysable.mean()) if n_before else float("nan"),
    }


def _class_counts(items: pd.DataFrame, analysable: np.ndarray, scored: np.ndarray) -> dict:
    """Class counts and shares: primary (analysable items), all scored items, conservative threshold."""
    return {
        "analysable": _rci.counts_with_proportions(items["class"].to_numpy()[analysable]),
        "all": _rci.counts_with_proportions(items["class_all_items"].to_numpy()[scored]),
        "conservative": _rci.counts_with_proportions(items["class_conservative"].to_numpy()[analysable]),
    }


def _detection_limits(scale: dict, z: float, k_design: int) -> dict:
    """SEMs, S_diff and the smallest reliable change: as an accuracy (z S_diff) and in samples of K."""
    min_det = z * scale["s_diff"]
    return {
        "sem": {"v1": scale["sem_v1"], "v2": scale["sem_v2"]},
        "s_diff": scale["s_diff"],
        "s_diff_all": scale["s_diff_all"],
        "min_detectable": min_det,
        "min_detectable_samples": int(np.ceil(min_det * k_design - 1e-9)) if np.isfinite(min_det) else -1,
    }


def _reliability_growth(correct: tuple[np.ndarray, np.ndarray], rel: dict, *, n_splits: int, seeds: tuple) -> dict:
    """Reliability against the number of samples per item, and the K that reaches r_xx = 0.8 and 0.9."""
    return {
        "reliability_by_k": {
            "v1": reliability_vs_k(correct[0], n_splits=n_splits, seed=seeds[0]),
            "v2": reliability_vs_k(correct[1], n_splits=n_splits, seed=seeds[1]),
        },
        "k_for_r": {v: {str(t): k_for_reliability(rel[v].r_xx, rel[v].k, t) for t in (0.8, 0.9)} for v in ("v1", "v2")},
    }
