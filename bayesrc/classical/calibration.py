"""Calibration of the reliable-change classification (SPEC section 2.1).

The reference recipe (paper 001) takes r_xx over every item but the SD over the
analysed items; with many floor / ceiling items r_xx is close to 1, S_diff is too
small and on data with no change at all it flags far more than the nominal 5 % of
analysable items. This module measures how far off a recipe is and offers the
calibrated variant:

* :func:`classify_counts` — the classification of one pair under any method, from
  the ``item x k`` correctness matrices (what the sample-level null recomputes);
* :func:`binomial_s_diff` — per-item ``S_diff,i = sqrt(p̃1 q̃1 / n1 + p̃2 q̃2 / n2)``
  with ``p̃ = (y + 0.5) / (n + 1)`` (``s_diff = "binomial"``);
* :func:`sample_level_null` — R replicates in which every item's valid outcomes of
  both versions are pooled and dealt at random into groups of the original sizes
  (a permutation within item: the exact null of "no change" for that item), with
  exclusions, reliability, SD and S_diff recomputed and the same rule applied.
  Vectorised over replicates (batches) and split halves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from bayesrc.classical.rci import RCISettings, min_valid_for
from bayesrc.classical.reliability import _split_masks, spearman_brown

#: classify_counts' and sample_level_null's default rule: the paper's (rule (a) at 6 of K = 10)
PAPER_SETTINGS = RCISettings(min_valid=6)
# no_change_test's level for "the data do not reject that nothing changed" (one minus 90% intervals' level)
NO_CHANGE_ALPHA = 0.10


def nominal_rate(z: float) -> float:
    """Two-sided rate of ``|N(0, 1)| > z`` (0.05 at z = 1.96).

    Examples
    --------
    >>> round(nominal_rate(1.96), 3)
    0.05
    """
    return float(2 * stats.norm.sf(z))


def binomial_s_diff(y1: np.ndarray, n1: np.ndarray, y2: np.ndarray, n2: np.ndarray) -> np.ndarray:
    """Per-item binomial SE of ``p_v2 - p_v1`` with ``p̃ = (y + 0.5) / (n + 1)`` (SPEC 2.1).

    The +0.5 / +1 smoothing keeps items at 0 or 1 from getting SE = 0. NaN where a
    version has no valid response.

    Examples
    --------
    >>> float(binomial_s_diff(5, 10, 5, 10).round(4))
    0.2236
    """
    y1, n1, y2, n2 = (np.asarray(a, float) for a in (y1, n1, y2, n2))
    with np.errstate(invalid="ignore", divide="ignore"):
        a = (y1 + 0.5) / (n1 + 1)
        b = (y2 + 0.5) / (n2 + 1)
        out = np.sqrt(a * (1 - a) / n1 + b * (1 - b) / n2)
    return np.where((n1 > 0) & (n2 > 0), out, np.nan)


def rci_detection_probability(
    p_v1: np.ndarray, p_v2: np.ndarray, k: int, s_diff: float | None, z: float = 1.96
) -> np.ndarray:
    """Exact probability that the RCI flags an item as improved: ``P((Y2 - Y1) / K > z S_diff)``.

    ``Y_v ~ Binomial(K, p_v)`` independently. ``s_diff`` a number: the reference S_diff,
    held fixed (a property of the whole benchmark); ``None``: the per-item binomial
    S_diff,i(Y1, Y2) of SPEC 2.1. Vectorised over items: an (items, K + 1, K + 1) pmf grid.

    Examples
    --------
    >>> import numpy as np
    >>> rci_detection_probability(np.array([0.5, 0.2]), np.array([0.5, 0.8]), 10, 0.2).round(3).tolist()
    [0.058, 0.913]
    """
    p1 = np.asarray(p_v1, dtype=float)[:, None, None]
    p2 = np.asarray(p_v2, dtype=float)[:, None, None]
    y = np.arange(k + 1)
    y1, y2 = y[None, :, None], y[None, None, :]
    joint = stats.binom.pmf(y1, k, p1) * stats.binom.pmf(y2, k, p2)
    s = binomial_s_diff(y1, k, y2, k) if s_diff is None else s_diff
    flag = (y2 - y1) / k > z * s + 1e-12
    return (joint * flag).sum(axis=(1, 2))


def rci_detectable_change(k: int, s_diff: float | None, z: float = 1.96, power: float = 0.8) -> float | None:
    """The smallest true change in one item's accuracy that the RCI flags with probability ``power``, at K samples.

    For an item centred on 50% accuracy (``p_v1 = 0.5 - d / 2``, ``p_v2 = 0.5 + d / 2``: the largest
    sampling variance, so the hardest to flag), by bisection on :func:`rci_detection_probability`
    (which grows with ``d``); deteriorations are the mirror image. None when even ``d`` near 1 is
    flagged less often than ``power`` (the threshold ``z S_diff`` is beyond reach at this K).

    Examples
    --------
    >>> round(rci_detectable_change(10, 0.2), 2), rci_detectable_change(10, 0.6) is None
    (0.51, True)
    """

    def flagged(d: float) -> float:
        return float(rci_detection_probability(np.array([0.5 - d / 2]), np.array([0.5 + d / 2]), k, s_diff, z)[0])

    lo, hi = 0.0, 1.0 - 1e-9
    if flagged(hi) < power:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if flagged(mid) >= power else (mid, hi)
    return hi


def _masked_sd(p: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Sample SD (ddof = 1) along the last axis over ``mask``; NaN with fewer than 2 items."""
    m = mask & np.isfinite(p)
    n = m.sum(-1)
    x = np.where(m, p, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = x.sum(-1) / n
        ss = np.where(m, (x - mean[..., None]) ** 2, 0.0).sum(-1)
        return np.where(n >= 2, np.sqrt(ss / (n - 1)), np.nan)


def batched_split_half(x: np.ndarray, include: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Median Spearman-Brown split-half reliability per replicate.

    ``x`` (R, items, K) with NaN for missing samples, ``include`` (R, items) the items
    whose half-accuracies are correlated, ``masks`` (K, S) 1.0 where a sample is in half 1.
    The same splits serve every replicate. Returns (R,) medians over finite splits.

    When every included item has all K samples the half sums are linear in the
    samples, so every split's Pearson r follows from the K x K moment matrix
    ``G = Xᵀ X`` of the included items (O(R·I·K² + R·S·K²)); otherwise the half
    accuracies are formed explicitly (pairwise complete).
    """
    valid = ~np.isnan(x)
    m1, m2 = masks, 1.0 - masks
    if np.all(valid | ~include[..., None]):
        w = include.astype(float)
        X = np.where(valid, x, 0.0)
        Xw = X * w[..., None]
        n = w.sum(1)[:, None]  # (R, 1)
        G = np.matmul(Xw.transpose(0, 2, 1), X)  # (R, K, K), batched BLAS
        s = Xw.sum(1)  # (R, K)
        c1, c2 = m1.sum(0), m2.sum(0)  # (S,)
        s1, s2 = (s @ m1) / c1, (s @ m2) / c2
        g1, g2 = G @ m1, G @ m2  # (R, K, S)
        q11 = (m1 * g1).sum(1) / c1**2
        q22 = (m2 * g2).sum(1) / c2**2
        q12 = (m1 * g2).sum(1) / (c1 * c2)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = (q12 - s1 * s2 / n) / np.sqrt((q11 - s1**2 / n) * (q22 - s2**2 / n))
    else:
        R, n_it, K = x.shape
        x0 = np.where(valid, x, 0.0).reshape(R * n_it, K)
        v = valid.reshape(R * n_it, K).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            h1 = ((x0 @ m1) / (v @ m1)).reshape(R, n_it, -1)  # (R, n_it, S)
            h2 = ((x0 @ m2) / (v @ m2)).reshape(R, n_it, -1)
            w = include[..., None] & np.isfinite(h1) & np.isfinite(h2)
            nw = w.sum(1)  # (R, S)
            a = np.where(w, h1, 0.0)
            b = np.where(w, h2, 0.0)
            ma, mb = a.sum(1) / nw, b.sum(1) / nw
            da = np.where(w, a - ma[:, None, :], 0.0)
            db = np.where(w, b - mb[:, None, :], 0.0)
            r = (da * db).sum(1) / np.sqrt((da * da).sum(1) * (db * db).sum(1))
    r = spearman_brown(r)
    r = np.where(np.isfinite(r), r, np.nan)
    out = np.full(r.shape[0], np.nan)
    ok = np.isfinite(r).any(1)
    with np.errstate(invalid="ignore"):
        out[ok] = np.nanmedian(r[ok], axis=1)
    return out


def classify_counts(
    x1: np.ndarray,
    x2: np.ndarray,
    settings: RCISettings = PAPER_SETTINGS,
    *,
    masks: np.ndarray | None = None,
    r_xx: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict:
    """Reliable-change classification of R replicates of one pair, vectorised.

    ``x1``, ``x2``: (R, items, K) correctness (1 / 0, NaN missing); ``settings``: the
    rule (default: the paper's, rule (a) at 6 valid responses). ``masks`` (K, S):
    split halves for the reliability (method "reference"); ``r_xx``: reliabilities
    to use instead of estimating them (shape (R,) each). Returns arrays per replicate:
    ``improved``, ``deteriorated``, ``flagged``, ``n_analysable`` (R,), ``analysable``
    and ``rci`` (R, items), ``s_diff`` (R,) (NaN for "binomial").

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x1 = (rng.random((2, 50, 10)) < 0.6).astype(float)  # 2 replicates x 50 items x K = 10
    >>> x2 = (rng.random((2, 50, 10)) < 0.6).astype(float)
    >>> out = classify_counts(x1, x2, RCISettings(min_valid=6, s_diff="binomial"))
    >>> out["flagged"].shape
    (2,)
    """
    n1, n2 = (~np.isnan(x1)).sum(-1), (~np.isnan(x2)).sum(-1)
    y1, y2 = np.nansum(x1, -1), np.nansum(x2, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p1 = np.where(n1 > 0, y1 / np.maximum(n1, 1), np.nan)
        p2 = np.where(n2 > 0, y2 / np.maximum(n2, 1), np.nan)
    scored = (n1 > 0) & (n2 > 0)
    z, min_valid, sd_basis = settings.z, settings.min_valid, settings.sd_basis
    if min_valid is None:  # SPEC 2: ceil(0.6 K) of the K each version's matrix holds
        m1, m2 = min_valid_for(x1.shape[-1]), min_valid_for(x2.shape[-1])
    elif isinstance(min_valid, tuple):  # per-item thresholds of each version
        m1, m2 = min_valid
    else:
        m1 = m2 = min_valid
    low = (n1 < m1) | (n2 < m2)
    fc = ((p1 == 0) & (p2 == 0)) | ((p1 == 1) & (p2 == 1))
    analysable = ~low & ~fc & scored
    delta = p2 - p1
    if settings.s_diff == "binomial":
        sd_i = binomial_s_diff(y1, n1, y2, n2)
        with np.errstate(invalid="ignore", divide="ignore"):
            rci = np.where(sd_i > 0, delta / sd_i, np.nan)
        s = np.full(x1.shape[0], np.nan)
    else:  # "reference"
        if r_xx is None:
            if masks is None:
                raise ValueError("method 'reference' needs split masks or r_xx")
            rel_in = analysable if settings.reliability_basis == "analysed" else None
            r1 = batched_split_half(x1, rel_in if rel_in is not None else n1 > 0, masks)
            r2 = batched_split_half(x2, rel_in if rel_in is not None else n2 > 0, masks)
        else:
            r1, r2 = (np.broadcast_to(np.asarray(r, float), (x1.shape[0],)) for r in r_xx)
        basis = analysable if sd_basis == "analysable" else scored
        # NaN reliability -> NaN SEM (never SEM = 0: that would shrink S_diff).
        f1 = np.sqrt(np.clip(1 - r1, 0, None))
        f2 = np.sqrt(np.clip(1 - r2, 0, None))
        s = np.hypot(_masked_sd(p1, basis) * f1, _masked_sd(p2, basis) * f2)
        with np.errstate(invalid="ignore", divide="ignore"):
            rci = np.where((s > 0)[:, None], delta / s[:, None], np.nan)
    imp = (rci > z) & analysable
    det = (rci < -z) & analysable
    return {
        "improved": imp.sum(-1),
        "deteriorated": det.sum(-1),
        "flagged": imp.sum(-1) + det.sum(-1),
        "n_analysable": analysable.sum(-1),
        "analysable": analysable,
        "rci": rci,
        "s_diff": s,
    }


def _deal(valid: np.ndarray, ones: np.ndarray, n_rep: int, rng: np.random.Generator) -> np.ndarray:
    """``n_rep`` uniformly random arrangements of each row's ``ones`` correct outcomes over its valid slots.

    A random permutation of a 0/1 multiset drawn slot by slot without replacement:
    slot j is 1 with probability (ones left) / (valid slots left). Vectorised over
    replicates and items; one pass over the (2K) slots.
    """
    n_items, n_slots = valid.shape
    out = np.full((n_rep, n_items, n_slots), np.nan)
    left = np.broadcast_to(ones.astype(float), (n_rep, n_items)).copy()
    slots = valid.sum(1).astype(float)
    for j in range(n_slots):
        v = valid[:, j]
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(slots > 0, left / np.maximum(slots, 1.0), 0.0)
        draw = (rng.random((n_rep, n_items)) < p) & v
        out[:, :, j] = np.where(v, draw, np.nan)
        left -= draw
        slots -= v
    return out


def permute_within_items(values: np.ndarray, valid: np.ndarray, n_rep: int, rng: np.random.Generator) -> np.ndarray:
    """``n_rep`` random permutations of each row's valid ``values`` over its valid slots, (n_rep, row, slot), NaN
    where a slot is not valid: the pooled samples of an item re-dealt, whatever their values.

    Examples
    --------
    >>> v = np.array([[1.0, 2.0, np.nan, 3.0]])
    >>> out = permute_within_items(v, ~np.isnan(v), 2, np.random.default_rng(0))
    >>> np.sort(out[:, 0, [0, 1, 3]], axis=1).tolist(), bool(np.isnan(out[:, 0, 2]).all())
    ([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], True)
    """
    keys = np.where(valid, rng.random((n_rep, *values.shape)), np.inf)  # valid slots first, in random order
    shuffled = np.take_along_axis(np.broadcast_to(values, keys.shape), np.argsort(keys, -1), -1)
    rank = np.cumsum(valid, -1) - 1  # each valid slot takes the next of the shuffled valid values
    dealt = np.take_along_axis(shuffled, np.broadcast_to(np.maximum(rank, 0), keys.shape), -1)
    return np.where(valid, dealt, np.nan)


def sample_level_null(
    correct_v1: np.ndarray,
    correct_v2: np.ndarray,
    settings: RCISettings = PAPER_SETTINGS,
    *,
    n_replicates: int = 200,
    n_splits: int = 50,
    batch: int = 20,
    seed: int | np.random.Generator | np.random.SeedSequence = 0,
    zs: tuple[float, ...] | None = None,
) -> dict:
    """Flagged counts on data with no change, built from the pair's own samples (SPEC 2.1).

    In each of ``n_replicates`` replicates every item's valid outcomes of both versions
    are pooled and dealt at random into groups of the original sizes ``n_v1`` and
    ``n_v2`` (a within-item permutation, so each item keeps its pooled accuracy and
    loses any change; graded scores are re-dealt by :func:`permute_within_items`);
    exclusions, reliability (``n_splits`` random split halves, the
    same for every replicate), SD and S_diff are recomputed and the same rule is
    applied (``settings``; default: the paper's, rule (a) at 6 valid responses). Returns the mean and
    2.5 / 50 / 97.5 percentiles of the flagged counts
    (improved + deteriorated), the implied false-positive rate per analysable item
    (``rate``) and the nominal two-sided rate of ``z``. ``zs``: further thresholds
    evaluated on the same replicates (``by_z``: flagged mean, 97.5 % and rate per z).

    Examples
    --------
    >>> from bayesrc.data import simulate_pair, item_counts
    >>> s = simulate_pair(300, 10, pi_change=0.0, seed=1)
    >>> c = item_counts(s.trials_v1, s.trials_v2)
    >>> out = sample_level_null(c["correct"][:, 0].values, c["correct"][:, 1].values, n_replicates=20)
    >>> out["replicates"]
    20
    """
    x1, x2 = np.asarray(correct_v1, float), np.asarray(correct_v2, float)
    k1, k2 = x1.shape[1], x2.shape[1]
    pooled = np.concatenate([x1, x2], axis=1)
    valid = ~np.isnan(pooled)
    ones = np.where(valid, pooled, 0.0).sum(1)  # correct outcomes of the item, both versions pooled
    # 0 / 1 outcomes are re-dealt by their counts (:func:`_deal`); graded scores by a permutation of the values
    binary = bool(np.isin(pooled[valid], (0.0, 1.0)).all())
    rng = np.random.default_rng(seed)
    k_all = max(k1, k2)
    masks = _split_masks(k_all, n_splits, rng).T.astype(float) if settings.s_diff == "reference" else None
    flagged, improved, deteriorated, n_an = [], [], [], []
    extra = {float(t): [] for t in (zs or ())}
    done = 0
    while done < n_replicates:
        b = min(batch, n_replicates - done)
        dealt = _deal(valid, ones, b, rng) if binary else permute_within_items(pooled, valid, b, rng)
        a, c = dealt[..., :k1], dealt[..., k1:]
        out = classify_counts(_pad(a, k_all), _pad(c, k_all), settings, masks=masks)
        for t in extra:
            extra[t].append(((np.abs(out["rci"]) > t) & out["analysable"]).sum(-1))
        flagged.append(out["flagged"])
        improved.append(out["improved"])
        deteriorated.append(out["deteriorated"])
        n_an.append(out["n_analysable"])
        done += b
    flagged, n_an = np.concatenate(flagged), np.concatenate(n_an)
    improved, deteriorated = np.concatenate(improved), np.concatenate(deteriorated)
    lo, mid, hi = np.percentile(flagged, [2.5, 50, 97.5])
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = float(flagged.sum() / n_an.sum()) if n_an.sum() else float("nan")
    return {
        "replicates": int(n_replicates),
        "flagged_mean": float(flagged.mean()),
        "flagged_p025": float(lo),
        "flagged_p50": float(mid),
        "flagged_p975": float(hi),
        "improved_mean": float(improved.mean()),
        "deteriorated_mean": float(deteriorated.mean()),
        "n_analysable_mean": float(n_an.mean()),
        "rate": rate,
        "nominal_rate": nominal_rate(settings.z),
        "s_diff_method": settings.s_diff,
        "reliability_basis": settings.reliability_basis,
        "sd_basis": settings.sd_basis,
        "n_splits": int(n_splits) if settings.s_diff == "reference" else 0,
        "flagged_draws": flagged,
        "by_z": {
            t: {
                "flagged_mean": float(np.mean(np.concatenate(v))),
                "flagged_p975": float(np.percentile(np.concatenate(v), 97.5)),
                "rate": float(np.concatenate(v).sum() / n_an.sum()) if n_an.sum() else float("nan"),
                "nominal_rate": nominal_rate(t),
            }
            for t, v in extra.items()
        },
    }


def _pad(x: np.ndarray, k: int) -> np.ndarray:
    """Pad the sample axis with NaN (not administered) up to ``k``."""
    if x.shape[-1] == k:
        return x
    pad = np.full((*x.shape[:-1], k - x.shape[-1]), np.nan)
    return np.concatenate([x, pad], axis=-1)


def null_warnings(null: dict, observed_flagged: int, n_analysable: int) -> list[str]:
    """Plain sentences about the calibration of the rule, from a :func:`sample_level_null` result."""
    out = []
    rate, nominal = null["rate"], null["nominal_rate"]
    if np.isfinite(rate) and rate > 2 * nominal:
        out.append(
            f"On data with no change built from these samples, method '{null['s_diff_method']}' flags "
            f"{rate:.1%} of analysable items (nominal {nominal:.1%}): about {null['flagged_mean']:.0f} of the "
            f"{observed_flagged} observed reliable changes are expected by chance alone; "
            "use --s-diff binomial for a calibrated classification."
        )
    if observed_flagged <= null["flagged_p975"]:
        out.append(
            f"The observed {observed_flagged} reliable changes of {n_analysable} analysable items lie within the "
            f"95% range of the no-change null ({null['flagged_p025']:.0f}-{null['flagged_p975']:.0f}): "
            "they are no evidence of item-level change."
        )
    return out


def not_rejected_phrase(no_change: dict) -> str:
    """The start of a warning where :func:`no_change_test` does not reject (RCI runs and fits say it alike)."""
    return (
        "the data do not reject that nothing changed between the versions "
        f"(within-item permutation test, p = {no_change['p_value']:.2f})"
    )


def _upper_p(draws: np.ndarray) -> np.ndarray:
    """Share of ``draws`` at or above each draw (its Monte Carlo permutation p-value, itself counted).

    Equal statistics can differ in their last bits (summed in another order), so draws within
    1e-9 (relative) count as ties: the conservative side."""
    ordered = np.sort(draws)
    return 1.0 - np.searchsorted(ordered, draws - 1e-9 * np.abs(draws), side="left") / len(draws)


def no_change_test(
    y: np.ndarray,
    n: np.ndarray,
    strata: np.ndarray | None = None,
    *,
    n_permutations: int = 999,
    seed: int | np.random.Generator | np.random.SeedSequence = 0,
    batch: int = 100,
) -> dict:
    """Did anything change between two versions? A within-item permutation test of "identical".

    Null hypothesis: every item's valid outcomes in the two versions are exchangeable (the
    versions are the same model: same per-item accuracy). Conditional on each item's total
    ``t_i = y_i1 + y_i2`` of ``N_i = n_i1 + n_i2`` outcomes, ``y_i1`` is then hypergeometric,
    independently over items, with

    ``E_i = n_i1 t_i / N_i``, ``V_i = n_i1 n_i2 t_i (N_i - t_i) / (N_i^2 (N_i - 1))``.

    Two statistics, one for each way versions differ:

    * items: ``T_I = sum_i (y_i1 - E_i)^2 / V_i`` (each item's conditional chi-square: large
      changes of single items, any direction);
    * strata: ``T_S = sum_s (sum_{i in s} (y_i1 - E_i))^2 / sum_{i in s} V_i`` (the
      Cochran-Mantel-Haenszel statistic of each stratum, e.g. (domain, correct letter), summed:
      small common moves of many items, as after a prompt or quantisation change).

    Each is referred to ``n_permutations`` draws from the null (every item's outcomes re-dealt
    between the versions), and the two are combined by their minimum p-value, referred to the
    same draws (Westfall and Young 1993), so ``p_value`` is exact up to Monte Carlo error: on
    identical versions ``P(p_value <= a) <= a`` for every ``a``. Items whose outcomes cannot move
    (all correct, all wrong, or no valid response in a version) add nothing.

    Why: on identical versions the change model's interval for RCI's false-discovery proportion
    cannot reach the realised 1.0 (issue 12: it held on 0 of 11 null replicates), because K = 10
    samples cannot tell "nothing moved" from "everything moved a little"; where this test does
    not reject, :func:`bayesrc.bayes.summaries.allow_no_change` widens that interval to 1.

    Parameters
    ----------
    y, n : (item, 2) correct and valid counts of the two versions.
    strata : stratum index per item (default: one stratum).
    n_permutations : draws from the null; ``seed`` seeds them (fixed: the p-value is then a function of the data).
    batch : draws at a time (memory: ``batch x items``).

    Returns
    -------
    dict with ``p_value`` (combined), ``p_items``, ``p_strata``, ``statistic_items``,
    ``statistic_strata``, ``n_permutations``, ``n_items`` (items that can move), ``n_strata``.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([[3, 3], [5, 6], [7, 7], [2, 1]]); n = np.full((4, 2), 10)
    >>> no_change_test(y, n, n_permutations=199)["p_value"] > 0.5
    True
    """
    y, n = np.asarray(y, float), np.asarray(n, float)
    t, total, n1 = y.sum(1), n.sum(1), n[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        var = n1 * (total - n1) * t * (total - t) / (total**2 * (total - 1.0))
        expected = n1 * t / total
    cols = np.flatnonzero(np.isfinite(var) & (var > 0))  # only the items that can move are re-dealt

    def draw(rng: np.random.Generator, size: int) -> np.ndarray:
        y1 = np.zeros((size, len(y)))
        y1[:, cols] = rng.hypergeometric(
            t[cols].astype(np.int64),
            (total - t)[cols].astype(np.int64),
            n1[cols].astype(np.int64),
            size=(size, len(cols)),
        )
        return y1

    return within_item_test(y[:, 0], expected, var, strata, draw, n_permutations=n_permutations, seed=seed, batch=batch)


def within_item_test(
    observed: np.ndarray,
    expected: np.ndarray,
    var: np.ndarray,
    strata: np.ndarray | None,
    draw: Callable[[np.random.Generator, int], np.ndarray],
    *,
    n_permutations: int = 999,
    seed: int | np.random.Generator | np.random.SeedSequence = 0,
    batch: int = 100,
) -> dict:
    """The permutation test of :func:`no_change_test` from each item's version-1 statistic ``observed``, its null
    mean ``expected`` and variance ``var`` (an item with no finite positive variance cannot move and adds nothing),
    and ``draw(rng, size)``: ``size`` draws of every item's statistic from the null, (size, item). Shared by the
    right/wrong test (hypergeometric draws) and the graded one
    (:func:`bayesrc.classical.graded.score_no_change_test`: permuted scores)."""
    n_items = len(observed)
    strata = np.zeros(n_items, np.int64) if strata is None else np.asarray(strata, np.int64)
    member = np.zeros((n_items, int(strata.max()) + 1))
    member[np.arange(n_items), strata] = 1.0
    movable = np.isfinite(var) & (var > 0)
    var = np.where(movable, var, 0.0)
    stratum_var = var @ member
    inv_var, inv_stratum_var = (
        1.0 / np.where(movable, var, np.inf),
        1.0 / np.where(stratum_var > 0, stratum_var, np.inf),
    )

    def statistics(y1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dev = np.where(movable, y1 - expected, 0.0)
        return np.atleast_1d(dev**2 @ inv_var), np.atleast_1d((dev @ member) ** 2 @ inv_stratum_var)

    rng = np.random.default_rng(seed)
    stats_all = [statistics(np.asarray(observed, float))]  # first: the observed data
    for start in range(0, n_permutations, batch):
        stats_all.append(statistics(draw(rng, min(batch, n_permutations - start))))
    items, strat = (np.concatenate(part) for part in zip(*stats_all))
    p_items, p_strata = _upper_p(items), _upper_p(strat)
    smallest = np.minimum(p_items, p_strata)
    return {
        "p_value": float(np.mean(smallest <= smallest[0])),
        "p_items": float(p_items[0]),
        "p_strata": float(p_strata[0]),
        "statistic_items": float(items[0]),
        "statistic_strata": float(strat[0]),
        "n_permutations": int(n_permutations),
        "n_items": int(movable.sum()),
        "n_strata": int((stratum_var > 0).sum()),
    }
