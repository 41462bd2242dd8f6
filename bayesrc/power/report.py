"""Resolution report: is the benchmark large enough to resolve this comparison? (SPEC 5, paper 002)

From two (or more) models' per-item scores on the same items:

- fixed-n: observed ``delta``, ``rho``, discordant counts ``b``/``c``, ``sigma_D``, MDE,
  ``N* = (K sigma_D / delta)^2`` at the observed gap, ``q = N / N*`` (resolved iff q >= 1,
  i.e. ``|T_N| >= z_{1-alpha/2} + z_{1-beta}``), exact and asymptotic McNemar;
- stress tests, each a multiplier on N*: multiplicity (Bonferroni, Holm, BH over the
  family of comparisons), clustering (design effect from ICC(D) of ``D_i = X_iA - X_iB``
  over item clusters), anytime validity (time-uniform boundary instead of ``z_{1-alpha/2}``).

A leaderboard (many models) is ranked by accuracy and its adjacent pairs form the
family; Holm (step-down) and BH (step-up) are applied on the q scale with the pairs
ordered by q (equivalently by the Wald p-value).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike
from scipy import stats

from bayesrc.classical.noise import noise_from_counts
from bayesrc.classical.secondary import mcnemar
from bayesrc.errors import InputError
from bayesrc.power import analytic as an
from bayesrc.power.result import VERDICT_PARADIGMS, PowerReport, pair_row

# ---------------------------------------------------------------------------
# One pair
# ---------------------------------------------------------------------------


def _check_scores(
    x_a: ArrayLike, x_b: ArrayLike, *, binary: bool, names: tuple[str, str]
) -> tuple[np.ndarray, np.ndarray]:
    arrays = []
    for name, x in zip(names, (x_a, x_b)):
        try:
            arr = np.asarray(x, dtype=float).ravel()
        except (TypeError, ValueError):
            raise InputError("scores must be numbers (0/1)", path=name, field="scores") from None
        bad = np.flatnonzero(np.isnan(arr))
        if bad.size:
            raise InputError(
                "missing score (NaN); drop the item or score it as 0", path=name, item=int(bad[0]), field="scores"
            )
        if binary:
            bad = np.flatnonzero((arr != 0) & (arr != 1))
            if bad.size:
                raise InputError(
                    f"scores must be binary 0/1, got {arr[bad[0]]:g} ({bad.size} non-binary value(s)); "
                    "for per-item means of K samples pass binary=False (CLI: --aggregate mean)",
                    path=name,
                    item=int(bad[0]),
                    field="scores",
                )
        arrays.append(arr)
    if arrays[0].size != arrays[1].size:
        raise InputError(
            f"paired scores must cover the same items: {arrays[0].size} scores for {names[0]} "
            f"but {arrays[1].size} for {names[1]}",
            path=names[1],
            field="scores",
        )
    if arrays[0].size < 2:
        raise InputError("at least 2 paired items are needed", path=names[0], field="scores")
    return arrays[0], arrays[1]


@dataclass
class PairResolution:
    """Resolution diagnostics of one paired comparison (A minus B).

    Examples
    --------
    >>> r = resolution_report(scores_a, scores_b, names=("A", "B"))  # doctest: +SKIP
    >>> r.q, r.verdicts, r.summary()  # doctest: +SKIP
    """

    name_a: str
    name_b: str
    n: int
    p_a: float
    p_b: float
    delta: float
    rho: float
    sigma_d: float
    b: int | None
    c: int | None
    mde: float
    n_star: float
    q: float
    p_exact: float | None
    p_asymptotic: float | None
    p_paired_t: float | None
    alpha: float
    power: float
    binary: bool
    comparisons: int
    multiplicity: dict[str, dict]  # method -> alpha_adj, inflation, n_star, q, resolved
    n_clusters: int | None
    icc: float | None
    design_effect: float | None
    anytime: dict  # method, u, inflation, n_star, q, resolved
    notes: list[str] = field(default_factory=list)

    @property
    def n_star_clustered(self) -> float | None:
        return None if self.design_effect is None else self.n_star * self.design_effect

    @property
    def verdicts(self) -> dict[str, bool | None]:
        """resolved (True) / unresolved (False) per paradigm; None where it does not apply."""
        out: dict[str, bool | None] = {"fixed_n": bool(self.q >= 1)}
        for m, d in self.multiplicity.items():
            out[m] = d["resolved"]
        out["clustered"] = None if self.design_effect is None else bool(self.q >= self.design_effect)
        out["anytime"] = self.anytime["resolved"]
        return out

    def to_frame(self) -> pd.DataFrame:
        """Verdict table: one row per paradigm (fixed-n and the stress tests)."""
        rows = [
            dict(
                paradigm="fixed_n", alpha=self.alpha, inflation=1.0, n_star=self.n_star, q=self.q, resolved=self.q >= 1
            )
        ]
        for m, d in self.multiplicity.items():
            rows.append(
                dict(
                    paradigm=m,
                    alpha=d["alpha"],
                    inflation=d["inflation"],
                    n_star=d["n_star"],
                    q=d["q"],
                    resolved=d["resolved"],
                )
            )
        if self.design_effect is not None:
            rows.append(
                dict(
                    paradigm="clustered",
                    alpha=self.alpha,
                    inflation=self.design_effect,
                    n_star=self.n_star_clustered,
                    q=self.q / self.design_effect,
                    resolved=self.q >= self.design_effect,
                )
            )
        else:
            rows.append(
                dict(paradigm="clustered", alpha=self.alpha, inflation=np.nan, n_star=np.nan, q=np.nan, resolved=None)
            )
        a = self.anytime
        rows.append(
            dict(
                paradigm="anytime",
                alpha=self.alpha,
                inflation=a["inflation"],
                n_star=a["n_star"],
                q=a["q"],
                resolved=a["resolved"],
            )
        )
        df = pd.DataFrame(rows)
        df.insert(0, "pair", f"{self.name_a} vs {self.name_b}")
        return df

    def summary(self) -> pd.DataFrame:
        """One row: the pair's figures and verdicts (the row of :meth:`PowerReport.to_frame`, without a rank)."""
        return pd.DataFrame([pair_row(self.to_dict())])

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["n_star_clustered"] = self.n_star_clustered
        d["n_star_ceil"] = None if not np.isfinite(self.n_star) else int(np.ceil(self.n_star))
        d["verdicts"] = {
            k: (None if v is None else ("resolved" if v else "unresolved")) for k, v in self.verdicts.items()
        }
        return d


