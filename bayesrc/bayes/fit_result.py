"""The result of a pair's fit (:func:`bayesrc.bayes.fit`): :class:`BayesFit` (``fit.json`` + ``items.parquet``,
``discordant.parquet``, ``posterior.nc``), :func:`check` of its convergence gate, :func:`realised_fdp` of its
classes against the truth, and the checks of what it reads back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes.check_figures import loo_pit_figure, ppc_figure, prior_predictive_figure
from bayesrc.bayes.checks import pit_ecdf_band
from bayesrc.bayes.diagnostics import GatedResult
from bayesrc.bayes.draws import item_block
from bayesrc.bayes.gating import gated_vars
from bayesrc.config import DELTA_MIN
from bayesrc.errors import ConvergenceError, InputError
from bayesrc.fields import finite_number, two_labels
from bayesrc.results import register


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
        | {  # what summary(), the figures and the report read (bayesrc.fields.check_fields)
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
    table_names = ("items", "discordant")
    has_posterior = True

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
    ppc = property(lambda self: self.payload.get("ppc") or {})  # posterior predictive check (bayesrc.bayes.ppc)
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
        return ppc_figure(_checked(self.ppc, "posterior predictive check"), **kwargs)

    def loo_pit_band(self) -> pd.DataFrame:
        """The LOO-PIT ECDF of the per-item change against uniform, with its simultaneous 95% band
        (:func:`bayesrc.bayes.checks.pit_ecdf_band` on the item table's ``loo_pit``)."""
        pit = (
            self.items["loo_pit"].to_numpy(float)
            if self.items is not None and "loo_pit" in self.items
            else np.array([])
        )
        if np.isfinite(pit).sum() < 2:
            raise _no_checks("LOO-PIT values")
        return pit_ecdf_band(pit)

    def plot_loo_pit(self, **kwargs):
        """Figure of the LOO-PIT calibration (:func:`bayesrc.bayes.check_figures.loo_pit_figure`)."""
        return loo_pit_figure(self.loo_pit_band(), ks_p=self.loo.get("loo_pit_ks_p"), **kwargs)

    def plot_prior_predictive(self, **kwargs):
        """Figure of the prior predictive check (:func:`bayesrc.bayes.check_figures.prior_predictive_figure`)."""
        return prior_predictive_figure(_checked(self.prior_predictive, "prior predictive check"), **kwargs)

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


def _checked(block: dict, what: str) -> dict:
    """``block``, or :func:`_no_checks` raised when it is empty."""
    if not block:
        raise _no_checks(what)
    return block


def _no_checks(what: str) -> ValueError:
    """The error of a figure or table of a fit without its checks, naming ``what`` it lacks."""
    return ValueError(f"this fit has no {what} (fit(..., checks=False) or fitted before the checks existed)")
