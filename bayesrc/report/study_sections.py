"""Sections of the run-wide studies: resolution diagnostics (power), model-switch matrices, sensitivity
analyses and real-model truth (of a pair and of a family of versions).
"""

from __future__ import annotations

import pandas as pd

from bayesrc.bayes.summaries import PRIOR_TOLERANCE
from bayesrc.power.result import VERDICT_PARADIGMS
from bayesrc.report import figures as F
from bayesrc.report.blocks import Figure, Section, Table, Text, _fig, _known, _num, _pct
from bayesrc.report.run import Comparison, Run
from bayesrc.sensitivity.figure import sensitivity_figure


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


#: SwitchResult.factors() columns -> the report's headers
FACTOR_COLUMNS = {
    "alpha": "alpha (prefix influence)",
    "alpha_se": "alpha SE",
    "beta": "beta (suffix susceptibility)",
    "beta_se": "beta SE",
}


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
    factors = result.factors(name).rename(columns=FACTOR_COLUMNS)
    blocks.append(Table(factors, f"{name}: additive factor model", latex=True, label=f"switch-{name}"))
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