def resolution_report(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    clusters: ArrayLike | None = None,
    *,
    names: tuple[str, str] = ("A", "B"),
    alpha: float = 0.05,
    power: float = 0.8,
    comparisons: int = 1,
    rank: int = 1,
    anytime: str = "normal_mixture",
    binary: bool = True,
    cluster_mean: str = "arithmetic",
) -> PairResolution:
    """Resolution diagnostics for model A vs model B from their per-item scores.

    Parameters
    ----------
    scores_a, scores_b : per-item scores on the same items, in the same order; 0/1
        (``binary=True``) or in [0, 1] (e.g. per-item means of K samples, ``binary=False``).
    clusters : optional cluster label per item (domain, subject) for the design effect.
    comparisons, rank : the family of comparisons this pair belongs to and its rank
        in it (1 = strongest); Holm and BH use the rank's step (see
        :func:`bayesrc.power.analytic.adjusted_alpha`). :func:`leaderboard_report`
        sets both for every adjacent pair.
    anytime : boundary of :func:`bayesrc.power.analytic.anytime_boundary`, tuned at this N.

    The observed ``sigma_D^2 = (b + c)/N - delta^2`` equals ``paired_variance`` at the
    observed accuracies and phi correlation; ``N*`` uses it with the observed gap, so
    ``q = T_N^2 / K^2`` with the paired Wald statistic ``T_N``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a = (rng.random(2000) < 0.62).astype(float); b = np.where(rng.random(2000) < 0.8, a, 1 - a)
    >>> r = resolution_report(a, b, names=("A", "B"))
    >>> bool(r.q == r.n / r.n_star)
    True
    """
    alpha = float(an._check_open_unit("alpha", alpha))
    power = float(an._check_open_unit("power", power))
    xa, xb = _check_scores(scores_a, scores_b, binary=binary, names=names)
    n = xa.size
    k = float(an.z_sum(alpha, power))
    d = xa - xb
    notes: list[str] = []
    pa, pb, var_d, rho = _paired_moments(xa, xb, notes)
    delta = pa - pb
    n_star = float(an._n_star(np.asarray(var_d), np.asarray(delta), np.asarray(k)))
    if delta == 0:
        notes.append("observed delta = 0: N* is infinite, no finite benchmark resolves this pair (q = 0)")
    q = _stressed(n_star, n, 1.0)[1]
    mde = _mde(n, (pa + pb) / 2, rho, var_d, k, alpha, power, binary)
    b, c, p_exact, p_asym, p_t = _paired_tests(xa, xb, var_d, binary)
    comparisons = int(comparisons)
    multiplicity = {}
    for method in an.MULTIPLICITY_METHODS:
        infl = float(an.multiplicity_inflation(comparisons, method, alpha, power, rank))
        ns, qq, ok = _stressed(n_star, n, infl)
        multiplicity[method] = dict(
            alpha=float(an.adjusted_alpha(comparisons, method, alpha, rank)),
            inflation=infl,
            n_star=ns,
            q=qq,
            resolved=ok,
        )
    n_clusters, icc, de = _clustering(clusters, d, names, cluster_mean, notes)
    infl_av = float(an.anytime_inflation(n, alpha, power, anytime))
    ns, qq, ok = _stressed(n_star, n, infl_av)
    any_d = dict(
        method=anytime, u=float(an.anytime_boundary(n, alpha, anytime)), inflation=infl_av, n_star=ns, q=qq, resolved=ok
    )  # u: tuned at this N

    return PairResolution(
        name_a=names[0],
        name_b=names[1],
        n=n,
        p_a=pa,
        p_b=pb,
        delta=delta,
        rho=rho,
        sigma_d=float(np.sqrt(var_d)),
        b=b,
        c=c,
        mde=mde,
        n_star=n_star,
        q=q,
        p_exact=p_exact,
        p_asymptotic=p_asym,
        p_paired_t=p_t,
        alpha=alpha,
        power=power,
        binary=binary,
        comparisons=comparisons,
        multiplicity=multiplicity,
        n_clusters=n_clusters,
        icc=icc,
        design_effect=de,
        anytime=any_d,
        notes=notes,
    )


