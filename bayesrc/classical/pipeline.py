"""The complete classical analysis of a version pair (SPEC section 2).

``reliable_change(counts)`` runs everything for one pair of versions and returns a
:class:`bayesrc.classical.PairResult`, the object ``bayesrc.load("rci.json")[NAME]`` gives back;
``analyse_pairs({...}, greedy={...})`` runs several pairs, the cross-pair tests and greedy
comparisons and returns an :class:`~bayesrc.classical.RCIRun`.

Which items each number uses (``sd_basis`` is stated in every output):

* reliability and ICC: every paired item of that version (the reference study);
* primary classes (``counts.analysable``): analysable items, with S_diff from the SD
  of the ``sd_basis`` set ("analysable", the paper's Table 2, or "all");
* ``counts.all``: every item with an accuracy in both versions, S_diff from the SD of
  that full set (the paper's pre-exclusion analysis and its greedy comparison);
* ``counts.conservative``: analysable items at ``z_conservative`` with the primary S_diff;
* direction-asymmetry test (the paper's version-swap null): the analysable items, the set
  of the observed counts (the reference study used every scored item);
* sample-level null (SPEC 2.1): the pair's own samples re-dealt within item, everything
  the classification uses recomputed; its false-positive rate and warnings.

``s_diff = "reference"`` (the paper's S_diff, default) or ``"binomial"`` (per-item, calibrated);
``reliability_basis = "all"`` (the paper) or ``"analysed"``.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from bayesrc.classical import rci as _rci
from bayesrc.classical.calibration import (
    NO_CHANGE_ALPHA,
    binomial_s_diff,
    no_change_test,
    not_rejected_phrase,
    null_warnings,
    sample_level_null,
)
from bayesrc.classical.rci import RCISettings
from bayesrc.classical.reliability import (
    SplitHalfReliability,
    icc_1_1,
    icc_1_k,
    k_for_reliability,
    reliability_vs_k,
    split_half_reliability,
)
from bayesrc.classical.result import PairResult, RCIRun
from bayesrc.classical.secondary import (
    difficulty_bins,
    domain_contingency,
    effect_sizes,
    empirical_null,
    greedy_agreement,
    greedy_change,
    mcnemar,
    stratified_s_diff,
    two_proportion_z,
)
from bayesrc.data.counts import modal_k
from bayesrc.data.inputs import model_inputs


def _aggregate_change(delta: np.ndarray) -> dict:
    """Mean item-level change with a t interval (the paper's aggregate Δ)."""
    d = np.asarray(delta, float)
    d = d[~np.isnan(d)]
    n = d.size
    if n < 2:
        return {"n": int(n), "mean_delta": float(d.mean()) if n else float("nan"), "ci95": [float("nan"), float("nan")]}
    half = stats.t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n)
    return {"n": int(n), "mean_delta": float(d.mean()), "ci95": [float(d.mean() - half), float(d.mean() + half)]}


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


