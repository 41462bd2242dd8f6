"""Report sections: one small builder per section, each returning ``None`` when its
inputs are absent from the run directory, so a report shows exactly what was run.

A section is a title plus blocks (:class:`Text`, :class:`Table`, :class:`Figure`);
the renderers in :mod:`bayesrc.report.render` turn the same sections into HTML,
Markdown or LaTeX. To add a section, write a builder ``(run, comparison) ->
Section | None`` and append it to :data:`SECTION_BUILDERS`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesrc.bayes.check_figures import loo_compare_figure, loo_pit_figure, ppc_figure, prior_predictive_figure
from bayesrc.bayes.summaries import PRIOR_TOLERANCE
from bayesrc.classical.noise import noise_from_items, noise_sentence
from bayesrc.classical.pipeline import _aggregate_change
from bayesrc.classical.rci import CLASSES
from bayesrc.classical.result import PairResult
from bayesrc.errors import InputError
from bayesrc.power.result import VERDICT_PARADIGMS
from bayesrc.report import figures as F
from bayesrc.report.run import Comparison, Run
from bayesrc.sensitivity.figure import sensitivity_figure


@dataclass
class Text:
    text: str  # plain text; ``**bold**`` is the only markup


@dataclass
class Table:
    frame: pd.DataFrame
    caption: str
    latex: bool = False  # also emitted as a booktabs table
    label: str = ""


@dataclass
class Figure:
    """A figure, drawn only when rendered (LaTeX output never draws)."""

    make: Callable[[], object]  # -> matplotlib Figure
    caption: str
    name: str

    @property
    def png(self) -> bytes:
        if not hasattr(self, "_png"):
            self._png = F.to_png(self.make())
        return self._png


@dataclass
class Section:
    key: str
    title: str
    blocks: list = field(default_factory=list)
    status: str = "ok"  # "ok" or "waiting" (placeholder: inputs not in the run directory)


def _fig(make: Callable[[], object], caption: str, name: str) -> Figure:
    return Figure(make, caption, name)


def _known(x: float | None) -> bool:
    """True for a finite number (a null or NaN field reads as unknown)."""
    return x is not None and bool(np.isfinite(x))


def _num(x: float | None, spec: str) -> str:
    """``x`` formatted with ``spec``, or "n/a" when it is unknown (null in a result file, or not finite)."""
    return format(x, spec) if _known(x) else "n/a"


def _count(x: int | None) -> str:
    """A count from a result file as written, or "n/a" when it is null (a file edited by hand or a tool)."""
    return _num(x, "")


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if _known(x) else "n/a"


def _interval(bounds: list[float] | None, after: str = "") -> str:
    """``"90% interval a–b"`` + ``after`` for a crosscheck's interval of RCI's FDP; empty for fits from before it."""
    return f"90% interval {_pct(bounds[0])}–{_pct(bounds[1])}{after}" if bounds else ""


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    rows = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            rows += _flatten(v, key + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            rows.append((key, f"[{len(v)} records]"))
        else:
            rows.append((key, str(v)))
    return rows


# --------------------------------------------------------------------------- pins


def pair_pins_frame(record: dict) -> pd.DataFrame:
    """Pins of two runs side by side: ``pin, v1, v2, status`` (same / allowed / blocking / ignored)."""
    status = {d["field"]: d["status"] for d in (record.get("comparison") or {}).get("differences", [])}
    v1, v2 = dict(_flatten(record["v1"])), dict(_flatten(record["v2"]))
    short = lambda v: v if len(v) <= 28 else v[:16] + "…" + v[-6:]  # noqa: E731  (hashes: enough to tell apart)
    rows = [
        (
            f,
            short(str(v1.get(f, ""))),
            short(str(v2.get(f, ""))),
            status.get(f, "same" if v1.get(f) == v2.get(f) else "differs"),
        )
        for f in sorted(set(v1) | set(v2))
    ]
    return pd.DataFrame(rows, columns=["pin", "v1", "v2", "status"])


def section_pins(run: Run, c: Comparison) -> Section | None:
    """The run's pins (``demo.json``, else ``run.json``) and the analysis parameters (the RCI pair's and the fit's)."""
    blocks: list = []
    rec, source = (run.demo_record, "demo.json") if run.demo_record is not None else (run.run_record, "run.json")
    if isinstance(rec, dict) and isinstance(rec.get("v1"), dict) and isinstance(rec.get("v2"), dict):
        comp = rec.get("comparison") or {}
        verdict = (
            "comparable: only the model pins differ"
            if comp.get("comparable")
            else "NOT comparable: pins other than the model differ"
        )
        blocks.append(Text(f"The two collection runs are {verdict} (the differing pins are marked)."))
        blocks.append(Table(pair_pins_frame(rec), f"Run pins of both versions ({source})"))
    elif rec is not None:
        rows = _flatten(rec) if isinstance(rec, dict) else [(source, str(rec))]
        blocks.append(Table(pd.DataFrame(rows, columns=["pin", "value"]), f"Run record ({source})"))
    if c.pair is not None:
        params = {"versions": " -> ".join(c.versions), **c.pair.params}
        blocks.append(
            Table(
                pd.DataFrame(list(params.items()), columns=["parameter", "value"]).astype({"value": str}),
                "Analysis parameters (rci.json)",
            )
        )
    if c.bayes is not None:
        fit = c.bayes
        keys = {"model": fit.model, "backend": fit.backend, "runtime_s": fit.runtime_s, "seed": fit.params["seed"]}
        blocks.append(
            Table(
                pd.DataFrame(list(keys.items()), columns=["fit", "value"]).astype({"value": str}),
                "Posterior fit (fit.json)",
            )
        )
    if not blocks:
        return None
    if rec is None:
        blocks.insert(0, Text("No run record (run.json) in this run directory: the collection pins are not shown."))
    return Section("pins", "Run pins and parameters", blocks)


# ------------------------------------------------------------- aggregate change


