"""Sections of the run and its classical analysis: the run's pins and parameters, the aggregate
accuracy change, reliable change (RCI) with its reference-study figures, and pairwise RCI of a family.
"""

from __future__ import annotations

import pandas as pd

from bayesrc.classical.noise import noise_from_items, noise_sentence
from bayesrc.classical.pipeline import _aggregate_change
from bayesrc.classical.result import PairResult
from bayesrc.errors import InputError
from bayesrc.report import figures as F
from bayesrc.report.blocks import Section, Table, Text, _count, _fig, _known, _num, _pct
from bayesrc.report.run import Comparison, Run


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


# ------------------------------------------------------ pairwise RCI of a family


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
