"""Bayesian sensitivity analyses of the paired change model: the prior grid (:func:`prior_sensitivity`: one fit moved
to each other prior by Pareto-smoothed importance weights where those pass a gate as strict as NUTS's, else
refitted) and the selection's FDR level (:func:`fdr_sensitivity`: one fit, items re-selected); see
:mod:`bayesrc.sensitivity.analyses`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes import SamplerConfig, SelectionConfig, fit, select, shared_adaptation
from bayesrc.bayes.change import PRIOR, change_log_prior, prior_settings
from bayesrc.bayes.draws import item_slices
from bayesrc.bayes.samplers import progress_bar
from bayesrc.bayes.summaries import ITEM_BLOCK, PARETO_K_MAX, direction_draws, flagged_errors, psis_weights
from bayesrc.bayes.task import fit_task
from bayesrc.sensitivity.classical import score_against_truth

FDR_GRID: tuple[float, ...] = (0.01, 0.05, 0.10, 0.20)

THRESHOLD_GRID: tuple[float, ...] = (0.90, 0.95, 0.975, 0.99)

_SCALES = ("mu_theta_sd", "sigma_theta_sd", "shift_sd", "sigma_delta_scale", "slope_sd")


def _prior_grid() -> dict[str, dict]:
    return {
        "default": {},
        "scales x 0.5": {k: PRIOR[k] * 0.5 for k in _SCALES},
        "scales x 2": {k: PRIOR[k] * 2.0 for k in _SCALES},
        "pi ~ Beta(1, 1)": {"pi_a": 1.0, "pi_b": 1.0},
        "pi ~ Beta(1, 9)": {"pi_a": 1.0, "pi_b": 9.0},
    }


PRIOR_GRID: dict[str, dict] = _prior_grid()


def _bayes_scores(items: pd.DataFrame, classes: np.ndarray, truth: pd.DataFrame | None) -> dict:
    """score_against_truth for posterior classes (every item is analysable in the model)."""
    frame = pd.DataFrame({"item_id": items["item_id"].to_numpy(), "class": classes, "analysable": True})
    return score_against_truth(frame, truth)


#: What a sensitivity fit is asked for beside its model: the grids read its posterior, gate, items and RCI
#: cross-check, never its predictive checks or PSIS-LOO (3-4 s a fit on 300 items; the fit the user reads is
#: ``bayesrc fit``'s, with them)
SENSITIVITY_FIT = {"model": "change", "checks": False}


def _change_fit(counts: xr.Dataset, config, seed: int, prior: dict | None = None, fdr: float = 0.10):
    cfg = config or SamplerConfig(seed=seed)  # every command's sampler defaults
    return fit(counts, **SENSITIVITY_FIT, prior=prior, config=cfg, selection=SelectionConfig(fdr=fdr))


def _change_fit_task(
    n_devices: int, counts: xr.Dataset, config, seed: int, prior: dict | None, fdr: float, adaptation: dict | None
):
    """One change-model refit of the grid from the base fit's ``adaptation`` (a Ray task body when mapped on Ray)."""
    cfg = config or SamplerConfig(seed=seed)
    with shared_adaptation(adaptation):
        return fit_task(
            n_devices,
            counts,
            {**SENSITIVITY_FIT, "prior": prior, "config": cfg, "selection": SelectionConfig(fdr=fdr)},
        )


def _prior_posteriors(
    counts: xr.Dataset,
    grid: dict[str, dict],
    fdr: float,
    result,
    config,
    seed: int,
    mapper,
    reweight: bool,
    adaptation: dict | None,
) -> dict:
    """Each grid entry's :class:`PriorPosterior`: ``result`` where its prior matches, the base fit
    reweighted where :func:`reweighted_posterior` passes, the rest refitted through ``mapper`` from the base fit's
    sampler adaptation (``adaptation``, or the one of the base fit made here; :func:`shared_adaptation`)."""
    base = result if result is not None and result.model == "change" else None
    if base is None and reweight:
        with shared_adaptation() as adaptation:
            base = _change_fit(counts, config, seed, next(iter(grid.values())), fdr)  # the grid's first prior
    out, todo = {}, []
    for name, prior in grid.items():
        if base is not None and base.params.get("prior") == prior_settings(prior):
            out[name] = fitted_posterior(base)
        elif reweight and (moved := reweighted_posterior(base, prior)).gate_passed:
            out[name] = moved
        else:
            todo.append(name)
    adaptation = adaptation if base is not None else None  # no base fit: each refit warms up on its own
    refits = _refits(counts, [grid[n] for n in todo], fdr, config, seed, mapper, adaptation)
    out.update({name: fitted_posterior(f) for name, f in zip(todo, refits)})
    return {name: out[name] for name in grid}


