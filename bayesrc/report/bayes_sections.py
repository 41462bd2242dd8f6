"""Sections of the Bayesian layer: item posteriors, domain shifts, convergence diagnostics, predictive
checks and LOO, model comparison, a joint family of versions, and the cross-check of RCI by the posterior.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd

from bayesrc.bayes.check_figures import loo_compare_figure, loo_pit_figure, ppc_figure, prior_predictive_figure
from bayesrc.classical.rci import CLASSES
from bayesrc.report import figures as F
from bayesrc.report.blocks import Section, Table, Text, _fig, _num, _pct
from bayesrc.report.classical_sections import pairwise_blocks
from bayesrc.report.run import Comparison, Run


def _waiting_for_fit(c: Comparison, key: str, title: str, needs: str) -> Section | None:
    """The section of a pair with no fit: one that says what it waits for where the pair's RCI ran, else none.

    Parameters
    ----------
    c : Comparison
        The pair, without a fit (``c.bayes is None``).
    key, title : str
        The section's key and title.
    needs : str
        The files of ``bayesrc fit`` the section reads.

    Returns
    -------
    Section or None
        A ``waiting`` section naming ``needs``; none where the pair has no RCI result either (nothing ran on it).
    """
    if c.pair is None:
        return None
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
        return _waiting_for_fit(c, "bayes_items", "Bayesian item posteriors", "fit.json and items.parquet")
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
        return _waiting_for_fit(c, "diagnostics", "Convergence diagnostics", "fit.json and posterior.nc")
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


def _interval(bounds: list[float] | None, after: str = "") -> str:
    """``"90% interval a–b"`` + ``after`` for a crosscheck's interval of RCI's FDP; empty for fits from before it."""
    return f"90% interval {_pct(bounds[0])}–{_pct(bounds[1])}{after}" if bounds else ""


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
        return _waiting_for_fit(c, "crosscheck", "RCI cross-check", "fit.json with a crosscheck block")
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