def reliable_change(
    counts: xr.Dataset,
    v1: str | None = None,
    v2: str | None = None,
    *,
    name: str = "pair",
    z: float = 1.96,
    z_conservative: float = 2.58,
    min_valid: int | None = None,
    valid_share: float = _rci.VALID_SHARE,
    sd_basis: str = "analysable",
    s_diff: str = "reference",
    reliability_basis: str = "all",
    n_splits: int = 1000,
    n_permutations: int = 1000,
    n_null: int = 200,
    null_splits: int = 50,
    n_splits_by_k: int = 200,
    seed: int = 0,
) -> PairResult:
    """Run the full classical analysis of SPEC section 2 on one version pair.

    Parameters
    ----------
    counts : item counts (:func:`bayesrc.data.item_counts`) holding both versions.
    v1, v2 : version labels (default: the first two versions in ``counts``).
    z, z_conservative : RCI thresholds (1.96 and 2.58).
    min_valid : exclusion rule (a) as a fixed count: fewer valid responses than this in
        either version. Default ``None``: ``ceil(valid_share * K)`` of the K samples each
        item was given in each version (SPEC 2: 6 at K = 10, 3 at K = 5).
    sd_basis : "analysable" (post-exclusion SD, the paper's primary table) or "all".
    s_diff : "reference" (the paper's SEM-based S_diff, default: reproduces its numbers,
        miscalibrated when many items sit at floor / ceiling) or "binomial" (per-item
        ``S_diff,i`` from the items' own binomial SEs; calibrated, SPEC 2.1).
    reliability_basis : items whose split halves give r_xx: "all" (the paper) or "analysed".
    n_splits, n_permutations : random split-halves and direction-asymmetry permutations.
    n_null, null_splits : replicates of the sample-level null and split halves per replicate;
        ``n_null=0`` skips both no-change checks, the null and :func:`pair_no_change_test`
        (cross-checks and simulation loops that read only the classes).
    seed : seeds every random step (reproducible).

    Returns
    -------
    PairResult
        The pair as ``rci.json`` holds it: ``payload`` (its ``pairs.NAME`` block, strict JSON with
        NaN as None) and ``items`` (the item table). It is the object ``bayesrc.load(DIR)[name]``
        gives back after :meth:`RCIRun.save`, and equals it.

    Examples
    --------
    >>> from bayesrc.data import simulate_pair, item_counts
    >>> s = simulate_pair(500, 10, seed=1)
    >>> res = reliable_change(item_counts(s.trials_v1, s.trials_v2), s_diff="binomial", n_null=20)
    >>> res.versions, res.s_diff_method
    (('model-v1', 'model-v2'), 'binomial')
    >>> sorted(res.null_samples)[:3]
    ['by_z', 'deteriorated_mean', 'flagged_mean']
    >>> res.summary().head(3)  # doctest: +SKIP
    >>> res.to_frame()[["item_id", "rci", "class"]].head()  # doctest: +SKIP
    """
    settings = RCISettings(
        z=z, min_valid=min_valid, sd_basis=sd_basis, s_diff=s_diff, reliability_basis=reliability_basis
    )
    versions = list(map(str, counts["version"].values))
    v1 = versions[0] if v1 is None else v1
    v2 = versions[1] if v2 is None else v2
    s_rel1, s_rel2, s_null, s_k1, s_k2 = np.random.SeedSequence(seed).spawn(5)

    a, b = counts.sel(version=v1), counts.sel(version=v2)
    items = _pair_items(counts, a, b)
    rule, reason, analysable, scored = _exclusions(items, min_valid, valid_share)

    correct = (a["correct"].values, b["correct"].values)
    rel = _reliability_and_icc(
        correct, analysable if reliability_basis == "analysed" else None, n_splits=n_splits, seeds=(s_rel1, s_rel2)
    )
    r1, r2 = rel["reliability"]["v1"].r_xx, rel["reliability"]["v2"].r_xx
    basis = analysable if sd_basis == "analysable" else scored
    s_item = binomial_s_diff(a["n_correct"].values, items["n_v1"], b["n_correct"].values, items["n_v2"])
    scale = _classify_items(
        items, settings, z_conservative, r1, r2, analysable=analysable, scored=scored, basis=basis, s_item=s_item
    )
    items["excluded"] = ~analysable
    items["reason"] = reason
    counts_out = _class_counts(items, analysable, scored)

    # Direction-asymmetry test on the items of the observed counts (analysable).
    null = empirical_null(
        items["p_v1"],
        items["p_v2"],
        r1,
        r2,
        z=z,
        n_permutations=n_permutations,
        seed=s_null,
        count=analysable,
        basis=basis,
        s_item=s_item if s_diff == "binomial" else None,
    )
    checks = _no_change_checks(
        counts,
        (v1, v2),
        correct,
        _null_settings(settings, items, valid_share),
        n_null=n_null,
        null_splits=null_splits,
        seed=seed,
    )
    flagged = counts_out["analysable"]["improved"] + counts_out["analysable"]["deteriorated"]
    warnings = _pair_warnings(
        checks["null_samples"],
        checks["no_change_test"],
        flagged,
        int(analysable.sum()),
        reliable=bool(np.isfinite(r1) and np.isfinite(r2)),
        s_diff=s_diff,
        seeds=counts.attrs.get("shared_seeds") or {},
    )
    k_design = modal_k(counts)
    params = {
        "z": z,
        "z_conservative": z_conservative,
        "min_valid": min_valid,
        "valid_share": valid_share,
        "min_valid_rule": rule,
        "sd_basis": sd_basis,
        "s_diff": s_diff,
        "reliability_basis": reliability_basis,
        "n_splits": n_splits,
        "n_permutations": n_permutations,
        "n_null": n_null,
        "null_splits": null_splits,
        "seed": seed,
        "k": k_design,
        "null_basis": "analysable",
    }
    payload = _pair_payload(
        versions=(v1, v2),
        params=params,
        **rel,
        exclusions=_exclusion_summary(items, analysable, reason, min_valid, rule),
        **_detection_limits(scale, z, k_design),
        counts=counts_out,
        null=null,
        **_secondary_tables(items[analysable], z),
        **_reliability_growth(correct, rel["reliability"], n_splits=n_splits_by_k, seeds=(s_k1, s_k2)),
        **checks,
        warnings=warnings,
        flips=flip_metrics(items["p_v1"], items["p_v2"]),
    )
    # Through RCIRun, as bayesrc.load reads rci.json: the payload normalised to strict JSON
    # (NaN -> None), so the pair equals its saved and reloaded copy.
    return RCIRun({"pairs": {name: payload}}, {name: items})[name]


