"""The switch analysis's typed result: :class:`SwitchResult` (``switch.json``), what
:func:`bayesrc.switch.analyse_switch` returns and ``bayesrc.load`` gives back: one class in memory
and on disk."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrc.errors import InputError
from bayesrc.plotting import new_figure
from bayesrc.results import Result, register
from bayesrc.switch.factor import factor_summary


@register
class SwitchResult(Result):
    """The switch analysis (``switch.json``): switch effects, LS and Bayesian factor fits per benchmark.

    :func:`bayesrc.switch.analyse_switch` returns one and ``bayesrc.load("switch.json")`` gives it
    back (what ``bayesrc switch`` writes): the same accessors in memory and from disk, and a result
    equals its saved and reloaded copy. Per benchmark the payload's ``benchmarks.NAME`` block holds
    the models, cell means, effects, the least-squares fit (``mu``, ``alpha``, ``beta``, ``r2``,
    ``cv_r2``, ``noise_floor_r2``, ``intervals``, ``cells``; null with fewer than 3 models) and
    ``bayes`` (backend -> gated fit); the tables below are typed views of it.

    Examples
    --------
    >>> from bayesrc.switch import analyse_switch, simulate_switch
    >>> res = analyse_switch(simulate_switch(4, 30, seed=3).data, n_boot=100, backends=())
    >>> res.benchmarks, res.effects().shape[0], res.models("sim")
    (['sim'], 12, ['model-0', 'model-1', 'model-2', 'model-3'])
    >>> res.effects_matrix().shape  # rows prefix, columns suffix
    (4, 4)
    >>> res.correlation is None  # α and β across benchmarks need two of them
    True
    """

    main_file = "switch.json"
    kind = "switch"
    field_kinds = {  # what the tables, the figures and the report read (bayesrc.fields.check_fields)
        "benchmarks": "object",
        "benchmarks.*": "object",
        "benchmarks.*.{mu,r2,cv_r2}": "number",
        "benchmarks.*.noise_floor_r2.{mean,p025,p975}": "number",
        "benchmarks.*.{alpha,beta,alpha_se,beta_se}.*": "number",
        "benchmarks.*.{cells,effects,cell_means,intervals}": "records",
        "benchmarks.*.{cells,effects,cell_means}.[].{prefix,suffix}": "text",
        "benchmarks.*.cells.[].{observed,pred,resid,loo_pred}": "number",
        "benchmarks.*.effects.[].{delta,ci_low,ci_high,se,p,p_adjusted}": "number",
        "benchmarks.*.effects.[].stars": "text",
        "benchmarks.*.cell_means.[].{mean,ci_low,ci_high,n}": "number",
        "benchmarks.*.models": "texts",
    }

    @property
    def benchmarks(self) -> list[str]:
        return list(self.payload.get("benchmarks", {}))

    def benchmark(self, name: str) -> dict:
        """The ``benchmarks.NAME`` block of ``switch.json``."""
        return self.payload["benchmarks"][name]

    def models(self, benchmark: str | None = None) -> list[str]:
        """A benchmark's models, in the order of its matrices' rows and columns."""
        return list(self.benchmark(benchmark or self.benchmarks[0])["models"])

    @property
    def settings(self) -> dict:
        """The analysis's settings: n_boot, seed, backends, draws, tune, chains, pairing_rho."""
        return self.payload["settings"]

    @property
    def correlation(self) -> dict | None:
        """Correlation of α and of β between the two benchmarks' LS fits (:func:`bayesrc.switch.factor_correlation`);
        alpha and beta are floats (NaN with fewer than 3 models in common), n_models an int; None
        unless exactly two benchmarks have a factor model."""
        c = self.payload.get("correlation")
        return None if c is None else {**c, "alpha": _float(c["alpha"]), "beta": _float(c["beta"])}

    @property
    def failed_fits(self) -> list[str]:
        """``benchmark/backend`` of every Bayesian factor fit that failed the convergence gate."""
        return list(self.failed_fit_reasons())

    def failed_fit_reasons(self) -> dict[str, str]:
        """``{benchmark/backend: the gate's worst diagnostic}`` of the failed Bayesian fits."""
        return {
            f"{b}/{n}": (d.get("diagnostics") or {}).get("worst", "")
            for b, r in self.payload.get("benchmarks", {}).items()
            for n, d in r.get("bayes", {}).items()
            if not d.get("passed")
        }

    def effects(self, benchmark: str | None = None):
        """Switch effects (prefix, suffix, delta, interval, stars) of a benchmark."""
        b = benchmark or self.benchmarks[0]
        return _one_row_per_cell(pd.DataFrame(self.benchmark(b).get("effects", [])), f"benchmarks.{b}.effects")

    def effects_matrix(self, benchmark: str | None = None, column: str = "delta") -> pd.DataFrame:
        """A column of :meth:`effects` (default Δ) as a models x models matrix: rows prefix, columns
        suffix, in the models' order; NaN on the diagonal and where a cell has no effect."""
        b = benchmark or self.benchmarks[0]
        return _square(self.effects(b), self.models(b), column)

    def cells(self, benchmark: str | None = None):
        """Observed switch cells with the LS factor model's fit (prefix, suffix, observed, pred, resid,
        loo_pred), largest ``|resid|`` first; empty without a factor model."""
        b = benchmark or self.benchmarks[0]
        return _one_row_per_cell(pd.DataFrame(self.benchmark(b).get("cells") or []), f"benchmarks.{b}.cells")

    def residual_matrix(self, benchmark: str | None = None) -> pd.DataFrame:
        """The LS factor model's residuals as a models x models matrix (as :meth:`effects_matrix`)."""
        b = benchmark or self.benchmarks[0]
        return _square(self.cells(b), self.models(b), "resid")

    def intervals(self, benchmark: str | None = None) -> pd.DataFrame:
        """The LS fit's α and β with intervals (term, model, estimate, se, ci_low, ci_high;
        :meth:`bayesrc.switch.AdditiveFit.intervals`); empty without a factor model."""
        return pd.DataFrame(self.benchmark(benchmark or self.benchmarks[0]).get("intervals") or [])

    def cell_means(self, benchmark: str | None = None) -> pd.DataFrame:
        """Mean score of every (prefix, suffix) cell with its interval and episode count."""
        return pd.DataFrame(self.benchmark(benchmark or self.benchmarks[0])["cell_means"])

    def factors(self, benchmark: str | None = None) -> pd.DataFrame:
        """The least-squares factor model's α (prefix influence) and β (suffix susceptibility) per model with their
        standard errors: :meth:`bayesrc.switch.AdditiveFit.summary`'s table (empty without a factor model)."""
        b = self.benchmark(benchmark or self.benchmarks[0])
        if not b.get("alpha"):
            return pd.DataFrame(columns=["model", "alpha", "alpha_se", "beta", "beta_se"])
        return factor_summary(b["alpha"], b["alpha_se"], b["beta"], b["beta_se"])

    def factor_table(self, benchmark: str | None = None) -> pd.DataFrame:
        """The Bayesian factor models' posterior summaries of μ, τ, α and β, one row per backend and term:
        :meth:`bayesrc.switch.BayesFactorFit.summary`'s table with the backend in front."""
        rows = []
        for backend, d in self.benchmark(benchmark or self.benchmarks[0]).get("bayes", {}).items():
            for term in ("mu", "tau", "alpha", "beta"):
                by_model = d.get(term, {}) if term in ("alpha", "beta") else {"": d.get(term)}
                rows += [{"backend": backend, "term": term, "model": m, **v} for m, v in by_model.items() if v]
        return pd.DataFrame(rows)

    def summary(self) -> pd.DataFrame:
        """One row per benchmark: models, cells, significant cells (95 %, before and after BH), μ, R²,
        the noise-floor R² (mean, 97.5 %), CV R² and each Bayesian fit's gate (NaN where not fitted)."""
        rows = []
        for b, r in self.payload.get("benchmarks", {}).items():
            eff = r.get("effects", [])
            floor = r.get("noise_floor_r2") or {}
            rows.append(
                {
                    "benchmark": b,
                    "models": len(r.get("models", [])),
                    "cells": len(eff),
                    "significant_95": sum(1 for e in eff if e.get("stars")),
                    "significant_95_adjusted": sum(bool(e["significant_95_adjusted"]) for e in eff)
                    if all("significant_95_adjusted" in e for e in eff)
                    else np.nan,
                    "mu": _float(r.get("mu")),
                    "r2": _float(r.get("r2")),
                    "noise_floor_r2": _float(floor.get("mean")),
                    "noise_floor_r2_p975": _float(floor.get("p975")),
                    "cv_r2": _float(r.get("cv_r2")),
                    "bayes_passed": ",".join(
                        f"{n}={'yes' if d.get('passed') else 'NO'}" for n, d in r.get("bayes", {}).items()
                    ),
                }
            )
        return pd.DataFrame(rows)

    def plot_effects(self, benchmark: str | None = None, ax=None):
        """Heatmap of the switch effects Δ_ab (rows prefix, columns suffix); returns the Figure."""
        b = benchmark or self.benchmarks[0]
        models = self.models(b)
        vals = self.effects_matrix(b).to_numpy(float)
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
        return f"{len(self.benchmarks)} benchmark(s)" + (
            f", failed fits: {', '.join(self.failed_fits)}" if self.failed_fits else ""
        )


def _float(x) -> float:
    """A number of the payload as a float: NaN where ``switch.json`` holds null (JSON has no NaN)."""
    return np.nan if x is None else float(x)


def _one_row_per_cell(table: pd.DataFrame, field: str) -> pd.DataFrame:
    """``table`` if it holds each (prefix, suffix) cell once; else an InputError naming the field (a matrix
    of the cells cannot be formed)."""
    if not {"prefix", "suffix"} <= set(table.columns):
        return table
    twice = table.duplicated(["prefix", "suffix"])
    if twice.any():
        prefix, suffix = table.loc[twice, ["prefix", "suffix"]].iloc[0]
        raise InputError(f"the cell {prefix} -> {suffix} appears twice", field=field)
    return table


def _square(cells: pd.DataFrame, models: list[str], column: str) -> pd.DataFrame:
    """``column`` of a table of cells (prefix, suffix, ...) as a models x models matrix: rows prefix,
    columns suffix, in the models' order; NaN where the table has no cell."""
    if cells.empty:
        return pd.DataFrame(np.nan, index=pd.Index(models, name="prefix"), columns=pd.Index(models, name="suffix"))
    return cells.pivot(index="prefix", columns="suffix", values=column).reindex(index=models, columns=models)