def aggregate_frame(items: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy per version and mean item-level change with a 95% t interval,
    over every item scored in both versions and over the analysable items."""
    rows = []
    scored = items[["p_v1", "p_v2"]].notna().all(axis=1)
    for label, sel in (("all scored items", scored), ("analysable items", scored & ~items["excluded"].astype(bool))):
        sub = items[sel]
        agg = _aggregate_change(sub["delta"].to_numpy())
        rows.append(
            {
                "items": label,
                "n": agg["n"],
                "acc_v1": sub["p_v1"].mean(),
                "acc_v2": sub["p_v2"].mean(),
                "delta": agg["mean_delta"],
                "ci95_lo": agg["ci95"][0],
                "ci95_hi": agg["ci95"][1],
            }
        )
    return pd.DataFrame(rows)


def section_aggregate(run: Run, c: Comparison) -> Section | None:
    if c.items is None:
        return None
    agg = aggregate_frame(c.items)
    a = agg.iloc[0]
    v1, v2 = c.versions
    sign = "rose" if a["ci95_lo"] > 0 else "fell" if a["ci95_hi"] < 0 else "did not change detectably"
    text = (
        f"Mean accuracy over {_count(a['n'])} items scored in both versions: {v1} {a['acc_v1']:.3f}, {v2} "
        f"{a['acc_v2']:.3f}; change {a['delta']:+.3f} (95% CI {a['ci95_lo']:+.3f} to {a['ci95_hi']:+.3f}) — the "
        f"aggregate {sign}."
    )
    pair = c.pair
    cnt = pair.analysable
    text += (
        f" Beneath it, {_count(cnt['improved'])} items reliably improved and {_count(cnt['deteriorated'])} reliably "
        f"deteriorated (churn {_pct(cnt['churn'])} of {_count(cnt['n'])} analysable items)"
    )
    ns = pair.null_samples
    if ns and _known(ns["flagged_p975"]):  # a null bound: there is nothing to compare the flags with
        if pair.n_flagged > ns["flagged_p975"]:
            text += (
                f", more than the {ns['flagged_p975']:.0f} that data with no change would give at most (97.5%): there "
                "is item-level change beyond chance"
                + (" that the aggregate hides." if sign == "did not change detectably" else ".")
            )
        else:
            text += (
                ", no more than data with no change give "
                f"({_num(ns['flagged_p025'], '.0f')}-{_num(ns['flagged_p975'], '.0f')}, 95%): this churn is no "
                "evidence of item-level change."
            )
    else:
        text += "."
    blocks = [Text(text), Table(agg, "Aggregate change (mean item Δp, t interval)", latex=True, label="aggregate")]
    noise = noise_block(c.items)
    return Section("aggregate", "Aggregate accuracy change", blocks + ([noise] if noise is not None else []))


def noise_block(items: pd.DataFrame) -> Text | None:
    """The noise decomposition of the aggregate change (sampling within items vs item set), or None
    where the item table lacks the counts or too few items have two answers in both versions."""
    if not {"p_v1", "p_v2", "n_v1", "n_v2"} <= set(items.columns):
        return None
    try:
        nd = noise_from_items(items)
    except InputError:
        return None
    return Text(f"**Noise.** {noise_sentence(nd)}")


# ---------------------------------------------------------- classical (RCI)


def null_sentence(pair: PairResult) -> str:
    """The sample-level null in words: expected flagged count with no change, and the rate."""
    ns, nc = pair.null_samples, pair.no_change_test
    test = (
        " Did anything change at all? Within-item permutation test of identical versions "
        f"({_count(nc['n_permutations'])} re-deals; each item's and each (domain, letter) stratum's chi-square): p = "
        f"{_num(nc['p_value'], '.3g')}."
        if nc
        else ""
    )
    if not ns:
        return "The sample-level no-change null was not computed for this run." + test
    return (
        f"No-change null ({_count(ns['replicates'])} replicates, each item's samples of both versions re-dealt at "
        f"random): {_num(ns['flagged_mean'], '.1f')} items flagged on average (95% range "
        f"{_num(ns['flagged_p025'], '.0f')}-{_num(ns['flagged_p975'], '.0f')}), a false-positive rate of "
        f"{_pct(ns['rate'])} per analysable item against the nominal {_pct(ns['nominal_rate'])}; observed "
        f"{_count(pair.n_flagged)}." + test
    )


def section_rci(run: Run, c: Comparison) -> Section | None:
    r = c.pair
    if r is None:
        return None
    z, ex, null = r.z, r.exclusions, r.direction_asymmetry
    if r.s_diff_method == "binomial":
        sdiff = (
            f"S_diff per item from its binomial SE (method **binomial**; median {r.s_diff:.4f}, so a typical item "
            f"needs |Δp| ≥ {r.min_detectable:.3f})"
        )
    else:
        sdiff = (
            f"S_diff = {r.s_diff:.4f} (method **reference**, SD basis **{r.sd_basis}**, r_xx over "
            f"{'the analysed' if r.reliability_basis == 'analysed' else 'all'} items), so the minimum detectable "
            f"change is |Δp| ≥ {_num(r.min_detectable, '.3f')} ({_count(r.min_detectable_samples)} of K = "
            f"{_count(r.params['k'])} samples)"
        )
    blocks = [
        Text(
            f"Reliable change (Jacobson–Truax RCI adapted to items), z = {z:g}. {sdiff}. {_count(ex['n_after'])} of "
            f"{_count(ex['n_before'])} items are analysable ({_count(ex['low_valid'])} with too few valid responses — "
            f"rule (a): fewer than {r.min_valid_rule} —, {_count(ex['floor_ceiling'])} at floor or ceiling in both "
            "versions)."
        ),
    ]
    blocks += [Text(f"**Warning:** {w}") for w in r.warnings]
    blocks += [
        Table(
            r.classification_table(),
            "Reliable-change classification (cf. the reference study's Table 1/2) and the no-change null",
            latex=True,
            label="rci-classes",
        ),
        Text(null_sentence(r)),
        Table(
            r.reliability_table(),
            "Split-half reliability (Spearman–Brown), ICC(1,K) (comparable with r_xx), ICC(1,1) and SEM per version",
            latex=True,
            label="reliability",
        ),
        Text(
            f"Direction-asymmetry test ({_count(null['n_permutations'])} version-swap permutations over the "
            f"{_count(null['n_items'])} analysable items; swapping keeps every |Δp|, so it tests only the balance of "
            f"improvements and deteriorations): 95th percentile {_num(null['improved_p95'], '.0f')} improved / "
            f"{_num(null['deteriorated_p95'], '.0f')} deteriorated, observed {_count(null['observed_improved'])} / "
            f"{_count(null['observed_deteriorated'])} — improvement "
            f"{'exceeds' if null['improved_exceeds_null'] else 'does not exceed'} and deterioration "
            f"{'exceeds' if null['deteriorated_exceeds_null'] else 'does not exceed'} its share under a symmetric null."
        ),
    ]
    fl = r.flips
    if fl:
        blocks.append(
            Text(
                f"Majority-answer flips: {_count(fl['negative_flips'])} items correct-majority in v1 but not in v2 "
                f"(negative flip rate {_pct(fl['negative_flip_rate'])}) and {_count(fl['positive_flips'])} the reverse "
                f"({_pct(fl['positive_flip_rate'])}), of {_count(fl['n'])} items scored in both."
            )
        )
    return Section("rci", "Classical reliable change", blocks)


def section_reference_figures(run: Run, c: Comparison) -> Section | None:
    """The reference study's four figures, redrawn from this run's items."""
    r = c.pair
    if r is None or r.items is None:
        return None
    z, items, d = r.z, r.items, r.domain
    dom = r.domain_crosstab()
    if dom.empty:  # no analysable item: show every item's class by domain
        dom = pd.crosstab(items["domain"], items["class"])
    bins = r.difficulty_table()
    blocks = [
        _fig(
            lambda: F.item_scatter(items, r.s_diff, z, versions=c.versions),
            f"Item accuracy v1 vs v2 by RCI class; the shaded band is |Δp| < {z:g}·S_diff (no reliable change).",
            "scatter",
        ),
        _fig(lambda: F.rci_histogram(items, z), f"RCI over analysable items with the ±{z:g} thresholds.", "rci_hist"),
        _fig(
            lambda: F.domain_heatmap(dom),
            f"Domain × class (analysable items): χ² = {_num(d['chi2'], '.2f')}, p = {_num(d['p'], '.3g')}, "
            f"Cramér's V = {_num(d['cramers_v'], '.3f')}.",
            "domain",
        ),
        Table(r.domain_table(), "Reliable change by domain", latex=True, label="domains"),
    ]
    if len(bins):  # an rci.json without difficulty bins has no churn to draw
        blocks.append(_fig(lambda: F.difficulty_churn(bins), "Churn by baseline difficulty (p_v1 bins).", "difficulty"))
    return Section("figures", "Item-level change (reference-study figures)", blocks)


# --------------------------------------------------------------- Bayesian layer


def _waiting(key: str, title: str, needs: str) -> Section:
    return Section(
        key, title, [Text(f"Not available for this run: needs {needs} (written by `bayesrc fit`).")], status="waiting"
    )


def gate_caption(fit) -> str:
    t = fit.diagnostics.thresholds
    div = "no divergences" if t["max_divergences"] == 0 else f"≤ {t['max_divergences']} divergences"
    return f"Diagnostics gate (R-hat ≤ {t['max_rhat']:g}, bulk and tail ESS ≥ {t['min_ess']:g}, {div})"


def section_bayes_items(run: Run, c: Comparison) -> Section | None:
    """Posterior P(change) vs RCI and the Δp forest plot (the fit's item table)."""
    if c.bayes is None:
        return (
            _waiting("bayes_items", "Bayesian item posteriors", "fit.json and items.parquet")
            if c.pair is not None
            else None
        )
    fit, b = c.bayes, c.bayes.items
    blocks: list = []
    if c.items is not None:
        merged = b.drop(columns="rci_class").merge(
            c.items[["item_id", "rci", "class"]].rename(columns={"class": "rci_class"}), on="item_id", how="inner"
        )
        blocks.append(
            _fig(
                lambda: F.p_changed_vs_rci(merged, c.pair.z),
                "Posterior probability that an item changed against its RCI: items outside ±z with low P(changed) are "
                "RCI's likely false discoveries.",
                "p_changed",
            )
        )
    blocks.append(
        _fig(lambda: F.dp_forest(b), "Δp posterior mean and 90% interval of the most changed items.", "forest")
    )
    counts = b["bayes_class"].value_counts().reindex(list(CLASSES), fill_value=0)
    blocks.append(
        Table(
            counts.rename_axis("class").reset_index(name="items"),
            "Posterior classification",
            latex=True,
            label="bayes-classes",
        )
    )
    if "p_rope" in b:
        rope = fit.params["rope"]
        sure = int((b["p_rope"] >= 0.95).sum())
        blocks.append(
            Text(
                f"Practical significance: {sure} of {len(b)} items have P(|Δp| > {rope}) ≥ 0.95 (expected number of "
                f"items beyond the ROPE: {b['p_rope'].sum():.1f})."
            )
        )
        top = b.sort_values("p_rope", ascending=False).head(15)[
            ["item_id", "domain", "dp_mean", "p_rope", "bayes_class"]
        ]
        blocks.append(
            Table(top, "Items most likely to have changed by more than the ROPE", latex=True, label="bayes-rope")
        )
    if fl := fit.flips:
        n, p = fl["expected_negative_flips"], fl["expected_positive_flips"]
        blocks.append(
            Text(
                f"Expected real majority flips (true accuracy crossing 0.5): {_num(n['mean'], '.1f')} negative (90% "
                f"interval {_num(n['lo90'], '.0f')}-{_num(n['hi90'], '.0f')}) and {_num(p['mean'], '.1f')} positive "
                f"({_num(p['lo90'], '.0f')}-{_num(p['hi90'], '.0f')})."
            )
        )
    return Section("bayes_items", "Bayesian item posteriors", blocks)


def section_domain_shift(run: Run, c: Comparison) -> Section | None:
    if c.bayes is None or not c.bayes.domain_shift:
        return None
    frame = c.bayes.domain_shift_table()
    return Section(
        "domain_shift",
        "Domain shift posteriors",
        [
            _fig(
                lambda: F.domain_shift_forest(frame),
                "Per-domain shift of the change model: posterior mean and 90% interval.",
                "domain_shift",
            ),
            Table(frame, "Domain shifts", latex=True, label="domain-shift"),
        ],
    )


def section_diagnostics(run: Run, c: Comparison) -> Section | None:
    """The diagnostics gate and trace / rank plots of the hyper-parameters (the fit's posterior)."""
    if c.bayes is None:
        return (
            _waiting("diagnostics", "Convergence diagnostics", "fit.json and posterior.nc")
            if c.pair is not None
            else None
        )
    fit = c.bayes
    blocks: list = [
        Text(
            "Diagnostics gate **passed**."
            if fit.diagnostics.passed
            else "Diagnostics gate **FAILED**: the posterior summaries below are not trustworthy."
        ),
        Table(fit.gate_table(), gate_caption(fit), latex=True, label="gate"),
    ]
    if fit.posterior is not None:
        dt = fit.posterior
        names = F.scalar_vars(dt)
        if names:
            blocks.append(
                _fig(lambda: F.trace_plot(dt, names), f"Trace and marginal posteriors ({', '.join(names)}).", "trace")
            )
            blocks.append(
                _fig(lambda: F.rank_plot(dt, names), "Rank ECDF plots: chains should stay within the envelope.", "rank")
            )
    return Section("diagnostics", "Convergence diagnostics", blocks)


def ppc_sentence(fit) -> str:
    """The posterior predictive check and PSIS-LOO of a fit in words (what to read first)."""
    ppc, lo = fit.ppc, fit.loo
    if not ppc["flagged"]:
        text = (
            "The model reproduces the data: no statistic in any stratum is outside what its replicated datasets give "
            f"(smallest adjusted p = {ppc['p_adjusted_min']:.3f} over {ppc['n_tests']} tests, family-wise level "
            f"{ppc['alpha']:g})."
        )
    else:
        text = (
            f"**The model does not reproduce the data** in {len(ppc['flagged'])} of {ppc['n_tests']} (stratum, "
            "statistic) tests (red dots)."
        )
    if lo:
        text += (
            f" PSIS-LOO: ELPD {lo['elpd']:.1f} ± {lo['se']:.1f}; {lo['n_high_k']} items with Pareto k above "
            f"{lo['k_threshold']:g}"
        )
        text += f" ({', '.join(lo['high_k_items'][:10])})." if lo["n_high_k"] else "."
    return text


def loo_pit_caption(band: pd.DataFrame) -> str:
    """What the LOO-PIT figure shows, and whether the curve leaves its band."""
    verdict = (
        "it leaves the band: the leave-one-out predictions of the per-item change are miscalibrated"
        if band["outside"].any()
        else "it stays within the band, as calibrated predictions do 95% of the time"
    )
    return (
        "LOO-PIT of each item's change y2 - y1: the ECDF minus the uniform CDF, with its 95% simultaneous band; "
        f"{verdict}."
    )


def prior_predictive_sentence(pp: dict) -> str:
    """What the priors imply, in words (``fit.json`` ``prior_predictive``)."""
    above = pp["share_abs_dp_above"]
    text = (
        f"Before the data, the priors put an item's accuracy between {pp['p_v1'][0]:.2f} and {pp['p_v1'][-1]:.2f} "
        f"(90%) and expect {above['0.05']:.0%} of items to move by more than 0.05 in accuracy ({above['0.1']:.0%} by "
        "more than 0.10)"
    )
    if pp.get("pi"):
        text += f"; the share of changed items has prior median {pp['pi'][2]:.2f}"
    return text + ". The posterior moves away from this where the data speak (prior predictive check)."


def section_checks(run: Run, c: Comparison) -> Section | None:
    """The posterior predictive check per stratum and PSIS-LOO (``fit.json`` ``ppc`` and ``loo``)."""
    if c.bayes is None or not c.bayes.ppc:
        return None
    fit = c.bayes
    blocks: list = [Text(ppc_sentence(fit))]
    blocks += [
        Text(f"**Warning:** {w}") for w in fit.warnings if w.startswith(("posterior predictive check", "PSIS-LOO"))
    ]
    blocks.append(
        _fig(
            lambda: ppc_figure(fit.ppc),
            "Observed statistic (dot; red: flagged) against the replicated 90% range (bar) and mean (tick), "
            "per stratum.",
            "ppc",
        )
    )
    with contextlib.suppress(ValueError):  # a fit without LOO-PIT values has no such figure
        band = fit.loo_pit_band()
        blocks.append(
            _fig(lambda: loo_pit_figure(band, ks_p=fit.loo.get("loo_pit_ks_p")), loo_pit_caption(band), "loo_pit")
        )
    if pp := fit.prior_predictive:
        blocks.append(Text(prior_predictive_sentence(pp)))
        blocks.append(
            _fig(
                lambda: prior_predictive_figure(pp),
                "Prior predictive: a new item's accuracy per version (beside the observed y / n) and its change, "
                "before the data.",
                "prior_predictive",
            )
        )
    flagged = fit.ppc_table()
    flagged = flagged[pd.to_numeric(flagged["p_adjusted"], errors="coerce") <= fit.ppc["alpha"]]
    if len(flagged):
        blocks.append(Table(flagged.round(4), "Flagged statistics", latex=True, label="ppc"))
    return Section("checks", "Predictive checks and LOO", blocks)


def section_model_comparison(run: Run, c: Comparison | None = None) -> Section | None:
    """Fits of the same items ranked by PSIS-LOO (``loo_compare.json`` of ``bayesrc fit --compare``)."""
    mc = run.model_comparison
    if mc is None:
        return None
    blocks: list = [Text(mc.sentence())]
    blocks.append(
        _fig(
            lambda: loo_compare_figure(mc.table),
            "ELPD difference of each model from the best, with ±2 SE of the difference.",
            "loo_compare",
        )
    )
    blocks.append(Table(mc.summary().round(3), "Models ranked by PSIS-LOO ELPD", latex=True, label="loo-compare"))
    return Section("model_comparison", "Model comparison (PSIS-LOO)", blocks)


def section_joint(run: Run, c: Comparison | None = None) -> Section | None:
    """A family of versions (``joint.json`` of ``bayesrc fit V1 V2 V3 ...``): rank bands, P(best), per-item changes."""
    jf = run.joint
    if jf is None:
        return None
    bands = " > ".join("{" + ", ".join(b) + "}" for b in jf.bands())
    text = (
        f"Joint change model of {len(jf.versions)} versions on {jf.payload['params']['n_items']} items, reference "
        f"{jf.versions[0]}; convergence gate "
        f"{'passed' if jf.status == 'ok' else 'FAILED (the numbers decide nothing)'}. Rank bands (versions whose "
        f"{1 - jf.payload['params']['q']:.0%} rank intervals overlap share a band), best first: {bands}."
    )
    blocks: list = [Text(text)]
    blocks.append(
        _fig(
            jf.plot_bands,
            "Each version's posterior mean accuracy with its 90% interval, coloured by rank band.",
            "joint_bands",
        )
    )
    blocks.append(
        _fig(
            jf.plot_changes,
            "Posterior mean change in accuracy from the reference, items with the largest changes.",
            "joint_changes",
        )
    )
    blocks.append(
        Table(
            jf.versions_table.round(3),
            "Versions: mean accuracy, P(best), rank interval and band",
            latex=True,
            label="joint-versions",
        )
    )
    if jf.posterior is not None:  # a ladder or a series of checkpoints reads step by step
        caption = (
            "Consecutive versions: change in mean accuracy (90% interval, P(up)) and the items whose 90% interval of "
            "Δp lies above or below 0"
        )
        blocks.append(Table(jf.version_changes().round(3), caption, latex=True, label="joint-steps"))
    if run.pairwise is not None:  # bayesrc rci --family on the same versions: the classical side of the family
        blocks += pairwise_blocks(run.pairwise)
    return Section("joint", "A family of versions", blocks)


#: the per-pair table's columns as the report heads them
PAIRWISE_HEADINGS = {
    "pair": "pair",
    "n_analysable": "analysable",
    "improved": "improved",
    "deteriorated": "deteriorated",
    "flagged": "flagged",
    "expected_no_change": "expected, no-change null",
    "no_change_p975": "null 97.5%",
    "expected_nominal": "expected, nominal rate",
}


def pairwise_table(res) -> pd.DataFrame:
    """A family's per-pair table as the report shows it: flags beside the number each pair's no-change null expects."""
    t = res.pairs_table[list(PAIRWISE_HEADINGS)].rename(columns=PAIRWISE_HEADINGS)
    return t.round({"expected, no-change null": 1, "null 97.5%": 0, "expected, nominal rate": 1})


def pairwise_blocks(res) -> list:
    """Pairwise RCI of a family (:class:`~bayesrc.classical.PairwiseRCI`): the multiplicity in words, the family's
    warnings, the per-pair table."""
    blocks: list = [Text(f"**Pairwise reliable change (classical).** {res.multiplicity_sentence()}")]
    blocks += [Text(f"**Warning:** {w}") for w in res.payload.get("warnings") or []]
    caption = (
        f"Reliable change of every pair at z = {res.z:.3f} ({res.multiplicity['rule']}), with the flags expected under "
        "each pair's no-change null"
    )
    blocks.append(Table(pairwise_table(res), caption, latex=True, label="pairwise-rci"))
    return blocks


def section_pairwise_rci(run: Run, c: Comparison | None = None) -> Section | None:
    """Pairwise RCI of a family (``pairwise_rci.json`` of ``bayesrc rci --family``), on its own when no joint fit
    holds it (:func:`section_joint`)."""
    if run.pairwise is None or run.joint is not None:
        return None
    return Section("pairwise_rci", "Pairwise reliable change in a family of versions", pairwise_blocks(run.pairwise))


def crosscheck_sentence(fit, pair=None) -> str:
    """RCI's estimated false-discovery proportion stated in words.

    Count and proportion come from one classification: the RCI classes the fit cross-checked
    (``crosscheck.rci_n_flagged``). When the report's RCI pair used other settings than the
    fit's cross-check, the sentence says so instead of mixing the two.
    """
    cc = fit.crosscheck
    fdp, flagged = cc["rci_estimated_fdp"], cc["rci_n_flagged"]
    if fdp is None:  # RCI flagged no item: there is no proportion to estimate
        return f"The RCI flagged {flagged} items, so there is no false-discovery proportion to estimate."
    text = (
        f"Of the {flagged} items the RCI calls reliably changed, the posterior estimates that about {_pct(fdp)} "
        f"({_interval(cc.get('rci_estimated_fdp_interval90'), '; ')}≈ {fdp * flagged:.0f} items) did not change in the "
        "flagged direction: that is the estimated false-discovery proportion of the RCI classification."
    )
    material = cc.get("rci_estimated_fdp_material")
    if material is not None and np.isfinite(material):
        dmin = fit.params.get("delta_min", 0.05)
        bounds = _interval(cc.get("rci_estimated_fdp_material_interval90"))
        text += (
            f" Counting also changes smaller than {dmin:g} in accuracy as false (a material false discovery), the "
            f"estimate is {_pct(material)}{f' ({bounds})' if bounds else ''}."
        )
    text += "".join(f" **Warning:** {w}." for w in getattr(fit, "warnings", []))
    if pair is not None and pair.n_flagged != flagged:
        text += (
            f" (The fit cross-checked an RCI run with other settings than this report's, which flags {pair.n_flagged} "
            "items; pass the report's classical result to bayesrc.bayes.fit(rci=...) to use one classification.)"
        )
    return text


def crosscheck_table(fit) -> pd.DataFrame:
    """RCI class (rows) x posterior class (columns) of the fit's cross-check.

    ``fit.json`` stores ``table[posterior class][RCI class]``; the report turns it so RCI's
    classes are the rows, as in the reference study's tables."""
    t = pd.DataFrame(fit.crosscheck["table"]).reindex(index=list(CLASSES), columns=list(CLASSES)).fillna(0).astype(int)
    t.index.name = "RCI \\ posterior"
    return t.reset_index()


def selection_rule(sel: dict) -> str:
    """The fit's selection rule in words (Bayesian FDR level, or a posterior-probability threshold)."""
    return (
        f"at FDR {_num(sel['fdr'], 'g')}"
        if sel["rule"] == "fdr"
        else f"at P(direction) ≥ {_num(sel['threshold'], 'g')}"
    )


def section_crosscheck(run: Run, c: Comparison) -> Section | None:
    if c.bayes is None:
        return (
            _waiting("crosscheck", "RCI cross-check", "fit.json with a crosscheck block")
            if c.pair is not None
            else None
        )
    fit = c.bayes
    cc = fit.crosscheck
    blocks: list = [Text(crosscheck_sentence(fit, c.pair))]
    if cc["kappa"] is not None:
        blocks.append(Text(f"Agreement of the posterior and RCI classes: Cohen's κ = {cc['kappa']:.3f}."))
    if cc["table"]:
        blocks.append(
            Table(crosscheck_table(fit), "RCI class (rows) × posterior class (columns)", latex=True, label="crosscheck")
        )
    sel = fit.selection
    blocks.append(
        Text(
            f"Posterior selection {selection_rule(sel)}: {sel['n_improved']} improved, {sel['n_deteriorated']} "
            f"deteriorated, expected false discoveries {_num(sel['expected_false'], '.1f')}."
        )
    )
    return Section("crosscheck", "RCI cross-check", blocks)


# -------------------------------------------------- power and switch (run-wide)


def section_power(run: Run, c: Comparison | None = None) -> Section | None:
    """Resolution diagnostics (``power.json`` of ``bayesrc power``): is the benchmark big enough?"""
    if run.power is None:
        return None
    versions = c.versions if c is not None and c.versions != ("v1", "v2") else None
    blocks: list = []
    for q in run.power.pair_records(versions)[:3]:
        resolved = [k for k in VERDICT_PARADIGMS if q["verdicts"].get(k) == "resolved"]
        blocks.append(
            Text(
                f"**{q['name_a']} vs {q['name_b']}**: N = {q['n']} items, observed δ = {_num(q['delta'], '+.3f')}, "
                f"minimum detectable effect {_num(q['mde'], '.3f')}; resolving a difference of the observed size (δ = "
                f"{_num(q['delta'], '+.3f')}) needs N* ≈ {q['n_star_ceil']} items, so q = N/N* = {_num(q['q'], '.3g')} "
                "— " + (f"resolved under {', '.join(resolved)}." if resolved else "unresolved under every stress test.")
            )
        )
    blocks.append(
        Table(
            run.power.pairs_table(versions),
            "Resolution per pair (verdicts under fixed n, multiplicity, clustering, anytime-valid)",
            latex=True,
            label="power",
        )
    )
    noise = run.power.noise_table(versions)
    if len(noise):
        blocks.append(
            Table(
                noise,
                "Noise of the mean-accuracy difference: sampling within items (K) vs the item set (N), and what would "
                "halve it",
            )
        )
    unresolved = run.power.summary()
    if len(unresolved):
        blocks.append(Table(unresolved, "Unresolved pairs per paradigm"))
    return Section("power", "Resolution diagnostics", blocks)


def switch_blocks(result, name: str) -> list:
    """Text, heatmaps and factor table of benchmark ``name`` of a :class:`~bayesrc.switch.SwitchResult`."""
    bench = result.benchmark(name)
    if bench["mu"] is None:  # fewer than 3 models: the factor model is not identified
        return [Text(f"**{name}**: {bench.get('note') or 'no factor model'}.")]
    floor = bench.get("noise_floor_r2")
    floor_txt = (
        (
            f" Pure noise at the observed cell noise gives R² = {_num(floor['mean'], '.3f')} on average (97.5%: "
            f"{_num(floor['p975'], '.3f')})"
            + (
                (
                    ": the fit explains more than noise does."
                    if bench["r2"] > floor["p975"]
                    else ": the fit's R² is within what noise alone explains."
                )
                if _known(bench["r2"]) and _known(floor["p975"])
                else "."
            )
        )
        if floor
        else ""
    )
    eff = result.effects(name)
    sig_txt = ""
    if "significant_95_adjusted" in eff:
        sig_txt = (
            f" {int((eff['stars'] != '').sum())} of {len(eff)} cells are significant at 95% before adjustment, "
            f"{int(eff['significant_95_adjusted'].astype(bool).sum())} after Benjamini-Hochberg over the cells."
        )
    blocks: list = [
        Text(
            f"**{name}**: μ = {_num(bench['mu'], '.3f')}, R² = {_num(bench['r2'], '.3f')}, leave-one-cell-out CV R² = "
            f"{_num(bench['cv_r2'], '.3f')}." + floor_txt + sig_txt
        )
    ]
    cells = result.cells(name)
    if len(cells):
        obs = cells.pivot(index="prefix", columns="suffix", values="observed")
        res = cells.pivot(index="prefix", columns="suffix", values="resid")
        blocks.append(
            _fig(
                lambda: F.heatmap(obs, title=f"{name}: switch effects", label="Δ (a→b − b→b)"),
                f"{name}: observed switch effects (rows: prefix model).",
                f"switch_{name}",
            )
        )
        blocks.append(
            _fig(
                lambda: F.heatmap(res, title=f"{name}: residuals", label="residual"),
                f"{name}: residuals of the additive factor model.",
                f"switch_resid_{name}",
            )
        )
    blocks.append(Table(result.factors(name), f"{name}: additive factor model", latex=True, label=f"switch-{name}"))
    return blocks


def section_switch(run: Run, c: Comparison | None = None) -> Section | None:
    """Switch heatmaps and factor model per benchmark (``switch.json`` of ``bayesrc switch``)."""
    if run.switch is None:
        return None
    blocks = [b for name in run.switch.benchmarks for b in switch_blocks(run.switch, name)]
    return Section("switch", "Model-switch matrices", blocks or [Text("switch.json holds no benchmark.")])


SENSITIVITY_TITLES = {
    "threshold": "RCI threshold and SD basis",
    "exclusion": "Exclusion rules",
    "k": "K-subsampling (first k samples per item)",
    "prior": "Prior grid (change model reweighted or refitted)",
    "fdr": "Bayesian FDR level and posterior threshold",
}


def section_sensitivity(run: Run, c: Comparison | None = None) -> Section | None:
    """Sensitivity analyses (:class:`~bayesrc.sensitivity.SensitivityTable` of ``bayesrc sensitivity``, with its
    figures)."""
    sens = run.sensitivity
    if sens is None:
        return None
    titles = SENSITIVITY_TITLES
    truth = any("realized_fdp" in sens[n] for n in sens.analyses)
    blocks: list = [
        Text(
            "How the reliable-change conclusions move when one analysis choice changes"
            + (" (realized false-discovery proportion against the simulation's truth)." if truth else ".")
        )
    ]
    order = sorted(sens.analyses, key=lambda n: (list(titles).index(n) if n in titles else len(titles), n))
    for name in order:
        table = sens[name]
        png = run.sensitivity_png(name)
        fig = Figure(
            lambda t=table: _sensitivity_figure(t), f"Sensitivity: {titles.get(name, name)}.", f"sensitivity_{name}"
        )
        if png is not None:  # the figure `bayesrc sensitivity` drew: embedded as it is
            fig._png = png.read_bytes()
        blocks.append(fig)
        blocks.append(
            Table(
                table.drop(columns=[col for col in ("analysis",) if col in table]),
                f"Sensitivity: {titles.get(name, name)}",
                latex=True,
                label=f"sens-{name}",
            )
        )
    return Section("sensitivity", "Sensitivity analyses", blocks)


def _sensitivity_figure(table: pd.DataFrame):
    return sensitivity_figure(table)


def section_truth(run: Run, c: Comparison | None = None) -> Section | None:
    """Real-model truth (:class:`~bayesrc.truth.TruthResult` of ``bayesrc truth``): each analysis scored against
    exact Δp."""
    t = run.truth
    if t is None:
        return None
    ex, rci, model, q = t.exact, t.methods.get("rci") or {}, t.methods.get(t.default_model) or {}, t.q
    text = (
        f"**{t.runs['v1']['label']} → {t.runs['v2']['label']}**, exact answer distributions: {t.n_items} items, median "
        f"|Δp| {_num(ex['median_abs_dp'], '.3f')}, {ex['n_material']} moved by ≥ {t.delta_min} ({ex['n_up']} up, "
        f"{ex['n_down']} down). On {t.replicates} replicate datasets of K = {t.k} samples drawn from them, RCI flagged "
        f"{_num(rci.get('flagged_mean'), '.1f')} items per replicate with realised FDP {_pct(rci.get('fdp_sign'))} "
        f"(sign) / {_pct(rci.get('fdp_material'))} (material); the default change model estimated it as "
        f"{_pct(model.get('rci_fdp_estimate_mean'))} (sign) / {_pct(model.get('rci_fdp_estimate_material_mean'))} "
        f"(material; RCI's realised on the same replicates: {_pct(model.get('rci_fdp_realised_mean'))} / "
        f"{_pct(model.get('rci_fdp_realised_material_mean'))}), selected {_num(model.get('selected_mean'), '.1f')} "
        f"items at q = {q:g} with realised FDP {_pct(model.get('fdp_sign'))} and its 90% intervals covered the exact "
        f"Δp of {_pct(model.get('coverage90'))} of items."
    )
    held = model.get("rci_fdp_interval_coverage")
    if _known(held):
        text += (
            f" Its 90% interval of RCI's FDP held the realised proportion on {_pct(held)} of the replicates (sign; "
            f"material: {_pct(model.get('rci_fdp_material_interval_coverage'))}; calibrated near 90%)."
        )
    rejected = model.get("no_change_rejected_share")
    if _known(rejected):
        text += (
            f" The no-change permutation test rejected identical versions at 0.10 on {_pct(rejected)} of the "
            "replicates; on the others the intervals of RCI's FDP run to 100% "
            "(if nothing changed, every flag is false)."
        )
    warned = model.get("rci_fdp_prior_sensitive_share")
    if _known(warned):
        text += (
            f" On {_pct(warned)} of the replicates the fit warned that its sign estimate of RCI's FDP moves by more "
            f"than {PRIOR_TOLERANCE:g} with its priors (material: "
            f"{_pct(model.get('rci_fdp_material_prior_sensitive_share'))}): there the data do not decide it."
        )
    blocks: list = [
        Text(text),
        Table(
            truth_table(t),
            "Real-model truth: every analysis against the exact Δp (means over replicates)",
            latex=True,
            label="truth",
        ),
    ]
    if t.per_replicate is not None and len(t.per_replicate):
        reps = t.per_replicate
        blocks.append(
            _fig(
                lambda: F.truth_scores(reps, q),
                "Realised false discoveries per replicate and the models' estimates of RCI's.",
                "truth",
            )
        )
    return Section("truth", "Real-model truth (exact answer distributions)", blocks)


def section_family_truth(run: Run, c: Comparison | None = None) -> Section | None:
    """Exact truth of a family (:class:`~bayesrc.truth.FamilyTruth` of ``bayesrc truth`` on three or
    more runs): the joint model's per-item changes and rank bands against it, beside the pair fits and RCI."""
    t = run.family_truth
    if t is None:
        return None
    acc = ", ".join(f"{v} {_num(t.exact['mean_accuracy'].get(v), '.3f')}" for v in t.versions)
    text = (
        f"**A family of {len(t.versions)} versions**, {t.versions[0]} the reference, exact answer distributions: "
        f"{t.n_items} items, mean accuracy {acc}. On {t.replicates} replicate datasets of K = {t.k} samples per "
        "version, each non-reference version's per-item change Δp was scored as the joint model of the family "
        "estimates it, as the pair model fitted to the reference and that version alone estimates it, and as RCI "
        "classifies it (flags of the models: 90% intervals that exclude 0). Rows named 'a -> b' score a later step of "
        "the chain of consecutive versions: the joint model's contrast of the two versions and RCI on that pair."
    )
    if t.bands is not None:
        b = t.bands
        text += (
            " The joint model's rank bands kept the exact order of mean accuracy on "
            f"{_pct(b['order_respected_share'])} of the replicates ({_num(b['bands_mean'], '.1f')} bands on average; "
            f"P(best) of the truly best version {_num(b['p_best_of_true_best_mean'], '.2f')})."
        )
    return Section(
        "family_truth",
        "Real-model truth of a family of versions",
        [
            Text(text),
            _fig(
                lambda: F.family_truth_scores(t.per_replicate),
                "Per version or step and method: the models' per-item coverage and every method's false discoveries, "
                "one point per replicate.",
                "family_truth",
            ),
            Table(
                family_truth_table(t),
                "A family against exact truth: per method and version or step, means over replicates",
                latex=True,
                label="family-truth",
            ),
        ],
    )


#: FamilyTruth.summary() columns -> the report's headers
FAMILY_TRUTH_COLUMNS = {
    "method": "method",
    "version": "version",
    "coverage90": "coverage90",
    "dp_rmse": "Δp RMSE",
    "dp_slope": "Δp slope",
    "flagged_mean": "flagged / replicate",
    "fdp_sign": "FDP (sign)",
    "fdp_material": "FDP (material)",
    "gate_pass_share": "gate passed",
    "runtime_mean_s": "seconds",
}


def family_truth_table(truth) -> pd.DataFrame:
    """One row per method and version of a :class:`~bayesrc.truth.FamilyTruth`."""
    return truth.summary().rename(columns=FAMILY_TRUTH_COLUMNS)


#: TruthResult.summary() columns -> the report's headers
TRUTH_COLUMNS = {
    "method": "method",
    "flagged_mean": "flagged / replicate",
    "fdp_sign": "FDP (sign)",
    "fdp_material": "FDP (material)",
    "coverage90": "coverage90",
    "rci_fdp_estimate_mean": "est. RCI FDP",
    "rci_fdp_realised_mean": "RCI FDP (same replicates)",
    "rci_fdp_estimate_material_mean": "est. RCI FDP (material)",
    "rci_fdp_realised_material_mean": "RCI FDP (material, same replicates)",
    "rci_fdp_interval_coverage": "90% interval held RCI FDP",
    "rci_fdp_material_interval_coverage": "90% interval held RCI FDP (material)",
    "no_change_rejected_share": "no-change test rejected",
    "rci_fdp_prior_sensitive_share": "est. moved by priors (share)",
    "rci_fdp_material_prior_sensitive_share": "est. moved by priors (material, share)",
    "dp_slope_mean": "Δp slope",
    "gate_pass_share": "gate passed",
}


def truth_table(truth) -> pd.DataFrame:
    """One row per method of a :class:`~bayesrc.truth.TruthResult`: flags, realised FDPs, coverage, the estimate of
    RCI's FDP."""
    t = truth.summary()
    return t[[c for c in TRUTH_COLUMNS if c in t]].rename(columns=TRUTH_COLUMNS)


PairBuilder = Callable[[Run, Comparison], "Section | None"]

SECTION_BUILDERS: list[PairBuilder] = [
    section_pins,
    section_aggregate,
    section_rci,
    section_reference_figures,
    section_bayes_items,
    section_domain_shift,
    section_crosscheck,
    section_diagnostics,
    section_checks,
    section_model_comparison,
    section_joint,
    section_pairwise_rci,
    section_sensitivity,
    section_power,
    section_switch,
    section_truth,
    section_family_truth,
]


def build_sections(run: Run, c: Comparison | None, *, builders: list[PairBuilder] | None = None) -> list[Section]:
    """The sections whose inputs the run holds, in order. A result file that lacks a field a
    section needs (written by another bayesrc version, or edited) is one clear error, not a traceback."""
    out = []
    for b in builders or SECTION_BUILDERS:
        try:
            s = b(run, c)
        except KeyError as exc:
            raise InputError(
                f"{b.__name__}: the result lacks field {exc} (rerun the analysis with this bayesrc)",
                path=section_file(run, c, b.__name__),
                field=str(exc.args[0]),
            ) from None
        except InputError as exc:
            if exc.path is not None:
                raise
            # a result's accessor refused a field's value (a null count, say): name the file it came from
            raise InputError(exc.message, path=section_file(run, c, b.__name__), field=exc.field) from None
        if s is not None:
            out.append(s)
    return out


BAYES_SECTIONS = {
    "section_bayes_items",
    "section_domain_shift",
    "section_crosscheck",
    "section_diagnostics",
    "section_checks",
}

#: the result file each run-wide or classical section reads (an error in it names that file)
SECTION_FILES = {
    "section_aggregate": "rci.json",
    "section_rci": "rci.json",
    "section_reference_figures": "rci.json",
    "section_power": "power.json",
    "section_switch": "switch.json",
    "section_sensitivity": "sensitivity.json",
    "section_truth": "truth.json",
    "section_family_truth": "family_truth.json",
    "section_model_comparison": "loo_compare.json",
    "section_joint": "joint.json",
    "section_pairwise_rci": "pairwise_rci.json",
}


def section_file(run: Run, c: Comparison | None, builder: str):
    """The file a section builder read: the pair's fit for the Bayesian sections, else its result file (the run's
    first file when unknown).

    Examples
    --------
    >>> section_file(load_run("runs/demo"), None, "section_power")  # doctest: +SKIP
    PosixPath('runs/demo/power.json')
    """
    if c is not None and builder in BAYES_SECTIONS and "fit" in c.files:
        return c.files["fit"]
    if named := run.files.get(SECTION_FILES.get(builder, "")):
        return named
    if c is not None and "fit" in c.files and not run.files:  # a fit's folder on its own: its fit.json is all it read
        return c.files["fit"]
    return next(iter(run.files.values()), run.path)
