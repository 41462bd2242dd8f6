"""Secondary analyses of the reliable-change study (paper 001, sections 3.4-3.9).

Pure functions over per-item arrays; the pipeline in
:mod:`bayesrc.classical.pipeline` (one pair) and :mod:`bayesrc.classical.across_pairs` wire them together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats

from bayesrc.classical.calibration import binomial_s_diff
from bayesrc.classical.rci import CLASSES, DETERIORATED, IMPROVED, NO_CHANGE, classify_rci
from bayesrc.errors import ParameterError, float_parameter


def empirical_null(
    p_v1: np.ndarray,
    p_v2: np.ndarray,
    r_v1: float,
    r_v2: float,
    *,
    z: float = 1.96,
    n_permutations: int = 1000,
    seed: int | np.random.Generator | np.random.SeedSequence = 0,
    count: np.ndarray | None = None,
    basis: np.ndarray | None = None,
    s_item: np.ndarray | None = None,
) -> dict:
    """Direction-asymmetry test: the version-swap permutation null (paper 001, section 3.6).

    Each permutation swaps the two versions' accuracies of every item with
    probability 1/2, recomputes SEM and S_diff from the swapped accuracies of the
    ``basis`` items (the reliabilities stay fixed) and counts ``RCI > z`` and
    ``RCI < -z`` among the ``count`` items (default: every item with both accuracies;
    the pipeline passes the analysable items, the set of the observed counts).
    ``s_item``: per-item S_diff (method "binomial"; symmetric in the versions, so a
    swap only flips the sign). Swapping keeps every ``|Δp|``, so this tests only whether
    improvements outnumber deteriorations (or the reverse), not whether the rule is
    calibrated: see :func:`bayesrc.classical.calibration.sample_level_null`.
    Vectorised over permutations.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p1, p2 = rng.random(100), rng.random(100)
    >>> out = empirical_null(p1, p2, 0.8, 0.8, n_permutations=100, seed=0)
    >>> out["n_permutations"]
    100
    """
    p1, p2 = np.asarray(p_v1, float), np.asarray(p_v2, float)
    ok = ~(np.isnan(p1) | np.isnan(p2))
    count = ok if count is None else (np.asarray(count, bool) & ok)
    basis = ok if basis is None else (np.asarray(basis, bool) & ok)
    rng = np.random.default_rng(seed)
    swap = rng.random((n_permutations, p1.size)) < 0.5
    a = np.where(swap, p2, p1)
    b = np.where(swap, p1, p2)
    with np.errstate(invalid="ignore", divide="ignore"):
        if s_item is not None:
            rci = (b - a) / np.asarray(s_item, float)[None, :]
        else:
            f1 = np.sqrt(1 - r_v1) if np.isfinite(r_v1) else np.nan
            f2 = np.sqrt(1 - r_v2) if np.isfinite(r_v2) else np.nan
            sem_a = np.std(a[:, basis], axis=1, ddof=1) * f1
            sem_b = np.std(b[:, basis], axis=1, ddof=1) * f2
            s_diff = np.hypot(sem_a, sem_b)
            rci = (b - a) / s_diff[:, None]
    improved = np.sum((rci > z) & count, axis=1)
    deteriorated = np.sum((rci < -z) & count, axis=1)
    return {
        "test": "direction-asymmetry (version-swap permutations)",
        "n_permutations": n_permutations,
        "n_items": int(count.sum()),
        "improved_mean": float(improved.mean()),
        "improved_p95": float(np.percentile(improved, 95)),
        "deteriorated_mean": float(deteriorated.mean()),
        "deteriorated_p95": float(np.percentile(deteriorated, 95)),
        "improved_draws": improved,
        "deteriorated_draws": deteriorated,
    }


def cramers_v(chi2: float, n: int, shape: tuple[int, int]) -> float:
    """Cramér's V = sqrt(chi2 / (n * (min(rows, cols) - 1)))."""
    k = min(shape) - 1
    return float(np.sqrt(chi2 / (n * k))) if n > 0 and k > 0 else float("nan")


