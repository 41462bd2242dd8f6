"""Report sections: one small builder per section, each returning ``None`` when its
inputs are absent from the run directory, so a report shows exactly what was run.

A section is a title plus blocks (:class:`Text`, :class:`Table`, :class:`Figure`);
the renderers in :mod:`bayesrc.report.render` turn the same sections into HTML,
Markdown or LaTeX. To add a section, write a builder ``(run, comparison) ->
Section | None`` and append it to :data:`SECTION_BUILDERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesrc.report import figures as F
from bayesrc.report.run import Comparison, Run


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


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.1f}%"


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
    rows = [(f, short(str(v1.get(f, ""))), short(str(v2.get(f, ""))), status.get(f, "same" if v1.get(f) == v2.get(f) else "differs")) for f in sorted(set(v1) | set(v2))]
    return pd.DataFrame(rows, columns=["pin", "v1", "v2", "status"])


def section_pins(run: Run, c: Comparison) -> Section | None:
    """The run's pins (``run.json``) and the analysis parameters (``rci.json``)."""
    blocks: list = []
    rec = run.run_record
    if isinstance(rec, dict) and isinstance(rec.get("v1"), dict) and isinstance(rec.get("v2"), dict):
        comp = rec.get("comparison") or {}
        verdict = "comparable: only the model pins differ" if comp.get("comparable") else "NOT comparable: pins other than the model differ"
        blocks.append(Text(f"The two collection runs are {verdict} (the differing pins are marked)."))
        blocks.append(Table(pair_pins_frame(rec), "Run pins of both versions (run.json)"))
    elif rec is not None:
        rows = _flatten(rec) if isinstance(rec, dict) else [("run.json", str(rec))]
        blocks.append(Table(pd.DataFrame(rows, columns=["pin", "value"]), "Run record (run.json)"))
    if c.rci is not None:
        params = {"versions": " -> ".join(c.versions), **{k: v for k, v in c.rci.get("params", {}).items()}}
        blocks.append(Table(pd.DataFrame(list(params.items()), columns=["parameter", "value"]).astype({"value": str}), "Analysis parameters (rci.json)"))
    if c.fit is not None:
        keys = {k: c.fit.get(k) for k in ("model", "backend", "runtime_s", "seed") if k in c.fit}
        if keys:
            blocks.append(Table(pd.DataFrame(list(keys.items()), columns=["fit", "value"]).astype({"value": str}), "Posterior fit (fit.json)"))
    if not blocks:
        return None
    if run.run_record is None:
        blocks.insert(0, Text("No run record (run.json) in this run directory: the collection pins are not shown."))
    return Section("pins", "Run pins and parameters", blocks)


# ------------------------------------------------------------- aggregate change