def _refits(
    counts: xr.Dataset, priors: list[dict], fdr: float, config, seed: int, mapper, adaptation: dict | None
) -> list:
    """Change-model fits under ``priors``, each from the base fit's sampler ``adaptation`` (None: each warms up on
    its own): here (one progress bar) or through ``mapper``, with the same draws either way."""
    if mapper is not None:
        chains = config.chains if config is not None else SamplerConfig().chains
        n_dev = max(1, min(chains, os.cpu_count() or 1))
        portable = None if adaptation is None else {k: _host_arrays(v) for k, v in adaptation.items()}
        tasks = [(n_dev, counts, config, seed, prior, fdr, portable) for prior in priors]
        return list(mapper(_change_fit_task, tasks))
    fits = []
    quiet = replace(config, progress=False) if config else SamplerConfig(seed=seed, progress=False)
    with progress_bar(config.progress if config else None, len(priors), "prior grid", unit="fit") as bar:
        for prior in priors:
            with shared_adaptation(adaptation):
                fits.append(_change_fit(counts, quiet, seed, prior, fdr))
            bar.update()
    return fits


def _host_arrays(state):
    """A sampler state with NumPy arrays in place of JAX's (picklable for another process)."""
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    return jax.tree.map(np.asarray, state)


@dataclass(frozen=True)
class PriorPosterior:
    """What the prior grid reports of one prior's posterior: from its own fit or reweighted.

    ``method`` "fit" (NUTS under this prior; ``ess`` its gate's smallest ESS) or "reweighted"
    (another fit's draws with Pareto-smoothed importance weights: ``pareto_k``, and ``ess`` the
    smallest ESS scaled by the weights' efficiency); ``items``: item_id, p_improve, p_deteriorate.
    """

    method: str
    gate_passed: bool
    pi_mean: float
    sigma_delta_mean: float
    rci_estimated_fdp: float
    items: pd.DataFrame
    prior: dict
    pareto_k: float
    ess: float


def fitted_posterior(res) -> PriorPosterior:
    """A change-model fit's own :class:`PriorPosterior`."""
    post, diag = res.posterior["posterior"], res.diagnostics
    return PriorPosterior(
        "fit",
        bool(diag.passed),
        float(post["pi"].mean()),
        float(post["sigma_delta"].mean()),
        float(res.crosscheck["rci_estimated_fdp"]),
        res.items[["item_id", "p_improve", "p_deteriorate"]],
        res.params["prior"],
        float("nan"),
        float(min(diag.min_ess_bulk, diag.min_ess_tail)),
    )


def reweighted_posterior(res, prior: dict) -> PriorPosterior:
    """The fit ``res`` moved to the prior settings ``prior`` by importance weighting, no refit.

    Items are integrated out of the sampled model and drawn from their conditionals given each
    draw's hyperparameters, which no prior setting touches, so the log ratio of the two
    hyperpriors (:func:`bayesrc.bayes.change.change_log_prior`) is the whole importance ratio.
    Gated as strictly as NUTS: ``gate_passed`` needs the fit's own gate, Pareto k <= 0.7 (the
    weights are reliable) and an ESS of at least the gate's ``min_ess`` after weighting (the
    fit's smallest ESS times the weights' relative efficiency ``1 / (S sum w^2)``). A prior far
    from the fitted one fails it and is refitted (:func:`prior_sensitivity`).

    Examples
    --------
    >>> moved = reweighted_posterior(res, {"pi_a": 1.0, "pi_b": 9.0})  # doctest: +SKIP
    >>> moved.pi_mean, moved.pareto_k, moved.gate_passed              # doctest: +SKIP
    """
    post, diag, params = res.posterior["posterior"], res.diagnostics, res.params
    log_ratio = change_log_prior(post, prior) - change_log_prior(post, params["prior"])
    w, khat = psis_weights(log_ratio)
    ess = float(min(diag.min_ess_bulk, diag.min_ess_tail)) / (w.size * float(w @ w))
    settings = {"rope": float(params.get("rope") or 0.0), "delta_min": params["delta_min"]}
    weighted = {"p_improve": [], "p_deteriorate": []}
    for block in item_slices(res.items.shape[0], ITEM_BLOCK):
        d = direction_draws(res.item_draws(block), block.stop - block.start, **settings)
        for k, parts in weighted.items():
            parts.append(w @ d[k])
    rci_cls = res.items["rci_class"].to_numpy(dtype=object)  # excluded items are no flag
    items = pd.DataFrame(
        {"item_id": res.items["item_id"].to_numpy(), **{k: np.concatenate(parts) for k, parts in weighted.items()}}
    )
    sigma_delta = post["sigma_delta"].values.reshape(w.size, -1).mean(1)
    passed = bool(diag.passed) and khat <= PARETO_K_MAX and ess >= diag.thresholds["min_ess"]
    return PriorPosterior(
        "reweighted",
        passed,
        float(w @ post["pi"].values.ravel()),
        float(w @ sigma_delta),
        float(w @ flagged_errors(post, rci_cls, **settings)[0]),
        items,
        prior_settings(prior),
        khat,
        ess,
    )