def _paired_moments(xa: np.ndarray, xb: np.ndarray, notes: list[str]) -> tuple[float, float, float, float]:
    """Both accuracies, the plug-in variance of the difference (ddof = 0) and the correlation
    (NaN, with a note, when one model's scores are constant)."""
    d = xa - xb
    pa, pb = float(xa.mean()), float(xb.mean())
    var_d = float(np.mean(d**2) - np.mean(d) ** 2)  # ddof = 0, the plug-in of sigma_D^2
    sa, sb = xa.std(), xb.std()
    rho = float(np.mean((xa - pa) * (xb - pb)) / (sa * sb)) if sa > 0 and sb > 0 else float("nan")
    if not np.isfinite(rho):
        notes.append(
            "one model's scores are constant: rho is undefined (N* uses the observed variance of the difference)"
        )
    return pa, pb, var_d, rho


def _stressed(n_star: float, n: int, inflation: float) -> tuple[float, float, bool]:
    """N* inflated by a stress test, the resulting q = N / N* and whether the pair is still resolved."""
    ns = n_star * inflation
    qq = 0.0 if not np.isfinite(ns) else n / ns if ns > 0 else np.inf
    return ns, qq, bool(qq >= 1)


def _mde(n: int, p_mean: float, rho: float, var_d: float, k: float, alpha: float, power: float, binary: bool) -> float:
    """The minimum detectable effect: the paired-binary formula, or the fixed-variance one for
    continuous scores (or a degenerate binary pair)."""
    if binary and 0 < p_mean < 1 and np.isfinite(rho):
        return float(an.mde(n, p_mean, rho, alpha, power))
    return k * np.sqrt(var_d / n) if var_d > 0 else float("nan")


def _paired_tests(xa: np.ndarray, xb: np.ndarray, var_d: float, binary: bool) -> tuple:
    """``(b, c, p_exact, p_asymptotic, p_paired_t)``: McNemar on the discordant counts for
    binary scores, the paired t-test otherwise (the other fields None)."""
    if binary:
        b, c = int(np.sum((xa == 1) & (xb == 0))), int(np.sum((xa == 0) & (xb == 1)))
        mc = mcnemar(b, c)
        return b, c, float(mc.p_exact), float(mc.p_asymptotic), None
    return None, None, None, None, float(stats.ttest_rel(xa, xb).pvalue) if var_d > 0 else 1.0


