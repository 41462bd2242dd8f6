"""One call from switch data to every result of SPEC section 4: :func:`analyse_switch` returns the
:class:`~bayesrc.switch.SwitchResult` that ``bayesrc switch`` writes (``switch.json``) and
``bayesrc.load`` gives back; :func:`plot_effects` and :func:`plot_residuals` draw the command's PNGs
from it."""

from __future__ import annotations

import io

import numpy as np
import xarray as xr

from bayesrc.config import SamplerConfig
from bayesrc.io import atomic_write_bytes
from bayesrc.switch.bayes import BayesFactorFit, factor_data, fit_factor_bayes
from bayesrc.switch.data import SwitchData
from bayesrc.switch.factor import AdditiveFit, factor_correlation, fit_additive
from bayesrc.switch.matrix import cell_means, effects_frame, switch_effects
from bayesrc.switch.result import SwitchResult

MIN_MODELS_NOTE = "the additive factor model needs at least 3 models (k(k-1) cells >= 2k-1 parameters); not fitted"


def analyse_switch(
    data: SwitchData,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    backends: tuple[str, ...] = ("numpyro", "pymc"),
    draws: int = SamplerConfig.draws,  # every command's sampler defaults, from one place
    tune: int = SamplerConfig.tune,
    chains: int = SamplerConfig.chains,
    pairing_rho: float = 0.0,
    progress: bool | None = None,
) -> SwitchResult:
    """Cell means, switch effects, LS and Bayesian factor fits for every benchmark (``progress``:
    the fits' progress bars, as :class:`~bayesrc.bayes.SamplerConfig`'s).

    Returns
    -------
    SwitchResult
        The record ``bayesrc switch`` writes (``switch.json``): per benchmark the models, cell
        means, switch effects, the least-squares factor fit (with its intervals and cells) and
        each backend's Bayesian fit, and the α / β correlation across two benchmarks. It is the
        object ``bayesrc.load("switch.json")`` gives back after ``save``, and equals it. The
        in-memory pieces (effects Dataset, :class:`~bayesrc.switch.AdditiveFit`,
        :class:`~bayesrc.switch.BayesFactorFit`) come from :func:`switch_effects`,
        :func:`fit_additive` and :func:`fit_factor_bayes`.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> res = analyse_switch(sim.data, n_boot=100, backends=())
    >>> res.effects().shape[0], res.summary()["models"].tolist()  # off-diagonal cells
    (12, [4])
    >>> res.intervals()["term"].unique().tolist()  # the LS fit's α and β with intervals
    ['alpha', 'beta']
    >>> res.save("out/switch")  # doctest: +SKIP
    """
    benchmarks: dict[str, dict] = {}
    fits: list[AdditiveFit] = []
    for bench in data.benchmarks:
        sub = data.select(bench)
        models = sub.models[bench]
        means = cell_means(sub, n_boot=n_boot, seed=seed)
        effects = switch_effects(sub, n_boot=n_boot, seed=seed, pairing_rho=pairing_rho)
        factor = len(models) >= 3  # fewer: μ, α, β not identified
        ls = (
            fit_additive(effects["delta"], se=effects["se"], base_cov=effects["base_cov"], seed=seed)
            if factor
            else None
        )
        bayes = {}
        if backends and factor:
            fd = factor_data(sub, pairing_rho=pairing_rho)
            for backend in backends:
                bayes[backend] = fit_factor_bayes(
                    fd, backend=backend, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress
                )
        benchmarks[bench] = _benchmark_payload(models, means, effects, ls, bayes)
        fits += [ls] if ls is not None else []
    settings = {
        "n_boot": n_boot,
        "seed": seed,
        "backends": list(backends),
        "draws": draws,
        "tune": tune,
        "chains": chains,
        "pairing_rho": pairing_rho,
    }
    correlation = factor_correlation(fits[0], fits[1]) if len(fits) == 2 else None
    return SwitchResult(
        {
            "input": data.path,
            "kind": data.kind,
            "settings": settings,
            "benchmarks": benchmarks,
            "correlation": correlation,
        }
    )


def _benchmark_payload(
    models: list[str], means: xr.Dataset, effects: xr.Dataset, ls: AdditiveFit | None, bayes: dict[str, BayesFactorFit]
) -> dict:
    """The ``benchmarks.NAME`` block of ``switch.json`` from one benchmark's analysis."""
    out = {"models": models, "interval": effects.attrs.get("interval")}
    if ls is not None:
        out.update(ls.to_dict())
    else:
        out.update(
            {
                "mu": None,
                "alpha": None,
                "beta": None,
                "r2": None,
                "cv_r2": None,
                "noise_floor_r2": None,
                "cells": [],
                "note": MIN_MODELS_NOTE,
            }
        )
    out["adjustment"] = effects.attrs.get("adjustment")
    out["effects"] = effects_frame(effects).to_dict(orient="records")
    out["cell_means"] = means.to_dataframe().reset_index().to_dict(orient="records")
    # gated by bayesrc.bayes.diagnostics.gate ("passed")
    out["bayes"] = {name: fit.to_dict() for name, fit in bayes.items()}
    return out


def plot_effects(result: SwitchResult, benchmark: str, path) -> None:
    """PNG heatmap of Δ_ab with stars (rows prefix, columns suffix); the diagonal, the reference, reads 0."""
    delta = result.effects_matrix(benchmark).to_numpy(float, copy=True)  # a copy: the diagonal is set below
    np.fill_diagonal(delta, 0.0)
    stars = result.effects_matrix(benchmark, "stars").fillna("").to_numpy()
    _heatmap(delta, stars, result.models(benchmark), f"{benchmark}: switch effects Δ (prefix → suffix)", path)


def plot_residuals(result: SwitchResult, benchmark: str, path) -> None:
    """PNG heatmap of the additive model's residuals (off-diagonal cells); nothing without a factor model."""
    b = result.benchmark(benchmark)
    if b["mu"] is None:
        return
    r2, cv_r2 = (np.nan if b[k] is None else b[k] for k in ("r2", "cv_r2"))  # null in switch.json: NaN
    title = f"{benchmark}: residuals of μ + α + β (R² = {r2:.2f}, CV R² = {cv_r2:.2f})"
    _heatmap(result.residual_matrix(benchmark).to_numpy(float), None, result.models(benchmark), title, path)


def _heatmap(values: np.ndarray, stars, models: list[str], title: str, path) -> None:
    from matplotlib.figure import Figure  # an explicit Figure: no pyplot, the caller's backend untouched

    k = len(models)
    lim = float(np.nanmax(np.abs(values))) or 1.0
    fig = Figure(figsize=(1.0 + 0.8 * k, 0.8 + 0.7 * k))
    ax = fig.add_subplot()
    im = ax.imshow(values, cmap="RdBu", vmin=-lim, vmax=lim)
    for i in range(k):
        for j in range(k):
            if np.isfinite(values[i, j]):
                txt = f"{values[i, j]:+.3f}" + (stars[i, j] if stars is not None else "")
                ax.text(j, i, txt, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(k), models, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(k), models, fontsize=7)
    ax.set_xlabel("suffix model")
    ax.set_ylabel("prefix model")
    ax.set_title(title, fontsize=8)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write_bytes(path, buf.getvalue())