def aggregate_frame(items: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy per version and mean item-level change with a 95% t interval,
    over every item scored in both versions and over the analysable items."""
    from bayesrc.classical.pipeline import _aggregate_change

    rows = []
    scored = items[["p_v1", "p_v2"]].notna().all(axis=1)
    for label, sel in (("all scored items", scored), ("analysable items", scored & ~items["excluded"].astype(bool))):
        sub = items[sel]
        agg = _aggregate_change(sub["delta"].to_numpy())
        rows.append({"items": label, "n": agg["n"], "acc_v1": sub["p_v1"].mean(), "acc_v2": sub["p_v2"].mean(), "delta": agg["mean_delta"], "ci95_lo": agg["ci95"][0], "ci95_hi": agg["ci95"][1]})
    return pd.DataFrame(rows)


def section_aggregate(run: Run, c: Comparison) -> Section | None:
    if c.items is None:
        return None
    agg = aggregate_frame(c.items)
    a = agg.iloc[0]
    v1, v2 = c.versions
    sign = "rose" if a["ci95_lo"] > 0 else "fell" if a["ci95_hi"] < 0 else "did not change detectably"
    text = (
        f"Mean accuracy over {a['n']} items scored in both versions: {v1} {a['acc_v1']:.3f}, {v2} {a['acc_v2']:.3f}; "
        f"change {a['delta']:+.3f} (95% CI {a['ci95_lo']:+.3f} to {a['ci95_hi']:+.3f}) — the aggregate {sign}."
    )
    if c.rci is not None:
        cnt = c.rci["counts"]["analysable"]
        text += f" Beneath it, {cnt['improved']} items reliably improved and {cnt['deteriorated']} reliably deteriorated (churn {_pct(cnt['churn'])} of {cnt['n']} analysable items)"
        ns = c.rci.get("null_samples")
        if ns:
            flagged = cnt["improved"] + cnt["deteriorated"]
            if flagged > ns["flagged_p975"]:
                text += f", more than the {ns['flagged_p975']:.0f} that data with no change would give at most (97.5%): there is item-level change beyond chance" + (
                    " that the aggregate hides." if sign == "did not change detectably" else "."
                )
            else:
                text += f", no more than data with no change give ({ns['flagged_p025']:.0f}-{ns['flagged_p975']:.0f}, 95%): this churn is no evidence of item-level change."
        else:
            text += "."
    return Section("aggregate", "Aggregate accuracy change", [Text(text), Table(agg, "Aggregate change (mean item Δp, t interval)", latex=True, label="aggregate")])


# ---------------------------------------------------------- classical (RCI)


def classification_table(rci: dict) -> pd.DataFrame:
    """The paper's Table 1/2 layout: classes x analysis set, counts and shares; with the
    sample-level no-change null's expected counts (analysable items) when present."""
    rows = []
    ns = rci.get("null_samples")
    null_col = {"improved": "improved_mean", "deteriorated": "deteriorated_mean"}
    for cls in F.CLASS_ORDER:
        row = {"class": F.CLASS_LABELS[cls]}
        for key, label in (("analysable", "analysable"), ("conservative", "conservative z"), ("all", "all items")):
            cnt = rci["counts"][key]
            row[f"{label} n"] = cnt[cls]
            row[f"{label} %"] = 100 * cnt["proportions"][cls] if cnt["n"] else np.nan
        if ns:
            row["no-change null n"] = ns[null_col[cls]] if cls in null_col else ns["n_analysable_mean"] - ns["flagged_mean"]
        rows.append(row)
    total = {"class": "total"}
    for key, label in (("analysable", "analysable"), ("conservative", "conservative z"), ("all", "all items")):
        total[f"{label} n"] = rci["counts"][key]["n"]
        total[f"{label} %"] = 100.0
    if ns:
        total["no-change null n"] = ns["n_analysable_mean"]
    rows.append(total)
    return pd.DataFrame(rows)


def reliability_table(rci: dict) -> pd.DataFrame:
    rows = []
    for v in ("v1", "v2"):
        r = rci["reliability"][v]
        rows.append({"version": v, "r_xx": r["r_xx"], "ci_lo": r["ci"][0], "ci_hi": r["ci"][1], "ICC(1,K)": r.get("icc_1_k", np.nan),
                     "ICC(1,1)": r["icc"], "SEM": rci["sem"][v]})  # fmt: skip
    return pd.DataFrame(rows)


def domain_table(rci: dict) -> pd.DataFrame:
    rows = []
    for d, v in rci["domain"]["per_domain"].items():
        rows.append(
            {
                "domain": d,
                "n": v["n"],
                "improved": v["improved"],
                "no change": v["no_change"],
                "deteriorated": v["deteriorated"],
                "churn %": 100 * (v["improved"] + v["deteriorated"]) / v["n"] if v["n"] else np.nan,
                "imp/det": v["ratio"] if v["ratio"] is not None else np.nan,
                "net": v["net"],
            }
        )
    return pd.DataFrame(rows)


def null_sentence(r: dict) -> str:
    """The sample-level null in words: expected flagged count with no change, and the rate."""
    ns = r.get("null_samples")
    if not ns:
        return "The sample-level no-change null was not computed for this run."
    cnt = r["counts"]["analysable"]
    flagged = cnt["improved"] + cnt["deteriorated"]
    return (
        f"No-change null ({ns['replicates']} replicates, each item's samples of both versions re-dealt at random): "
        f"{ns['flagged_mean']:.1f} items flagged on average (95% range {ns['flagged_p025']:.0f}-{ns['flagged_p975']:.0f}), "
        f"a false-positive rate of {_pct(ns['rate'])} per analysable item against the nominal {_pct(ns['nominal_rate'])}; "
        f"observed {flagged}."
    )


def section_rci(run: Run, c: Comparison) -> Section | None:
    if c.rci is None:
        return None
    r = c.rci
    z = r["params"]["z"]
    ex = r["exclusions"]
    null = r.get("direction_asymmetry") or r.get("null")
    method = r.get("s_diff_method", "reference")
    if method == "binomial":
        sdiff = f"S_diff per item from its binomial SE (method **binomial**; median {r['s_diff']:.4f}, so a typical item needs |Δp| ≥ {r['min_detectable']:.3f})"
    else:
        sdiff = (
            f"S_diff = {r['s_diff']:.4f} (method **reference**, SD basis **{r['sd_basis']}**, r_xx over "
            f"{'the analysed' if r.get('reliability_basis') == 'analysed' else 'all'} items), so the minimum detectable change is "
            f"|Δp| ≥ {r['min_detectable']:.3f} ({r['min_detectable_samples']} of K = {r['params'].get('k', 'K')} samples)"
        )
    blocks = [
        Text(
            f"Reliable change (Jacobson–Truax RCI adapted to items), z = {z:g}. {sdiff}. {ex['n_after']} of {ex['n_before']} items are analysable "
            f"({ex['low_valid']} with too few valid responses — rule (a): fewer than {ex.get('min_valid_rule', ex.get('min_valid'))} —, {ex['floor_ceiling']} at floor or ceiling in both versions)."
        ),
    ]
    for w in r.get("warnings") or []:
        blocks.append(Text(f"**Warning:** {w}"))
    blocks += [
        Table(classification_table(r), "Reliable-change classification (cf. the reference study's Table 1/2) and the no-change null", latex=True, label="rci-classes"),
        Text(null_sentence(r)),
        Table(reliability_table(r), "Split-half reliability (Spearman–Brown), ICC(1,K) (comparable with r_xx), ICC(1,1) and SEM per version", latex=True, label="reliability"),
        Text(
            f"Direction-asymmetry test ({null['n_permutations']} version-swap permutations over the {null.get('n_items', ex['n_after'])} analysable items; "
            f"swapping keeps every |Δp|, so it tests only the balance of improvements and deteriorations): 95th percentile "
            f"{null['improved_p95']:.0f} improved / {null['deteriorated_p95']:.0f} deteriorated, observed {null['observed_improved']} / "
            f"{null['observed_deteriorated']} — improvement {'exceeds' if null['improved_exceeds_null'] else 'does not exceed'} and deterioration "
            f"{'exceeds' if null['deteriorated_exceeds_null'] else 'does not exceed'} its share under a symmetric null."
        ),
    ]
    fl = r.get("flips")
    if fl:
        blocks.append(
            Text(
                f"Majority-answer flips: {fl['negative_flips']} items correct-majority in v1 but not in v2 "
                f"(negative flip rate {_pct(fl['negative_flip_rate'])}) and {fl['positive_flips']} the reverse "
                f"({_pct(fl['positive_flip_rate'])}), of {fl['n']} items scored in both."
            )
        )
    return Section("rci", "Classical reliable change", blocks)


def section_reference_figures(run: Run, c: Comparison) -> Section | None:
    """The reference study's four figures, redrawn from this run's items."""
    if c.items is None or c.rci is None:
        return None
    z, items, r = c.rci["params"]["z"], c.items, c.rci
    dom = pd.DataFrame(r["domain"]["table"]).T if r["domain"].get("table") else pd.crosstab(items["domain"], items["class"])
    bins = pd.DataFrame(r["difficulty_bins"])
    d = r["domain"]
    blocks = [
        _fig(lambda: F.item_scatter(items, r["s_diff"], z, versions=c.versions), f"Item accuracy v1 vs v2 by RCI class; the shaded band is |Δp| < {z:g}·S_diff (no reliable change).", "scatter"),
        _fig(lambda: F.rci_histogram(items, z), f"RCI over analysable items with the ±{z:g} thresholds.", "rci_hist"),
        _fig(lambda: F.domain_heatmap(dom), f"Domain × class (analysable items): χ² = {d['chi2']:.2f}, p = {d['p']:.3g}, Cramér's V = {d['cramers_v']:.3f}.", "domain"),
        Table(domain_table(r), "Reliable change by domain", latex=True, label="domains"),
        _fig(lambda: F.difficulty_churn(bins), "Churn by baseline difficulty (p_v1 bins).", "difficulty"),
    ]
    return Section("figures", "Item-level change (reference-study figures)", blocks)


# --------------------------------------------------------------- Bayesian layer


BAYES_ITEM_COLUMNS = ("item_id", "domain", "p_v1_mean", "p_v2_mean", "dp_mean", "dp_lo90", "dp_hi90", "p_changed", "p_improve", "p_deteriorate", "bayes_class", "rci_class")


def _waiting(key: str, title: str, needs: str) -> Section:
    return Section(key, title, [Text(f"Not available for this run: needs {needs} (written by `bayesrc fit`).")], status="waiting")


def gate_table(fit) -> pd.DataFrame:
    """The gate with the thresholds *the fit used* (:meth:`bayesrc.bayes.BayesFit.gate_table`)."""
    return fit.gate_table()


def gate_caption(fit) -> str:
    t = fit.diagnostics.thresholds
    div = "no divergences" if t["max_divergences"] == 0 else f"≤ {t['max_divergences']} divergences"
    return f"Diagnostics gate (R-hat ≤ {t['max_rhat']:g}, bulk and tail ESS ≥ {t['min_ess']:g}, {div})"


def section_bayes_items(run: Run, c: Comparison) -> Section | None:
    """Posterior P(change) vs RCI and the Δp forest plot (``items.parquet`` of ``bayesrc fit``)."""
    if c.bayes_items is None:
        return _waiting("bayes_items", "Bayesian item posteriors", "items.parquet") if c.rci is not None else None
    b = c.bayes_items
    missing = [col for col in ("item_id", "dp_mean", "dp_lo90", "dp_hi90", "p_changed") if col not in b]
    if missing:
        return Section("bayes_items", "Bayesian item posteriors", [Text(f"items.parquet lacks column(s) {', '.join(missing)}; section skipped.")], status="waiting")
    blocks: list = []
    if c.items is not None:
        merged = b.drop(columns=[col for col in ("rci_class",) if col in b]).merge(c.items[["item_id", "rci", "class"]].rename(columns={"class": "rci_class"}), on="item_id", how="inner")
        blocks.append(
            _fig(
                lambda: F.p_changed_vs_rci(merged, c.rci["params"]["z"] if c.rci else 1.96),
                "Posterior probability that an item changed against its RCI: items outside ±z with low P(changed) are RCI's likely false discoveries.",
                "p_changed",
            )
        )
    blocks.append(_fig(lambda: F.dp_forest(b), "Δp posterior mean and 90% interval of the most changed items.", "forest"))
    if "bayes_class" in b:
        counts = b["bayes_class"].value_counts().reindex(list(F.CLASS_ORDER), fill_value=0)
        blocks.append(Table(counts.rename_axis("class").reset_index(name="items"), "Posterior classification", latex=True, label="bayes-classes"))
    if "p_rope" in b:
        rope = (c.fit or {}).get("params", {}).get("rope")
        sure = int((b["p_rope"] >= 0.95).sum())
        blocks.append(
            Text(f"Practical significance: {sure} of {len(b)} items have P(|Δp| > {rope if rope is not None else 'ROPE'}) ≥ 0.95 (expected number of items beyond the ROPE: {b['p_rope'].sum():.1f}).")
        )
        top = b.sort_values("p_rope", ascending=False).head(15)[[col for col in ("item_id", "domain", "dp_mean", "p_rope", "bayes_class") if col in b]]
        blocks.append(Table(top, "Items most likely to have changed by more than the ROPE", latex=True, label="bayes-rope"))
    fl = (c.fit or {}).get("flips")
    if fl:
        n, p = fl["expected_negative_flips"], fl["expected_positive_flips"]
        blocks.append(
            Text(
                f"Expected real majority flips (true accuracy crossing 0.5): {n['mean']:.1f} negative (90% interval "
                f"{n['lo90']:.0f}-{n['hi90']:.0f}) and {p['mean']:.1f} positive ({p['lo90']:.0f}-{p['hi90']:.0f})."
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
            _fig(lambda: F.domain_shift_forest(frame), "Per-domain shift of the change model: posterior mean and 90% interval.", "domain_shift"),
            Table(frame, "Domain shifts", latex=True, label="domain-shift"),
        ],
    )


def section_diagnostics(run: Run, c: Comparison) -> Section | None:
    """The diagnostics gate and trace / rank plots of the hyper-parameters (``posterior.nc``)."""
    if c.fit is None:
        return _waiting("diagnostics", "Convergence diagnostics", "fit.json and posterior.nc") if c.rci is not None else None
    d = c.fit.get("diagnostics", {})
    passed = bool(d.get("passed"))
    blocks: list = [
        Text("Diagnostics gate **passed**." if passed else "Diagnostics gate **FAILED**: the posterior summaries below are not trustworthy."),
        Table(gate_table(c.bayes), gate_caption(c.bayes), latex=True, label="gate"),
    ]
    if c.posterior_path is not None:
        dt = read_posterior(c.posterior_path)
        names = F.scalar_vars(dt)
        if names:
            blocks.append(_fig(lambda: F.trace_plot(dt, names), f"Trace and marginal posteriors ({', '.join(names)}).", "trace"))
            blocks.append(_fig(lambda: F.rank_plot(dt, names), "Rank ECDF plots: chains should stay within the envelope.", "rank"))
    return Section("diagnostics", "Convergence diagnostics", blocks)


def read_posterior(path):
    """``posterior.nc`` as an xarray DataTree (the ArviZ 1.x InferenceData)."""
    import xarray as xr

    from bayesrc.errors import InputError

    try:
        with xr.open_datatree(path) as dt:
            return dt.load()
    except (OSError, ValueError, ImportError) as exc:
        raise InputError(f"unreadable posterior ({type(exc).__name__}: {exc})", path=path) from None


def crosscheck_sentence(fit, pair=None) -> str:
    """RCI's estimated false-discovery proportion stated in words.

    Count and proportion come from one classification: the RCI classes the fit cross-checked
    (``crosscheck.rci_n_flagged``). When the report's RCI pair used other settings than the
    fit's cross-check, the sentence says so instead of mixing the two.
    """
    cc = fit.crosscheck
    fdp, flagged = cc.get("rci_estimated_fdp"), cc.get("rci_n_flagged")
    if fdp is None:
        return "The fit does not report RCI's estimated false-discovery proportion."
    if flagged is None:
        return f"The posterior estimates that {_pct(fdp)} of the RCI's reliable changes did not change in the flagged direction (estimated false-discovery proportion)."
    text = (
        f"Of the {flagged} items the RCI calls reliably changed, the posterior estimates that about {_pct(fdp)} "
        f"(≈ {fdp * flagged:.0f} items) did not change in the flagged direction: that is the estimated "
        f"false-discovery proportion of the RCI classification."
    )
    if pair is not None and pair.n_flagged != flagged:
        text += (
            f" (The fit cross-checked an RCI run with other settings than this report's, which flags {pair.n_flagged} items;"
            f" pass the report's classical result to bayesrc.bayes.fit(rci=...) to use one classification.)"
        )
    return text


def section_crosscheck(run: Run, c: Comparison) -> Section | None:
    if c.fit is None or "crosscheck" not in c.fit:
        return _waiting("crosscheck", "RCI cross-check", "fit.json with a crosscheck block") if c.rci is not None else None
    cc = c.fit["crosscheck"]
    blocks: list = [Text(crosscheck_sentence(c.bayes, c.pair))]
    if cc.get("kappa") is not None:
        blocks.append(Text(f"Agreement of the posterior and RCI classes: Cohen's κ = {cc['kappa']:.3f}."))
    table = cc.get("table")
    if isinstance(table, dict) and table:
        # fit.json: table[posterior class][RCI class] -> columns are posterior, index RCI
        t = pd.DataFrame(table).reindex(index=["improved", "no_change", "deteriorated"])
        t.index.name = "RCI \\ posterior"
        blocks.append(Table(t.reset_index(), "RCI class (rows) × posterior class (columns)", latex=True, label="crosscheck"))
    sel = c.fit.get("selection")
    if sel:
        blocks.append(
            Text(
                f"Posterior selection at FDR {sel.get('fdr')}: {sel.get('n_improved')} improved, {sel.get('n_deteriorated')} deteriorated, "
                f"expected false discoveries {float(sel.get('expected_false', float('nan'))):.1f}."
            )
        )
    return Section("crosscheck", "RCI cross-check", blocks)


# -------------------------------------------------- power and switch (run-wide)


def _records_tables(obj, prefix: str = "") -> list[tuple[str, pd.DataFrame]]:
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _records_tables(v, f"{prefix}{k}.")
    elif isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        out.append((prefix.rstrip("."), pd.DataFrame(obj)))
    return out


VERDICT_PARADIGMS = ("fixed_n", "bonferroni", "holm", "bh", "clustered", "anytime")


def power_pairs_table(pairs: list[dict]) -> pd.DataFrame:
    """One row per compared pair of ``power.json``: N, δ, ρ, discordant counts, MDE, N*, q, McNemar, verdicts."""
    rows = []
    for p in pairs:
        row = {
            "pair": f"{p.get('name_a')} vs {p.get('name_b')}",
            "N": p.get("n"),
            "delta": p.get("delta"),
            "rho": p.get("rho"),
            "b": p.get("b"),
            "c": p.get("c"),
            "MDE": p.get("mde"),
            "N*": p.get("n_star_ceil", p.get("n_star")),
            "q = N/N*": p.get("q"),
            "p exact": p.get("p_exact"),
        }
        for k in VERDICT_PARADIGMS:
            if k in (p.get("verdicts") or {}):
                row[k] = p["verdicts"][k]
        rows.append(row)
    return pd.DataFrame(rows)


def section_power(run: Run, c: Comparison | None = None) -> Section | None:
    """Resolution diagnostics (``power.json`` of ``bayesrc power``): is the benchmark big enough?"""
    if run.power is None:
        return None
    p = run.power
    pairs = p.get("pairs") if isinstance(p, dict) else None
    if not (isinstance(pairs, list) and pairs and isinstance(pairs[0], dict) and "n_star" in pairs[0]):
        rows = _flatten(p) if isinstance(p, dict) else [("power.json", str(p))]
        return Section("power", "Resolution diagnostics", [Table(pd.DataFrame(rows[:80], columns=["quantity", "value"]), "Resolution diagnostics (power.json)")])
    if c is not None and c.versions != ("v1", "v2"):
        mine = [q for q in pairs if {str(q.get("name_a")), str(q.get("name_b"))} == set(c.versions)]
        pairs = mine or pairs
    blocks: list = []
    for q in pairs[:3]:
        v = q.get("verdicts") or {}
        resolved = [k for k in VERDICT_PARADIGMS if v.get(k) == "resolved"]
        blocks.append(
            Text(
                f"**{q.get('name_a')} vs {q.get('name_b')}**: N = {q.get('n')} items, observed δ = {q.get('delta', float('nan')):+.3f}, "
                f"minimum detectable effect {q.get('mde', float('nan')):.3f}; resolving a difference of the observed size (δ = {q.get('delta', float('nan')):+.3f}) "
                f"needs N* ≈ {q.get('n_star_ceil') or q.get('n_star')} items, "
                f"so q = N/N* = {q.get('q', float('nan')):.3g} — " + (f"resolved under {', '.join(resolved)}." if resolved else "unresolved under every stress test.")
            )
        )
    blocks.append(Table(power_pairs_table(pairs), "Resolution per pair (verdicts under fixed n, multiplicity, clustering, anytime-valid)", latex=True, label="power"))
    if p.get("unresolved"):
        blocks.append(Table(pd.DataFrame(p["unresolved"]), "Unresolved pairs per paradigm"))
    return Section("power", "Resolution diagnostics", blocks)


def switch_blocks(name: str, bench: dict) -> list:
    cells = pd.DataFrame(bench.get("cells") or [])
    floor = bench.get("noise_floor_r2") or {}
    floor_txt = (
        (
            f" Pure noise at the observed cell noise gives R² = {floor['mean']:.3f} on average (97.5%: {floor['p975']:.3f}); "
            + ("the fit explains more than noise does." if bench.get("r2", float("nan")) > floor["p975"] else "the fit's R² is within what noise alone explains.")
        )
        if floor
        else ""
    )
    eff = pd.DataFrame(bench.get("effects") or [])
    sig_txt = ""
    if "significant_95_adjusted" in eff:
        sig_txt = (
            f" {int((eff['stars'] != '').sum())} of {len(eff)} cells are significant at 95% before adjustment, "
            f"{int(eff['significant_95_adjusted'].astype(bool).sum())} after Benjamini-Hochberg over the cells."
        )
    blocks: list = [
        Text(f"**{name}**: μ = {bench.get('mu', float('nan')):.3f}, R² = {bench.get('r2', float('nan')):.3f}, leave-one-cell-out CV R² = {bench.get('cv_r2', float('nan')):.3f}." + floor_txt + sig_txt)
    ]
    if {"prefix", "suffix", "observed"} <= set(cells):
        obs = cells.pivot(index="prefix", columns="suffix", values="observed")
        blocks.append(_fig(lambda: F.heatmap(obs, title=f"{name}: switch effects", label="Δ (a→b − b→b)"), f"{name}: observed switch effects (rows: prefix model).", f"switch_{name}"))
        if "resid" in cells:
            res = cells.pivot(index="prefix", columns="suffix", values="resid")
            blocks.append(_fig(lambda: F.heatmap(res, title=f"{name}: residuals", label="residual"), f"{name}: residuals of the additive factor model.", f"switch_resid_{name}"))
    ab = pd.DataFrame({"alpha (prefix influence)": pd.Series(bench.get("alpha") or {}), "beta (suffix susceptibility)": pd.Series(bench.get("beta") or {})})
    if len(ab):
        blocks.append(Table(ab.rename_axis("model").reset_index(), f"{name}: additive factor model", latex=True, label=f"switch-{name}"))
    return blocks


def section_switch(run: Run, c: Comparison | None = None) -> Section | None:
    """Switch heatmaps (``switch.json`` of ``bayesrc switch``: per benchmark mu, alpha, beta, r2, cv_r2, cells)."""
    if run.switch is None:
        return None
    s = run.switch.get("benchmarks", run.switch) if isinstance(run.switch, dict) else {}
    blocks: list = []
    for name, bench in s.items():
        if isinstance(bench, dict) and ("cells" in bench or "alpha" in bench):
            blocks += switch_blocks(str(name), bench)
    if not blocks:
        blocks = [Text("switch.json holds no benchmark with cells or factor estimates.")]
    return Section("switch", "Model-switch matrices", blocks)


def section_sensitivity(run: Run, c: Comparison | None = None) -> Section | None:
    """Sensitivity analyses (``sensitivity_NAME.csv`` / ``.png`` of ``bayesrc sensitivity``)."""
    if not run.sensitivity:
        return None
    titles = {
        "threshold": "RCI threshold and SD basis", "exclusion": "Exclusion rules", "k": "K-subsampling (first k samples per item)",
        "prior": "Prior grid (change model refitted)", "fdr": "Bayesian FDR level and posterior threshold",
    }  # fmt: skip
    blocks: list = [
        Text(
            "How the reliable-change conclusions move when one analysis choice changes"
            + (" (realized false-discovery proportion against the simulation's truth)." if any("realized_fdp" in t for t, _ in run.sensitivity.values()) else ".")
        )
    ]
    order = sorted(run.sensitivity, key=lambda n: (list(titles).index(n) if n in titles else len(titles), n))
    for name in order:
        table, png = run.sensitivity[name]
        if png is not None:
            fig = Figure(lambda: None, f"Sensitivity: {titles.get(name, name)}.", f"sensitivity_{name}")
            fig._png = png.read_bytes()
            blocks.append(fig)
        blocks.append(Table(table.drop(columns=[col for col in ("analysis",) if col in table]), f"Sensitivity: {titles.get(name, name)}", latex=True, label=f"sens-{name}"))
    return Section("sensitivity", "Sensitivity analyses", blocks)


def truth_table(truth: dict) -> pd.DataFrame:
    """One row per method of ``truth.json``: flags, realised FDPs, coverage, the estimate of RCI's FDP."""
    rows = []
    default = truth.get("default_model", "change")
    for name, m in (truth.get("methods") or {}).items():
        rows.append({
            "method": name + (" (default)" if name == default else ""),
            "flagged / replicate": m.get("flagged_mean"),
            "FDP (sign)": m.get("fdp_sign"),
            "FDP (material)": m.get("fdp_material"),
            "coverage90": m.get("coverage90"),
            "est. RCI FDP": m.get("rci_fdp_estimate_mean"),
            "RCI FDP (same replicates)": m.get("rci_fdp_realised_mean"),
            "Δp slope": m.get("dp_slope_mean"),
        })  # fmt: skip
    return pd.DataFrame(rows)


def section_truth(run: Run, c: Comparison | None = None) -> Section | None:
    """Real-model truth (``truth.json`` of ``bayesrc truth``): each analysis scored against exact Δp."""
    t = run.truth
    if not isinstance(t, dict) or "methods" not in t:
        return None
    ex, rci, model = t.get("exact") or {}, t.get("rci") or {}, t.get("model") or {}
    runs = t.get("runs") or {}
    text = (
        f"**{(runs.get('v1') or {}).get('label', 'v1')} → {(runs.get('v2') or {}).get('label', 'v2')}**, exact answer distributions: "
        f"{t.get('n_items')} items, median |Δp| {ex.get('median_abs_dp', float('nan')):.3f}, {ex.get('n_material')} moved by ≥ {t.get('delta_min')} "
        f"({ex.get('n_up')} up, {ex.get('n_down')} down). On {t.get('replicates')} replicate datasets of K = {t.get('k')} samples drawn from them, "
        f"RCI flagged {rci.get('flagged_mean', float('nan')):.1f} items per replicate with realised FDP {_pct(rci.get('fdp_sign'))} (sign) / "
        f"{_pct(rci.get('fdp_material'))} (material); the default change model estimated it as {_pct(model.get('rci_fdp_estimate_mean'))}, "
        f"selected {model.get('selected_mean', float('nan')):.1f} items at q = {t.get('q')} with realised FDP {_pct(model.get('fdp_sign'))} "
        f"and its 90% intervals covered the exact Δp of {_pct(model.get('coverage90'))} of items."
    )
    blocks: list = [Text(text), Table(truth_table(t), "Real-model truth: every analysis against the exact Δp (means over replicates)", latex=True, label="truth")]
    if run.truth_replicates is not None and len(run.truth_replicates):
        reps = run.truth_replicates
        blocks.append(_fig(lambda: F.truth_scores(reps, float(t.get("q", 0.10))), "Realised false discoveries per replicate and the models' estimates of RCI's.", "truth"))
    return Section("truth", "Real-model truth (exact answer distributions)", blocks)


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
    section_sensitivity,
    section_power,
    section_switch,
    section_truth,
]


def build_sections(run: Run, c: Comparison, *, builders: list[PairBuilder] | None = None) -> list[Section]:
    return [s for b in (builders or SECTION_BUILDERS) if (s := b(run, c)) is not None]
