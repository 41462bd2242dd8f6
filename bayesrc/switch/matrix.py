"""Cell means and switch effects as xarray objects with dims (prefix, suffix).

Switch effect (paper 004 section 2, SPEC section 4): for an ordered pair a → b,

    Δ_ab = mean_e [ s_e(a → b) − s_e(b → b) ],

paired by episode e against b's own no-switch dialogue (the diagonal). Episode data
give paired BCa intervals (episodes resampled, pairing kept) and stars at the 95 /
99 / 99.9 % levels; the 99.9 % star needs at least ``MIN_BOOT_999`` = 10,000 resamples
(fewer cannot place a 0.05 % tail), otherwise the stars stop at ``**``. Cell
significance is also given after Benjamini-Hochberg over the off-diagonal cells
(``p`` from the normal approximation Δ / SE, ``significant_95_adjusted``).

Every Δ_ab of suffix column b shares the baseline mean s̄_bb, so the cells of a column
are correlated: ``base_cov`` (dim suffix) is Cov(Δ_ab, Δ_cb) for a ≠ c -- the mean
over pairs of cells of the column of the episodes' covariance of the paired
differences over n (episode data), or Var(s̄_bb)(1 − ρ) (cell data; exact for ρ = 0).
The factor model's intervals carry it (:func:`bayesrc.switch.factor.fit_additive`).

Cell summaries (published means and 95 % intervals) carry no pairing, so their
effects get normal intervals with SE² = SE_ab² + SE_bb² -- an upper bound on the
paired SE (positive within-episode correlation only narrows it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from bayesrc.switch.bootstrap import STAR_LEVELS, bca_mean, stars_from_limits
from bayesrc.switch.data import Z95, SwitchData

MIN_BOOT_999 = 10_000


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """BH-adjusted p-values (step-up, monotone); NaN entries stay NaN and are not counted.

    :func:`scipy.stats.false_discovery_control` over the finite entries (it refuses NaN).

    Examples
    --------
    >>> benjamini_hochberg(np.array([0.01, 0.04, 0.03])).round(3).tolist()
    [0.03, 0.04, 0.04]
    """
    p = np.asarray(p, float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    out[ok] = stats.false_discovery_control(p[ok])
    return out


def paired_column_cov(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Paired differences of a (prefix, suffix, episode) score array against the diagonal.

    Returns ``delta``, ``se`` and ``n`` (k, k) of d_e(a→b) = s_e(a→b) − s_e(b→b) and
    ``base_cov`` (k,): for each column b the mean over cell pairs a ≠ c of
    Cov_e(d_ab, d_cb) / n_b (pairwise-complete episodes) -- the covariance the shared
    baseline s̄_bb induces between the column's effects.
    """
    k = arr.shape[0]
    delta, se, n = np.full((k, k), np.nan), np.full((k, k), np.nan), np.zeros((k, k))
    base_cov = np.full(k, np.nan)
    for b in range(k):
        d = arr[:, b, :] - arr[b, b, :][None, :]  # (prefix, episode)
        rows = [a for a in range(k) if a != b]
        for a in rows:
            x = d[a][np.isfinite(d[a])]
            if x.size:
                delta[a, b], n[a, b] = x.mean(), x.size
                se[a, b] = x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else np.nan
        D = d[rows]
        if np.isfinite(D).all() and D.shape[1] > 1:  # the usual case: one covariance matrix
            C = np.atleast_2d(np.cov(D)) / D.shape[1]  # two models: one cell per column, no pair
            covs = list(C[np.triu_indices(len(rows), 1)])
        else:
            covs = []
            for i, a in enumerate(rows):
                for c in rows[i + 1 :]:
                    ok = np.isfinite(d[a]) & np.isfinite(d[c])
                    if ok.sum() > 1:
                        # Cov of the two cell means: sample covariance over the shared episodes * n_shared / (n_a n_c).
                        cov = np.cov(d[a][ok], d[c][ok])[0, 1]
                        covs.append(cov * ok.sum() / (n[a, b] * n[c, b]))
        if covs:
            base_cov[b] = float(np.mean(covs))
    return delta, se, n, base_cov


def _single(data: SwitchData) -> tuple[str, list[str], pd.DataFrame]:
    if len(data.benchmarks) != 1:
        raise ValueError(f"select one benchmark first (data.select(name)); have {data.benchmarks}")
    bench = data.benchmarks[0]
    return bench, data.models[bench], data.frame


def _empty(models: list[str], fill: float = np.nan) -> np.ndarray:
    return np.full((len(models), len(models)), fill)