def domain_contingency(domain: np.ndarray, classes: np.ndarray) -> dict:
    """Domain x class table, chi-squared test of independence and Cramér's V.

    Rows or columns that are all zero carry no information and make the expected
    counts zero, so they are dropped before the test. Per domain: counts, the
    improvement / deterioration ratio (None when nothing deteriorated) and net change.

    Examples
    --------
    >>> import numpy as np
    >>> out = domain_contingency(np.array(["a", "a", "b", "b"]),
    ...                          np.array(["improved", "no_change", "no_change", "deteriorated"]))
    >>> out["dof"], round(out["cramers_v"], 3)
    (2, 0.707)
    """
    table = pd.crosstab(pd.Series(domain, name="domain"), pd.Series(classes, name="class")).reindex(
        columns=list(CLASSES), fill_value=0
    )
    informative = table.loc[table.sum(axis=1) > 0, table.sum(axis=0) > 0]
    if informative.shape[0] >= 2 and informative.shape[1] >= 2:
        chi2, p, dof, _ = stats.chi2_contingency(informative.to_numpy())
        v = cramers_v(chi2, int(informative.to_numpy().sum()), informative.shape)
    else:
        chi2, p, dof, v = float("nan"), float("nan"), 0, float("nan")
    per_domain = {}
    for d, row in table.iterrows():
        imp, det = int(row[IMPROVED]), int(row[DETERIORATED])
        per_domain[str(d)] = {
            "n": int(row.sum()),
            "improved": imp,
            "no_change": int(row[NO_CHANGE]),
            "deteriorated": det,
            "ratio": imp / det if det else None,
            "net": imp - det,
        }
    return {
        "chi2": float(chi2),
        "p": float(p),
        "dof": int(dof),
        "cramers_v": v,
        "table": table,
        "per_domain": per_domain,
    }


DIFFICULTY_EDGES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def difficulty_bins(p_v1: np.ndarray, classes: np.ndarray, edges: tuple[float, ...] = DIFFICULTY_EDGES) -> pd.DataFrame:
    """Churn and direction by baseline accuracy ``p_v1`` (paper 001, section 3.5).

    Bins are half-open ``[lo, hi)`` except the last, which includes 1.0; a tiny
    tolerance keeps ``p = 0.2`` (= 2/10) in ``[0.2, 0.4)`` despite rounding.

    Examples
    --------
    >>> import numpy as np
    >>> t = difficulty_bins(np.array([0.1, 0.5, 0.9]), np.array(["improved", "no_change", "deteriorated"]))
    >>> int(t["n"].sum())
    3
    """
    p = np.asarray(p_v1, float)
    cls = np.asarray(classes, dtype=object)
    idx = np.searchsorted(np.asarray(edges), p + 1e-9, side="right") - 1
    idx = np.clip(idx, 0, len(edges) - 2)
    rows = []
    for b in range(len(edges) - 1):
        sel = idx == b
        n = int(sel.sum())
        imp = int(np.sum(cls[sel] == IMPROVED))
        det = int(np.sum(cls[sel] == DETERIORATED))
        rows.append(
            {
                "bin": f"{edges[b]:.1f}-{edges[b + 1]:.1f}",
                "lo": edges[b],
                "hi": edges[b + 1],
                "n": n,
                "improved": imp,
                "no_change": n - imp - det,
                "deteriorated": det,
                "churn": (imp + det) / n if n else float("nan"),
                "net": imp - det,
            }
        )
    return pd.DataFrame(rows)


def effect_sizes(delta: np.ndarray, classes: np.ndarray) -> dict:
    """``|Δp|`` overall and among reliably changed items (paper 001, section 3.4).

    Examples
    --------
    >>> import numpy as np
    >>> e = effect_sizes(np.array([0.3, -0.1, 0.0]), np.array(["improved", "no_change", "no_change"]))
    >>> e["changed"]["mean_abs_delta"]
    0.3
    """
    d = np.abs(np.asarray(delta, float))
    changed = np.isin(np.asarray(classes, dtype=object), [IMPROVED, DETERIORATED])

    def describe(x: np.ndarray) -> dict:
        if x.size == 0:
            nan = float("nan")
            return {"n": 0, "mean_abs_delta": nan, "median_abs_delta": nan, "share_ge_0.2": nan, "share_ge_0.4": nan}
        # 1e-9: |Δp| = 0.2 computed as 0.3 - 0.1 must count as >= 0.2.
        return {
            "n": int(x.size),
            "mean_abs_delta": float(x.mean()),
            "median_abs_delta": float(np.median(x)),
            "share_ge_0.2": float(np.mean(x >= 0.2 - 1e-9)),
            "share_ge_0.4": float(np.mean(x >= 0.4 - 1e-9)),
        }

    return {"all": describe(d), "changed": describe(d[changed])}


