"""``truth``: which analysis can be trusted, at which K, for *these* models and items (SPEC section 7).

Two exact runs give every item's true Delta p. :func:`truth` draws ``replicates`` K-sample
datasets from them (:func:`bayesrc.data.sample_from_exact`), runs the classical RCI (the
reference classes and every variant the classical layer computes) and each Bayesian model on
each, and scores them against the exact Delta p:

* a flagged item is a **sign** false discovery when the flagged direction differs from the
  sign of the exact Delta p (Delta p = 0 counts as false), a **material** one when that holds
  or ``|Delta p| < delta_min`` (SPEC 7; default 0.05);
* ``fdp_*``: the mean over replicates of the realised false-discovery proportion (0 for a
  replicate with no flag: the FDR convention), ``fdp_*_pooled`` false / flagged over all
  replicates;
* models: ``coverage90`` (share of items whose 90% interval holds the exact Delta p), the
  estimate of RCI's FDP (``rci_fdp_estimate_mean``, mean over replicates where RCI flagged
  something) beside RCI's realised one over the same replicates (``rci_fdp_realised_mean``),
  the same for material false discoveries (``rci_fdp_estimate_material_mean`` /
  ``rci_fdp_realised_material_mean``, the fit's ``delta_min`` = this ``delta_min``), the share
  of those replicates whose 90% interval of RCI's FDP held the realised one
  (``rci_fdp_interval_coverage``, ``rci_fdp_material_interval_coverage``; see
  :func:`bayesrc.bayes.summaries.rci_fdp_interval`, widened to 1 where the no-change test does
  not reject, :func:`bayesrc.bayes.summaries.allow_no_change`; its p-value per replicate
  ``no_change_p``; the share of replicates where it rejected at 0.10, ``no_change_rejected_share``), and the
  share of replicates whose fit warned that the estimate moves with its priors
  (``rci_fdp_prior_sensitive_share``, ``rci_fdp_material_prior_sensitive_share``; see
  :func:`bayesrc.bayes.summaries.rci_fdp_prior_sensitivity`),
  and the model's own FDR selection at ``q``.

Example
-------
>>> res = truth("runs/exact_q4", "runs/exact_q3", k=10, replicates=20, seed=0)   # doctest: +SKIP
>>> res.summary()                                                                # doctest: +SKIP
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrc.bayes import SamplerConfig, SelectionConfig, fit, model_inputs
from bayesrc.bayes.checks import loo_checks
from bayesrc.bayes.samplers import progress_bar, shared_adaptation
from bayesrc.classical import reliable_change
from bayesrc.classical.calibration import NO_CHANGE_ALPHA
from bayesrc.classical.rci import DETERIORATED, IMPROVED
from bayesrc.data.exact import _as_exact, exact_truth
from bayesrc.errors import InputError
from bayesrc.results import Result, register
from bayesrc.truth.replicates import replicate_datasets, run_labels

# Each Bayesian method: keyword arguments of bayesrc.bayes.fit. "change" is the default change
# model; "change_v0" the change model as it was before issue 12 (no item covariate, Beta(2, 2)
# share of changed items, HalfNormal(3) spread of changes), kept to show what the change fixed.
MODEL_SPECS: dict[str, dict] = {
    "change": {"model": "change", "covariate": "auto"},
    "change_v0": {"model": "change", "covariate": None, "prior": {"pi_a": 2.0, "pi_b": 2.0, "sigma_delta_sd": 3.0}},
    "betabinom": {"model": "betabinom", "covariate": None},
}
DEFAULT_MODEL = "change"
DEFAULT_METHODS = tuple(MODEL_SPECS)
# RCI classes computed by the classical layer for one pair: column of PairResult.items -> method name.
RCI_VARIANTS = {"class": "rci", "class_conservative": "rci_conservative", "class_all_items": "rci_all_items"}


def score_classes(classes, dp_exact: np.ndarray, delta_min: float = 0.05) -> dict:
    """Flagged items and false discoveries of one classification against exact Delta p.

    ``classes``: "improved" / "deteriorated" / anything else (not flagged).

    Examples
    --------
    >>> s = score_classes(["improved", "deteriorated", "no_change"], [0.2, 0.01, -0.3])
    >>> s["flagged"], s["false_sign"], s["false_material"]
    (2, 1, 1)
    """
    cls = np.asarray(classes, dtype=object)
    dp = np.asarray(dp_exact, float)
    up, down = cls == IMPROVED, cls == DETERIORATED
    flagged = int(up.sum() + down.sum())
    false_sign = up & (dp <= 0) | down & (dp >= 0)
    false_material = ((up | down) & (np.abs(dp) < delta_min)) | false_sign
    n_fs, n_fm = int(false_sign.sum()), int(false_material.sum())
    return {
        "flagged": flagged,
        "n_up": int(up.sum()),
        "n_down": int(down.sum()),
        "false_sign": n_fs,
        "false_material": n_fm,
        "fdp_sign": n_fs / flagged if flagged else 0.0,
        "fdp_material": n_fm / flagged if flagged else 0.0,
    }


def _model_scores(items: pd.DataFrame, dp: np.ndarray) -> dict:
    """Coverage of exact Delta p by the 90% intervals, and how much the posterior mean shrinks it."""
    lo, hi, mean = (items[c].to_numpy(float) for c in ("dp_lo90", "dp_hi90", "dp_mean"))
    cov = float(np.mean((dp >= lo - 1e-12) & (dp <= hi + 1e-12)))
    slope = float(np.polyfit(dp, mean, 1)[0]) if np.ptp(dp) > 0 else float("nan")
    return {"coverage90": cov, "dp_slope": slope, "dp_rmse": float(np.sqrt(np.mean((mean - dp) ** 2)))}


def _elpd_loo(res, counts) -> dict:
    """PSIS-LOO over items of a collapsed fit (:func:`bayesrc.bayes.checks.loo_checks`, the step of the fit's own
    checks): the models' predictive fit on the same replicate, beside their scores against the truth. The fit runs
    without its checks, whose predictive checks no score reads (~3 s a 300-item fit)."""
    if not res.params.get("collapsed", True):
        return {"elpd_loo": float("nan"), "elpd_loo_se": float("nan"), "pareto_k_max": float("nan")}
    data = model_inputs(counts, covariate=res.params["covariate"])  # the inputs the fit sampled
    loo, _ = loo_checks(res.posterior, data, data.items)
    return {"elpd_loo": float(loo["elpd"]), "elpd_loo_se": float(loo["se"]), "pareto_k_max": float(loo["pareto_k_max"])}


def score_replicate(
    counts,
    dp_exact: np.ndarray,
    *,
    methods=DEFAULT_METHODS,
    delta_min: float = 0.05,
    q: float = 0.10,
    config=None,
    seed: int = 0,
    rci_kwargs: dict | None = None,
    backend: str = "numpyro",
) -> list[dict]:
    """Score RCI (every variant) and each Bayesian method on one K-sample dataset: one row per method.

    Examples
    --------
    >>> rows = score_replicate(counts, dp_exact, methods=("change",))   # doctest: +SKIP
    >>> pd.DataFrame(rows)[["method", "flagged", "fdp_sign"]]          # doctest: +SKIP
    """
    rk = {"n_splits": 200, "n_permutations": 200, "seed": seed, **(rci_kwargs or {})}
    rows = []
    t0 = time.perf_counter()
    rci = reliable_change(counts, **rk)
    rci_items = rci.to_frame().set_index("item_id").reindex(counts["item"].values)
    rci_time = time.perf_counter() - t0
    for col, name in RCI_VARIANTS.items():
        rows.append(
            {
                "method": name,
                "kind": "rci",
                **score_classes(rci_items[col].to_numpy(dtype=object), dp_exact, delta_min),
                "runtime_s": rci_time,
            }
        )
    t0 = time.perf_counter()
    rci_sd_all = (
        reliable_change(counts, **{**rk, "sd_basis": "all"})
        .to_frame()
        .set_index("item_id")
        .reindex(counts["item"].values)
    )
    rows.append(
        {
            "method": "rci_sd_all",
            "kind": "rci",
            **score_classes(rci_sd_all["class"].to_numpy(dtype=object), dp_exact, delta_min),
            "runtime_s": time.perf_counter() - t0,
        }
    )
    ref = rows[0]
    for name in methods:
        spec = dict(MODEL_SPECS[name])
        selection = SelectionConfig(fdr=q, delta_min=delta_min)
        res = fit(counts, backend=backend, config=config, selection=selection, rci_kwargs=rk, checks=False, **spec)
        it = res.items.set_index("item_id").reindex(counts["item"].values)
        row = {
            "method": name,
            "kind": "bayes",
            **score_classes(it["bayes_class"].to_numpy(dtype=object), dp_exact, delta_min),
        }
        row.update(_model_scores(it, dp_exact))
        row.update(_elpd_loo(res, counts))
        row.update(
            rci_fdp_estimate=res.crosscheck["rci_estimated_fdp"] if ref["flagged"] else float("nan"),
            rci_fdp_realised=ref["fdp_sign"] if ref["flagged"] else float("nan"),
            rci_fdp_estimate_material=res.crosscheck["rci_estimated_fdp_material"] if ref["flagged"] else float("nan"),
            rci_fdp_realised_material=ref["fdp_material"] if ref["flagged"] else float("nan"),
            **_prior_sensitive(res.crosscheck, ref["flagged"]),
            **_interval_scores(res.crosscheck, ref),
            no_change_p=res.crosscheck["no_change_test"]["p_value"],
            expected_fdp=res.selection["expected_fdp"],
            gate_passed=bool(res.diagnostics.passed),
            max_rhat=float(res.diagnostics.max_rhat),
            min_ess=float(res.diagnostics.min_ess_bulk),
            runtime_s=res.runtime_s,
        )
        rows.append(row)
    return rows


def _prior_sensitive(cc: dict, rci_flagged: int) -> dict:
    """Whether the fit warned that its RCI-FDP estimates move with the priors (NaN: no flag or no such check)."""
    sens = cc.get("prior_sensitivity") or {}
    flag = lambda key: float(sens[key]) if rci_flagged and sens.get(key) is not None else float("nan")  # noqa: E731
    return {
        "rci_fdp_prior_sensitive": flag("sensitive"),
        "rci_fdp_material_prior_sensitive": flag("sensitive_material"),
    }


def interval_holds(bounds, realised: float) -> float:
    """1.0 when ``realised`` lies in the closed interval ``bounds = [lo, hi]`` (to rounding), 0.0 when
    not, NaN without an interval (``None``, or NaN bounds).

    Examples
    --------
    >>> interval_holds([0.1, 0.4], 0.4), interval_holds([0.1, 0.4], 0.05), interval_holds(None, 0.2)
    (1.0, 0.0, nan)
    """
    if bounds is None or not np.isfinite(bounds[0]):
        return float("nan")
    return float(bounds[0] - 1e-12 <= realised <= bounds[1] + 1e-12)


def _interval_scores(cc: dict, ref: dict) -> dict:
    """The fit's 90% intervals of RCI's FDP and whether they hold RCI's realised FDP (NaN: no flag,
    or a fit without intervals)."""
    out = {}
    for kind, key, name in (
        ("sign", "rci_estimated_fdp_interval90", "rci_fdp"),
        ("material", "rci_estimated_fdp_material_interval90", "rci_fdp_material"),
    ):
        bounds = cc.get(key)  # None when RCI flagged nothing
        lo, hi = bounds or (float("nan"), float("nan"))
        out |= {f"{name}_lo90": lo, f"{name}_hi90": hi, f"{name}_covered90": interval_holds(bounds, ref[f"fdp_{kind}"])}
    return out


METHOD_NUMBERS = (  # a method's means over replicates (_aggregate): all numbers but its kind
    "flagged_mean",
    "fdp_sign",
    "fdp_material",
    "fdp_sign_pooled",
    "fdp_material_pooled",
    "runtime_mean_s",
    "selected_mean",
    "coverage90",
    "rci_fdp_estimate_mean",
    "rci_fdp_realised_mean",
    "rci_fdp_estimate_material_mean",
    "rci_fdp_realised_material_mean",
    "rci_fdp_interval_coverage",
    "rci_fdp_material_interval_coverage",
    "no_change_rejected_share",
    "rci_fdp_prior_sensitive_share",
    "rci_fdp_material_prior_sensitive_share",
    "expected_fdp_mean",
    "dp_slope_mean",
    "elpd_loo_mean",
    "gate_pass_share",
    "rci_fdp_error",
    "rci_fdp_material_error",
)

#: the method means TruthResult.summary leaves to the replicates table (pooled FDPs, run time, selection size, errors)
_NOT_SUMMARISED = frozenset(
    {
        "fdp_sign_pooled",
        "fdp_material_pooled",
        "runtime_mean_s",
        "selected_mean",
        "expected_fdp_mean",
        "rci_fdp_error",
        "rci_fdp_material_error",
    }
)


def _aggregate(rep: pd.DataFrame) -> dict[str, dict]:
    """Per-method means over replicates (see module docstring)."""
    out = {}
    for name, g in rep.groupby("method", sort=False):
        flagged = g["flagged"].sum()
        d = {
            "kind": g["kind"].iloc[0],
            "flagged_mean": float(g["flagged"].mean()),
            "fdp_sign": float(g["fdp_sign"].mean()),
            "fdp_material": float(g["fdp_material"].mean()),
            "fdp_sign_pooled": float(g["false_sign"].sum() / flagged) if flagged else 0.0,
            "fdp_material_pooled": float(g["false_material"].sum() / flagged) if flagged else 0.0,
            "runtime_mean_s": float(g["runtime_s"].mean()),
        }
        if d["kind"] == "bayes":
            has = g["rci_fdp_estimate"].notna()
            d.update(
                selected_mean=d["flagged_mean"],
                coverage90=float(g["coverage90"].mean()),
                rci_fdp_estimate_mean=float(g.loc[has, "rci_fdp_estimate"].mean()) if has.any() else float("nan"),
                rci_fdp_realised_mean=float(g.loc[has, "rci_fdp_realised"].mean()) if has.any() else float("nan"),
                rci_fdp_estimate_material_mean=float(g.loc[has, "rci_fdp_estimate_material"].mean())
                if has.any()
                else float("nan"),
                rci_fdp_realised_material_mean=float(g.loc[has, "rci_fdp_realised_material"].mean())
                if has.any()
                else float("nan"),
                rci_fdp_interval_coverage=float(g["rci_fdp_covered90"].mean()),
                rci_fdp_material_interval_coverage=float(g["rci_fdp_material_covered90"].mean()),
                no_change_rejected_share=float((g["no_change_p"] < NO_CHANGE_ALPHA).mean()),
                rci_fdp_prior_sensitive_share=float(g["rci_fdp_prior_sensitive"].mean()),
                rci_fdp_material_prior_sensitive_share=float(g["rci_fdp_material_prior_sensitive"].mean()),
                expected_fdp_mean=float(g["expected_fdp"].mean()),
                dp_slope_mean=float(g["dp_slope"].mean()),
                elpd_loo_mean=float(g["elpd_loo"].mean()),
                gate_pass_share=float(g["gate_passed"].mean()),
            )
            d["rci_fdp_error"] = d["rci_fdp_estimate_mean"] - d["rci_fdp_realised_mean"]
            d["rci_fdp_material_error"] = d["rci_fdp_estimate_material_mean"] - d["rci_fdp_realised_material_mean"]
        out[str(name)] = d
    return out


def _exact_summary(items: pd.DataFrame, delta_min: float) -> dict:
    dp = items["delta_p"].to_numpy(float)
    return {
        "n_items": int(dp.size),
        "median_abs_dp": float(np.median(np.abs(dp))),
        "n_material": int(np.sum(np.abs(dp) >= delta_min)),
        "n_up": int(np.sum(dp >= delta_min)),
        "n_down": int(np.sum(dp <= -delta_min)),
        "mean_p_v1": float(items["p_v1"].mean()),
        "mean_p_v2": float(items["p_v2"].mean()),
    }


class ScoredReplicates(Result):
    """A truth result: its JSON (the means over replicates) with two tables beside it, ``PREFIX_replicates.parquet``
    (one row per replicate and method) and ``PREFIX_items.parquet`` (the items' exact accuracies), ``PREFIX`` the
    main file's stem.

    Examples
    --------
    >>> ScoredReplicates({"k": 10}).table_file("items")
    'result_items.parquet'
    """

    per_replicate = property(lambda self: self.tables.get("replicates"))
    items = property(lambda self: self.tables.get("items"))

    table_names = ("replicates", "items")

    def table_file(self, name: str) -> str:
        return f"{Path(self.main_file).stem}_{name}.parquet"

    def to_dict(self) -> dict:
        """The content of the main file (the tables are saved beside it)."""
        return copy.deepcopy(self.payload)

    @classmethod
    def from_dict(
        cls,
        d: dict,
        posterior: Any = None,
        *,
        per_replicate: pd.DataFrame | None = None,
        items: pd.DataFrame | None = None,
    ):
        """Rebuild from the main file's content (and the tables, if given)."""
        tables = {name: t for name, t in (("replicates", per_replicate), ("items", items)) if t is not None}
        return cls(copy.deepcopy(d), tables)


@register
class TruthResult(ScoredReplicates):
    """Real-model truth of one exact pair (``truth.json`` + ``truth_replicates.parquet`` +
    ``truth_items.parquet``): per-method aggregates, the per-replicate table and the items'
    exact Delta p. ``methods["rci"]`` is RCI's reference classification and
    ``methods[default_model]`` the default change model.

    Examples
    --------
    >>> import bayesrc
    >>> res = bayesrc.load("runs/truth_q3")   # doctest: +SKIP
    >>> res.summary()                         # doctest: +SKIP
    """

    main_file = "truth.json"
    kind = "truth"
    field_kinds = {  # what the summary, the figure and the report read (bayesrc.fields.check_fields)
        "{exact,runs,methods}": "object",
        "runs.{v1,v2}": "object",
        "runs.*.label": "text",
        "exact.{median_abs_dp,mean_p_v1,mean_p_v2}": "number",
        "exact.{n_items,n_material,n_up,n_down}": "integer",
        "{k,replicates,n_items}": "integer",
        "delta_min": "number",
        "default_model": "text",
        "methods.*": "object",
        "methods.*.kind": "text",
        "methods.*.{" + ",".join(METHOD_NUMBERS) + "}": "number",
    }

    @classmethod
    def from_scores(
        cls,
        *,
        k: int,
        replicates: int,
        delta_min: float,
        q: float,
        seed: int,
        n_items: int,
        runs: dict,
        exact: dict,
        methods: dict[str, dict],
        default_model: str = DEFAULT_MODEL,
        settings: dict | None = None,
        per_replicate: pd.DataFrame | None = None,
        items: pd.DataFrame | None = None,
    ) -> TruthResult:
        """The result of :func:`truth` from its parts (``truth.json``'s keys, the two tables)."""
        payload = {
            "k": k,
            "replicates": replicates,
            "delta_min": delta_min,
            "q": q,
            "seed": seed,
            "n_items": n_items,
            "runs": runs,
            "exact": exact,
            "default_model": default_model,
            "rci": methods.get("rci"),
            "model": methods.get(default_model),
            "methods": methods,
            "settings": settings or {},
        }
        tables = {name: t for name, t in (("replicates", per_replicate), ("items", items)) if t is not None}
        return cls(payload, tables)

    k = property(lambda self: self.payload["k"])
    replicates = property(lambda self: self.payload["replicates"])
    delta_min = property(lambda self: self.payload["delta_min"])

    @property
    def q(self) -> float:
        """The FDR level the models selected at, in (0, 1) (a value out of it: :class:`InputError`, field ``q``)."""
        q = self.payload["q"]
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0 < q < 1:
            raise InputError(f"expected the FDR level, a number in (0, 1), got {q!r}", field="q")
        return float(q)

    seed = property(lambda self: self.payload["seed"])
    n_items = property(lambda self: self.payload["n_items"])
    runs = property(lambda self: self.payload["runs"])
    exact = property(lambda self: self.payload["exact"])
    methods = property(lambda self: self.payload["methods"])
    default_model = property(lambda self: self.payload.get("default_model", DEFAULT_MODEL))
    settings = property(lambda self: self.payload.get("settings", {}))

    def required_columns(self, name: str) -> tuple[str, ...]:
        # what the report's scores and figure read
        return ("method", "kind", "fdp_sign") if name == "replicates" else ()

    def summary(self) -> pd.DataFrame:
        """One row per method: flagged per replicate, realised FDPs and, for models, coverage and RCI-FDP estimate."""
        cols = [c for c in METHOD_NUMBERS if c not in _NOT_SUMMARISED]
        rows = []
        for name, m in self.methods.items():
            label = name + (" (default)" if name == self.default_model else "")
            rows.append({"method": label, **{c: np.nan if m.get(c) is None else m.get(c) for c in cols}})
        return pd.DataFrame(rows)

    def _headline(self) -> str:
        return f"K = {self.k}, {self.replicates} replicate(s), {self.n_items} items"


def truth(
    exact_v1,
    exact_v2,
    *,
    k: int = 10,
    replicates: int = 20,
    seed: int = 0,
    delta_min: float = 0.05,
    q: float = 0.10,
    methods=DEFAULT_METHODS,
    config: SamplerConfig | None = None,
    backend: str = "numpyro",
    progress: bool | None = None,
) -> TruthResult:
    """Score RCI and the Bayesian models on ``replicates`` K-sample datasets drawn from two exact runs.

    Parameters
    ----------
    exact_v1, exact_v2 : exact run directories (or :class:`bayesrc.data.exact.ExactRun`).
    k : samples per item and version in each replicate.
    methods : Bayesian methods, names of :data:`MODEL_SPECS`.
    config : the fits' sampler settings (default ``SamplerConfig()``, every command's); each
        replicate's fits get their own seed, drawn with the replicate.
    progress : a progress bar over the replicates (their fits' own bars off): True, False, or
        None (the default) on a terminal or in Jupyter.

    Examples
    --------
    >>> res = truth("runs/exact_q4", "runs/exact_q3", k=10, replicates=20)               # doctest: +SKIP
    >>> res.methods["change"]["coverage90"]                                          # doctest: +SKIP
    """
    if not 0 < delta_min < 1:
        raise InputError(f"must be in (0, 1), got {delta_min}", field="--delta-min")
    if replicates < 1 or k < 1:
        raise InputError("replicates and k must be >= 1", field="--replicates")
    unknown = [m for m in methods if m not in MODEL_SPECS]
    if unknown:
        raise InputError(f"unknown method {unknown[0]!r}; known: {', '.join(MODEL_SPECS)}", field="--methods")
    ex1, ex2 = _as_exact(exact_v1), _as_exact(exact_v2)
    items = exact_truth(ex1, ex2)
    labels = tuple(run_labels([ex1, ex2]))
    config = config or SamplerConfig()
    rows = []
    # replicates of one pair share a shape: each fit starts from the last one's adaptation
    with progress_bar(progress, replicates, desc="truth", unit="replicate") as bar, shared_adaptation():
        for r, counts, dp, sampler_seed in replicate_datasets(
            ex1, ex2, k=k, seed=seed, replicates=range(replicates), labels=labels
        ):
            cfg = replace(config, seed=sampler_seed, progress=False)
            rep = score_replicate(
                counts, dp, methods=methods, delta_min=delta_min, q=q, config=cfg, seed=r, backend=backend
            )
            rows += [row | {"replicate": r} for row in rep]
            bar.update()
    per_rep = pd.DataFrame(rows)
    per_rep = per_rep[["replicate"] + [c for c in per_rep.columns if c != "replicate"]]
    return TruthResult.from_scores(
        k=int(k),
        replicates=int(replicates),
        delta_min=float(delta_min),
        q=float(q),
        seed=int(seed),
        n_items=len(items),
        runs={"v1": {"path": str(ex1.path), "label": ex1.label}, "v2": {"path": str(ex2.path), "label": ex2.label}},
        exact=_exact_summary(items, delta_min),
        methods=_aggregate(per_rep),
        settings={
            "chains": config.chains,
            "tune": config.tune,
            "draws": config.draws,
            "backend": backend,
            "methods": list(methods),
            "model_specs": {m: MODEL_SPECS[m] for m in methods},
        },
        per_replicate=per_rep,
        items=items,
    )
