"""The complete classical analysis of a version pair (SPEC section 2).

``reliable_change(counts)`` runs everything for one pair of versions and returns a
:class:`bayesrc.classical.PairResult`, the object ``bayesrc.load("rci.json")[NAME]`` gives back;
``analyse_pairs({...}, greedy={...})`` (:mod:`bayesrc.classical.across_pairs`) runs several pairs, the
cross-pair tests and greedy comparisons and returns an :class:`~bayesrc.classical.RCIRun`.

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

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from bayesrc.classical import rci as _rci
from bayesrc.classical.calibration import (
    binomial_s_diff,
)
from bayesrc.classical.graded import add_scale_units, is_graded_scores, paired_tests, unit_scores
from bayesrc.classical.no_change_checks import _no_change_checks, _null_settings, _pair_warnings
from bayesrc.classical.pair_statistics import (
    _class_counts,
    _classify_items,
    _detection_limits,
    _exclusion_summary,
    _exclusions,
    _pair_items,
    _reliability_and_icc,
    _reliability_growth,
    flip_metrics,
)
from bayesrc.classical.rci import RCISettings
from bayesrc.classical.reliability import (
    SplitHalfReliability,
)
from bayesrc.classical.result import PairResult, RCIRun
from bayesrc.classical.secondary import (
    difficulty_bins,
    domain_contingency,
    effect_sizes,
    empirical_null,
    stratified_s_diff,
)
from bayesrc.data.counts import modal_k


def _aggregate_change(delta: np.ndarray) -> dict:
    """Mean item-level change with a t interval (the paper's aggregate Δ)."""
    d = np.asarray(delta, float)
    d = d[~np.isnan(d)]
    n = d.size
    if n < 2:
        return {"n": int(n), "mean_delta": float(d.mean()) if n else float("nan"), "ci95": [float("nan"), float("nan")]}
    half = stats.t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n)
    return {"n": int(n), "mean_delta": float(d.mean()), "ci95": [float(d.mean() - half), float(d.mean() + half)]}


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
    counts : item counts (:func:`bayesrc.data.item_counts`) holding both versions, or graded item scores
        (:func:`bayesrc.data.item_scores`): RCI on the items' mean scores (:mod:`bayesrc.classical.graded`).
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
    if is_graded_scores(counts):  # mean scores on the unit scale (bayesrc.classical.graded)
        counts = unit_scores(counts)
    graded = counts.attrs.get("graded")
    versions = list(map(str, counts["version"].values))
    v1 = versions[0] if v1 is None else v1
    v2 = versions[1] if v2 is None else v2
    s_rel1, s_rel2, s_null, s_k1, s_k2 = np.random.SeedSequence(seed).spawn(5)

    a, b = counts.sel(version=v1), counts.sel(version=v2)
    items = _pair_items(counts, a, b)
    if graded:
        add_scale_units(items, graded)
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
    if graded:
        payload["graded"] = {**graded, "paired_tests": paired_tests(items["delta"][analysable].to_numpy())}
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