def prior_sensitivity(
    counts: xr.Dataset,
    *,
    grid: dict[str, dict] | None = None,
    fdr: float = 0.10,
    result=None,
    config=None,
    truth: pd.DataFrame | None = None,
    seed: int = 0,
    mapper=None,
    reweight: bool = True,
    adaptation: dict | None = None,
) -> pd.DataFrame:
    """The collapsed change model under each prior of ``grid`` (default :data:`PRIOR_GRID`).

    One row per prior: how it was obtained (``method``), the gate, posterior means of ``pi``
    (share changed) and ``sigma_delta``, the items selected at Bayesian FDR ``fdr``, the model's
    expected false-discovery proportion and its estimate of RCI's (plus realized FDP given
    ``truth``). ``reweight``: one NUTS fit (``result``, else the grid's first prior) moved to
    every other prior by importance weighting where that passes its gate
    (:func:`reweighted_posterior`), the others refitted; ``False`` refits every prior. Every
    fit uses the same seed, so rows differ only by the prior. ``result``: a change-model fit
    to reuse for the grid entry with its prior. ``mapper(fn, arg_tuples)`` runs the refits
    (e.g. :func:`bayesrc.scale.ray_map`: one Ray task per prior, same results). Each refit starts from the base
    fit's sampler adaptation (``adaptation``: the :func:`~bayesrc.bayes.shared_adaptation` block ``result`` was
    fitted in; the base fit made here brings its own) with a short burn-in instead of a warm-up
    (:func:`~bayesrc.bayes.shared_adaptation`), behind the same gate; without one each refit warms up on its own.

    Examples
    --------
    >>> prior_sensitivity(counts, truth=sim.truth, seed=0)   # doctest: +SKIP
    """
    grid = grid or PRIOR_GRID
    posteriors = _prior_posteriors(counts, grid, fdr, result, config, seed, mapper, reweight, adaptation)
    return _prior_rows(posteriors, fdr, truth)


def _prior_rows(posteriors: dict[str, PriorPosterior], fdr: float, truth: pd.DataFrame | None) -> pd.DataFrame:
    rows = []
    for name, p in posteriors.items():
        cls, sel = select(p.items["p_improve"], p.items["p_deteriorate"], rule="fdr", fdr=fdr)
        rows.append(
            {  # conclusions first, the prior's settings last (the report's table scrolls right)
                "analysis": "prior",
                "prior": name,
                "method": p.method,
                "gate_passed": p.gate_passed,
                "pareto_k": p.pareto_k,
                "ess": p.ess,
                "pi_mean": p.pi_mean,
                "sigma_delta_mean": p.sigma_delta_mean,
                "fdr": fdr,
                "expected_fdp": sel["expected_fdp"],
                "rci_estimated_fdp": p.rci_estimated_fdp,
                **_bayes_scores(p.items, cls, truth),
                **p.prior,
            }
        )
    return pd.DataFrame(rows)


def fdr_sensitivity(
    counts: xr.Dataset,
    *,
    qs: Sequence[float] = FDR_GRID,
    thresholds: Sequence[float] = THRESHOLD_GRID,
    result=None,
    config=None,
    truth: pd.DataFrame | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Items selected at each Bayesian FDR level ``q`` and each posterior threshold, from one fit.

    ``result``: a :class:`bayesrc.bayes.BayesFit` of the change model to reuse (else one is
    fitted). ``error_level`` is what each setting allows: the mean posterior error of the
    selected set (``q``) or the largest posterior error of one selected item (``1 - t``).

    Examples
    --------
    >>> fdr_sensitivity(counts, qs=(0.05, 0.10), seed=0)     # doctest: +SKIP
    """
    res = result if result is not None else _change_fit(counts, config, seed)
    items = res.items
    settings = [("fdr", float(q), float(q)) for q in qs] + [("threshold", float(t), 1.0 - float(t)) for t in thresholds]
    rows = []
    for rule, level, error_level in settings:
        cls, sel = select(items["p_improve"], items["p_deteriorate"], rule=rule, fdr=level, threshold=level)
        rows.append(
            {
                "analysis": "fdr",
                "rule": rule,
                "level": level,
                "error_level": error_level,
                "expected_fdp": sel["expected_fdp"],
                "expected_false": sel["expected_false"],
                "gate_passed": bool(res.diagnostics.passed),
                **_bayes_scores(items, cls, truth),
            }
        )
    return pd.DataFrame(rows)