def stratified_s_diff(
    p_v1: np.ndarray,
    p_v2: np.ndarray,
    n_v1: np.ndarray,
    n_v2: np.ndarray,
    *,
    z: float = 1.96,
    n_strata: int = 3,
) -> pd.DataFrame:
    """Difficulty-stratified S_diff from per-item binomial SEs (SPEC 2.1; paper 001, section 5).

    Items are cut into ``n_strata`` quantile groups of difficulty ``(p_v1 + p_v2) / 2``
    (ties may merge groups); within each, every item gets its binomial S_diff,i
    (:func:`~bayesrc.classical.calibration.binomial_s_diff`) and is reclassified with
    ``RCI_i = Δp_i / S_diff,i``. The table reports the mean S_diff,i per stratum: the
    heteroscedasticity check (the restricted-range SD times the global r_xx would
    only shrink S_diff).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p1 = rng.random(90); p2 = np.clip(p1 + rng.normal(0, 0.1, 90), 0, 1); n = np.full(90, 10)
    >>> len(stratified_s_diff(p1, p2, n, n))  # one row per difficulty tercile
    3
    """
    p1, p2 = np.asarray(p_v1, float), np.asarray(p_v2, float)
    n1, n2 = np.asarray(n_v1, float), np.asarray(n_v2, float)
    s_i = binomial_s_diff(np.round(p1 * n1), n1, np.round(p2 * n2), n2)
    difficulty = (p1 + p2) / 2
    labels = {3: ["hard", "medium", "easy"]}.get(n_strata, [f"q{i + 1}" for i in range(n_strata)])
    codes = pd.qcut(difficulty, n_strata, labels=False, duplicates="drop") if difficulty.size else np.array([])
    rows = []
    for code in sorted(pd.unique(codes[~np.isnan(codes)])):
        sel = codes == code
        with np.errstate(invalid="ignore", divide="ignore"):
            rci = (p2[sel] - p1[sel]) / s_i[sel]
        cls = classify_rci(rci, z)
        sd = float(np.nanmean(s_i[sel]))
        rows.append(
            {
                "stratum": labels[int(code)] if int(code) < len(labels) else f"q{int(code) + 1}",
                "n": int(sel.sum()),
                "mean_difficulty": float(difficulty[sel].mean()),
                "s_diff": sd,
                "s_diff_method": "binomial per item (mean)",
                "min_detectable": z * sd,
                "improved": int(np.sum(cls == IMPROVED)),
                "no_change": int(np.sum(cls == NO_CHANGE)),
                "deteriorated": int(np.sum(cls == DETERIORATED)),
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class McNemarResult:
    """McNemar test on discordant counts ``b`` (A right, B wrong) and ``c`` (A wrong, B right).

    Examples
    --------
    >>> r = mcnemar(296, 250)
    >>> round(float(r.p_exact), 3), round(float(r.p_asymptotic), 3)
    (0.054, 0.049)
    """

    b: np.ndarray
    c: np.ndarray
    statistic: np.ndarray  # chi-squared, 1 df
    p_exact: np.ndarray  # exact conditional binomial, two-sided
    p_asymptotic: np.ndarray  # chi-squared(1)
    exact: bool

    @property
    def p_value(self) -> np.ndarray:
        return self.p_exact if self.exact else self.p_asymptotic


def _discordant(name: str, x: ArrayLike) -> np.ndarray:
    """Discordant counts as floats; anything but non-negative whole numbers is a :class:`ParameterError`."""
    arr = float_parameter(name, x)
    if (arr < 0).any() or (arr != np.round(arr)).any():
        raise ParameterError("discordant counts must be non-negative integers", field=name)
    return arr


def _unwrap(x: np.ndarray):
    """0-d arrays as numpy scalars, so that scalar calls give scalars."""
    x = np.asarray(x)
    return x[()] if x.ndim == 0 else x


def mcnemar(b: ArrayLike, c: ArrayLike, exact: bool = True, correction: bool = False) -> McNemarResult:
    """McNemar's test of paired binary outcomes, both forms (vectorised over arrays of counts).

    - exact conditional: given ``b + c`` discordant pairs, ``b ~ Binomial(b + c, 1/2)``
      under H0; two-sided ``p = min(1, 2 P(X <= min(b, c)))``.
    - asymptotic: ``X^2 = (b - c)^2 / (b + c)`` (``(|b - c| - 1)^2 / (b + c)`` with
      ``correction``) referred to chi-squared with 1 df.

    ``b + c = 0`` gives statistic 0 and p = 1 (no evidence either way). ``p_value``
    is the exact one when ``exact`` is true.

    Examples
    --------
    >>> r = mcnemar(296, 250)  # paper 002's HellaSwag boundary case
    >>> round(float(r.p_exact), 3), round(float(r.p_asymptotic), 3)
    (0.054, 0.049)
    >>> round(float(mcnemar(30, 12).p_exact), 4)
    0.0079
    """
    b_arr, c_arr = np.broadcast_arrays(_discordant("b", b), _discordant("c", c))
    m = b_arr + c_arr
    diff = np.abs(b_arr - c_arr)
    if correction:
        diff = np.maximum(diff - 1, 0)
    stat = np.where(m > 0, diff**2 / np.where(m > 0, m, 1), 0.0)
    p_asym = stats.chi2.sf(stat, 1)
    p_ex = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(b_arr, c_arr), m, 0.5))
    p_ex = np.where(m > 0, p_ex, 1.0)
    return McNemarResult(_unwrap(b_arr), _unwrap(c_arr), _unwrap(stat), _unwrap(p_ex), _unwrap(p_asym), bool(exact))


