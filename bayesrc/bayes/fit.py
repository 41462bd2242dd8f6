"""One call from item counts to a gated, summarised, cross-checked Bayesian fit."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes.change import prior_settings
from bayesrc.bayes.diagnostics import Diagnostics, gate
from bayesrc.bayes.inputs import ModelInputs, model_inputs
from bayesrc.bayes.samplers import SamplerConfig
from bayesrc.bayes.summaries import ITEM_COLUMNS, crosscheck, domain_shift, item_summary, select
from bayesrc.errors import ConvergenceError

MODELS = ("betabinom", "change")
BACKENDS = ("numpyro", "pymc")


def sample(
    data: ModelInputs, model: str, backend: str = "numpyro", *, collapsed: bool = True, slope: bool = False,
    prior: dict | None = None, config: SamplerConfig | None = None,
):  # fmt: skip
    """Dispatch to one of the four model functions; returns the posterior DataTree.

    ``prior`` overrides the change model's ``PRIOR`` entries (prior sensitivity).
    """
    if model == "betabinom":
        if prior:
            raise ValueError("prior overrides apply to the change model only")
        from bayesrc.bayes.betabinom import betabinom_numpyro, betabinom_pymc

        fn = betabinom_numpyro if backend == "numpyro" else betabinom_pymc
        return fn(data, collapsed=collapsed, config=config)
    if model == "change":
        if collapsed:
            from bayesrc.bayes.change_collapsed import change_collapsed_numpyro as fn_n, change_collapsed_pymc as fn_p
        else:
            from bayesrc.bayes.change import change_numpyro as fn_n, change_pymc as fn_p

        fn = fn_n if backend == "numpyro" else fn_p
        return fn(data, slope=slope, prior=prior, config=config)
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def gated_vars(model: str, slope: bool = False, collapsed: bool = False, covariate: bool = False) -> list[str]:
    """The sampled quantities the gate checks (plus p for the beta-binomial).

    The collapsed change model samples only the hyperparameters (``theta`` is an exact
    conditional draw, independent given them), so only those are gated. ``covariate``: the
    change model has an item covariate (its ``group_shift`` is gated too).
    """
    if model == "betabinom":
        return ["logit_mu", "log_kappa", "p"]
    extra = (["slope"] if slope else []) + (["group_shift"] if covariate else [])
    return ["mu_theta", "sigma_theta", "shift", "sigma_delta", "pi"] + ([] if collapsed else ["theta"]) + extra


@dataclass
class BayesFit:
    """A fitted model: posterior, item table, diagnostics, selection and RCI cross-check."""

    posterior: object  # xarray.DataTree
    items: pd.DataFrame
    diagnostics: Diagnostics
    selection: dict
    crosscheck: dict
    discordant: pd.DataFrame
    domain_shift: dict
    runtime_s: float
    backend: str
    model: str
    params: dict = field(default_factory=dict)

    @property
    def status(self) -> str:
        return "ok" if self.diagnostics.passed else "failed"

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "model": self.model,
            "backend": self.backend,
            "runtime_s": self.runtime_s,
            "diagnostics": self.diagnostics.to_dict(),
            "selection": self.selection,
            "crosscheck": self.crosscheck,
            "domain_shift": self.domain_shift,
            "params": self.params,
        }

    def summary(self) -> pd.DataFrame:
        d, s, c = self.diagnostics, self.selection, self.crosscheck
        rows = [
            ("status", self.status), ("model", self.model), ("backend", self.backend), ("runtime_s", round(self.runtime_s, 2)),
            ("max R-hat", d.max_rhat), ("min ESS bulk", d.min_ess_bulk), ("min ESS tail", d.min_ess_tail), ("divergences", d.divergences),
            ("improved", s["n_improved"]), ("deteriorated", s["n_deteriorated"]), ("expected false", s["expected_false"]),
            ("kappa vs RCI", c["kappa"]), ("RCI estimated FDP", c["rci_estimated_fdp"]),
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=["metric", "value"])

    def write(self, out_dir: str | Path) -> None:
        """Write ``posterior.nc``, ``items.parquet``, ``discordant.parquet`` and ``fit.json`` together."""
        from bayesrc.io import atomic_write_json, staged_output

        status = self.status
        with staged_output(out_dir) as stage:
            dt = self.posterior.copy()
            dt.attrs.update(status=status, model=self.model, backend=self.backend)
            dt.to_netcdf(stage / "posterior.nc", engine="h5netcdf")
            items = self.items.copy()
            items.attrs = {"status": status, "model": self.model, "backend": self.backend}
            items.to_parquet(stage / "items.parquet", index=False)
            disc = self.discordant.copy()
            disc.attrs = {"status": status}
            disc.to_parquet(stage / "discordant.parquet", index=False)
            atomic_write_json(stage / "fit.json", self.to_dict())


def fit(
    counts: xr.Dataset,
    *,
    model: str = "change",
    backend: str = "numpyro",
    collapsed: bool = True,
    slope: bool = False,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    rule: str = "fdr",
    fdr: float = 0.10,
    threshold: float = 0.975,
    rope: float = 0.0,
    max_rhat: float = 1.01,
    min_ess: float = 400.0,
    max_divergences: int = 0,
    rci_kwargs: dict | None = None,
    covariate: str | None = "auto",
) -> BayesFit:
    """Fit ``model`` to a version pair, gate it, select changed items and cross-check against RCI.

    ``collapsed`` (default): NUTS on the hyperparameters only with the items integrated
    out (beta-binomial: conjugate; change model: :mod:`bayesrc.bayes.change_collapsed`);
    ``collapsed=False`` samples every item parameter with NUTS (the cross-check).
    ``covariate`` (change model): an item coord of ``counts`` whose levels shift the mean change
    (``"auto"``: ``correct_answer`` when present; ``None``: none; see :func:`model_inputs`).
    Never raises for a failed gate: the result's ``status`` is "failed" (see :func:`fit_or_raise`).
    """
    from bayesrc.classical import reliable_change

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    cfg = config or SamplerConfig()
    data = model_inputs(counts, covariate=covariate if model == "change" else None)
    t0 = time.perf_counter()
    dt = sample(data, model, backend, collapsed=collapsed, slope=slope, prior=prior, config=cfg)
    runtime = time.perf_counter() - t0
    diag = gate(dt, gated_vars(model, slope, collapsed, data.n_groups > 1), max_rhat=max_rhat, min_ess=min_ess, max_divergences=max_divergences)
    items = item_summary(dt, data, rope=rope)
    cls, sel = select(items["p_improve"], items["p_deteriorate"], rule=rule, fdr=fdr, threshold=threshold)
    items["bayes_class"] = cls
    rci = reliable_change(counts, data.versions[0], data.versions[1], **(rci_kwargs or {"n_splits": 200, "n_permutations": 200}))
    rci_items = rci.to_frame()
    items["rci_class"] = rci_items.set_index("item_id")["class"].reindex(items["item_id"]).fillna("excluded").to_numpy(dtype=object)
    cc, disc = crosscheck(items, rci_items, rci.s_diff)
    items = items[list(ITEM_COLUMNS)]
    params = {
        "collapsed": bool(collapsed),
        "slope": bool(slope) if model == "change" else None,
        "prior": prior_settings(prior) if model == "change" else None,
        "chains": cfg.chains, "draws": cfg.draws, "tune": cfg.tune, "target_accept": cfg.target_accept, "seed": cfg.seed,
        "covariate": data.covariate, "covariate_levels": list(data.groups) if data.covariate else None,
        "rope": rope, "versions": list(data.versions), "n_items": data.n_items, "domains": list(data.domains),
        "rci_sd_basis": rci.params.get("sd_basis"), "rci_s_diff": rci.s_diff,
    }  # fmt: skip
    return BayesFit(dt, items, diag, sel, cc, disc, domain_shift(dt, data), runtime, backend, model, params)


def check(result: BayesFit, allow_unconverged: bool = False) -> BayesFit:
    """Raise :class:`ConvergenceError` for a failed gate unless ``allow_unconverged``."""
    if not result.diagnostics.passed and not allow_unconverged:
        d = result.diagnostics
        raise ConvergenceError(
            f"{result.model} ({result.backend}) failed the convergence gate: max R-hat {d.max_rhat:.4f}, "
            f"min ESS bulk {d.min_ess_bulk:.0f} / tail {d.min_ess_tail:.0f}, {d.divergences} divergences "
            f"[{d.worst}]; outputs are marked failed (pass --allow-unconverged to accept)"
        )
    return result


def realised_fdp(classes: np.ndarray, true_dp: np.ndarray) -> float:
    """Share of flagged items whose true dp is zero or of the opposite sign (needs the truth)."""
    classes = np.asarray(classes, dtype=object)
    up, down = classes == "improved", classes == "deteriorated"
    n = up.sum() + down.sum()
    if n == 0:
        return 0.0
    false = np.sum(up & (true_dp <= 0)) + np.sum(down & (true_dp >= 0))
    return float(false / n)