def _dataset(models: list[str], bench: str, **vars_: np.ndarray) -> xr.Dataset:
    coords = {"prefix": models, "suffix": models}
    ds = xr.Dataset({k: (("prefix", "suffix"), v) for k, v in vars_.items()}, coords=coords)
    ds.attrs["benchmark"] = bench
    for v in ds.data_vars.values():
        v.attrs["benchmark"] = bench
    return ds


def episode_array(data: SwitchData) -> xr.DataArray:
    """Scores as a DataArray (prefix, suffix, episode); NaN where a cell lacks an episode.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> episode_array(sim.data).dims
    ('prefix', 'suffix', 'episode')
    """
    bench, models, df = _single(data)
    da = df.set_index(["prefix", "suffix", "episode"])["score"].to_xarray().reindex(prefix=models, suffix=models)
    da.name = "score"
    da.attrs["benchmark"] = bench
    return da


def cell_means(data: SwitchData, *, n_boot: int = 1000, level: float = 0.95, seed: int | None = 0) -> xr.Dataset:
    """Cell means with BCa intervals (episodes) or the published intervals (cells).

    Returns a Dataset (prefix, suffix) with ``mean``, ``ci_low``, ``ci_high``, ``n``.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> cell_means(sim.data, n_boot=100)["mean"].dims
    ('prefix', 'suffix')
    """
    bench, models, df = _single(data)
    k = len(models)
    idx = {m: i for i, m in enumerate(models)}
    mean, lo, hi, n = _empty(models), _empty(models), _empty(models), np.zeros((k, k))
    if data.kind == "cells":
        for r in df.itertuples():
            i, j = idx[r.prefix], idx[r.suffix]
            mean[i, j], lo[i, j], hi[i, j], n[i, j] = r.mean, r.ci_low, r.ci_high, r.n
        interval = "published 95% interval"
    else:
        rng = np.random.default_rng(seed)
        for (p, s), g in df.groupby(["prefix", "suffix"], sort=False):
            i, j = idx[p], idx[s]
            m, l_, h_ = bca_mean(g["score"].to_numpy(), n_boot=n_boot, levels=(level,), rng=rng)
            mean[i, j], lo[i, j], hi[i, j], n[i, j] = m, l_[0], h_[0], len(g)
        interval = f"BCa {level:.0%}, {n_boot} resamples of episodes"
    ds = _dataset(models, bench, mean=mean, ci_low=lo, ci_high=hi, n=n)
    ds.attrs["interval"] = interval
    return ds


def effects_from_scores(
    scores: np.ndarray, models: list[str], *, n_boot: int = 1000, seed: int | None = 0, benchmark: str = ""
) -> xr.Dataset:
    """Switch effects from a (prefix, suffix, episode) score array (NaN: no episode).

    What :func:`switch_effects` computes for episode data, without the loading step:
    paired Δ, SE, ``base_cov``, BCa intervals and stars (``n_boot > 0``) and the
    BH-adjusted significance.
    """
    values = np.asarray(scores, float)
    k = len(models)
    lo, hi = _empty(models), _empty(models)
    stars = np.full((k, k), "", dtype=object)
    delta, se, n, base_cov = paired_column_cov(values)
    rng = np.random.default_rng(seed)
    # The 99.9% limit needs >= MIN_BOOT_999 resamples; with fewer only 95 / 99 % stars.
    levels = STAR_LEVELS if n_boot >= MIN_BOOT_999 else STAR_LEVELS[:2]
    for j in range(k if n_boot > 0 else 0):  # n_boot = 0: point estimates, SEs and p only
        base = values[j, j]
        for i in range(k):
            if i == j:
                continue
            diff = values[i, j] - base
            diff = diff[np.isfinite(diff)]
            if diff.size == 0:
                continue
            _, l_, h_ = bca_mean(diff, n_boot=n_boot, levels=levels, rng=rng)
            lo[i, j], hi[i, j] = l_[0], h_[0]
            stars[i, j] = stars_from_limits(l_, h_)[()]
    interval = f"paired BCa 95%, {n_boot} resamples of episodes" + (
        "" if n_boot >= MIN_BOOT_999 else f"; 99.9% stars need >= {MIN_BOOT_999} resamples"
    )
    return _finish(models, benchmark, delta, lo, hi, se, n, stars, base_cov, interval)


