"""Additive prefix/suffix factor model, least squares (paper 004 eq. 1, SPEC section 4).

On the off-diagonal switch effects

    Δ_ab = μ + α_a + β_b + ε_ab,    Σ_a α_a = Σ_b β_b = 0,

α_a is the prefix influence of model a and β_b the suffix susceptibility of b. The
constraints are imposed by the sum-to-zero basis α = C a, β = C b with
C = [I_{K−1}; −1ᵀ] (K × (K−1)), which makes the design X = [1, C[prefix], C[suffix]]
full rank, so ordinary least squares gives the constrained solution. Because the fit
is linear, leave-one-cell-out residuals are exact from the hat matrix:
e_(i) = e_i / (1 − h_ii). Variance explained R² = 1 − SSR/SST (SST about the mean of
the off-diagonal effects); CV R² = 1 − Σ e_(i)² / SST.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats


def sum_to_zero_basis(k: int) -> np.ndarray:
    """C (k × k−1): columns span {v : Σ v = 0}; v = C w."""
    return np.vstack([np.eye(k - 1), -np.ones((1, k - 1))])


def off_diagonal_cells(delta: xr.DataArray) -> pd.DataFrame:
    """Finite off-diagonal cells of a (prefix, suffix) matrix as (prefix, suffix, observed)."""
    df = delta.rename("observed").to_dataframe().reset_index()[["prefix", "suffix", "observed"]]
    df = df[(df["prefix"] != df["suffix"]) & np.isfinite(df["observed"])]
    return df.reset_index(drop=True)


def design_matrix(prefix_idx: np.ndarray, suffix_idx: np.ndarray, k: int) -> np.ndarray:
    """X = [1, C[prefix], C[suffix]] (n × 2k−1)."""
    C = sum_to_zero_basis(k)
    return np.column_stack([np.ones(len(prefix_idx)), C[prefix_idx], C[suffix_idx]])


@dataclass
class AdditiveFit:
    """Least-squares fit of Δ_ab = μ + α_a + β_b + ε_ab.

    ``alpha`` / ``beta``: pandas Series indexed by model (sum zero); ``alpha_se`` /
    ``beta_se``: OLS standard errors; ``cells``: prefix, suffix, observed, pred, resid,
    loo_pred, loo_resid sorted by |resid| (largest first).
    """

    benchmark: str
    models: list[str]
    mu: float
    alpha: pd.Series
    beta: pd.Series
    mu_se: float
    alpha_se: pd.Series
    beta_se: pd.Series
    r2: float
    cv_r2: float
    resid_sd: float
    df_resid: int
    cells: pd.DataFrame
    level: float = 0.95
    extra: dict = field(default_factory=dict)

    def intervals(self) -> pd.DataFrame:
        """α and β with t intervals (df = cells − (2K − 1))."""
        t = stats.t.ppf((1 + self.level) / 2, self.df_resid) if self.df_resid > 0 else np.nan
        rows = []
        for term, est, se in (("alpha", self.alpha, self.alpha_se), ("beta", self.beta, self.beta_se)):
            for m in self.models:
                rows.append({"term": term, "model": m, "estimate": est[m], "se": se[m], "ci_low": est[m] - t * se[m], "ci_high": est[m] + t * se[m]})
        return pd.DataFrame(rows)

    def summary(self) -> pd.DataFrame:
        """One row per model: α (prefix influence) and β (suffix susceptibility) with SEs."""
        return pd.DataFrame(
            {"model": self.models, "alpha": self.alpha.to_numpy(), "alpha_se": self.alpha_se.to_numpy(), "beta": self.beta.to_numpy(), "beta_se": self.beta_se.to_numpy()}
        )

    def to_dict(self) -> dict:
        ci = self.intervals()
        return {
            "benchmark": self.benchmark,
            "mu": self.mu,
            "mu_se": self.mu_se,
            "alpha": {m: float(v) for m, v in self.alpha.items()},
            "beta": {m: float(v) for m, v in self.beta.items()},
            "alpha_se": {m: float(v) for m, v in self.alpha_se.items()},
            "beta_se": {m: float(v) for m, v in self.beta_se.items()},
            "intervals": ci.to_dict(orient="records"),
            "r2": self.r2,
            "cv_r2": self.cv_r2,
            "resid_sd": self.resid_sd,
            "n_cells": int(len(self.cells)),
            "cells": self.cells[["prefix", "suffix", "observed", "pred", "resid", "loo_pred"]].to_dict(orient="records"),
        }


def fit_additive(delta: xr.DataArray, *, level: float = 0.95) -> AdditiveFit:
    """Least-squares additive model on the off-diagonal cells of ``delta`` (prefix, suffix).

    ``delta`` may be the ``delta`` variable of :func:`~bayesrc.switch.switch_effects`.
    """
    models = [str(m) for m in delta["prefix"].to_numpy()]
    if list(map(str, delta["suffix"].to_numpy())) != models:
        raise ValueError("delta must have the same models, in the same order, on prefix and suffix")
    k = len(models)
    cells = off_diagonal_cells(delta)
    pos = {m: i for i, m in enumerate(models)}
    pi = cells["prefix"].map(pos).to_numpy()
    si = cells["suffix"].map(pos).to_numpy()
    y = cells["observed"].to_numpy(float)
    X = design_matrix(pi, si, k)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise ValueError("too few off-diagonal cells to identify mu, alpha and beta")
    XtX_inv = np.linalg.inv(X.T @ X)
    coef = XtX_inv @ X.T @ y
    pred = X @ coef
    resid = y - pred
    h = np.einsum("ij,jk,ik->i", X, XtX_inv, X)
    loo_resid = resid / (1.0 - h)
    sst = float(((y - y.mean()) ** 2).sum())
    n, p = X.shape
    df_resid = n - p
    s2 = float(resid @ resid / df_resid) if df_resid > 0 else np.nan
    C = sum_to_zero_basis(k)
    # Map (μ, a, b) -> (μ, α, β) and carry the covariance s² (XᵀX)⁻¹ through it.
    M = np.zeros((1 + 2 * k, p))
    M[0, 0] = 1.0
    M[1 : 1 + k, 1:k] = C
    M[1 + k :, k:] = C
    full = M @ coef
    cov = s2 * M @ XtX_inv @ M.T
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    cells = cells.assign(pred=pred, resid=resid, loo_pred=y - loo_resid, loo_resid=loo_resid)
    cells = cells.reindex(cells["resid"].abs().sort_values(ascending=False).index).reset_index(drop=True)
    return AdditiveFit(
        benchmark=str(delta.attrs.get("benchmark", "")),
        models=models,
        mu=float(full[0]),
        alpha=pd.Series(full[1 : 1 + k], index=models, name="alpha"),
        beta=pd.Series(full[1 + k :], index=models, name="beta"),
        mu_se=float(se[0]),
        alpha_se=pd.Series(se[1 : 1 + k], index=models, name="alpha_se"),
        beta_se=pd.Series(se[1 + k :], index=models, name="beta_se"),
        r2=1.0 - float(resid @ resid) / sst if sst > 0 else np.nan,
        cv_r2=1.0 - float(loo_resid @ loo_resid) / sst if sst > 0 else np.nan,
        resid_sd=float(np.sqrt(s2)),
        df_resid=int(df_resid),
        cells=cells,
        level=level,
    )


def factor_correlation(fit_a: AdditiveFit, fit_b: AdditiveFit) -> dict[str, float]:
    """Pearson correlation of α and of β across two benchmarks (models in common)."""
    common = [m for m in fit_a.models if m in set(fit_b.models)]
    if len(common) < 3:
        return {"alpha": float("nan"), "beta": float("nan"), "n_models": len(common)}
    r_a = float(np.corrcoef(fit_a.alpha[common], fit_b.alpha[common])[0, 1])
    r_b = float(np.corrcoef(fit_a.beta[common], fit_b.beta[common])[0, 1])
    return {"alpha": r_a, "beta": r_b, "n_models": len(common)}
