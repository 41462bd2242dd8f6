"""Cell means and switch effects as xarray objects with dims (prefix, suffix).

Switch effect (paper 004 section 2, SPEC section 4): for an ordered pair a → b,

    Δ_ab = mean_e [ s_e(a → b) − s_e(b → b) ],

paired by episode e against b's own no-switch dialogue (the diagonal). Episode data
give paired BCa intervals (episodes resampled, pairing kept) and stars at the 95 /
99 / 99.9 % levels. Cell summaries (published means and 95 % intervals) carry no
pairing, so their effects get normal intervals with SE² = SE_ab² + SE_bb² -- an upper
bound on the paired SE (positive within-episode correlation only narrows it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.switch.bootstrap import STAR_LEVELS, bca_mean, stars_from_limits
from bayesrc.switch.data import Z95, SwitchData


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
    """Scores as a DataArray (prefix, suffix, episode); NaN where a cell lacks an episode."""
    bench, models, df = _single(data)
    da = (
        df.set_index(["prefix", "suffix", "episode"])["score"]
        .to_xarray()
        .reindex(prefix=models, suffix=models)
    )
    da.name = "score"
    da.attrs["benchmark"] = bench
    return da


def cell_means(data: SwitchData, *, n_boot: int = 1000, level: float = 0.95, seed: int | None = 0) -> xr.Dataset:
    """Cell means with BCa intervals (episodes) or the published intervals (cells).

    Returns a Dataset (prefix, suffix) with ``mean``, ``ci_low``, ``ci_high``, ``n``.
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


def switch_effects(data: SwitchData, *, n_boot: int = 1000, seed: int | None = 0, pairing_rho: float = 0.0) -> xr.Dataset:
    """Switch effects Δ_ab with intervals and significance stars, dims (prefix, suffix).

    Variables: ``delta`` (0 on the diagonal), ``ci_low``/``ci_high`` (95 %), ``se``,
    ``n`` (paired episodes) and ``stars`` ('*' / '**' / '***': the 95 / 99 / 99.9 %
    interval excludes zero). ``pairing_rho`` (cell data only): assumed within-episode
    correlation of a → b and b → b scores, SE² = SE_ab² + SE_bb² − 2ρ SE_ab SE_bb
    (0: the unpaired upper bound).
    """
    bench, models, df = _single(data)
    k = len(models)
    idx = {m: i for i, m in enumerate(models)}
    delta, lo, hi, se = _empty(models), _empty(models), _empty(models), _empty(models)
    n = np.zeros((k, k))
    stars = np.full((k, k), "", dtype=object)
    if data.kind == "cells":
        cell = {(r.prefix, r.suffix): r for r in df.itertuples()}
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
        interval = f"normal 95% from published cell intervals, SE^2 = SE_ab^2 + SE_bb^2 - 2 rho SE_ab SE_bb, rho = {pairing_rho}"
    else:
        arr = episode_array(data)
        rng = np.random.default_rng(seed)
        for j, s in enumerate(models):
            base = arr.sel(prefix=s, suffix=s).to_numpy()
            for i, p in enumerate(models):
                if p == s:
                    continue
                diff = arr.sel(prefix=p, suffix=s).to_numpy() - base
                diff = diff[np.isfinite(diff)]
                if diff.size == 0:
                    continue
                m, l_, h_ = bca_mean(diff, n_boot=n_boot, levels=STAR_LEVELS, rng=rng)
                delta[i, j], lo[i, j], hi[i, j] = m, l_[0], h_[0]
                se[i, j] = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else np.nan
                n[i, j] = diff.size
                stars[i, j] = stars_from_limits(l_, h_)[()]
        interval = f"paired BCa 95%, {n_boot} resamples of episodes"
    np.fill_diagonal(delta, 0.0)
    ds = _dataset(models, bench, delta=delta, ci_low=lo, ci_high=hi, se=se, n=n, stars=stars)
    ds.attrs["interval"] = interval
    return ds


def effects_frame(effects: xr.Dataset, *, off_diagonal: bool = True) -> pd.DataFrame:
    """Tidy table (prefix, suffix, delta, ci_low, ci_high, se, n, stars)."""
    df = effects.to_dataframe().reset_index()
    if off_diagonal:
        df = df[df["prefix"] != df["suffix"]]
    return df.dropna(subset=["delta"]).reset_index(drop=True)


def format_matrix(effects: xr.Dataset, *, digits: int = 3) -> pd.DataFrame:
    """The paper's table: Δ with stars, rows prefix, columns suffix."""
    d = effects["delta"].to_numpy()
    s = effects["stars"].to_numpy()
    text = np.vectorize(lambda v, st: "" if not np.isfinite(v) else f"{v:+.{digits}f}{st}")(d, s)
    return pd.DataFrame(text, index=effects["prefix"].to_numpy(), columns=effects["suffix"].to_numpy())