def _finish(models, bench, delta, lo, hi, se, n, stars, base_cov, interval) -> xr.Dataset:
    k = len(models)
    np.fill_diagonal(delta, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        pval = 2 * stats.norm.sf(np.abs(delta) / se)
    off = ~np.eye(k, dtype=bool) & np.isfinite(pval)
    p_adj = np.full((k, k), np.nan)
    p_adj[off] = benjamini_hochberg(pval[off])
    ds = _dataset(
        models,
        bench,
        delta=delta,
        ci_low=lo,
        ci_high=hi,
        se=se,
        n=n,
        stars=stars,
        p=np.where(off, pval, np.nan),
        p_adjusted=p_adj,
        significant_95_adjusted=np.where(off, p_adj <= 0.05, False),
    )
    ds["base_cov"] = ("suffix", base_cov)
    ds.attrs["interval"] = interval
    ds.attrs["adjustment"] = "Benjamini-Hochberg over the off-diagonal cells, p from Δ / SE (normal)"
    return ds


def switch_effects(
    data: SwitchData, *, n_boot: int = 1000, seed: int | None = 0, pairing_rho: float = 0.0
) -> xr.Dataset:
    """Switch effects Δ_ab with intervals and significance stars, dims (prefix, suffix).

    Variables: ``delta`` (0 on the diagonal), ``ci_low``/``ci_high`` (95 %), ``se``,
    ``n`` (paired episodes) and ``stars`` (``'*'`` / ``'**'`` / ``'***'``: the 95 / 99 / 99.9 %
    interval excludes zero). ``pairing_rho`` (cell data only): assumed within-episode
    correlation of a → b and b → b scores, SE² = SE_ab² + SE_bb² − 2ρ SE_ab SE_bb
    (0: the unpaired upper bound). ``n_boot = 0`` (episode data): no BCa intervals or stars,
    only Δ, SE, ``base_cov`` and the BH-adjusted significance.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> eff = switch_effects(sim.data, n_boot=100)
    >>> eff["delta"].dims, float(eff["delta"][0, 0])  # the diagonal is the reference: 0
    (('prefix', 'suffix'), 0.0)
    """
    bench, models, df = _single(data)
    k = len(models)
    idx = {m: i for i, m in enumerate(models)}
    delta, lo, hi, se = _empty(models), _empty(models), _empty(models), _empty(models)
    n = np.zeros((k, k))
    stars = np.full((k, k), "", dtype=object)
    base_cov = np.full(k, np.nan)
    if data.kind == "cells":
        cell = {(r.prefix, r.suffix): r for r in df.itertuples()}
        for (p, s), r in cell.items():
            if p == s:
                base_cov[idx[s]] = r.se**2 * (1 - pairing_rho)
        z = np.asarray([Z95, 2.5758293035489, 3.2905267314919255])
        for (p, s), r in cell.items():
            if p == s or (s, s) not in cell:
                continue
            b = cell[(s, s)]
            i, j = idx[p], idx[s]
            delta[i, j] = r.mean - b.mean
            se[i, j] = np.sqrt(r.se**2 + b.se**2 - 2 * pairing_rho * r.se * b.se)
            lo[i, j], hi[i, j] = delta[i, j] - Z95 * se[i, j], delta[i, j] + Z95 * se[i, j]
            n[i, j] = min(r.n, b.n)
            stars[i, j] = "*" * int((abs(delta[i, j]) > z * se[i, j]).sum())
        interval = (
            "normal 95% from published cell intervals, SE^2 = SE_ab^2 + SE_bb^2 - 2 rho SE_ab SE_bb, "
            f"rho = {pairing_rho}"
        )
    else:
        return effects_from_scores(episode_array(data).to_numpy(), models, n_boot=n_boot, seed=seed, benchmark=bench)
    return _finish(models, bench, delta, lo, hi, se, n, stars, base_cov, interval)


def effects_frame(effects: xr.Dataset, *, off_diagonal: bool = True) -> pd.DataFrame:
    """Tidy table (prefix, suffix, delta, ci_low, ci_high, se, n, stars, p, p_adjusted, significant_95_adjusted).

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> len(effects_frame(switch_effects(sim.data, n_boot=0)))  # off-diagonal cells
    12
    """
    df = effects.drop_vars("base_cov", errors="ignore").to_dataframe().reset_index()
    if off_diagonal:
        df = df[df["prefix"] != df["suffix"]]
    return df.dropna(subset=["delta"]).reset_index(drop=True)


def format_matrix(effects: xr.Dataset, *, digits: int = 3) -> pd.DataFrame:
    """The paper's table: Δ with stars, rows prefix, columns suffix.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> format_matrix(switch_effects(sim.data, n_boot=0)).shape
    (4, 4)
    """
    d = effects["delta"].to_numpy()
    s = effects["stars"].to_numpy()
    text = np.vectorize(lambda v, st: "" if not np.isfinite(v) else f"{v:+.{digits}f}{st}")(d, s)
    return pd.DataFrame(text, index=effects["prefix"].to_numpy(), columns=effects["suffix"].to_numpy())
