"""The switch analysis's typed result: :class:`SwitchResult` (``switch.json``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrc.plotting import new_figure
from bayesrc.results import Result, register


@register
class SwitchResult(Result):
    """``bayesrc switch`` output (``switch.json``): switch effects, LS and Bayesian factor fits per benchmark.

    Examples
    --------
    >>> from bayesrc.switch import analyse_switch, simulate_switch
    >>> res = analyse_switch(simulate_switch(4, 30, seed=3).data, n_boot=100, backends=()).to_result()
    >>> res.benchmarks, res.effects().shape[0]
    (['sim'], 12)
    """

    main_file = "switch.json"
    kind = "switch"

    @property
    def benchmarks(self) -> list[str]:
        return list(self.payload.get("benchmarks", {}))

    def benchmark(self, name: str) -> dict:
        return self.payload["benchmarks"][name]

    @property
    def failed_fits(self) -> list[str]:
        """``benchmark/backend`` of every Bayesian factor fit that failed the convergence gate."""
        return list(self.failed_fit_reasons())

    def failed_fit_reasons(self) -> dict[str, str]:
        """``{benchmark/backend: the gate's worst diagnostic}`` of the failed Bayesian fits."""
        return {f"{b}/{n}": (d.get("diagnostics") or {}).get("worst", "") for b, r in self.payload.get("benchmarks", {}).items() for n, d in r.get("bayes", {}).items() if not d.get("passed")}

    def effects(self, benchmark: str | None = None):
        """Switch effects (prefix, suffix, delta, interval, stars) of a benchmark."""
        return pd.DataFrame(self.benchmark(benchmark or self.benchmarks[0]).get("effects", []))

    def cells(self, benchmark: str | None = None):
        """Observed switch cells with the factor model's fit (prefix, suffix, observed, fitted, resid, ...)."""
        return pd.DataFrame(self.benchmark(benchmark or self.benchmarks[0]).get("cells") or [])

    def factors(self, benchmark: str | None = None):
        """The additive factor model's α (prefix influence) and β (suffix susceptibility) per model."""
        b = self.benchmark(benchmark or self.benchmarks[0])
        ab = pd.DataFrame({"alpha (prefix influence)": pd.Series(b.get("alpha") or {}, dtype=float), "beta (suffix susceptibility)": pd.Series(b.get("beta") or {}, dtype=float)})
        return ab.rename_axis("model").reset_index()

    def factor_table(self, benchmark: str | None = None):
        """Posterior summary of μ, τ, α and β for every backend fitted (long format)."""
        rows = []
        for backend, d in self.benchmark(benchmark or self.benchmarks[0]).get("bayes", {}).items():
            for term, v in d.get("terms", {}).items():
                rows.append({"backend": backend, "term": term, **v})
        return pd.DataFrame(rows)

    def summary(self):
        rows = []
        for b, r in self.payload.get("benchmarks", {}).items():
            eff = r.get("effects", [])
            rows.append({
                "benchmark": b, "models": len(r.get("models", [])), "cells": len(eff),
                "significant_95": sum(1 for e in eff if e.get("stars")), "mu": r.get("mu"), "r2": r.get("r2"), "cv_r2": r.get("cv_r2"),
                "bayes_passed": ",".join(f"{n}={'yes' if d.get('passed') else 'NO'}" for n, d in r.get("bayes", {}).items()),
            })  # fmt: skip
        return pd.DataFrame(rows)

    def plot_effects(self, benchmark: str | None = None, ax=None):
        """Heatmap of the switch effects Δ_ab (rows prefix, columns suffix); returns the Figure."""
        b = benchmark or self.benchmarks[0]
        models = self.benchmark(b)["models"]
        eff = self.effects(b)
        pos = {m: i for i, m in enumerate(models)}
        vals = np.full((len(models), len(models)), np.nan)
        for r in eff.itertuples():
            if r.delta is not None and np.isfinite(r.delta):
                vals[pos[r.prefix], pos[r.suffix]] = r.delta
        fig = ax.figure if ax is not None else new_figure(figsize=(1.0 + 0.8 * len(models), 0.8 + 0.7 * len(models)))
        ax = ax or fig.add_subplot()
        lim = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
        im = ax.imshow(vals, cmap="RdBu", vmin=-lim, vmax=lim)
        ax.set_xticks(range(len(models)), models, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(models)), models, fontsize=7)
        ax.set_xlabel("suffix model")
        ax.set_ylabel("prefix model")
        fig.colorbar(im, ax=ax, shrink=0.8)
        return fig

    def _headline(self) -> str:
        return f"{len(self.benchmarks)} benchmark(s)" + (f", failed fits: {', '.join(self.failed_fits)}" if self.failed_fits else "")
