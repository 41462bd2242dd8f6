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

Shared baselines (SPEC section 4): every Δ_ab of column b shares the baseline mean
s̄_bb, whose noise moves the whole column, is absorbed into β_b and never reaches the
residuals, so s² (XᵀX)⁻¹ understates the uncertainty of β (and μ). Given the cells'
noise -- SE_ab² on the diagonal and Cov(Δ_ab, Δ_cb) = ``base_cov[b]`` within a column
(:func:`bayesrc.switch.matrix.switch_effects`) -- the point estimates stay OLS (so the
published residual table reproduces) and their covariance is the GLS-model sandwich

    Cov(coef) = A (V + τ̂² I) Aᵀ,  A = (XᵀX)⁻¹ Xᵀ,
    τ̂² = max(0, (SSR − tr((I − H) V)) / (n − p))   (interaction beyond the cell noise),

with normal intervals. The **noise-floor R²** is the R² of the same fit on cells drawn
from N(0, V): what pure noise at the observed cell noise explains.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    d = delta.transpose("prefix", "suffix")
    pre, suf = d["prefix"].to_numpy(), d["suffix"].to_numpy()
    i, j = np.meshgrid(np.arange(pre.size), np.arange(suf.size), indexing="ij")
    v = d.to_numpy()
    keep = (pre[i] != suf[j]) & np.isfinite(v)
    return pd.DataFrame({"prefix": pre[i][keep], "suffix": suf[j][keep], "observed": v[keep]})


def design_matrix(prefix_idx: np.ndarray, suffix_idx: np.ndarray, k: int) -> np.ndarray:
    """X = [1, C[prefix], C[suffix]] (n × 2k−1)."""
    C = sum_to_zero_basis(k)
    return np.column_stack([np.ones(len(prefix_idx)), C[prefix_idx], C[suffix_idx]])


def factor_summary(alpha: Mapping, alpha_se: Mapping, beta: Mapping, beta_se: Mapping) -> pd.DataFrame:
    """One row per model (in ``alpha``'s order): α (prefix influence) and β (suffix susceptibility) with their standard
    errors. The table of :meth:`AdditiveFit.summary` in memory and of :meth:`bayesrc.switch.SwitchResult.factors`
    from ``switch.json``.

    Examples
    --------
    >>> factor_summary({"a": 0.1, "b": -0.1}, {"a": 0.02, "b": 0.02}, {"a": -0.3, "b": 0.3}, {"a": 0.05, "b": 0.05})
      model  alpha  alpha_se  beta  beta_se
    0     a    0.1      0.02  -0.3     0.05
    1     b   -0.1      0.02   0.3     0.05
    """
    models = list(alpha.keys())
    columns = {"alpha": alpha, "alpha_se": alpha_se, "beta": beta, "beta_se": beta_se}
    return pd.DataFrame({"model": models, **{c: [float(v[m]) for m in models] for c, v in columns.items()}})


@dataclass
class AdditiveFit:
    """Least-squares fit of Δ_ab = μ + α_a + β_b + ε_ab.

    ``alpha`` / ``beta``: pandas Series indexed by model (sum zero); ``alpha_se`` /
    ``beta_se``: OLS standard errors; ``cells``: prefix, suffix, observed, pred, resid,
    loo_pred, loo_resid sorted by ``|resid|`` (largest first).

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> fit = fit_additive(switch_effects(sim.data, n_boot=0)["delta"])
    >>> list(fit.alpha.index) == sim.models
    True
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
    covariance: str = "ols"  # "ols": s² (XᵀX)⁻¹; "shared_baseline": A (V + τ̂² I) Aᵀ
    noise_floor: dict | None = None

    def intervals(self) -> pd.DataFrame:
        """α and β with intervals: normal with the shared-baseline covariance, else t (df = cells − (2K − 1))."""
        if self.covariance == "shared_baseline":
            t = stats.norm.ppf((1 + self.level) / 2)
        else:
            t = stats.t.ppf((1 + self.level) / 2, self.df_resid) if self.df_resid > 0 else np.nan
        rows = []
        for term, est, se in (("alpha", self.alpha, self.alpha_se), ("beta", self.beta, self.beta_se)):
            for m in self.models:
                rows.append(
                    {
                        "term": term,
                        "model": m,
                        "estimate": est[m],
                        "se": se[m],
                        "ci_low": est[m] - t * se[m],
                        "ci_high": est[m] + t * se[m],
                    }
                )
        return pd.DataFrame(rows)

    def summary(self) -> pd.DataFrame:
        """One row per model: α (prefix influence) and β (suffix susceptibility) with SEs (:func:`factor_summary`)."""
        return factor_summary(self.alpha, self.alpha_se, self.beta, self.beta_se)

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
            "covariance": self.covariance,
            "tau2": self.extra.get("tau2"),
            "noise_floor_r2": self.noise_floor,
            "n_cells": int(len(self.cells)),
            "cells": self.cells[["prefix", "suffix", "observed", "pred", "resid", "loo_pred"]].to_dict(
                orient="records"
            ),
        }


def noise_covariance(
    cells: pd.DataFrame, se: xr.DataArray, base_cov: xr.DataArray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cells' noise: ``(var, col_cov, suffix_idx)`` -- SE_ab² per cell, ``base_cov[b]``
    (0 where unknown) per cell's column b, and the cells' column index. The covariance is
    V = diag(var) + col_cov between two different cells of one column (0 across columns)."""
    pos = {str(m): i for i, m in enumerate(se["prefix"].to_numpy())}
    pi = np.array([pos[str(p)] for p in cells["prefix"]])
    si = np.array([pos[str(s)] for s in cells["suffix"]])
    var = se.to_numpy()[pi, si] ** 2
    c = np.nan_to_num(base_cov.to_numpy()[si]) if base_cov is not None else np.zeros(len(si))
    return var, np.minimum(c, var), si


