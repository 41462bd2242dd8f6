"""One call from switch data to every result of SPEC section 4 (what the CLI writes)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.io import atomic_write_bytes
from bayesrc.switch.bayes import factor_data, fit_factor_bayes
from bayesrc.switch.data import SwitchData
from bayesrc.switch.factor import AdditiveFit, factor_correlation, fit_additive
from bayesrc.switch.matrix import cell_means, effects_frame, switch_effects
from bayesrc.switch.result import SwitchResult

MIN_MODELS_NOTE = "the additive factor model needs at least 3 models (k(k-1) cells >= 2k-1 parameters); not fitted"


@dataclass
class BenchmarkResult:
    benchmark: str
    models: list[str]
    means: xr.Dataset
    effects: xr.Dataset
    ls: AdditiveFit | None  # None with fewer than 3 models (μ, α, β not identified)
    bayes: dict = field(default_factory=dict)  # backend -> BayesFactorFit

    def to_dict(self) -> dict:
        means = self.means.to_dataframe().reset_index()
        out = {"models": self.models, "interval": self.effects.attrs.get("interval")}
        if self.ls is not None:
            out.update(self.ls.to_dict())
        else:
            out.update({"mu": None, "alpha": None, "beta": None, "r2": None, "cv_r2": None, "noise_floor_r2": None, "cells": [], "note": MIN_MODELS_NOTE})
        out["adjustment"] = self.effects.attrs.get("adjustment")
        out["effects"] = effects_frame(self.effects).to_dict(orient="records")
        out["cell_means"] = means.to_dict(orient="records")
        out["bayes"] = {}
        for name, fit in self.bayes.items():
            out["bayes"][name] = fit.to_dict()  # gated by bayesrc.bayes.diagnostics.gate ("passed")
        return out


@dataclass
class SwitchAnalysis:
    """Every benchmark's switch effects, LS factor fit and Bayesian factor fits (:func:`analyse_switch`);
    ``to_result()`` gives the saveable :class:`bayesrc.switch.SwitchResult`.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> analysis = analyse_switch(sim.data, n_boot=100, backends=())
    >>> analysis.to_result().summary()["models"].tolist()
    [4]
    """

    data: SwitchData
    results: dict[str, BenchmarkResult]
    settings: dict

    @property
    def correlation(self) -> dict | None:
        fits = [r.ls for r in self.results.values() if r.ls is not None]
        return factor_correlation(fits[0], fits[1]) if len(fits) == 2 else None

    @property
    def failed_fits(self) -> list[str]:
        return [f"{b}/{n}" for b, r in self.results.items() for n, d in r.to_dict()["bayes"].items() if not d["passed"]]

    def summary(self) -> pd.DataFrame:
        rows = []
        for b, r in self.results.items():
            eff = effects_frame(r.effects)
            rows.append(
                {
                    "benchmark": b,
                    "models": len(r.models),
                    "cells": len(eff),
                    "significant_95": int((eff["stars"] != "").sum()),
                    "significant_95_adjusted": int(eff["significant_95_adjusted"].astype(bool).sum()) if "significant_95_adjusted" in eff else np.nan,
                    "mu": r.ls.mu if r.ls else np.nan,
                    "r2": r.ls.r2 if r.ls else np.nan,
                    "noise_floor_r2": (r.ls.noise_floor or {}).get("mean", np.nan) if r.ls else np.nan,
                    "noise_floor_r2_p975": (r.ls.noise_floor or {}).get("p975", np.nan) if r.ls else np.nan,
                    "cv_r2": r.ls.cv_r2 if r.ls else np.nan,
                }
            )
        return pd.DataFrame(rows)

    def to_result(self):
        """The typed, saveable record (:class:`bayesrc.switch.SwitchResult`, ``switch.json``)."""
        return SwitchResult(self.to_dict())

    def to_dict(self) -> dict:
        return {
            "input": self.data.path,
            "kind": self.data.kind,
            "settings": self.settings,
            "benchmarks": {b: r.to_dict() for b, r in self.results.items()},
            "correlation": self.correlation,
        }


def analyse_switch(
    data: SwitchData,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    backends: tuple[str, ...] = ("numpyro", "pymc"),
    draws: int = 500,
    tune: int = 500,
    chains: int = 4,
    pairing_rho: float = 0.0,
    progress: bool | None = None,
) -> SwitchAnalysis:
    """Cell means, switch effects, LS and Bayesian factor fits for every benchmark (``progress``:
    the fits' progress bars, as :class:`~bayesrc.bayes.SamplerConfig`'s).

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> res = analyse_switch(sim.data, n_boot=100, backends=()).to_result()
    >>> res.effects().shape[0]  # off-diagonal cells
    12
    """
    results: dict[str, BenchmarkResult] = {}
    for bench in data.benchmarks:
        sub = data.select(bench)
        means = cell_means(sub, n_boot=n_boot, seed=seed)
        effects = switch_effects(sub, n_boot=n_boot, seed=seed, pairing_rho=pairing_rho)
        factor = len(sub.models[bench]) >= 3
        ls = fit_additive(effects["delta"], se=effects["se"], base_cov=effects["base_cov"], seed=seed) if factor else None
        res = BenchmarkResult(bench, sub.models[bench], means, effects, ls)
        if backends and factor:
            fd = factor_data(sub, pairing_rho=pairing_rho)
            for backend in backends:
                res.bayes[backend] = fit_factor_bayes(fd, backend=backend, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress)
        results[bench] = res
    settings = {"n_boot": n_boot, "seed": seed, "backends": list(backends), "draws": draws, "tune": tune, "chains": chains, "pairing_rho": pairing_rho}
    return SwitchAnalysis(data, results, settings)


def plot_effects(result: BenchmarkResult, path) -> None:
    """Heatmap of Δ_ab with stars (rows prefix, columns suffix)."""
    _heatmap(result.effects["delta"].to_numpy(), result.effects["stars"].to_numpy(), result.models, f"{result.benchmark}: switch effects Δ (prefix → suffix)", path)


def plot_residuals(result: BenchmarkResult, path) -> None:
    """Heatmap of additive-model residuals (off-diagonal cells)."""
    if result.ls is None:
        return
    k = len(result.models)
    pos = {m: i for i, m in enumerate(result.models)}
    res = np.full((k, k), np.nan)
    for r in result.ls.cells.itertuples():
        res[pos[r.prefix], pos[r.suffix]] = r.resid
    title = f"{result.benchmark}: residuals of μ + α + β (R² = {result.ls.r2:.2f}, CV R² = {result.ls.cv_r2:.2f})"
    _heatmap(res, None, result.models, title, path)


def _heatmap(values: np.ndarray, stars, models: list[str], title: str, path) -> None:
    import io

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
