"""Sensitivity analyses of the reliable-change conclusions, classical and Bayesian.

Each analysis re-runs the classification over a grid of one analysis choice and
returns a tidy table (one row per setting) and a figure:

* :func:`threshold_sensitivity` — the RCI threshold ``z`` (1.645 ... 3.0, incl. the
  paper's 1.96 and conservative 2.58) under both ``sd_basis`` choices;
* :func:`exclusion_sensitivity` — rule (a) ``min_valid`` over a grid, rule (b)
  floor/ceiling exclusion on or off (which changes the SD basis, hence S_diff);
* :func:`k_subsample_sensitivity` — "what would K = 3, 5, ... have concluded?":
  the full classical analysis (reliability included) on the first ``k`` samples of
  every item, with rule (a) scaled as ``ceil(0.6 k)`` (the paper's 6 of 10);
* :func:`prior_sensitivity` — the paired change model under a prior grid
  (:data:`PRIOR_GRID`: every scale halved / doubled, a flat and a sceptical prior on the
  share of changed items), selection at one FDR level: one fit, moved to each other prior by
  Pareto-smoothed importance weights where those pass a gate as strict as NUTS's, else refitted;
* :func:`fdr_sensitivity` — one change-model fit, items re-selected at several Bayesian
  FDR levels q and posterior-probability thresholds (plotted against the error each
  allows: q, or 1 - threshold per item), with the model's expected FDP.

Given the truth of a simulated pair (``bayesrc.data.simulate_pair``), every row also
carries the realized false-discovery proportion and the share of truly changed
items detected. Reproducible: every random step (MCMC included) is seeded from ``seed``.

The threshold and exclusion grids reuse one reliability estimate (they do not
change r_xx) and recompute SEM, S_diff and the classes with the classical
module's formulas (SPEC section 2); at the defaults they equal ``bayesrc rci``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes import SamplerConfig, SelectionConfig, fit, select
from bayesrc.bayes.change import PRIOR, change_log_prior, prior_settings
from bayesrc.bayes.draws import item_slices
from bayesrc.bayes.samplers import progress_bar
from bayesrc.bayes.summaries import ITEM_BLOCK, PARETO_K_MAX, direction_draws, flagged_errors, psis_weights
from bayesrc.bayes.task import fit_task
from bayesrc.classical import rci as R
from bayesrc.classical.calibration import binomial_s_diff, nominal_rate, sample_level_null
from bayesrc.classical.pipeline import reliable_change
from bayesrc.classical.rci import RCISettings
from bayesrc.classical.reliability import split_half_reliability
from bayesrc.classical.result import PairResult

Z_GRID: tuple[float, ...] = (1.645, 1.96, 2.326, 2.58, 3.0)
MIN_VALID_GRID: tuple[int, ...] = (2, 4, 6, 8, 10)
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


def classify(
    items: pd.DataFrame, r_v1: float, r_v2: float, settings: RCISettings = RCISettings(), *, floor_ceiling: bool = True
) -> pd.DataFrame:
    """Per-item class under one setting: ``items`` needs p_v1, p_v2, n_v1, n_v2 (an RCI items table).

    ``settings``: the classification (``z``, ``min_valid``, ``sd_basis``, ``s_diff``; the
    reliabilities ``r_v1``, ``r_v2`` are given, so its ``reliability_basis`` is not read);
    ``floor_ceiling``: apply exclusion rule (b). Returns ``items`` with columns
    ``analysable``, ``rci`` and ``class`` and the setting's S_diff in ``attrs["s_diff"]``
    (the median per-item S_diff,i for ``s_diff = "binomial"``).

    Examples
    --------
    >>> from bayesrc.classical import reliable_change
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> pair = reliable_change(item_counts(sim.trials_v1, sim.trials_v2), n_null=0, n_permutations=20)
    >>> r1, r2 = pair.r_xx["v1"], pair.r_xx["v2"]
    >>> bool((classify(pair.items, r1, r2)["class"] == pair.items["class"]).all())  # the defaults are bayesrc rci's
    True
    """
    p1, p2 = items["p_v1"].to_numpy(float), items["p_v2"].to_numpy(float)
    ks = {"k_v1": items["k_v1"], "k_v2": items["k_v2"]} if "k_v1" in items else {}
    reason = R.exclusion_reasons(items["n_v1"], items["n_v2"], p1, p2, settings.min_valid, **ks)
    analysable = (reason == "") | ((reason == "floor_ceiling") & (not floor_ceiling))
    scored = ~(np.isnan(p1) | np.isnan(p2))
    analysable &= scored
    basis = analysable if settings.sd_basis == "analysable" else scored
    if settings.s_diff == "binomial":
        n1, n2 = items["n_v1"].to_numpy(float), items["n_v2"].to_numpy(float)
        s_item = binomial_s_diff(np.round(p1 * n1), n1, np.round(p2 * n2), n2)
        with np.errstate(invalid="ignore", divide="ignore"):
            rci = (p2 - p1) / s_item
        s_diff = float(np.nanmedian(s_item[analysable])) if analysable.any() else float("nan")
    else:
        _, _, s_diff = R.s_diff_from_accuracies(p1[basis], p2[basis], r_v1, r_v2)
        rci = R.reliable_change_index(p2 - p1, s_diff)
    out = items[["item_id", "domain", "p_v1", "p_v2"]].copy()
    out["analysable"] = analysable
    out["rci"] = rci
    out["class"] = np.where(analysable, R.classify_rci(rci, settings.z), R.EXCLUDED)
    out.attrs["s_diff"] = s_diff
    return out


def score_against_truth(classes: pd.DataFrame, truth: pd.DataFrame | None) -> dict:
    """Detections, and with truth: true detections (changed, right direction), realized FDP, share detected."""
    cls = classes["class"].to_numpy()
    flagged = np.isin(cls, (R.IMPROVED, R.DETERIORATED))
    out = {
        "n_analysable": int(classes["analysable"].sum()),
        "improved": int(np.sum(cls == R.IMPROVED)),
        "deteriorated": int(np.sum(cls == R.DETERIORATED)),
        "detections": int(flagged.sum()),
    }
    out["churn"] = out["detections"] / out["n_analysable"] if out["n_analysable"] else float("nan")
    if truth is not None:
        t = truth.set_index("item_id").reindex(classes["item_id"])
        sign = np.sign(t["delta_p"].to_numpy(float))
        direction = np.where(cls == R.IMPROVED, 1.0, np.where(cls == R.DETERIORATED, -1.0, 0.0))
        true_hit = flagged & t["changed"].to_numpy(bool) & (sign == direction)
        n_changed = int(t["changed"].sum())
        out["true_detections"] = int(true_hit.sum())
        out["false_detections"] = out["detections"] - out["true_detections"]
        out["realized_fdp"] = out["false_detections"] / out["detections"] if out["detections"] else 0.0
        out["share_changed_detected"] = out["true_detections"] / n_changed if n_changed else float("nan")
    return out


def _pair(counts: xr.Dataset, pair: PairResult | None, seed: int, settings: RCISettings) -> PairResult:
    if pair is not None:
        return pair
    # The nulls are not needed here (threshold_sensitivity runs its own per method): keep them minimal.
    return reliable_change(counts, n_permutations=20, n_null=0, seed=seed, **asdict(settings))


METHODS: tuple[tuple[str, str], ...] = (("reference", "all"), ("reference", "analysed"), ("binomial", "all"))


def threshold_sensitivity(
    counts: xr.Dataset,
    *,
    zs: Sequence[float] = Z_GRID,
    sd_bases: Sequence[str] = ("analysable", "all"),
    methods: Sequence[tuple[str, str]] = METHODS,
    min_valid: int | None = None,
    null_replicates: int = 200,
    truth: pd.DataFrame | None = None,
    pair: PairResult | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """RCI classes over a grid of thresholds ``z``, SD bases and S_diff methods (one row per setting).

    ``methods``: (s_diff, reliability_basis) pairs -- the paper's recipe ("reference", "all"),
    its r_xx over the analysed items, and the calibrated per-item "binomial" S_diff (no SD
    basis). Every row carries the observed counts and, from the sample-level no-change null
    (``null_replicates`` replicates, SPEC 2.1; 0 skips it), the flagged count expected
    with no change at all and the implied false-positive rate beside the nominal one.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> t = threshold_sensitivity(item_counts(sim.trials_v1, sim.trials_v2), zs=(1.96,), null_replicates=0)
    >>> t["z"].unique().tolist()
    [1.96]
    """
    p = _pair(counts, pair, seed, RCISettings(min_valid=min_valid))
    r_all = (p.r_xx["v1"], p.r_xx["v2"])
    analysable = ~p.items["excluded"].to_numpy(bool)
    a, b = counts["correct"].isel(version=0).values, counts["correct"].isel(version=1).values
    rows = []
    for s_diff, rel_basis in methods:
        if s_diff == "reference" and rel_basis == "analysed":
            r1, r2 = (split_half_reliability(x[analysable], n_splits=200, seed=seed).r_xx for x in (a, b))
        else:
            r1, r2 = r_all
        for basis in sd_bases if s_diff == "reference" else ("-",):
            settings = RCISettings(
                z=float(zs[0]),
                min_valid=min_valid,
                sd_basis=basis if basis != "-" else "analysable",
                s_diff=s_diff,
                reliability_basis=rel_basis,
            )
            null = None
            if null_replicates > 0:
                null = sample_level_null(
                    a, b, settings, n_replicates=null_replicates, seed=seed, zs=tuple(float(z) for z in zs)
                )
            for z in zs:
                cls = classify(p.items, r1, r2, replace(settings, z=float(z)))
                row = {
                    "analysis": "threshold",
                    "z": float(z),
                    "method": f"{s_diff}" + (f" (r_xx: {rel_basis}, SD: {basis})" if s_diff == "reference" else ""),
                    "s_diff_method": s_diff,
                    "reliability_basis": rel_basis if s_diff == "reference" else "-",
                    "sd_basis": basis,
                    "s_diff": cls.attrs["s_diff"],
                    "min_detectable": z * cls.attrs["s_diff"],
                    **score_against_truth(cls, truth),
                }
                if null is not None:
                    nz = null["by_z"][float(z)]
                    row.update(
                        {
                            "null_flagged_mean": nz["flagged_mean"],
                            "null_flagged_p975": nz["flagged_p975"],
                            "null_rate": nz["rate"],
                            "nominal_rate": nominal_rate(z),
                        }
                    )
                rows.append(row)
    return pd.DataFrame(rows)


def exclusion_sensitivity(
    counts: xr.Dataset,
    *,
    min_valid_grid: Sequence[int] = MIN_VALID_GRID,
    floor_ceiling: Sequence[bool] = (True, False),
    settings: RCISettings = RCISettings(),
    truth: pd.DataFrame | None = None,
    pair: PairResult | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """RCI classes over exclusion rule (a) ``min_valid`` and rule (b) floor/ceiling on or off.

    ``settings``: the rest of the classification (``z``, ``sd_basis``, ``s_diff``); its
    ``min_valid`` is replaced by each value of the grid.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> exclusion_sensitivity(item_counts(sim.trials_v1, sim.trials_v2), min_valid_grid=(6,))["min_valid"].tolist()
    [6, 6]
    """
    p = _pair(counts, pair, seed, settings)
    r1, r2 = p.r_xx["v1"], p.r_xx["v2"]
    rows = []
    for fc in floor_ceiling:
        for m in min_valid_grid:
            cls = classify(p.items, r1, r2, replace(settings, min_valid=int(m)), floor_ceiling=fc)
            rows.append(
                {
                    "analysis": "exclusion",
                    "min_valid": int(m),
                    "floor_ceiling_excluded": bool(fc),
                    "s_diff": cls.attrs["s_diff"],
                    **score_against_truth(cls, truth),
                }
            )
    return pd.DataFrame(rows)


def first_k(counts: xr.Dataset, k: int) -> xr.Dataset:
    """Item counts built from the first ``k`` samples of every item and version."""
    correct = counts["correct"].isel(k=slice(0, k))
    administered = counts["n_trials"].clip(max=k)
    n_valid = correct.notnull().sum("k").astype(np.int64)
    n_correct = correct.fillna(0).sum("k").astype(np.int64)
    p = (n_correct / n_valid.where(n_valid > 0)).astype(float)
    return xr.Dataset(
        {"n_trials": administered, "n_valid": n_valid, "n_correct": n_correct, "p": p, "correct": correct},
        attrs=dict(counts.attrs),
    )


def k_subsample_sensitivity(
    counts: xr.Dataset,
    *,
    ks: Sequence[int] | None = None,
    settings: RCISettings = RCISettings(),
    valid_share: float = 0.6,
    n_splits: int = 200,
    truth: pd.DataFrame | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """The classical analysis on the first ``k`` samples, for each ``k`` (default 3, 5, ..., K).

    Rule (a) scales with k: ``min_valid = ceil(valid_share * k)`` (6 at K = 10), replacing
    ``settings.min_valid``; the rest of ``settings`` (``z``, ``sd_basis``, ...) is kept.
    Reliability is re-estimated at each k (split halves of the first k samples).

    Examples
    --------
    >>> k_subsample_sensitivity(counts, ks=(3, 5))        # doctest: +SKIP
    """
    k_full = int(counts.sizes["k"])
    ks = sorted(set(ks if ks is not None else [*range(3, k_full, 2), k_full]))
    rows = []
    for i, k in enumerate(ks):
        if not 2 <= k <= k_full:
            raise ValueError(f"k must be in 2..{k_full}, got {k}")
        mv = max(1, math.ceil(valid_share * k - 1e-9))
        at_k = replace(settings, min_valid=mv)
        p = reliable_change(
            first_k(counts, k),
            n_splits=n_splits,
            n_permutations=20,
            n_splits_by_k=20,
            n_null=0,
            seed=seed + i,
            **asdict(at_k),
        )
        cls = classify(p.items, p.r_xx["v1"], p.r_xx["v2"], at_k)
        rows.append(
            {
                "analysis": "k_subsample",
                "k": int(k),
                "min_valid": mv,
                "r_xx_v1": p.r_xx["v1"],
                "r_xx_v2": p.r_xx["v2"],
                "s_diff": p.s_diff,
                "min_detectable": p.min_detectable,
                **score_against_truth(cls, truth),
            }
        )
    return pd.DataFrame(rows)


def _bayes_scores(items: pd.DataFrame, classes: np.ndarray, truth: pd.DataFrame | None) -> dict:
    """score_against_truth for posterior classes (every item is analysable in the model)."""
    frame = pd.DataFrame({"item_id": items["item_id"].to_numpy(), "class": classes, "analysable": True})
    return score_against_truth(frame, truth)


def _change_fit(counts: xr.Dataset, config, seed: int, prior: dict | None = None, fdr: float = 0.10):
    cfg = config or SamplerConfig(seed=seed)  # every command's sampler defaults
    return fit(counts, model="change", prior=prior, config=cfg, selection=SelectionConfig(fdr=fdr))


def _change_fit_task(n_devices: int, counts: xr.Dataset, config, seed: int, prior: dict | None, fdr: float):
    """One change-model fit of the grid (a Ray task body when mapped on Ray)."""
    cfg = config or SamplerConfig(seed=seed)
    return fit_task(
        n_devices, counts, {"model": "change", "prior": prior, "config": cfg, "selection": SelectionConfig(fdr=fdr)}
    )


def _prior_posteriors(
    counts: xr.Dataset, grid: dict[str, dict], fdr: float, result, config, seed: int, mapper, reweight: bool
) -> dict:
    """Each grid entry's :class:`PriorPosterior`: ``result`` where its prior matches, the base fit
    reweighted where :func:`reweighted_posterior` passes, the rest refitted through ``mapper``."""
    base = result if result is not None and result.model == "change" else None
    if base is None and reweight:
        base = _change_fit(counts, config, seed, next(iter(grid.values())), fdr)  # the grid's first prior
    out, todo = {}, []
    for name, prior in grid.items():
        if base is not None and base.params.get("prior") == prior_settings(prior):
            out[name] = fitted_posterior(base)
        elif reweight and (moved := reweighted_posterior(base, prior)).gate_passed:
            out[name] = moved
        else:
            todo.append(name)
    out.update(
        {
            name: fitted_posterior(f)
            for name, f in zip(todo, _refits(counts, [grid[n] for n in todo], fdr, config, seed, mapper))
        }
    )
    return {name: out[name] for name in grid}


def _refits(counts: xr.Dataset, priors: list[dict], fdr: float, config, seed: int, mapper) -> list:
    """Change-model fits under ``priors``: here (one progress bar) or through ``mapper``."""
    if mapper is not None:
        chains = config.chains if config is not None else SamplerConfig().chains
        n_dev = max(1, min(chains, os.cpu_count() or 1))
        return list(mapper(_change_fit_task, [(n_dev, counts, config, seed, prior, fdr) for prior in priors]))
    fits = []
    with progress_bar(config.progress if config else None, len(priors), "prior grid", unit="fit") as bar:
        for prior in priors:
            fits.append(
                _change_fit(
                    counts,
                    replace(config, progress=False) if config else SamplerConfig(seed=seed, progress=False),
                    seed,
                    prior,
                    fdr,
                )
            )
            bar.update()
    return fits


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
    (e.g. :func:`bayesrc.scale.ray_map`: one Ray task per prior, same results).

    Examples
    --------
    >>> prior_sensitivity(counts, truth=sim.truth, seed=0)   # doctest: +SKIP
    """
    grid = grid or PRIOR_GRID
    return _prior_rows(_prior_posteriors(counts, grid, fdr, result, config, seed, mapper, reweight), fdr, truth)


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