def two_proportion_z(x1: int, n1: int, x2: int, n2: int) -> tuple[float, float]:
    """Pooled two-proportion z-test: ``z = (p1 - p2) / sqrt(p(1-p)(1/n1 + 1/n2))``, two-sided p.

    Examples
    --------
    >>> z, p = two_proportion_z(60, 100, 45, 100)
    >>> round(z, 3), round(p, 4)
    (2.124, 0.0337)
    """
    if n1 == 0 or n2 == 0:
        return float("nan"), float("nan")
    pooled = (x1 + x2) / (n1 + n2)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return float("nan"), float("nan")
    z = (x1 / n1 - x2 / n2) / se
    return float(z), float(2 * stats.norm.sf(abs(z)))


def greedy_change(g_v1: np.ndarray, g_v2: np.ndarray) -> np.ndarray:
    """Single-shot change of an item: ``gained`` (0 -> 1), ``lost`` (1 -> 0) or ``no_change``."""
    g1, g2 = np.asarray(g_v1, bool), np.asarray(g_v2, bool)
    return np.where(~g1 & g2, "gained", np.where(g1 & ~g2, "lost", "no_change")).astype(object)


def greedy_agreement(change: np.ndarray, classes: np.ndarray) -> dict:
    """Agreement of greedy flips with RCI classes (paper 001, section 3.9).

    ``rci_changed_missed_by_greedy``: share of RCI-changed items with no greedy flip;
    ``greedy_flips_no_rci_change``: share of greedy flips that RCI calls no change.

    Examples
    --------
    >>> import numpy as np
    >>> g = greedy_agreement(np.array(["gained", "no_change"]), np.array(["improved", "improved"]))
    >>> g["rci_changed_missed_by_greedy"]
    0.5
    """
    change, cls = np.asarray(change, dtype=object), np.asarray(classes, dtype=object)
    table = pd.crosstab(pd.Series(change, name="greedy"), pd.Series(cls, name="rci")).reindex(
        index=["gained", "no_change", "lost"], columns=list(CLASSES), fill_value=0
    )
    agree = int(table.loc["gained", IMPROVED] + table.loc["no_change", NO_CHANGE] + table.loc["lost", DETERIORATED])
    flips = change != "no_change"
    rci_changed = cls != NO_CHANGE
    n_flip, n_rci = int(flips.sum()), int(rci_changed.sum())
    missed = int(np.sum(rci_changed & ~flips))
    false_flag = int(np.sum(flips & ~rci_changed))
    return {
        "matched": int(change.size),
        "greedy_flips": n_flip,
        "rci_changed": n_rci,
        "exact_agreement": agree / change.size if change.size else float("nan"),
        "rci_changed_missed_by_greedy": missed / n_rci if n_rci else float("nan"),
        "rci_changed_missed_by_greedy_n": missed,
        "greedy_flips_no_rci_change": false_flag / n_flip if n_flip else float("nan"),
        "greedy_flips_no_rci_change_n": false_flag,
        "table": table,
    }