def _clustering(
    clusters: ArrayLike | None, d: np.ndarray, names: tuple[str, str], cluster_mean: str, notes: list[str]
) -> tuple:
    """``(n_clusters, icc, design_effect)`` of the score differences ``d`` (None where not estimable)."""
    if clusters is None:
        return None, None, None
    g = np.asarray(clusters).ravel()
    if g.size != d.size:
        raise InputError(f"{g.size} cluster labels for {d.size} items", path=names[0], field="clusters")
    n_clusters = int(np.unique(g).size)
    if n_clusters < 2:
        notes.append("one cluster only: the design effect is not estimable")
        return n_clusters, None, None
    icc = cluster_icc_safe(d, g)
    return n_clusters, icc, float(an.design_effect(icc, np.unique(g, return_counts=True)[1], mean=cluster_mean))


def cluster_icc_safe(d: np.ndarray, clusters: np.ndarray) -> float:
    """ICC(1) of the paired differences by cluster; 0 when the differences do not vary."""
    if np.all(d == d[0]):
        return 0.0
    return float(an.cluster_icc(d, clusters))


# ---------------------------------------------------------------------------
# Leaderboard: adjacent pairs
# ---------------------------------------------------------------------------


def multiplicity_verdicts(
    q: ArrayLike, m: int, method: str, alpha: float = 0.05, power: float = 0.8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bonferroni / Holm (step-down) / BH (step-up) on the q scale; comparisons ranked by q (largest first).

    Rank k passes its step iff ``q_(k) >= multiplicity_inflation(m, method, rank=k)``.
    Holm resolves ranks up to the first failure; BH resolves every rank up to the
    largest passing one; Bonferroni judges each on its own.

    Returns per pair (in input order): rank, the step's inflation, resolved.

    Examples
    --------
    >>> import numpy as np
    >>> ranks, inflation, resolved = multiplicity_verdicts(np.array([3.0, 1.2, 0.5]), 3, "holm")
    >>> resolved.tolist()
    [True, False, False]
    """
    q = np.asarray(q, dtype=float)
    order = np.argsort(-q, kind="stable")
    ranks = np.empty(len(q), dtype=int)
    ranks[order] = np.arange(1, len(q) + 1)
    infl = np.asarray(an.multiplicity_inflation(m, method, alpha, power, rank=ranks), dtype=float)
    pass_step = q >= infl
    sorted_pass = pass_step[order]
    if method == "holm":  # stop at the first failure
        ok_sorted = np.cumprod(sorted_pass).astype(bool)
    elif method == "bh":  # all up to the largest passing rank
        last = np.flatnonzero(sorted_pass)
        ok_sorted = np.arange(len(q)) <= (last[-1] if last.size else -1)
    else:
        ok_sorted = sorted_pass
    resolved = np.empty(len(q), dtype=bool)
    resolved[order] = ok_sorted
    return ranks, infl, resolved


def leaderboard_report(
    scores: Mapping[str, ArrayLike] | pd.DataFrame,
    clusters: ArrayLike | None = None,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    comparisons: int | None = None,
    anytime: str = "normal_mixture",
    binary: bool = True,
    cluster_mean: str = "arithmetic",
    info: dict | None = None,
) -> PowerReport:
    """Resolution of every adjacent pair of a leaderboard.

    Models are ranked by accuracy (best first); pair r compares rank r with rank
    r + 1 (so ``delta >= 0``). The family has ``comparisons`` members (default: the
    number of adjacent pairs, M - 1). Bonferroni applies ``alpha/m`` to each pair;
    Holm and BH are run as step procedures over the adjacent pairs on the q scale.
    With two models this is the single pair's report.

    Returns
    -------
    PowerReport
        The record ``bayesrc power`` writes (``power.json``): ``info`` (``info`` with comparisons,
        alpha, power and anytime),
        ``ranking``, ``unresolved`` per paradigm and one ``pairs`` record per adjacent pair
        (:meth:`PairResolution.to_dict`). It is the object ``bayesrc.load("power.json")`` gives
        back after ``save``, and equals it; :meth:`~bayesrc.power.PowerReport.to_frame` and
        :meth:`~bayesrc.power.PowerReport.to_markdown` are the command's ``pairs.csv`` and ``power.md``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> rep = leaderboard_report({m: (rng.random(500) < p).astype(float)
    ...                           for m, p in (("a", 0.7), ("b", 0.6), ("c", 0.5))})
    >>> rep.to_frame()["pair"].tolist()  # adjacent pairs of the ranking
    ['a vs b', 'b vs c']
    >>> rep.summary()["paradigm"].tolist()[:3]  # the unresolved pairs per paradigm
    ['fixed_n', 'bonferroni', 'holm']
    >>> rep.save("out/power")  # doctest: +SKIP
    """
    if isinstance(scores, Mapping):
        lengths = {str(k): np.size(v) for k, v in scores.items()}
        if len(set(lengths.values())) > 1:
            raise InputError(f"paired scores must cover the same items, got lengths {lengths}", field="scores")
        frame = pd.DataFrame({k: _check_scores(v, v, binary=False, names=(k, k))[0] for k, v in scores.items()})
    else:
        frame = scores
    if frame.shape[1] < 2:
        raise InputError("need the scores of at least two models", field="scores")
    acc = frame.mean(axis=0)
    order = sorted(frame.columns, key=lambda c: (-acc[c], list(frame.columns).index(c)))
    ranking = pd.DataFrame(
        {"rank": np.arange(1, len(order) + 1), "model": order, "accuracy": [float(acc[c]) for c in order]}
    )
    m_pairs = len(order) - 1
    m = m_pairs if comparisons is None else int(comparisons)
    if m < m_pairs:
        raise an.ParameterError(
            f"comparisons = {m} but the leaderboard has {m_pairs} adjacent pairs", field="comparisons"
        )
    pairs = [
        resolution_report(
            frame[a],
            frame[b],
            clusters,
            names=(a, b),
            alpha=alpha,
            power=power,
            comparisons=m,
            anytime=anytime,
            binary=binary,
            cluster_mean=cluster_mean,
        )
        for a, b in zip(order[:-1], order[1:])
    ]
    q = np.array([p.q for p in pairs])
    for method in ("holm", "bh"):
        ranks, infl, ok = multiplicity_verdicts(q, m, method, alpha, power)
        for pr, r, f, v in zip(pairs, ranks, infl, ok):
            ns, qq, _ = _stressed(pr.n_star, pr.n, float(f))  # the step procedure decides resolved, not q alone
            pr.multiplicity[method].update(
                rank=int(r),
                alpha=float(an.adjusted_alpha(m, method, alpha, r)),
                inflation=float(f),
                n_star=ns,
                q=qq,
                resolved=bool(v),
            )
    return PowerReport(
        {
            "info": dict(info or {}, comparisons=m, alpha=alpha, power=power, anytime=anytime),
            "ranking": ranking.to_dict(orient="records"),
            "unresolved": _unresolved_counts(pairs),
            "pairs": [p.to_dict() for p in pairs],
        }
    )


def _unresolved_counts(pairs: list[PairResolution]) -> list[dict]:
    """Per paradigm, how many of ``pairs`` it judges and how many of those are unresolved (the
    ``unresolved`` records of ``power.json``).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.tile([1.0, 0.0], 100)
    >>> _unresolved_counts([resolution_report(x, x[::-1])])[0]  # δ = 0: unresolved
    {'paradigm': 'fixed_n', 'pairs': 1, 'unresolved': 1}
    """
    rows = []
    for p in VERDICT_PARADIGMS:
        known = [v for v in (pr.verdicts[p] for pr in pairs) if v is not None]
        rows.append({"paradigm": p, "pairs": len(known), "unresolved": int(sum(not v for v in known))})
    return rows


def leaderboard_noise(counts: xr.Dataset, report: PowerReport, items: ArrayLike | None = None) -> list[dict]:
    """Noise decomposition (:func:`bayesrc.classical.noise_decomposition`) of every adjacent pair's
    mean-accuracy difference (A - B, per-item accuracy ``y / n``), from the K samples per item.

    ``items``: the items analysed (default all). Empty when no item has two answers in both
    versions (single-shot scores: the within-item variance is not estimable). The report holds
    them through :meth:`bayesrc.power.PowerReport.with_noise`.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> from bayesrc.power import scores_from_counts
    >>> sim = simulate_pair(300, 10, seed=1)
    >>> counts = item_counts(sim.trials_v1, sim.trials_v2)
    >>> scores, _, _ = scores_from_counts(counts)
    >>> report = leaderboard_report(scores)
    >>> rows = leaderboard_noise(counts, report)
    >>> [(r["name_a"], r["n_half"]) for r in rows]
    [('model-v2', 600)]
    >>> report.with_noise(rows).noise_table()["N to halve"].tolist()
    [600]
    """
    sub = counts if items is None else counts.sel(item=list(items))
    out = []
    for p in report.pair_records():
        a, b = str(p["name_a"]), str(p["name_b"])
        try:
            nd = noise_from_counts(sub, (b, a))  # D = A - B, as the pair's delta
        except InputError:
            return []
        out.append({"name_a": a, "name_b": b, **{k: v for k, v in nd.items() if k != "versions"}})
    return out