def _pair_payload(
    *,
    versions: tuple[str, str],
    params: dict,
    reliability: dict[str, SplitHalfReliability],
    icc: dict[str, float],
    icc_k: dict[str, float],
    exclusions: dict,
    sem: dict[str, float],
    s_diff: float,
    s_diff_all: float,
    min_detectable: float,
    min_detectable_samples: int,
    counts: dict,
    null: dict,
    null_samples: dict | None,
    no_change_test: dict | None,
    domain: dict,
    difficulty: pd.DataFrame,
    effects: dict,
    stratified: pd.DataFrame,
    aggregate: dict,
    reliability_by_k: dict[str, dict[int, SplitHalfReliability]],
    k_for_r: dict[str, dict[str, int | None]],
    warnings: list[str],
    flips: dict,
) -> dict:
    """The ``pairs.NAME`` block of ``rci.json`` from the analysis's parts."""
    analysable = counts["analysable"]
    dom = {k: v for k, v in domain.items() if k != "table"}
    dom["table"] = {str(d): {str(c): int(n) for c, n in row.items()} for d, row in domain["table"].iterrows()}
    flagged = analysable["improved"] + analysable["deteriorated"]
    samples = (
        None
        if null_samples is None
        else {**_without_draws(null_samples), "observed_flagged": flagged, "observed_rate": analysable["churn"]}
    )
    return {
        "versions": list(versions),
        "sd_basis": params["sd_basis"],
        "s_diff_method": params.get("s_diff", "reference"),
        "reliability_basis": params.get("reliability_basis", "all"),
        "params": params,
        "warnings": list(warnings),
        "reliability": {v: {**reliability[v].to_dict(), "icc": icc[v], "icc_1_k": icc_k[v]} for v in ("v1", "v2")},
        "exclusions": exclusions,
        "sem": sem,
        "s_diff": s_diff,
        "s_diff_all_items": s_diff_all,
        "min_detectable": min_detectable,
        "min_detectable_samples": min_detectable_samples,
        "counts": counts,
        "null_samples": samples,
        "no_change_test": no_change_test,
        "direction_asymmetry": {
            **_without_draws(null),
            "observed_improved": analysable["improved"],
            "observed_deteriorated": analysable["deteriorated"],
            "improved_exceeds_null": analysable["improved"] > null["improved_p95"],
            "deteriorated_exceeds_null": analysable["deteriorated"] > null["deteriorated_p95"],
        },
        "flips": flips,
        "domain": dom,
        "difficulty_bins": difficulty.to_dict(orient="records"),
        "effect_sizes": effects,
        "stratified": stratified.to_dict(orient="records"),
        "reliability_vs_k": {
            v: {str(k): {"r_xx": r.r_xx, "ci": list(r.ci)} for k, r in by_k.items()}
            for v, by_k in reliability_by_k.items()
        },
        "k_for_r80": {v: d["0.8"] for v, d in k_for_r.items()},
        "k_for_r90": {v: d["0.9"] for v, d in k_for_r.items()},
        "aggregate": aggregate,
    }