def _dense(var: np.ndarray, c: np.ndarray, col: np.ndarray) -> np.ndarray:
    same = col[:, None] == col[None, :]
    V = np.where(same, c[:, None], 0.0)
    np.fill_diagonal(V, var)
    return V


def noise_floor_r2(
    X: np.ndarray, var: np.ndarray, col_cov: np.ndarray, col: np.ndarray, *, n_draws: int = 1000, seed: int = 0
) -> dict:
    """R² of the additive fit on cells drawn with the cells' noise and no switch effects.

    Each draw is Δ*_ab = sqrt(var_ab − c_b) z_ab + sqrt(c_b) η_b (z, η standard normal):
    exactly the covariance of :func:`noise_covariance`. Mean and 2.5 / 97.5 % of R².
    """
    rng = np.random.default_rng(seed)
    n = len(var)
    k = int(col.max()) + 1
    Y = rng.standard_normal((n_draws, n)) * np.sqrt(var - col_cov) + rng.standard_normal((n_draws, k))[
        :, col
    ] * np.sqrt(col_cov)
    H = X @ np.linalg.solve(X.T @ X, X.T)  # hat matrix (X has full column rank)
    R = Y - Y @ H
    sst = ((Y - Y.mean(1, keepdims=True)) ** 2).sum(1)
    r2 = 1 - (R**2).sum(1) / sst
    lo, hi = np.percentile(r2, [2.5, 97.5])
    return {"mean": float(r2.mean()), "p025": float(lo), "p975": float(hi), "draws": int(n_draws)}


def fit_additive(
    delta: xr.DataArray,
    *,
    level: float = 0.95,
    se: xr.DataArray | None = None,
    base_cov: xr.DataArray | None = None,
    n_noise: int = 1000,
    seed: int = 0,
) -> AdditiveFit:
    """Least-squares additive model on the off-diagonal cells of ``delta`` (prefix, suffix).

    ``delta`` may be the ``delta`` variable of :func:`~bayesrc.switch.switch_effects`.
    ``se`` and ``base_cov`` (the same Dataset's ``se`` and ``base_cov``): the cells' noise;
    given, α, β and μ get the shared-baseline covariance (module docstring) and the
    noise-floor R² is computed from ``n_noise`` draws.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> eff = switch_effects(simulate_switch(4, 60, seed=1).data, n_boot=200)
    >>> fit = fit_additive(eff["delta"], se=eff["se"], base_cov=eff["base_cov"])
    >>> fit.covariance
    'shared_baseline'
    """
    models = _matrix_models(delta)
    k = len(models)
    cells = off_diagonal_cells(delta)
    X = _cells_design(cells, models)
    y = cells["observed"].to_numpy(float)
    ls = _least_squares(X, y)
    noise = _cell_noise(cells, se, base_cov)
    cov_coef, tau2 = _coef_covariance(X, ls, noise)
    floor = noise_floor_r2(X, *noise, n_draws=n_noise, seed=seed) if noise is not None else None
    M = _constraint_map(k, X.shape[1])
    full = M @ ls.coef
    se_full = np.sqrt(np.clip(np.diag(M @ cov_coef @ M.T), 0, None))
    sst = float(((y - y.mean()) ** 2).sum())
    return AdditiveFit(
        benchmark=str(delta.attrs.get("benchmark", "")),
        models=models,
        mu=float(full[0]),
        alpha=pd.Series(full[1 : 1 + k], index=models, name="alpha"),
        beta=pd.Series(full[1 + k :], index=models, name="beta"),
        mu_se=float(se_full[0]),
        alpha_se=pd.Series(se_full[1 : 1 + k], index=models, name="alpha_se"),
        beta_se=pd.Series(se_full[1 + k :], index=models, name="beta_se"),
        r2=1.0 - float(ls.resid @ ls.resid) / sst if sst > 0 else np.nan,
        cv_r2=1.0 - float(ls.loo_resid @ ls.loo_resid) / sst if sst > 0 else np.nan,
        resid_sd=float(np.sqrt(ls.s2)),
        df_resid=int(ls.df_resid),
        cells=_cells_table(cells, y, ls),
        level=level,
        extra={} if tau2 is None else {"tau2": tau2},
        covariance="ols" if noise is None else "shared_baseline",
        noise_floor=floor,
    )


