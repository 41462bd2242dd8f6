"""One call from item counts to a gated, summarised, cross-checked Bayesian fit, and the steps it composes.

:func:`fit` of a pair runs :func:`sample_posterior` (the gated sampling), :func:`select_items` (the item
table and the changed items), :func:`crosscheck_rci` (against the classical RCI result) and
:func:`workflow_checks` (prior and posterior predictive checks, PSIS-LOO), and puts their records
together as a :class:`~bayesrc.bayes.fit_result.BayesFit`; each step can be called on its own.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes.betabinom import betabinom_numpyro, betabinom_pymc
from bayesrc.bayes.change import STRUCTURE_SITES, change_log_prior, change_numpyro, change_pymc, prior_settings
from bayesrc.bayes.change_collapsed import change_collapsed_numpyro, change_collapsed_pymc
from bayesrc.bayes.change_item_draws import with_item_draws
from bayesrc.bayes.checks import loo_checks, loo_warnings
from bayesrc.bayes.diagnostics import Diagnostics
from bayesrc.bayes.draws import item_block, thinned_draws
from bayesrc.bayes.fit_result import BayesFit
from bayesrc.bayes.gating import gated_vars, sample_gated
from bayesrc.bayes.inputs import ModelInputs, model_inputs
from bayesrc.bayes.joint_fit import JointFit, fit_joint
from bayesrc.bayes.ppc import MAX_PPC_DRAWS, posterior_predictive_check, ppc_warnings
from bayesrc.bayes.prior_predictive import prior_predictive
from bayesrc.bayes.samplers import SamplerConfig
from bayesrc.bayes.summaries import (
    ITEM_COLUMNS,
    allow_no_change,
    crosscheck,
    domain_shift,
    expected_flips,
    item_summary,
    rci_fdp_interval,
    rci_fdp_prior_sensitivity,
    select,
)
from bayesrc.classical import PairResult, reliable_change
from bayesrc.classical.no_change_checks import pair_no_change_test
from bayesrc.config import GateConfig, SelectionConfig, release_memory, releases_jax_caches

MODELS = ("betabinom", "change")
# the classical run fit() cross-checks when given none
CROSSCHECK_RCI_KWARGS = {"n_splits": 200, "n_permutations": 200, "n_null": 0}
BACKENDS = ("numpyro", "pymc")


def sample(
    data: ModelInputs,
    model: str,
    backend: str = "numpyro",
    *,
    collapsed: bool = True,
    slope: bool = False,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    items: bool = True,
):
    """Dispatch to one of the four model functions; returns the posterior DataTree.

    ``prior`` overrides the change model's ``PRIOR`` entries (prior sensitivity). ``items=False``
    leaves out the collapsed change model's item draws (:func:`~bayesrc.bayes.change_item_draws.with_item_draws`
    adds them); the other models sample or draw their items as they go.

    Examples
    --------
    >>> dt = sample(model_inputs(counts), "betabinom", config=SamplerConfig(chains=2, draws=500))  # doctest: +SKIP
    """
    if model == "betabinom":
        if prior:
            raise ValueError("prior overrides apply to the change model only")
        fn = betabinom_numpyro if backend == "numpyro" else betabinom_pymc
        return fn(data, collapsed=collapsed, config=config)
    if model == "change":
        if collapsed:
            fn = partial(change_collapsed_numpyro if backend == "numpyro" else change_collapsed_pymc, items=items)
        else:
            fn = change_numpyro if backend == "numpyro" else change_pymc
        return fn(data, slope=slope, prior=prior, config=config)
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def sample_posterior(
    data: ModelInputs,
    model: str = "change",
    backend: str = "numpyro",
    *,
    collapsed: bool = True,
    slope: bool = False,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    gate: GateConfig | None = None,
) -> tuple[xr.DataTree, Diagnostics, list[dict], SamplerConfig]:
    """The sampling step of :func:`fit`: :func:`sample` behind the convergence gate.

    :func:`~bayesrc.bayes.gating.sample_gated` samples with ``config`` (default :class:`SamplerConfig`'s defaults)
    and, while the gate (``gate``, default :class:`GateConfig`'s) fails and its ``escalate`` is set, again with
    longer chains. The collapsed change model is sampled without its item draws, which
    :func:`~bayesrc.bayes.change_item_draws.with_item_draws` adds once, to the last attempt. The other
    arguments are :func:`fit`'s.

    Returns
    -------
    tuple
        ``(dt, diagnostics, attempts, config)``: the posterior, the last attempt's gate
        (:class:`~bayesrc.bayes.diagnostics.Diagnostics`; a failed gate does not raise), one record per
        attempt (``fit.json``'s ``attempts``) and the last attempt's settings.

    Examples
    --------
    >>> data = model_inputs(counts)                                                   # doctest: +SKIP
    >>> dt, diag, attempts, cfg = sample_posterior(data, config=SamplerConfig(seed=1))  # doctest: +SKIP
    >>> diag.passed, len(attempts)                                                    # doctest: +SKIP
    (True, 1)
    """
    hyper_only = model == "change" and collapsed  # its item draws once, after the gate, not for every attempt
    sampler = partial(sample, data, model, backend, collapsed=collapsed, slope=slope, prior=prior, items=not hyper_only)
    dt, diag, attempts, cfg = sample_gated(
        sampler, gated_vars(model, slope, collapsed, data.n_groups > 1), config or SamplerConfig(), gate or GateConfig()
    )
    release_memory()  # the sampler's compiled code and buffers: the item draws and checks need the room
    if hyper_only:
        dt = with_item_draws(dt, data, cfg, slope=slope, prior=prior)
        release_memory()
    return dt, diag, attempts, cfg


def select_items(
    dt,
    data: ModelInputs,
    selection: SelectionConfig | None = None,
) -> tuple[pd.DataFrame, dict]:
    """The item step of :func:`fit`: the item table of a posterior and the changed items selected from it.

    With ``selection`` (a :class:`~bayesrc.bayes.SelectionConfig`, default its defaults):
    :func:`~bayesrc.bayes.summaries.item_summary` (dp, the direction probabilities, those of a change of at
    least ``delta_min``, ``p_rope`` with a ``rope``), then :func:`~bayesrc.bayes.summaries.select` on
    ``p_improve`` and ``p_deteriorate``: Bayesian FDR at level ``fdr`` (``rule="fdr"``) or
    ``P(direction) >= threshold`` (``rule="threshold"``).

    Returns
    -------
    tuple
        ``(items, selection)``: the item table with each item's class (``bayes_class``) and the
        selection's record (``fit.json``'s ``selection``: rule, level, items flagged, expected false ones).

    Examples
    --------
    >>> items, selection = select_items(dt, data, SelectionConfig(fdr=0.05))    # doctest: +SKIP
    >>> selection["n_improved"], selection["expected_fdp"]     # doctest: +SKIP
    """
    s = selection or SelectionConfig()
    items = item_summary(dt, data, rope=s.rope, delta_min=s.delta_min)
    cls, sel = select(items["p_improve"], items["p_deteriorate"], rule=s.rule, fdr=s.fdr, threshold=s.threshold)
    items["bayes_class"] = cls
    return items, sel


def crosscheck_rci(
    dt,
    data: ModelInputs,
    counts: xr.Dataset,
    items: pd.DataFrame,
    rci: PairResult,
    selection: SelectionConfig | None = None,
    *,
    model: str = "change",
    prior: dict | None = None,
) -> tuple[pd.DataFrame, dict, pd.DataFrame, list[str]]:
    """The cross-check step of :func:`fit`: the model's classes against a classical RCI result of the same pair.

    The agreement table and kappa, the discordant items and RCI's estimated false-discovery proportion,
    sign and material (:func:`~bayesrc.bayes.summaries.crosscheck`, with 90% intervals), the within-item
    permutation test of no change and, for the change model, how that estimate moves when the
    change-structure priors are power-scaled (:func:`prior_sensitivity_warnings`).

    Parameters
    ----------
    dt, data, counts : the posterior (:func:`sample_posterior`), its model inputs and the item counts.
    items : the item table with ``bayes_class`` (:func:`select_items`).
    rci : the :class:`bayesrc.classical.PairResult` of ``data``'s pair (:func:`bayesrc.classical.reliable_change`,
        or loaded from ``rci.json``), its item table used as it is (ValueError for another pair's).
    selection : what ``items`` was formed with (its ``rope`` and ``delta_min``; default
        :class:`~bayesrc.bayes.SelectionConfig`'s).
    model, prior : what ``dt`` was sampled with.

    Returns
    -------
    tuple
        ``(items, crosscheck, discordant, warnings)``: a copy of ``items`` with RCI's class (``rci_class``),
        ``fit.json``'s ``crosscheck``, the items the two classify differently and the warnings.

    Examples
    --------
    >>> pair = bayesrc.classical.reliable_change(counts)                               # doctest: +SKIP
    >>> items, cc, discordant, warnings = crosscheck_rci(dt, data, counts, items, pair)  # doctest: +SKIP
    >>> cc["kappa"], cc["rci_estimated_fdp"]                                           # doctest: +SKIP
    """
    selection = selection or SelectionConfig()
    rope, delta_min = float(selection.rope or 0.0), selection.delta_min
    rci_items = _rci_items(rci, data)
    items = items.copy()
    items["rci_class"] = (
        rci_items.set_index("item_id")["class"].reindex(items["item_id"]).fillna("excluded").to_numpy(dtype=object)
    )
    rci_class = items["rci_class"].to_numpy(dtype=object)
    cc, disc = crosscheck(items, rci_items, rci.s_diff)
    cc |= rci_fdp_interval(dt["posterior"], rci_class, rope=rope, delta_min=delta_min)
    cc["no_change_test"] = pair_no_change_test(counts, *data.versions)  # the same p-value as the RCI run's
    cc, warnings = allow_no_change(cc, cc["no_change_test"], cc["rci_n_flagged"])
    if model == "change":
        log_prior = change_log_prior(dt["posterior"], prior, STRUCTURE_SITES)
        cc["prior_sensitivity"] = rci_fdp_prior_sensitivity(
            dt["posterior"], rci_class, log_prior, delta_min=delta_min, rope=rope
        )
        warnings += prior_sensitivity_warnings(cc["prior_sensitivity"], cc, delta_min)
    return items, cc, disc, warnings


def workflow_checks(
    dt,
    data: ModelInputs,
    counts: xr.Dataset,
    items: pd.DataFrame,
    *,
    model: str = "change",
    slope: bool = False,
    prior: dict | None = None,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict, dict, dict, list[str]]:
    """The checks step of :func:`fit`: what the priors imply, the posterior predictive check and PSIS-LOO.

    :func:`~bayesrc.bayes.prior_predictive.prior_predictive` on ``data``'s design, then :func:`run_checks`
    (a posterior predictive check per stratum, PSIS-LOO with Pareto k and LOO-PIT per item) and the
    warnings they give. ``model``, ``slope``, ``prior``: what ``dt`` was sampled with; ``seed``: its
    last attempt's.

    Returns
    -------
    tuple
        ``(items, ppc, loo, prior_predictive, warnings)``: ``items`` with the columns ``elpd_loo``,
        ``pareto_k`` and ``loo_pit``; ``fit.json``'s ``ppc``, ``loo`` and ``prior_predictive``; the warnings
        (a model that does not reproduce the data, items with a high Pareto k).

    Examples
    --------
    >>> items, ppc, loo, prior_pred, warnings = workflow_checks(  # doctest: +SKIP
    ...     dt, data, counts, items, seed=cfg.seed
    ... )
    >>> loo["elpd"], ppc["flagged"]                            # doctest: +SKIP
    """
    prior_pred = prior_predictive(
        data, model, slope=slope and model == "change", prior=prior if model == "change" else None, seed=seed
    )
    ppc, loo_payload, per_item = run_checks(dt, data, counts, items["item_id"], seed=seed)
    items = pd.concat([items.reset_index(drop=True), per_item.drop(columns="item_id")], axis=1)
    return items, ppc, loo_payload, prior_pred, ppc_warnings(ppc, model) + loo_warnings(loo_payload)


@releases_jax_caches
def fit(
    counts: xr.Dataset,
    *,
    versions: tuple[str, ...] | None = None,
    model: str = "change",
    backend: str = "numpyro",
    collapsed: bool = True,
    slope: bool = False,
    prior: dict | None = None,
    covariate: str | None = "auto",
    config: SamplerConfig | None = None,
    gate: GateConfig | None = None,
    selection: SelectionConfig | None = None,
    rci: PairResult | None = None,
    rci_kwargs: dict | None = None,
    checks: bool = True,
) -> BayesFit | JointFit:
    """Fit ``model`` to a version pair, gate it, select changed items and cross-check against RCI;
    or, for three or more versions, fit the joint change model of the family.

    A pair's fit is :func:`sample_posterior`, :func:`select_items`, :func:`crosscheck_rci` and
    :func:`workflow_checks` in turn, their records put together as a :class:`BayesFit`.

    Parameters
    ----------
    counts : item counts (:func:`bayesrc.data.item_counts` / :func:`bayesrc.data.load_counts`).
    versions : the pair ``(v1, v2)`` to compare (default: the first two versions of ``counts``), or
        three or more versions of a family (the first the reference).
    model : ``"change"`` (paired change model, SPEC 3.2) or ``"betabinom"`` (SPEC 3.1). With
        ``"change"`` and three or more versions in ``counts`` (or in ``versions``), the joint model of
        the family (:func:`bayesrc.bayes.joint_fit.fit_joint`: a :class:`JointFit`; its sampler and gate
        settings are these, the pair-only ones (:data:`PAIR_ONLY_DEFAULTS`, ``selection`` among them)
        must stay at their defaults).
    backend : ``"numpyro"`` or ``"pymc"``.
    collapsed : NUTS on the hyperparameters only, items integrated out (beta-binomial:
        conjugate; change model: :mod:`bayesrc.bayes.change_collapsed`); ``False`` samples
        every item parameter with NUTS (the cross-check).
    covariate : change model: an item coord of ``counts`` whose levels shift the items' mean
        easiness and mean change (``"auto"``: ``correct_answer`` when present; ``None``: none; see
        :func:`model_inputs`).
    config : the sampler's settings (:class:`SamplerConfig`, default its defaults).
    gate : the convergence gate (:class:`~bayesrc.bayes.GateConfig`: R-hat, ESS, divergences;
        its thresholds are stored with the result) and whether a failed gate escalates: sample again
        before giving up (:func:`~bayesrc.bayes.gating.escalated_config`: more draws when R-hat or ESS fell
        short, longer warm-up and a higher target acceptance after divergences); every attempt is recorded
        in ``payload["attempts"]`` (``fit.json``).
    selection : how changed items are selected (:class:`~bayesrc.bayes.SelectionConfig`: Bayesian
        FDR at level ``fdr``, or P(direction) >= ``threshold``) and what counts as material (``delta_min``,
        SPEC 7: items get ``P(dp >= delta_min)`` and ``P(dp <= -delta_min)``, the cross-check RCI's
        estimated *material* false-discovery proportion; ``rope``: ``p_rope``).
    rci : the classical result to cross-check against, a :class:`bayesrc.classical.PairResult`
        (from :func:`bayesrc.classical.reliable_change` or loaded from ``rci.json``; its item
        table is used as it is), so report and fit share one RCI classification. Default: run
        :func:`bayesrc.classical.reliable_change` with ``rci_kwargs``.
    rci_kwargs : settings of that classical run (default 200 splits and permutations).
    checks : the workflow checks (:mod:`bayesrc.bayes.ppc`, :mod:`bayesrc.bayes.checks`): a posterior predictive
        check per stratum (domain x covariate level; ``payload["ppc"]``, a warning when the model does not
        reproduce the data) and PSIS-LOO with Pareto k and LOO-PIT per item (``payload["loo"]``,
        item columns ``elpd_loo``, ``pareto_k``, ``loo_pit``; :func:`bayesrc.bayes.compare`), and
        what the priors imply for item accuracies and their change on this design
        (``payload["prior_predictive"]``, :func:`bayesrc.bayes.prior_predictive.prior_predictive`).

    Returns
    -------
    BayesFit
        Never raises for a failed gate: ``status`` is "failed" (see :func:`check`).

    Examples
    --------
    >>> from bayesrc.data import simulate_pair
    >>> counts = simulate_pair(n_items=200, k=10, seed=1).counts     # doctest: +SKIP
    >>> res = fit(counts, versions=("v1", "v2"))                     # doctest: +SKIP
    >>> strict = fit(counts, selection=SelectionConfig(fdr=0.05), gate=GateConfig(escalate=False))  # doctest: +SKIP
    >>> res.summary()                                                # doctest: +SKIP
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if versions is not None:
        counts = counts.sel(version=[str(v) for v in versions])
    if counts.sizes["version"] >= 3:
        if model != "change":
            raise ValueError(
                f"the {model} model compares a pair: pass versions=(v1, v2), "
                "or model='change' for the joint model of the family"
            )
        bad = pair_only_settings(collapsed=collapsed, slope=slope, rci=rci, rci_kwargs=rci_kwargs, selection=selection)
        if bad:
            raise ValueError(
                f"the joint model of three or more versions has no {', '.join(bad)} setting "
                "(fit a pair with versions=(v1, v2))"
            )
        return fit_joint(counts, backend=backend, prior=prior, config=config, covariate=covariate, gate=gate)
    selection = selection or SelectionConfig()
    data = model_inputs(counts, covariate=covariate if model == "change" else None)
    rci = _rci_result(counts, data, rci, rci_kwargs)  # before sampling: a bad rci fails fast
    t0 = time.perf_counter()
    dt, diag, attempts, cfg = sample_posterior(
        data,
        model,
        backend,
        collapsed=collapsed,
        slope=slope,
        prior=prior,
        config=config,
        gate=gate,
    )
    runtime = time.perf_counter() - t0
    items, sel = select_items(dt, data, selection)
    items, cc, disc, warnings = crosscheck_rci(dt, data, counts, items, rci, selection, model=model, prior=prior)
    ppc, loo_payload, prior_pred = None, None, None
    if checks:
        items, ppc, loo_payload, prior_pred, check_warnings = workflow_checks(
            dt, data, counts, items, model=model, slope=slope, prior=prior, seed=cfg.seed
        )
        warnings += check_warnings
    items = items[[c for c in ITEM_COLUMNS if c in items] + (["p_rope"] if "p_rope" in items else [])]
    payload = {
        "status": "ok" if diag.passed else "failed",
        "model": model,
        "backend": backend,
        "runtime_s": runtime,
        "diagnostics": diag.to_dict(),
        "selection": sel,
        "crosscheck": cc,
        "domain_shift": domain_shift(dt, data),
        "params": _fit_params(
            data, cfg, rci, model=model, collapsed=collapsed, slope=slope, prior=prior, selection=selection
        ),
        "flips": expected_flips(dt, data),
        "warnings": warnings,
        "attempts": attempts,
        "ppc": ppc,
        "loo": loo_payload,
        "prior_predictive": prior_pred,
    }
    return BayesFit(payload, {"items": items.reset_index(drop=True), "discordant": disc}, dt)


#: Settings only a pair's fit has (the joint model of a family is collapsed, without slope, covariate,
#: item selection or RCI cross-check yet), at the values that leave them unused (``selection``: None or
#: :class:`~bayesrc.bayes.SelectionConfig`'s defaults).
PAIR_ONLY_DEFAULTS = {
    "collapsed": True,
    "slope": False,
    "rci": None,
    "rci_kwargs": None,
    "selection": SelectionConfig(),
}


def pair_only_settings(**given) -> list[str]:
    """The names among ``given`` (keywords of :func:`fit`) that a family's joint fit does not have but that
    are set away from :data:`PAIR_ONLY_DEFAULTS`: :func:`fit` and ``bayesrc fit V1 V2 V3 ...`` refuse them
    rather than ignore them.

    Examples
    --------
    >>> pair_only_settings(selection=SelectionConfig(fdr=0.05), slope=False)
    ['selection']
    >>> pair_only_settings(selection=None, collapsed=True)
    []
    """
    given = {k: PAIR_ONLY_DEFAULTS[k] if k == "selection" and v is None else v for k, v in given.items()}
    return [k for k, v in given.items() if v != PAIR_ONLY_DEFAULTS[k]]


def _fit_params(
    data: ModelInputs,
    cfg: SamplerConfig,
    rci: PairResult,
    *,
    model: str,
    collapsed: bool,
    slope: bool,
    prior,
    selection: SelectionConfig,
) -> dict:
    """``fit.json``'s ``params``: the model's settings, the sampler's and the cross-checked RCI's."""
    rci_params = dict(rci.params)
    return {
        "collapsed": bool(collapsed),
        "slope": bool(slope) if model == "change" else None,
        "prior": prior_settings(prior) if model == "change" else None,
        "chains": cfg.chains,
        "draws": cfg.draws,
        "tune": cfg.tune,
        "target_accept": cfg.target_accept,
        "seed": cfg.seed,
        "covariate": data.covariate,
        "covariate_levels": list(data.groups) if data.covariate else None,
        "rope": selection.rope,
        "delta_min": float(selection.delta_min),
        "versions": list(data.versions),
        "n_items": data.n_items,
        "domains": list(data.domains),
        "rci_sd_basis": rci_params.get("sd_basis"),
        "rci_s_diff": rci.s_diff,
        "rci_params": rci_params,
    }


def run_checks(
    dt, data: ModelInputs, counts: xr.Dataset, item_ids, *, seed: int = 0
) -> tuple[dict, dict, pd.DataFrame]:
    """The posterior predictive check and PSIS-LOO of one fit: ``(ppc, loo, per-item table)``.

    The check's strata are domain x covariate level whatever the model used: a model without the
    item covariate is checked on the strata it leaves out (``covariate="auto"``: the correct
    option's letter when the counts carry it), so a structure it misses shows.

    Examples
    --------
    >>> ppc, loo, per_item = run_checks(  # doctest: +SKIP
    ...     res.posterior, model_inputs(counts), counts, res.items["item_id"]
    ... )
    """
    strata = data if data.covariate else model_inputs(counts, *data.versions, covariate="auto")
    # the draws the check replicates, formed for them alone
    p = item_block(thinned_draws(dt["posterior"], MAX_PPC_DRAWS))["p"].values[None]
    ppc = posterior_predictive_check(p, strata, seed=seed)
    del p  # freed before PSIS-LOO, a fit's peak step at 12,000 items
    ids = np.asarray(item_ids).astype(str)
    if not np.array_equal(ids, np.asarray(data.items).astype(str)):
        raise ValueError("the item table is not in the model inputs' item order")
    release_memory()  # the check's compiled code: PSIS-LOO's (draw, item) arrays need the room at 12,000 items
    loo_payload, per_item = loo_checks(dt, data, ids, seed=seed)
    return ppc, loo_payload, per_item


def prior_sensitivity_warnings(sens: dict, cc: dict, delta_min: float) -> list[str]:
    """One line per estimate of RCI's false-discovery proportion that the data do not decide
    (it moves by more than the tolerance when the change-structure priors are power-scaled)."""
    out = []
    for key, label, flag in (
        ("rci_estimated_fdp", "sign", "sensitive"),
        ("rci_estimated_fdp_material", f"material, |dp| >= {delta_min:g}", "sensitive_material"),
    ):
        if not sens.get(flag):
            continue
        advice = (
            "use the material estimate, or more samples per item"
            if flag == "sensitive" and not sens.get("sensitive_material")
            else "more samples per item would"
        )
        out.append(
            f"RCI's estimated false-discovery proportion ({label}) is {cc[key]:.1%}, "
            f"but {min(sens[key]):.1%}-{max(sens[key]):.1%} with the priors "
            "on the share and spread of changes power-scaled by "
            f"{min(sens['alphas']):g}-{max(sens['alphas']):g}: the data do not decide it, "
            f"so it is not calibrated ({advice})"
        )
    return out


def _rci_result(counts: xr.Dataset, data: ModelInputs, rci: PairResult | None, rci_kwargs: dict | None) -> PairResult:
    """The classical result :func:`fit` cross-checks (given, or run here), refused before it samples when it
    compares another pair or has no item table."""
    if rci is None:
        rci = reliable_change(counts, data.versions[0], data.versions[1], **(rci_kwargs or CROSSCHECK_RCI_KWARGS))
    elif rci_kwargs:
        raise ValueError("give either rci (an existing classical result) or rci_kwargs, not both")
    _rci_items(rci, data)
    return rci


def _rci_items(rci: PairResult, data: ModelInputs) -> pd.DataFrame:
    """``rci``'s item table (a copy), refused when ``rci`` compares another pair than ``data``."""
    if rci.versions != tuple(data.versions):
        raise ValueError(f"the classical result compares {rci.versions}, the fit {tuple(data.versions)}")
    return rci.to_frame()