def _without_draws(record: dict) -> dict:
    """``record`` without its ``*_draws`` arrays: ``rci.json`` keeps the nulls' summaries, not every replicate."""
    return {k: v for k, v in record.items() if not k.endswith("_draws")}


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
        "no_change_test": pair_no_change_test(counts, *versions),
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


def _secondary_tables(sub: pd.DataFrame, z: float) -> dict:
    """The secondary analyses of the analysable items ``sub``: by domain, by difficulty, effect sizes, stratified
    S_diff, aggregate change."""
    return {
        "domain": domain_contingency(sub["domain"].to_numpy(), sub["class"].to_numpy()),
        "difficulty": difficulty_bins(sub["p_v1"].to_numpy(), sub["class"].to_numpy()),
        "effects": effect_sizes(sub["delta"].to_numpy(), sub["class"].to_numpy()),
        "stratified": stratified_s_diff(
            sub["p_v1"].to_numpy(), sub["p_v2"].to_numpy(), sub["n_v1"].to_numpy(), sub["n_v2"].to_numpy(), z=z
        ),
        "aggregate": _aggregate_change(sub["delta"].to_numpy()),
    }


def _mcnemar_record(b: int, c: int) -> dict:
    """rci.json's McNemar record: ``b``, ``c``, ``chi2`` (NaN without discordant items) and ``p_exact``."""
    res = mcnemar(b, c)
    return {"b": b, "c": c, "chi2": float(res.statistic) if b + c else float("nan"), "p_exact": float(res.p_exact)}


def cross_pair(a: PairResult, b: PairResult) -> dict:
    """Compare two pairs (paper 001, section 3.8; SPEC 2.1).

    On shared items the comparison is paired: McNemar on flagged / not flagged over
    the items analysable in both pairs (``test = "mcnemar"``, ``p_test``). The paper's
    two-proportion z-test of the reliable-change rates (``z``, ``p``) is kept for
    reference; it is the primary test only when the item sets are disjoint. Pearson r
    of RCI over the items analysable in both pairs.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> a, b = (simulate_pair(200, 10, seed=s) for s in (1, 2))
    >>> ra, rb = (reliable_change(item_counts(s.trials_v1, s.trials_v2), n_splits=50, n_permutations=50, n_null=0)
    ...           for s in (a, b))
    >>> cross_pair(ra, rb)["z"]  # doctest: +SKIP
    """
    ca, cb = a.counts["analysable"], b.counts["analysable"]
    z, p = two_proportion_z(ca["improved"] + ca["deteriorated"], ca["n"], cb["improved"] + cb["deteriorated"], cb["n"])
    ia = a.items.loc[~a.items["excluded"], ["item_id", "rci", "class"]]
    ib = b.items.loc[~b.items["excluded"], ["item_id", "rci", "class"]]
    shared = ia.merge(ib, on="item_id", suffixes=("_a", "_b"))
    ok = shared[["rci_a", "rci_b"]].notna().all(axis=1)
    if ok.sum() >= 3 and shared.loc[ok, "rci_a"].std() > 0 and shared.loc[ok, "rci_b"].std() > 0:
        r, r_p = stats.pearsonr(shared.loc[ok, "rci_a"], shared.loc[ok, "rci_b"])
    else:
        r, r_p = float("nan"), float("nan")
    fa = shared["class_a"].isin([_rci.IMPROVED, _rci.DETERIORATED]).to_numpy()
    fb = shared["class_b"].isin([_rci.IMPROVED, _rci.DETERIORATED]).to_numpy()
    mc = _mcnemar_record(int(np.sum(fa & ~fb)), int(np.sum(~fa & fb)))
    paired = len(shared) > 0
    return {
        "pairs": [a.name, b.name],
        "rate_a": ca["churn"],
        "rate_b": cb["churn"],
        "test": "mcnemar" if paired else "two_proportion_z",
        "p_test": mc["p_exact"] if paired else p,
        "mcnemar": {
            **mc,
            "n_shared": int(len(shared)),
            "rate_a_shared": float(fa.mean()) if paired else float("nan"),
            "rate_b_shared": float(fb.mean()) if paired else float("nan"),
        },
        "z": z,
        "p": p,
        "z_test_note": "two-proportion z assumes independent item sets; with shared items use the McNemar test",
        "pearson_r": float(r),
        "pearson_p": float(r_p),
        "n_shared": int(len(shared)),
    }