def _matrix_models(delta: xr.DataArray) -> list[str]:
    """The models of ``delta``: the same, in the same order, on prefix and suffix."""
    models = [str(m) for m in delta["prefix"].to_numpy()]
    if list(map(str, delta["suffix"].to_numpy())) != models:
        raise ValueError("delta must have the same models, in the same order, on prefix and suffix")
    return models


def _cells_design(cells: pd.DataFrame, models: list[str]) -> np.ndarray:
    """The design X of the cells (:func:`design_matrix`); cells that cannot identify μ, α and β are an error."""
    pos = {m: i for i, m in enumerate(models)}
    X = design_matrix(cells["prefix"].map(pos).to_numpy(), cells["suffix"].map(pos).to_numpy(), len(models))
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise ValueError("too few off-diagonal cells to identify mu, alpha and beta")
    return X


@dataclass(frozen=True)
class _LeastSquares:
    """OLS of y on X in the sum-to-zero basis, with the leave-one-cell-out residuals."""

    XtX_inv: np.ndarray
    coef: np.ndarray
    pred: np.ndarray
    resid: np.ndarray
    loo_resid: np.ndarray
    df_resid: int
    s2: float


def _least_squares(X: np.ndarray, y: np.ndarray) -> _LeastSquares:
    """OLS; the fit is linear, so leave-one-out residuals are exact from the hat matrix: e_i / (1 − h_ii)."""
    XtX_inv = np.linalg.inv(X.T @ X)
    coef = XtX_inv @ X.T @ y
    pred = X @ coef
    resid = y - pred
    h = np.einsum("ij,jk,ik->i", X, XtX_inv, X)
    n, p = X.shape
    df_resid = n - p
    s2 = float(resid @ resid / df_resid) if df_resid > 0 else np.nan
    return _LeastSquares(
        XtX_inv=XtX_inv, coef=coef, pred=pred, resid=resid, loo_resid=resid / (1.0 - h), df_resid=df_resid, s2=s2
    )


def _cell_noise(
    cells: pd.DataFrame, se: xr.DataArray | None, base_cov: xr.DataArray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`noise_covariance` of the cells; None without ``se`` or with a cell whose SE is unknown (the fit falls
    back to OLS)."""
    noise = noise_covariance(cells, se, base_cov) if se is not None else None
    return noise if noise is not None and np.all(np.isfinite(noise[0])) else None


def _coef_covariance(
    X: np.ndarray, ls: _LeastSquares, noise: tuple[np.ndarray, np.ndarray, np.ndarray] | None
) -> tuple[np.ndarray, float | None]:
    """Covariance of the basis coefficients and τ̂²: A (V + τ̂² I) Aᵀ given the cells' noise, else s² (XᵀX)⁻¹
    (τ̂² None)."""
    if noise is None:
        return ls.s2 * ls.XtX_inv, None
    V = _dense(*noise)
    A = ls.XtX_inv @ X.T
    tr = float(np.trace(V) - np.einsum("ij,ji->", X @ A, V))  # tr((I − H) V)
    tau2 = max(0.0, (float(ls.resid @ ls.resid) - tr) / ls.df_resid) if ls.df_resid > 0 else 0.0
    return A @ V @ A.T + tau2 * ls.XtX_inv, tau2


def _constraint_map(k: int, p: int) -> np.ndarray:
    """M: (μ, a, b) -> (μ, α, β), α = C a and β = C b; M carries the estimates and their covariance."""
    C = sum_to_zero_basis(k)
    M = np.zeros((1 + 2 * k, p))
    M[0, 0] = 1.0
    M[1 : 1 + k, 1:k] = C
    M[1 + k :, k:] = C
    return M


def _cells_table(cells: pd.DataFrame, y: np.ndarray, ls: _LeastSquares) -> pd.DataFrame:
    """The cells with their fitted and leave-one-out values, largest ``|resid|`` first."""
    cells = cells.assign(pred=ls.pred, resid=ls.resid, loo_pred=y - ls.loo_resid, loo_resid=ls.loo_resid)
    return cells.reindex(cells["resid"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def factor_correlation(fit_a: AdditiveFit, fit_b: AdditiveFit) -> dict[str, float]:
    """Pearson correlation of α and of β across two benchmarks (models in common).

    Examples
    --------
    >>> factor_correlation(fit_coqa, fit_gsm8k)  # {'alpha': r, 'beta': r}  # doctest: +SKIP
    """
    common = [m for m in fit_a.models if m in set(fit_b.models)]
    if len(common) < 3:
        return {"alpha": float("nan"), "beta": float("nan"), "n_models": len(common)}
    r_a = float(np.corrcoef(fit_a.alpha[common], fit_b.alpha[common])[0, 1])
    r_b = float(np.corrcoef(fit_a.beta[common], fit_b.beta[common])[0, 1])
    return {"alpha": r_a, "beta": r_b, "n_models": len(common)}
