"""One call from item counts to a gated, summarised, cross-checked Bayesian fit."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes.betabinom import betabinom_numpyro, betabinom_pymc
from bayesrc.bayes.change import STRUCTURE_SITES, change_log_prior, change_numpyro, change_pymc, prior_settings
from bayesrc.bayes.change_collapsed import change_collapsed_numpyro, change_collapsed_pymc
from bayesrc.bayes.change_item_draws import with_item_draws
from bayesrc.bayes.check_figures import loo_pit_figure, ppc_figure, prior_predictive_figure
from bayesrc.bayes.checks import (
    MAX_PPC_DRAWS,
    loo_checks,
    loo_warnings,
    pit_ecdf_band,
    posterior_predictive_check,
    ppc_warnings,
)
from bayesrc.bayes.diagnostics import GatedResult
from bayesrc.bayes.draws import item_block, thinned_draws
from bayesrc.bayes.gating import sample_gated
from bayesrc.bayes.inputs import ModelInputs, model_inputs
from bayesrc.bayes.joint_fit import JointFit, fit_joint
from bayesrc.bayes.prior_predictive import prior_predictive
from bayesrc.bayes.samplers import SamplerConfig
from bayesrc.bayes.summaries import (
    DELTA_MIN,
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
from bayesrc.config import release_memory, releases_jax_caches
from bayesrc.errors import ConvergenceError, InputError
from bayesrc.results import finite_number, register, two_labels

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


def gated_vars(model: str, slope: bool = False, collapsed: bool = False, covariate: bool = False) -> list[str]:
    """The sampled quantities the gate checks (plus p for the beta-binomial).

    The collapsed change model samples only the hyperparameters (``theta`` is an exact
    conditional draw, independent given them), so only those are gated. ``covariate``: the
    change model has an item covariate (its ``group_level``, ``group_shift``, ``stratum_shift_sd`` and
    ``stratum_shift_z`` are gated too; ``stratum_shift`` is their product, exactly 0 in a stratum
    with no interaction contrast).

    Examples
    --------
    >>> gated_vars("change", collapsed=True)
    ['mu_theta', 'sigma_theta', 'shift', 'sigma_delta', 'pi']
    """
    if model == "betabinom":
        return ["logit_mu", "log_kappa", "p"]
    extra = (["slope"] if slope else []) + (
        ["group_level", "group_shift", "stratum_shift_sd", "stratum_shift_z"] if covariate else []
    )
    return ["mu_theta", "sigma_theta", "shift", "sigma_delta", "pi"] + ([] if collapsed else ["theta"]) + extra


@register
class BayesFit(GatedResult):
    """A fitted model: posterior, item table, diagnostics, selection and RCI cross-check.

    The record is ``fit.json`` (``payload``) plus the tables ``items`` and ``discordant``
    (``items.parquet``, ``discordant.parquet``) and the posterior (``posterior.nc``);
    :meth:`save` writes all four together, :func:`bayesrc.load` reads them back equal.
    Keys other analyses add to ``fit.json`` are kept as they are.

    Examples
    --------
    >>> res = bayesrc.bayes.fit(counts, versions=("v1", "v2"))   # doctest: +SKIP
    >>> res.summary(); res.plot_forest(); res.save("out/fit")     # doctest: +SKIP
    >>> bayesrc.load("out/fit") == res                           # doctest: +SKIP
    True
    """

    main_file = "fit.json"
    kind = "fit"
    headline_metrics = (
        *("status", "model", "max R-hat", "min ESS bulk", "divergences", "improved", "deteriorated"),
        *("expected false", "RCI flagged", "RCI estimated FDP", "posterior predictive check"),
    )
    field_kinds = (
        GatedResult.field_kinds
        | {  # what summary(), the figures and the report read (bayesrc.results.check_fields)
            "{status,model,backend}": "text",
            "{selection,crosscheck}": "object",
            "selection.rule": "text",
            "selection.{fdr,threshold,expected_false,expected_fdp}": "number",
            "selection.{n_improved,n_deteriorated}": "count",
            "crosscheck.{kappa,rci_estimated_fdp,rci_estimated_fdp_material}": "number",
            "crosscheck.rci_n_flagged": "count",
            "crosscheck.table.*": "object",
            "crosscheck.table.*.*": "count",
            "crosscheck.{rci_estimated_fdp_interval90,rci_estimated_fdp_material_interval90}": "interval",
            "crosscheck.no_change_test.p_value": "number",
            "crosscheck.prior_sensitivity.{alphas,rci_estimated_fdp,rci_estimated_fdp_material}": "numbers",
            "domain_shift.*": "object",
            "domain_shift.*.{mean,lo90,hi90}": "number",
            "params.delta_min": "finite",
            "params.rope": "number",
            "flips.{expected_negative_flips,expected_positive_flips}": "object",
            "flips.{expected_negative_flips,expected_positive_flips}.{mean,lo90,hi90}": "number",
            "warnings": "texts",
            "ppc.{alpha,p_adjusted_min}": "finite",
            "ppc.n_tests": "count",
            "ppc.flagged": "list",
            "ppc.table!": "records",  # drawn after the section is built: a missing key there is no section's error
            "ppc.table.[].{stratum!,stat!}": "text",
            "ppc.table.[].{observed,replicated_mean,replicated_lo90,replicated_hi90,p,p_adjusted}": "number",
            "loo.{elpd,se,k_threshold}": "finite",
            "loo.n_high_k": "count",
            "loo.high_k_items": "labels",
            "{ppc,loo,prior_predictive,flips}": "block",
            "loo.loo_pit_ks_p": "number",
        }
    )
    has_posterior = True

    def table_names_on_disk(self, folder: Path) -> dict[str, Path]:
        return {n: folder / f"{n}.parquet" for n in ("items", "discordant") if (folder / f"{n}.parquet").is_file()}

    def required_columns(self, name: str) -> tuple[str, ...]:
        # the report's item table and forest
        return ("item_id", "dp_mean", "dp_lo90", "dp_hi90", "bayes_class") if name == "items" else ()

    def posterior_attrs(self) -> dict:
        return {"status": self.status, "model": self.model, "backend": self.backend}

    def table_attrs(self, name: str) -> dict:
        return {"status": self.status} | ({"model": self.model, "backend": self.backend} if name == "items" else {})

    # typed accessors over the payload ------------------------------------------------
    model = property(lambda self: self.payload["model"])
    backend = property(lambda self: self.payload["backend"])
    selection = property(lambda self: self.payload["selection"])
    crosscheck = property(lambda self: self.payload["crosscheck"])
    domain_shift = property(lambda self: self.payload.get("domain_shift") or {})
    params = property(lambda self: self.payload.get("params") or {})
    flips = property(lambda self: self.payload.get("flips") or {})  # expected real majority flips (SPEC 2.1)
    warnings = property(lambda self: list(self.payload.get("warnings") or []))  # estimates the data do not decide
    ppc = property(lambda self: self.payload.get("ppc") or {})  # posterior predictive check (bayesrc.bayes.checks)
    loo = property(lambda self: self.payload.get("loo") or {})  # PSIS-LOO over items: ELPD, Pareto k

    @property
    def prior_predictive(self) -> dict:
        """What the priors imply (:func:`bayesrc.bayes.prior_predictive.prior_predictive`); the numbers
        the summary, the report and its figure read are checked (:class:`InputError` naming the field)."""
        pp = self.payload.get("prior_predictive") or {}
        if pp:
            check_prior_predictive(pp)
        return pp

    items = property(lambda self: self.tables.get("items"))
    discordant = property(lambda self: self.tables.get("discordant"))

    @property
    def versions(self) -> tuple[str, str]:
        return two_labels(self.params.get("versions") or ["v1", "v2"], "params.versions")

    def summary(self) -> pd.DataFrame:
        """Headline numbers as a two-column table (metric, value)."""
        d, s, c = self.diagnostics, self.selection, self.crosscheck
        rows = [
            ("status", self.status),
            ("model", self.model),
            ("backend", self.backend),
            ("runtime_s", round(self.runtime_s, 2)),
            ("max R-hat", d.max_rhat),
            ("min ESS bulk", d.min_ess_bulk),
            ("min ESS tail", d.min_ess_tail),
            ("divergences", d.divergences),
            ("improved", s["n_improved"]),
            ("deteriorated", s["n_deteriorated"]),
            ("expected false", s["expected_false"]),
            ("kappa vs RCI (RCI-analysed items)", c["kappa"]),
            ("RCI flagged", c.get("rci_n_flagged")),
            ("RCI estimated FDP", c["rci_estimated_fdp"]),
            (
                f"RCI estimated FDP, material (|dp| >= {self.params.get('delta_min', DELTA_MIN):g})",
                c.get("rci_estimated_fdp_material"),
            ),
        ]
        if c.get("no_change_test"):
            rows.append(("no-change test p (within-item permutation)", c["no_change_test"]["p_value"]))
        for key, label in (
            ("rci_estimated_fdp_interval90", "RCI estimated FDP, 90% interval"),
            ("rci_estimated_fdp_material_interval90", "RCI estimated FDP, material, 90% interval"),
        ):
            if c.get(key):
                rows.append((label, " - ".join(f"{v:.3f}" for v in c[key])))
        sens = c.get("prior_sensitivity") or {}
        if sens.get("rci_estimated_fdp"):
            for key, label in (
                ("rci_estimated_fdp", "RCI estimated FDP"),
                ("rci_estimated_fdp_material", "RCI estimated FDP, material"),
            ):
                rows.append(
                    (
                        f"{label}, priors power-scaled x{sens['alphas'][0]:g} / x{sens['alphas'][-1]:g}",
                        " / ".join(f"{v:.3f}" for v in sens[key]),
                    )
                )
        if self.flips:
            rows.append(("expected negative flips", self.flips["expected_negative_flips"]["mean"]))
        if self.ppc:
            verdict = (
                "passed"
                if not self.ppc["flagged"]
                else f"WARNS ({len(self.ppc['flagged'])} of {self.ppc['n_tests']} tests)"
            )
            rows += [("posterior predictive check", verdict), ("PPC smallest adjusted p", self.ppc["p_adjusted_min"])]
        if self.loo:
            rows += [
                ("ELPD (PSIS-LOO) ± SE", f"{self.loo['elpd']:.1f} ± {self.loo['se']:.1f}"),
                (f"items with Pareto k > {self.loo['k_threshold']:g}", self.loo["n_high_k"]),
            ]
        if pp := self.prior_predictive:
            rows += [
                (
                    "prior predictive: share of items with |dp| > 0.05 / > 0.10",
                    " / ".join(f"{v:.3f}" for v in pp["share_abs_dp_above"].values()),
                ),
                (
                    "prior predictive: 90% range of an item's accuracy (v1)",
                    f"{pp['p_v1'][0]:.3f} - {pp['p_v1'][-1]:.3f}",
                ),
            ]
        rows += [("warning", w) for w in self.warnings]
        return pd.DataFrame(rows, columns=["metric", "value"])

    def ppc_table(self) -> pd.DataFrame:
        """The posterior predictive check, one row per (stratum, statistic): observed, replicated
        mean and 90% range, p and min-p adjusted p (empty for a fit without checks)."""
        cols = [
            "stratum",
            "n_items",
            "stat",
            "observed",
            "replicated_mean",
            "replicated_lo90",
            "replicated_hi90",
            "p",
            "p_adjusted",
        ]
        return pd.DataFrame(self.ppc.get("table") or [], columns=cols)

    def plot_ppc(self, **kwargs):
        """Figure of the posterior predictive check (:func:`bayesrc.bayes.check_figures.ppc_figure`)."""
        if not self.ppc:
            raise ValueError(
                "this fit has no posterior predictive check (fit(..., checks=False) or fitted before issue 31)"
            )
        return ppc_figure(self.ppc, **kwargs)

    def loo_pit_band(self) -> pd.DataFrame:
        """The LOO-PIT ECDF of the per-item change against uniform, with its simultaneous 95% band
        (:func:`bayesrc.bayes.checks.pit_ecdf_band` on the item table's ``loo_pit``)."""
        pit = (
            self.items["loo_pit"].to_numpy(float)
            if self.items is not None and "loo_pit" in self.items
            else np.array([])
        )
        if np.isfinite(pit).sum() < 2:
            raise ValueError("this fit has no LOO-PIT values (fit(..., checks=False) or fitted before issue 31)")
        return pit_ecdf_band(pit)

    def plot_loo_pit(self, **kwargs):
        """Figure of the LOO-PIT calibration (:func:`bayesrc.bayes.check_figures.loo_pit_figure`)."""
        return loo_pit_figure(self.loo_pit_band(), ks_p=self.loo.get("loo_pit_ks_p"), **kwargs)

    def plot_prior_predictive(self, **kwargs):
        """Figure of the prior predictive check (:func:`bayesrc.bayes.check_figures.prior_predictive_figure`)."""
        if not self.prior_predictive:
            raise ValueError(
                "this fit has no prior predictive check (fit(..., checks=False) or fitted before it existed)"
            )
        return prior_predictive_figure(self.prior_predictive, **kwargs)

    def domain_shift_table(self) -> pd.DataFrame:
        """Per-domain posterior mean dp and its 90 % interval (domain, mean, lo90, hi90)."""
        rows = [
            {"domain": k, "mean": v["mean"], "lo90": v["lo90"], "hi90": v["hi90"]} for k, v in self.domain_shift.items()
        ]
        return pd.DataFrame(rows, columns=["domain", "mean", "lo90", "hi90"])

    def item_draws(self, items=None) -> xr.Dataset:
        """The posterior draws of the items ``items`` (an ``isel`` indexer; None: all) with ``p``
        (item, version), ``dp`` and, for the change model, ``r = P(changed)`` and ``p_up`` formed
        (:func:`bayesrc.bayes.draws.item_block`: the fit stores only what cannot be recomputed).

        Examples
        --------
        >>> res.item_draws(slice(0, 100))["dp"].mean(("chain", "draw"))   # doctest: +SKIP
        """
        return item_block(self.posterior["posterior"], items)

    def plot_forest(self, n: int = 30, **kwargs):
        """Forest plot (arviz-plots) of the posterior Δp of the ``n`` items with the largest ``|mean Δp|``.

        Returns the arviz-plots ``PlotCollection``; ``kwargs`` go to :func:`arviz_plots.plot_forest`
        (e.g. ``backend="matplotlib"``).
        """
        import arviz_plots as azp  # deferred: arviz_plots loads matplotlib, ~4 s (bayes extra)

        order = np.argsort(-self.items["dp_mean"].abs().to_numpy(), kind="stable")[:n]
        dp = self.item_draws(order)["dp"].assign_coords(item=self.items["item_id"].to_numpy()[order].astype(str))
        kwargs.setdefault("backend", "matplotlib")
        return azp.plot_forest(dp.to_dataset(name="dp"), combined=True, **kwargs)

    def plot_trace(self, var_names: list[str] | None = None, **kwargs):
        """Trace and marginal plots (arviz-plots) of the gated hyperparameters."""
        import arviz_plots as azp  # deferred: arviz_plots loads matplotlib, ~4 s (bayes extra)

        post = self.posterior["posterior"]
        names = var_names or [
            v for v in gated_vars(self.model, bool(self.params.get("slope")), True) if v in post and v != "p"
        ]
        kwargs.setdefault("backend", "matplotlib")
        return azp.plot_trace_dist(self.posterior, var_names=names, compact=True, **kwargs)

    def write(self, out_dir: str | Path) -> Path:
        """Alias of :meth:`save`: ``posterior.nc``, ``items.parquet``, ``discordant.parquet`` and ``fit.json``."""
        return self.save(out_dir)

    def _headline(self) -> str:
        s = self.selection
        return (
            f"{self.model} ({self.backend}) {self.versions[0]} -> {self.versions[1]}, gate {self.status}, "
            f"{s['n_improved']} improved, {s['n_deteriorated']} deteriorated"
        )


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
    config: SamplerConfig | None = None,
    rule: str = "fdr",
    fdr: float = 0.10,
    threshold: float = 0.975,
    rope: float | None = None,
    delta_min: float = DELTA_MIN,
    max_rhat: float = 1.01,
    min_ess: float = 400.0,
    max_divergences: int = 0,
    rci: PairResult | None = None,
    rci_kwargs: dict | None = None,
    covariate: str | None = "auto",
    escalate: bool = True,
    checks: bool = True,
) -> BayesFit | JointFit:
    """Fit ``model`` to a version pair, gate it, select changed items and cross-check against RCI;
    or, for three or more versions, fit the joint change model of the family.

    Parameters
    ----------
    counts : item counts (:func:`bayesrc.data.item_counts` / :func:`bayesrc.data.load_counts`).
    versions : the pair ``(v1, v2)`` to compare (default: the first two versions of ``counts``), or
        three or more versions of a family (the first the reference).
    model : ``"change"`` (paired change model, SPEC 3.2) or ``"betabinom"`` (SPEC 3.1). With
        ``"change"`` and three or more versions in ``counts`` (or in ``versions``), the joint model of
        the family (:func:`bayesrc.bayes.joint_fit.fit_joint`: a :class:`JointFit`; its sampler and gate
        settings are these, the pair-only ones must stay at their defaults).
    backend : ``"numpyro"`` or ``"pymc"``.
    collapsed : NUTS on the hyperparameters only, items integrated out (beta-binomial:
        conjugate; change model: :mod:`bayesrc.bayes.change_collapsed`); ``False`` samples
        every item parameter with NUTS (the cross-check).
    rule, fdr, threshold : selection (Bayesian FDR at level ``fdr``, or P(direction) >= ``threshold``).
    delta_min : a material change in accuracy (SPEC 7): items get ``P(dp >= delta_min)`` and
        ``P(dp <= -delta_min)``, the cross-check RCI's estimated *material* false-discovery proportion.
    max_rhat, min_ess, max_divergences : the convergence gate (stored with the result).
    rci : the classical result to cross-check against, a :class:`bayesrc.classical.PairResult`
        (from :func:`bayesrc.classical.reliable_change` or loaded from ``rci.json``; its item
        table is used as it is), so report and fit share one RCI classification. Default: run
        :func:`bayesrc.classical.reliable_change` with ``rci_kwargs``.
    rci_kwargs : settings of that classical run (default 200 splits and permutations).
    covariate : change model: an item coord of ``counts`` whose levels shift the items' mean
        easiness and mean change (``"auto"``: ``correct_answer`` when present; ``None``: none; see
        :func:`model_inputs`).
    escalate : when the gate fails, sample again before giving up (:func:`~bayesrc.bayes.gating.escalated_config`: more
        draws when R-hat or ESS fell short, longer warm-up and a higher target acceptance after
        divergences); every attempt is recorded in
        ``payload["attempts"]`` (``fit.json``).
    checks : the workflow checks (:mod:`bayesrc.bayes.checks`): a posterior predictive check per
        stratum (domain x covariate level; ``payload["ppc"]``, a warning when the model does not
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
    >>> res.summary()                                                # doctest: +SKIP
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not 0 < delta_min < 1:  # before sampling: a fit is minutes
        raise ValueError(f"delta_min must be in (0, 1), got {delta_min}")
    if versions is not None:
        counts = counts.sel(version=[str(v) for v in versions])
    if counts.sizes["version"] >= 3:
        if model != "change":
            raise ValueError(
                f"the {model} model compares a pair: pass versions=(v1, v2), "
                "or model='change' for the joint model of the family"
            )
        bad = pair_only_settings(
            collapsed=collapsed,
            slope=slope,
            rci=rci,
            rci_kwargs=rci_kwargs,
            rope=rope,
            rule=rule,
            fdr=fdr,
            threshold=threshold,
            delta_min=delta_min,
        )
        if bad:
            raise ValueError(
                f"the joint model of three or more versions has no {', '.join(bad)} setting "
                "(fit a pair with versions=(v1, v2))"
            )
        thresholds = {"max_rhat": max_rhat, "min_ess": min_ess, "max_divergences": max_divergences}
        return fit_joint(
            counts, backend=backend, prior=prior, config=config, covariate=covariate, escalate=escalate, **thresholds
        )
    data = model_inputs(counts, covariate=covariate if model == "change" else None)
    rci_items, s_diff, rci_params = _rci_classes(counts, data, rci, rci_kwargs)  # before sampling: a bad rci fails fast
    t0 = time.perf_counter()
    thresholds = {"max_rhat": max_rhat, "min_ess": min_ess, "max_divergences": max_divergences}
    hyper_only = model == "change" and collapsed  # its item draws once, after the gate, not for every attempt
    sampler = partial(sample, data, model, backend, collapsed=collapsed, slope=slope, prior=prior, items=not hyper_only)
    dt, diag, attempts, cfg = sample_gated(
        sampler, gated_vars(model, slope, collapsed, data.n_groups > 1), config or SamplerConfig(), thresholds, escalate
    )
    release_memory()  # the sampler's compiled code and buffers: the item draws and checks need the room
    if hyper_only:
        dt = with_item_draws(dt, data, cfg, slope=slope, prior=prior)
        release_memory()
    runtime = time.perf_counter() - t0
    items = item_summary(dt, data, rope=rope, delta_min=delta_min)
    cls, sel = select(items["p_improve"], items["p_deteriorate"], rule=rule, fdr=fdr, threshold=threshold)
    items["bayes_class"] = cls
    cc, disc, warnings = _crosscheck_rci(
        dt, counts, data, items, rci_items, s_diff, model=model, prior=prior, rope=rope, delta_min=delta_min
    )
    ppc, loo_payload, prior_pred = None, None, None
    if checks:
        items, ppc, loo_payload, prior_pred = _workflow_checks(
            dt, data, counts, items, model=model, slope=slope, prior=prior, seed=cfg.seed
        )
        warnings += ppc_warnings(ppc, model) + loo_warnings(loo_payload)
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
            data,
            cfg,
            rci_params,
            s_diff,
            model=model,
            collapsed=collapsed,
            slope=slope,
            prior=prior,
            rope=rope,
            delta_min=delta_min,
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
#: item selection or RCI cross-check yet), at the values that leave them unused.
PAIR_ONLY_DEFAULTS = {
    "collapsed": True,
    "slope": False,
    "rci": None,
    "rci_kwargs": None,
    "rope": None,
    "rule": "fdr",
    "fdr": 0.10,
    "threshold": 0.975,
    "delta_min": DELTA_MIN,
}


def pair_only_settings(**given) -> list[str]:
    """The names among ``given`` (keywords of :func:`fit`) that a family's joint fit does not have but that
    are set away from :data:`PAIR_ONLY_DEFAULTS`: :func:`fit` and ``bayesrc fit V1 V2 V3 ...`` refuse them
    rather than ignore them.

    Examples
    --------
    >>> pair_only_settings(fdr=0.05, rule="fdr")
    ['fdr']
    """
    return [k for k, v in given.items() if v != PAIR_ONLY_DEFAULTS[k]]


def _workflow_checks(
    dt, data: ModelInputs, counts: xr.Dataset, items: pd.DataFrame, *, model: str, slope: bool, prior, seed: int
):
    """The prior predictive check, the posterior predictive check and PSIS-LOO of a fit:
    ``(items with the per-item LOO columns, ppc, loo, prior_predictive)``."""
    prior_pred = prior_predictive(
        data, model, slope=slope and model == "change", prior=prior if model == "change" else None, seed=seed
    )
    ppc, loo_payload, per_item = run_checks(dt, data, counts, items["item_id"], seed=seed)
    items = pd.concat([items.reset_index(drop=True), per_item.drop(columns="item_id")], axis=1)
    return items, ppc, loo_payload, prior_pred


def _crosscheck_rci(
    dt,
    counts: xr.Dataset,
    data: ModelInputs,
    items: pd.DataFrame,
    rci_items: pd.DataFrame,
    s_diff: float,
    *,
    model: str,
    prior,
    rope,
    delta_min: float,
):
    """The RCI cross-check of a fit: ``(crosscheck, discordant items, warnings)``; adds the RCI class to ``items``
    (in place)."""
    items["rci_class"] = (
        rci_items.set_index("item_id")["class"].reindex(items["item_id"]).fillna("excluded").to_numpy(dtype=object)
    )
    rci_class = items["rci_class"].to_numpy(dtype=object)
    cc, disc = crosscheck(items, rci_items, s_diff)
    cc |= rci_fdp_interval(dt["posterior"], rci_class, rope=float(rope or 0.0), delta_min=delta_min)
    cc["no_change_test"] = pair_no_change_test(counts, *data.versions)  # the same p-value as the RCI run's
    cc, warnings = allow_no_change(cc, cc["no_change_test"], cc["rci_n_flagged"])
    if model == "change":
        log_prior = change_log_prior(dt["posterior"], prior, STRUCTURE_SITES)
        cc["prior_sensitivity"] = rci_fdp_prior_sensitivity(
            dt["posterior"], rci_class, log_prior, delta_min=delta_min, rope=float(rope or 0.0)
        )
        warnings += prior_sensitivity_warnings(cc["prior_sensitivity"], cc, delta_min)
    return cc, disc, warnings


def _fit_params(
    data: ModelInputs,
    cfg: SamplerConfig,
    rci_params: dict,
    s_diff: float,
    *,
    model: str,
    collapsed: bool,
    slope: bool,
    prior,
    rope,
    delta_min: float,
) -> dict:
    """``fit.json``'s ``params``: the model's settings, the sampler's and the cross-checked RCI's."""
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
        "rope": rope,
        "delta_min": float(delta_min),
        "versions": list(data.versions),
        "n_items": data.n_items,
        "domains": list(data.domains),
        "rci_sd_basis": rci_params.get("sd_basis"),
        "rci_s_diff": s_diff,
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


def _rci_classes(
    counts: xr.Dataset, data: ModelInputs, rci: PairResult | None, rci_kwargs: dict | None
) -> tuple[pd.DataFrame, float, dict]:
    """The RCI item table, S_diff and settings the cross-check uses (given, or run here)."""
    if rci is None:
        rci = reliable_change(counts, data.versions[0], data.versions[1], **(rci_kwargs or CROSSCHECK_RCI_KWARGS))
    elif rci_kwargs:
        raise ValueError("give either rci (an existing classical result) or rci_kwargs, not both")
    if rci.versions != tuple(data.versions):
        raise ValueError(f"the classical result compares {rci.versions}, the fit {tuple(data.versions)}")
    return rci.to_frame(), rci.s_diff, dict(rci.params)


def check(result: BayesFit, allow_unconverged: bool = False) -> BayesFit:
    """Raise :class:`ConvergenceError` for a failed gate unless ``allow_unconverged``.

    Examples
    --------
    >>> res = check(fit(counts))  # doctest: +SKIP
    Traceback (most recent call last):
    bayesrc.errors.ConvergenceError: change (numpyro) failed the convergence gate: ...
    """
    if not result.diagnostics.passed and not allow_unconverged:
        d = result.diagnostics
        # non-finite R-hat / ESS (one chain, a constant draw) are stored as JSON null
        num = lambda x, spec: "undefined" if x is None or not np.isfinite(x) else format(x, spec)  # noqa: E731
        raise ConvergenceError(
            f"{result.model} ({result.backend}) failed the convergence gate: max R-hat {num(d.max_rhat, '.4f')}, "
            f"min ESS bulk {num(d.min_ess_bulk, '.0f')} / tail {num(d.min_ess_tail, '.0f')}, "
            f"{d.divergences} divergences "
            f"[{d.worst}]; outputs are marked failed (pass --allow-unconverged to accept)"
        )
    return result


def realised_fdp(classes: np.ndarray, true_dp: np.ndarray) -> float:
    """Share of flagged items whose true dp is zero or of the opposite sign (needs the truth).

    Examples
    --------
    >>> import numpy as np
    >>> realised_fdp(np.array(["improved", "improved", "deteriorated", "no_change"]), np.array([0.2, -0.1, -0.3, 0.0]))
    0.3333333333333333
    """
    classes = np.asarray(classes, dtype=object)
    up, down = classes == "improved", classes == "deteriorated"
    n = up.sum() + down.sum()
    if n == 0:
        return 0.0
    false = np.sum(up & (true_dp <= 0)) + np.sum(down & (true_dp >= 0))
    return float(false / n)


#: the prior predictive histograms and the count series each holds beside its bin edges
_PP_HISTOGRAMS = {"hist_p": ("prior_v1", "prior_v2", "observed_v1", "observed_v2"), "hist_dp": ("prior",)}


def check_prior_predictive(pp: dict) -> None:
    """:class:`InputError` naming the first field of a ``prior_predictive`` block (``fit.json``) that
    is not what its readers draw and print: finite numbers, one count per histogram bin.

    Examples
    --------
    >>> pp = {"p_v1": [0.1, 0.9], "share_abs_dp_above": {"0.05": 0.4}, "hist_p": {"edges": [0, 1], "prior_v1": [1]}}
    >>> try:
    ...     check_prior_predictive(pp)
    ... except InputError as err:
    ...     print(err.field, "|", err.message)
    prior_predictive.hist_p.prior_v2 | expected a list of finite numbers, got None
    """
    _finite_list(pp.get("p_v1"), "prior_predictive.p_v1", min_len=1)
    if pp.get("pi") is not None:
        _finite_list(pp["pi"], "prior_predictive.pi", min_len=3)
    above = pp.get("share_abs_dp_above")
    if not isinstance(above, dict):
        raise InputError(f"expected an object of shares, got {above!r}", field="prior_predictive.share_abs_dp_above")
    _finite_list(list(above.values()), "prior_predictive.share_abs_dp_above")
    for name, series in _PP_HISTOGRAMS.items():
        hist = pp.get(name)
        if not isinstance(hist, dict):
            raise InputError(f"expected an object, got {hist!r}", field=f"prior_predictive.{name}")
        edges = _finite_list(hist.get("edges"), f"prior_predictive.{name}.edges", min_len=2)
        for key in series:
            if len(_finite_list(hist.get(key), f"prior_predictive.{name}.{key}")) != len(edges) - 1:
                raise InputError(
                    f"expected {len(edges) - 1} counts, one per bin", field=f"prior_predictive.{name}.{key}"
                )


def _finite_list(values: object, field: str, *, min_len: int = 0) -> list:
    if not isinstance(values, list) or len(values) < min_len:
        raise InputError(f"expected a list of finite numbers, got {values!r}"[:160], field=field)
    for v in values:
        finite_number(v, field)
    return values
