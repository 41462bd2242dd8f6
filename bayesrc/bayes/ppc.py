"""Posterior predictive check on every fit (issue 31).

**Posterior predictive check** (:func:`posterior_predictive_check`). For each posterior draw of the
item accuracies ``p`` (item, version), replicate counts ``y_rep ~ Binomial(n, p)``; compare the
replicated with the observed data per *stratum* (domain x covariate level, each domain, each
level and all items: :func:`check_strata`) on :data:`STATS`: each version's mean and spread of the
item accuracies, the mean and spread of the per-item change ``y2/n2 - y1/n1``, the share of
item-versions at floor (0 correct) and ceiling (all correct), and the between-version correlation
of item accuracies. Each (stratum, statistic) gets a two-sided posterior predictive p-value (mid-p
for ties, :func:`predictive_pvalues`).

Multiplicity: the single-step min-p adjustment (Westfall-Young) over all tests, calibrated on the
replicates themselves (:func:`minp_adjust`): a test's adjusted p-value is the share of replicated
datasets whose *smallest* p-value over every (stratum, statistic) is at most the observed p-value.
The statistics overlap heavily (the means of the versions and of their change, nested strata),
which Bonferroni or Holm would pay for in power; the replicates carry that dependence. A fit warns
(``"posterior predictive check: ..."``) when an adjusted p-value is at most :data:`PPC_ALPHA`.
Posterior predictive p-values are conservative (the data are used twice), so on data the model can
have generated the warning rate stays below the nominal level (``benchmarks/ppc_calibration.py``).

Pure numpy; no JAX, PyMC or plotting here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.stats import rankdata

from bayesrc.bayes.draws import thin_index
from bayesrc.bayes.inputs import ModelInputs

STATS = ("mean_v1", "mean_v2", "sd_v1", "sd_v2", "mean_change", "sd_change", "floor", "ceiling", "corr")
STAT_LABELS = {
    "mean_v1": "the mean accuracy in version 1",
    "mean_v2": "the mean accuracy in version 2",
    "sd_v1": "the spread (SD) of item accuracies in version 1",
    "sd_v2": "the spread (SD) of item accuracies in version 2",
    "mean_change": "the mean per-item change y2 - y1",
    "sd_change": "the spread (SD) of the per-item change y2 - y1",
    "floor": "the share of items at floor (0 correct)",
    "ceiling": "the share of items at ceiling (all correct)",
    "corr": "the between-version correlation of item accuracies",
}
PPC_ALPHA = 0.05  # family-wise level of the posterior predictive check's warning
MIN_STRATUM_ITEMS = 5  # strata with fewer items (valid in both versions) are not tested on their own
MAX_PPC_DRAWS = 2000  # posterior draws replicated (evenly thinned beyond)
# Replicated datasets: up to 4 per posterior draw while (datasets x items) stays under this. Why more
# than one: a p-value is estimated from the replicates, and with 2,000 a statistic at a true tail
# probability of ~0.001 lay beyond all of them one time in ~7 (p = 0, flagged) and not otherwise
# (adjusted p ~0.08): the verdict flipped with the posterior draws' Monte Carlo noise.
PPC_REPLICATE_BUDGET = 4_000_000
PPC_SLICE_ENTRIES = 1_000_000  # replicated (dataset x item) entries drawn and summarised at a time (memory: ~75 MB)


def check_strata(data: ModelInputs, min_items: int = MIN_STRATUM_ITEMS) -> tuple[np.ndarray, list[str]]:
    """The strata the posterior predictive check compares: membership (item, stratum) and names.

    Each domain x covariate level (``"domain:level"``), each domain (``"domain:*"``), each level
    (``"*:level"``) and all items (``"all"``); without a covariate the domains and ``"all"``. Strata
    with fewer than ``min_items`` items are left out, and a stratum with the same items as one
    before it (a domain with one level) is kept once.

    Examples
    --------
    >>> d = ModelInputs(y=np.zeros((6, 2), int), n=np.full((6, 2), 10), dom=np.array([0, 0, 0, 1, 1, 1]),
    ...                 items=np.arange(6), versions=("a", "b"), domains=("x", "y"), group=np.array([0, 1, 0, 1, 0, 1]),
    ...                 groups=("A", "B"), covariate="letter")
    >>> member, names = check_strata(d, min_items=3)
    >>> names, member.sum(0).tolist()
    (['x:*', 'y:*', '*:A', '*:B', 'all'], [3, 3, 3, 3, 6])
    """
    dom, grp = data.dom, data.grp
    cols, names = [], []
    if data.n_groups > 1:
        for d, g in sorted(set(zip(dom.tolist(), grp.tolist()))):
            cols.append((dom == d) & (grp == g))
            names.append(f"{data.domains[d]}:{data.groups[g]}")
    for d, name in enumerate(data.domains):
        cols.append(dom == d)
        names.append(f"{name}:*" if data.n_groups > 1 else name)
    if data.n_groups > 1:
        for g, name in enumerate(data.groups):
            cols.append(grp == g)
            names.append(f"*:{name}")
    cols.append(np.ones(data.n_items, bool))
    names.append("all")
    valid = (data.n > 0).all(1)
    keep, seen = [], set()
    for j, col in enumerate(cols):
        key = (col & valid).tobytes()
        if (col & valid).sum() >= min_items and key not in seen:
            seen.add(key)
            keep.append(j)
    return np.stack([cols[j] for j in keep], 1), [names[j] for j in keep]


def stratum_statistics(y: np.ndarray, n: np.ndarray, member: np.ndarray) -> np.ndarray:
    """:data:`STATS` per stratum, for observed or replicated counts: shape (..., stratum, stat).

    ``y``: (..., item, 2) counts (leading axes: replicates), ``n``: (item, 2) trials,
    ``member``: (item, stratum) booleans. Items without a valid response in a version are left
    out; a statistic that is undefined (a correlation with no spread) is NaN.

    Examples
    --------
    >>> y = np.array([[2, 3], [5, 5], [10, 9]]); n = np.full((3, 2), 10)
    >>> s = stratum_statistics(y, n, np.ones((3, 1), bool))[0]
    >>> dict(zip(STATS, s.round(3).tolist()))["mean_change"], dict(zip(STATS, s.round(3).tolist()))["ceiling"]
    (0.0, 0.167)
    """
    valid = (n > 0).all(1)
    w = (member & valid[:, None]).astype(float)  # (item, stratum)
    cnt = w.sum(0)
    a = y / np.maximum(n, 1)
    d = a[..., 1] - a[..., 0]

    def avg(x):  # (..., item) -> (..., stratum)
        return (x @ w) / cnt

    m1, m2, md = avg(a[..., 0]), avg(a[..., 1]), avg(d)
    v1, v2, vd = avg(a[..., 0] ** 2) - m1**2, avg(a[..., 1] ** 2) - m2**2, avg(d**2) - md**2
    v1, v2, vd = (np.maximum(v, 0.0) for v in (v1, v2, vd))
    cov = avg(a[..., 0] * a[..., 1]) - m1 * m2
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where((v1 > 1e-12) & (v2 > 1e-12), cov / np.sqrt(v1 * v2), np.nan)
    floor = 0.5 * avg((y == 0).sum(-1).astype(float))
    ceiling = 0.5 * avg((y == n).sum(-1).astype(float))
    return np.stack([m1, m2, np.sqrt(v1), np.sqrt(v2), md, np.sqrt(vd), floor, ceiling, corr], -1)


def predictive_pvalues(obs: np.ndarray, rep: np.ndarray) -> np.ndarray:
    """Two-sided posterior predictive p-values ``2 min(P(T_rep < T) + P(=)/2, P(T_rep > T) + P(=)/2)``.

    ``obs``: (...), ``rep``: (draw, ...). NaN replicates are left out; NaN where ``obs`` is NaN.

    Examples
    --------
    >>> predictive_pvalues(np.array([0.0, 3.0]), np.array([[-1.0, 0.0], [0.0, 1.0], [1.0, 2.0]])).tolist()
    [1.0, 0.0]
    """
    ok = ~np.isnan(rep)
    m = np.maximum(ok.sum(0), 1)
    below = ((rep < obs) & ok).sum(0) / m
    tie = ((rep == obs) & ok).sum(0) / m
    above = 1.0 - below - tie
    p = np.minimum(1.0, 2.0 * np.minimum(below + 0.5 * tie, above + 0.5 * tie))
    return np.where(np.isnan(obs) | (ok.sum(0) == 0), np.nan, p)


def replicate_pvalues(rep: np.ndarray) -> np.ndarray:
    """Each replicate's own two-sided p-values against all replicates (the min-p reference): (draw, test).

    Ranks per column (ties: mid-p); a NaN replicate gets p = 1 (untested).

    Examples
    --------
    >>> replicate_pvalues(np.array([[0.0], [1.0], [2.0], [3.0]]))[:, 0].tolist()
    [0.25, 0.75, 0.75, 0.25]
    """
    s = rep.shape[0]
    filled = np.where(np.isnan(rep), np.nanmedian(rep, axis=0) if s else 0.0, rep)
    lo = rankdata(filled, method="min", axis=0)  # 1 + number below
    hi = rankdata(filled, method="max", axis=0)  # number at or below
    tie = hi - lo + 1
    below, above = lo - 1, s - hi
    p = np.minimum(1.0, 2.0 * np.minimum(below + 0.5 * tie, above + 0.5 * tie) / s)
    return np.where(np.isnan(rep), 1.0, p)


def minp_adjust(p_obs: np.ndarray, p_rep: np.ndarray) -> np.ndarray:
    """Single-step min-p adjusted p-values: the share of replicates whose smallest p-value is at most each observed one.

    ``p_obs``: (test,) with NaN for untested; ``p_rep``: (draw, test) from :func:`replicate_pvalues`.

    Examples
    --------
    >>> p_rep = np.array([[0.5, 0.9], [0.02, 0.6], [0.3, 0.1], [0.8, 0.04]])
    >>> minp_adjust(np.array([0.01, 0.3]), p_rep).tolist()
    [0.0, 0.75]
    """
    tested = ~np.isnan(p_obs)
    if not tested.any():
        return np.full_like(p_obs, np.nan)
    minp = p_rep[:, tested].min(1)
    adj = (minp[:, None] <= p_obs[None, :]).mean(0)
    return np.where(tested, adj, np.nan)


def thin_draws(a: np.ndarray, max_draws: int = MAX_PPC_DRAWS) -> np.ndarray:
    """Chains and draws of ``a`` (chain, draw, ...) flattened and evenly thinned to at most ``max_draws``.

    Examples
    --------
    >>> thin_draws(np.zeros((4, 1000, 3)), 2000).shape
    (2000, 3)
    """
    flat = np.asarray(a).reshape(-1, *np.shape(a)[2:])
    return flat if flat.shape[0] <= max_draws else flat[thin_index(flat.shape[0], max_draws)]


def replicated_statistics(
    draws: np.ndarray, per_draw: int, data: ModelInputs, member: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """:func:`stratum_statistics` of ``per_draw`` datasets ``y ~ Binomial(n, p)`` per draw of ``draws`` (draw, item, 2):
    (draw x per_draw, stratum, stat).

    Drawn and summarised :data:`PPC_SLICE_ENTRIES` (dataset x item) entries at a time (bounded memory
    at 12,000 items), in the order one call would draw them: the same replicates as drawing all at once.
    """
    step = max(1, PPC_SLICE_ENTRIES // max(data.n_items * per_draw, 1))
    parts = [
        stratum_statistics(rng.binomial(data.n[None], np.repeat(draws[i : i + step], per_draw, axis=0)), data.n, member)
        for i in range(0, len(draws), step)
    ]
    return np.concatenate(parts) if parts else np.empty((0, member.shape[1], len(STATS)))


def posterior_predictive_check(
    p: np.ndarray,
    data: ModelInputs,
    *,
    seed: int = 0,
    alpha: float = PPC_ALPHA,
    min_items: int = MIN_STRATUM_ITEMS,
    max_draws: int = MAX_PPC_DRAWS,
) -> dict:
    """Posterior predictive check of item accuracy draws ``p`` (chain, draw, item, 2) against ``data``.

    Replicates ``y_rep ~ Binomial(n, p)`` (1-4 datasets per draw: ``PPC_REPLICATE_BUDGET``), computes :data:`STATS`
    per stratum
    (:func:`check_strata` over ``data``'s domains and covariate levels), two-sided predictive
    p-values and their min-p adjustment. Returns the ``ppc`` payload: settings, one row per
    (stratum, statistic) in ``table`` (observed, replicated mean and 90% range, p, adjusted p) and
    the rows flagged at ``alpha`` in ``flagged``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> n = np.full((40, 2), 10); p = rng.beta(2, 2, (40, 1)).repeat(2, 1)
    >>> d = ModelInputs(y=rng.binomial(n, p), n=n, dom=np.zeros(40, int), items=np.arange(40), versions=("a", "b"),
    ...                 domains=("x",))
    >>> out = posterior_predictive_check(np.broadcast_to(p, (2, 100, 40, 2)), d)
    >>> out["n_tests"], out["flagged"]
    (9, [])
    """
    member, names = check_strata(data, min_items)
    draws = thin_draws(p, max_draws)
    per_draw = int(np.clip(PPC_REPLICATE_BUDGET // max(data.n_items * draws.shape[0], 1), 1, 4))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 31]))
    obs = stratum_statistics(data.y, data.n, member)  # (stratum, stat)
    rep = replicated_statistics(draws, per_draw, data, member, rng)  # (draw, stratum, stat)
    p_obs = predictive_pvalues(obs, rep)
    adj = minp_adjust(p_obs.ravel(), replicate_pvalues(rep.reshape(rep.shape[0], -1))).reshape(p_obs.shape)
    lo, hi = np.nanquantile(rep, [0.05, 0.95], axis=0) if rep.shape[0] else (np.full_like(obs, np.nan),) * 2
    counts = (member & (data.n > 0).all(1)[:, None]).sum(0)
    table = [
        {
            "stratum": s,
            "n_items": int(counts[i]),
            "stat": st,
            "observed": obs[i, j],
            "replicated_mean": float(np.nanmean(rep[:, i, j])) if np.isfinite(rep[:, i, j]).any() else None,
            "replicated_lo90": lo[i, j],
            "replicated_hi90": hi[i, j],
            "p": p_obs[i, j],
            "p_adjusted": adj[i, j],
        }
        for i, s in enumerate(names)
        for j, st in enumerate(STATS)
    ]
    table = [{k: (float(v) if isinstance(v, np.floating) else v) for k, v in row.items()} for row in table]
    flagged = sorted(
        (r for r in table if r["p_adjusted"] is not None and np.isfinite(r["p_adjusted"]) and r["p_adjusted"] <= alpha),
        key=lambda r: (r["p_adjusted"], r["p"]),
    )
    n_tests = int(np.isfinite(p_obs).sum())
    return {
        "alpha": alpha,
        "method": "single-step min-p over the replicates (Westfall-Young)",
        "n_draws": int(draws.shape[0]),
        "n_replicates": int(rep.shape[0]),
        "n_tests": n_tests,
        "covariate": data.covariate,
        "strata": names,
        "stats": list(STATS),
        "min_stratum_items": min_items,
        "p_min": float(np.nanmin(p_obs)) if n_tests else None,
        "p_adjusted_min": float(np.nanmin(adj)) if n_tests else None,
        "table": table,
        "flagged": flagged,
        "passed": not flagged,
    }


PAIRING_STATS = ("corr", "sd_change")  # what a model without pairing (the beta-binomial) cannot reproduce


def ppc_warnings(ppc: Mapping, model: str = "change", max_named: int = 3) -> list[str]:
    """One warning line naming the strata and statistics the model does not reproduce (none if it does).

    The advice depends on ``model``: the beta-binomial treats an item's two versions as independent,
    so it misses the between-version correlation and the spread of the change on paired data.

    Examples
    --------
    >>> row = {"stratum": "repeat:A", "stat": "mean_change", "observed": 0.2, "replicated_lo90": 0.0,
    ...        "replicated_hi90": 0.1, "p": 0.0, "p_adjusted": 0.0}
    >>> ppc_warnings({"flagged": [row], "n_tests": 90, "alpha": 0.05})[0][:80]
    'posterior predictive check: the model does not reproduce the mean per-item chang'
    """
    rows = list(ppc.get("flagged") or [])
    if not rows:
        return []
    named = "; ".join(
        f"{STAT_LABELS.get(r['stat'], r['stat'])} in stratum {r['stratum']} "
        f"(observed {r['observed']:.3f}, replicated 90% range "
        f"{r['replicated_lo90']:.3f} to {r['replicated_hi90']:.3f}, adjusted p = {r['p_adjusted']:.3f})"
        for r in rows[:max_named]
    )
    more = f" and {len(rows) - max_named} more (fit.json: ppc.flagged)" if len(rows) > max_named else ""
    if model == "betabinom" and all(r["stat"] in PAIRING_STATS for r in rows):
        advice = (
            "the beta-binomial treats an item's two versions as independent; "
            "for per-item change use the change model, which pairs them"
        )
    else:
        advice = (
            "the model misses structure in these items "
            "(an item covariate such as the correct option's letter, a stratum with its own "
            "change): read its estimates there with care, and compare models (bayesrc fit --compare)"
        )
    return [
        f"posterior predictive check: the model does not reproduce {named}{more}, "
        f"at family-wise level {ppc['alpha']:g} over {ppc['n_tests']} tests; {advice}"
    ]