ANALYSES = {
    "threshold": threshold_sensitivity,
    "exclusion": exclusion_sensitivity,
    "k": k_subsample_sensitivity,
    "prior": prior_sensitivity,
    "fdr": fdr_sensitivity,
}


def run_sensitivity_analyses(
    counts: xr.Dataset,
    names: Sequence[str] = ("threshold", "exclusion", "k"),
    *,
    truth: pd.DataFrame | None = None,
    settings: RCISettings = RCISettings(),
    seed: int = 0,
    zs: Sequence[float] = Z_GRID,
    methods: Sequence[tuple[str, str]] = METHODS,
    null_replicates: int = 200,
    min_valid_grid: Sequence[int] = MIN_VALID_GRID,
    ks: Sequence[int] | None = None,
    qs: Sequence[float] = FDR_GRID,
    config=None,
    mapper=None,
    reweight: bool = True,
) -> dict[str, pd.DataFrame]:
    """Run the named analyses (one shared reliability estimate for threshold / exclusion, one
    default-prior change-model fit for prior / fdr; ``config``: its sampler settings).
    ``settings``: the RCI classification the exclusion and K analyses vary one part of
    (:class:`bayesrc.classical.rci.RCISettings`; default the paper's).

    ``mapper(fn, arg_tuples)``: how the prior grid's refits run (default serially here; e.g.
    :func:`bayesrc.scale.ray_map`); ``reweight``: :func:`prior_sensitivity`'s.

    Examples
    --------
    >>> tables = run_sensitivity_analyses(counts, ("threshold", "k"))   # doctest: +SKIP
    >>> sorted(tables)                                                    # doctest: +SKIP
    ['k', 'threshold']
    """
    pair, base = None, None
    out: dict[str, pd.DataFrame] = {}
    for name in names:
        if name in ("prior", "fdr") and base is None:  # one fit for both; the prior grid reweights it
            base = _change_fit(counts, config, seed)
        if name in ("threshold", "exclusion") and pair is None:
            pair = _pair(counts, None, seed, settings)
        if name == "threshold":
            out[name] = threshold_sensitivity(
                counts, zs=zs, methods=methods, null_replicates=null_replicates, truth=truth, pair=pair, seed=seed
            )
        elif name == "exclusion":
            out[name] = exclusion_sensitivity(
                counts, min_valid_grid=min_valid_grid, settings=settings, truth=truth, pair=pair, seed=seed
            )
        elif name == "k":
            out[name] = k_subsample_sensitivity(counts, ks=ks, settings=settings, truth=truth, seed=seed)
        elif name == "prior":
            out[name] = prior_sensitivity(
                counts, result=base, config=config, truth=truth, seed=seed, mapper=mapper, reweight=reweight
            )
        elif name == "fdr":
            out[name] = fdr_sensitivity(counts, qs=qs, result=base, truth=truth, seed=seed)
        else:
            raise ValueError(f"unknown sensitivity analysis {name!r}")
    return out