def greedy_flips(greedy_counts: xr.Dataset, v1: str | None = None, v2: str | None = None) -> pd.DataFrame:
    """Per-item single-shot result of two versions: items scored in both, with their change.

    Examples
    --------
    >>> from bayesrc.data import load_counts
    >>> g = load_counts(["v1_greedy.jsonl", "v2_greedy.jsonl"], greedy=True)  # doctest: +SKIP
    >>> greedy_flips(g)["change"].value_counts()  # doctest: +SKIP
    """
    versions = list(map(str, greedy_counts["version"].values))
    v1 = versions[0] if v1 is None else v1
    v2 = versions[1] if v2 is None else v2
    a, b = greedy_counts.sel(version=v1), greedy_counts.sel(version=v2)
    ok = (a["n_valid"].values > 0) & (b["n_valid"].values > 0)
    g1 = a["p"].values[ok] >= 0.5
    g2 = b["p"].values[ok] >= 0.5
    return pd.DataFrame(
        {"item_id": greedy_counts["item"].values[ok], "g_v1": g1, "g_v2": g2, "change": greedy_change(g1, g2)}
    )


def greedy_comparison(greedy_counts: xr.Dataset, pair: PairResult) -> dict:
    """Greedy flips against RCI classes of the full-set analysis, as in paper 001 (3.9).

    Examples
    --------
    >>> greedy_comparison(greedy_counts, pair)["rci_changed_missed_by_greedy"]  # doctest: +SKIP
    """
    flips = greedy_flips(greedy_counts)
    joined = flips.merge(pair.items[["item_id", "class_all_items"]], on="item_id")
    joined = joined[joined["class_all_items"] != _rci.EXCLUDED]
    out = greedy_agreement(joined["change"].to_numpy(), joined["class_all_items"].to_numpy())
    out["greedy_items_scored_both"] = int(len(flips))
    out["classes_from"] = "all_items"
    return out


def analyse_pairs(
    pairs: dict[str, xr.Dataset],
    *,
    greedy: dict[str, xr.Dataset] | None = None,
    **kwargs,
) -> RCIRun:
    """Run :func:`reliable_change` on every pair; cross-pair tests for every two pairs;
    greedy comparisons for the pairs with greedy data (keyed by pair name).

    Returns the :class:`~bayesrc.classical.RCIRun` that ``bayesrc rci`` saves (``rci.json`` +
    ``items_NAME.parquet``) and ``bayesrc.load`` gives back: ``run[NAME]`` is the pair's
    :class:`~bayesrc.classical.PairResult`.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(200, 10, seed=1)
    >>> counts = item_counts(sim.trials_v1, sim.trials_v2)
    >>> run = analyse_pairs({"demo": counts}, n_splits=50, n_permutations=50, n_null=0)
    >>> run["demo"].n_flagged >= 0, run.names
    (True, ['demo'])
    >>> run.save("out/rci")  # doctest: +SKIP
    """
    results = {name: reliable_change(ds, name=name, **kwargs) for name, ds in pairs.items()}
    crosses = [cross_pair(results[x], results[y]) for x, y in combinations(results, 2)]
    greedy_out = {}
    for name, gds in (greedy or {}).items():
        if name not in results:
            raise ValueError(f"greedy data for unknown pair {name!r}; pairs are {sorted(results)}")
        greedy_out[name] = greedy_comparison(gds, results[name])
    return RCIRun.from_pairs(results, crosses, greedy_out)
