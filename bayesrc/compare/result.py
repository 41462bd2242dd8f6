"""The gate's result: :class:`CompareResult` (``compare.json`` + ``items.parquet``), its exit code, and the
Markdown summary it writes beside them (``summary.md``, a pull-request comment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.classical.noise import noise_sentence
from bayesrc.classical.rci import CLASS_LABELS, DETERIORATED, IMPROVED, NO_CHANGE
from bayesrc.compare.rules import resolution_sentence
from bayesrc.io import atomic_write_text
from bayesrc.markdown import markdown_table
from bayesrc.results import Result, register

#: exit status of each decision ("undecided", exit 3: the fit failed its convergence gate)
EXIT_CODES = {"pass": 0, "fail": 1, "undecided": 3, "inconclusive": 4}


@register
class CompareResult(Result):
    """A gate decision with the evidence behind it (``compare.json`` + ``items.parquet``; ``summary.md``
    is written beside them).

    Examples
    --------
    >>> res = compare(counts, fail_on="deteriorated", q=0.10)  # doctest: +SKIP
    >>> res.exit_code, res.summary()  # doctest: +SKIP
    >>> res = compare(counts, margin=0.02)  # pass / fail / inconclusive  # doctest: +SKIP
    >>> res.decision, res.exit_code, res.margin["reasons"], res.noise["k_half"]  # doctest: +SKIP
    """

    main_file = "compare.json"
    kind = "compare"
    table_names = ("items",)

    def __init__(self, payload: dict, tables: dict | None = None, posterior: Any = None, *, fit: Any = None) -> None:
        super().__init__(payload, tables, posterior)
        self.fit = fit  # the BayesFit behind the decision (None for a loaded result)

    @classmethod
    def from_decision(
        cls,
        versions: tuple[str, str],
        fail_on: str,
        q: float,
        found: bool,
        status: str,
        bayes: dict,
        classical: dict,
        items: pd.DataFrame,
        fit: Any = None,
        *,
        margin: dict | None = None,
        noise: dict | None = None,
        resolution: dict | None = None,
    ) -> CompareResult:
        """The result from its parts: ``bayes`` (n_improved, n_deteriorated, expected_false, aggregate), ``classical``
        (RCI counts, S_diff, aggregate, rule (a)), ``items`` (flagged items first), the fit, the margin
        evidence (:func:`margin_evidence`, None without a margin), the noise decomposition and what the
        comparison could have detected (:func:`resolution`)."""
        decision = (
            "undecided"
            if status != "ok"
            else margin["decision"]
            if margin is not None
            else ("fail" if found else "pass")
        )
        exit_code = EXIT_CODES.get(decision, 3)
        payload = {
            "versions": list(versions),
            "fail_on": fail_on,
            "q": q,
            "found": found,
            "decision": decision,
            "status": status,
            "exit_code": exit_code,
            "margin": margin,
            "bayes": bayes,
            "classical": classical,
            "noise": noise,
            "resolution": resolution,
        }
        return cls(payload, {"items": items}, fit=fit)

    versions = property(lambda self: tuple(self.payload["versions"]))
    fail_on = property(lambda self: self.payload["fail_on"])
    q = property(lambda self: self.payload["q"])
    found = property(lambda self: self.payload["found"])  # the FDR selection flagged what fail_on names (no margin)
    margin = property(lambda self: self.payload.get("margin"))  # margin evidence (margin_evidence) or None
    # noise decomposition (bayesrc.classical.noise_from_counts) or None
    noise = property(lambda self: self.payload.get("noise"))
    # what the comparison could have detected (resolution) or None
    resolution = property(lambda self: self.payload.get("resolution"))
    status = property(lambda self: self.payload["status"])  # "ok" or "failed" (convergence gate)
    # n_improved, n_deteriorated, expected_false, aggregate {mean, lo90, hi90, p_below_0}
    bayes = property(lambda self: self.payload["bayes"])
    # RCI counts, S_diff, aggregate mean dp with t interval, rule (a)
    classical = property(lambda self: self.payload["classical"])
    items = property(lambda self: self.tables.get("items"))  # flagged items first (bayes class, posterior, RCI class)

    @property
    def decision(self) -> str:
        """The decision: "pass", "fail", "inconclusive" (only with a margin) or "undecided" (the fit failed its
        convergence gate); without a margin "fail" when found."""
        if self.status != "ok":
            return "undecided"
        return self.payload.get("decision") or ("fail" if self.found else "pass")

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail, 4 inconclusive (margin only), 3 fit failed its convergence gate."""
        return EXIT_CODES.get(self.decision, 3)

    def _save_extra(self, stage: Path) -> None:
        atomic_write_text(stage / "summary.md", markdown_summary(self))

    def summary(self) -> pd.DataFrame:
        b, c = self.bayes, self.classical
        rows = [
            ("versions", f"{self.versions[0]} -> {self.versions[1]}"),
            ("fail on", self.fail_on),
            ("q", self.q),
            ("status", self.status),
            ("found", self.found),
            ("Bayes improved", b["n_improved"]),
            ("Bayes deteriorated", b["n_deteriorated"]),
            ("expected false discoveries", b["expected_false"]),
            (
                f"mean dp, 90% CrI (posterior; all {self._n_fitted()} items)",
                _interval_text(b["aggregate"]["mean"], b["aggregate"]["lo90"], b["aggregate"]["hi90"]),
            ),
            ("P(mean dp < 0)", b["aggregate"]["p_below_0"]),
            (
                f"mean dp, 95% CI (classical; the {c['n_analysable']} analysable items)",
                _interval_text(c["aggregate"]["mean_delta"], *c["aggregate"]["ci95"]),
            ),
            ("RCI improved", c["improved"]),
            ("RCI deteriorated", c["deteriorated"]),
            ("RCI analysable", c["n_analysable"]),
        ]
        m = self.margin
        if m is not None:
            rows += [
                ("margin", m["margin"]),
                (
                    "decision",
                    "undecided (the fit failed its convergence gate)"
                    if self.status != "ok"
                    else m["label"]
                    if m["decision"] == "inconclusive"
                    else f"{m['decision']}: {m['label']}",
                ),
                (m["aggregate"]["within_text"], m["aggregate"]["p_within"]),
            ]
            w = m.get("would_decide")
            if w is not None:
                rows += [
                    ("would decide: N at this K", w["n_items"]),
                    ("would decide: K at this N", w["k"]),
                    ("would decide: cheaper", f"more {w['cheaper']}"),
                ]
        nd, r = self.noise, self.resolution
        if nd is not None:
            rows += [
                (f"SE of mean dp (observed; the {nd['n_items']} items with 2+ valid answers in both)", nd["se"]),
                ("sampling share of its variance", nd["share_sampling"]),
                ("N to halve it", nd["n_half"]),
                ("K to halve it", nd["k_half"]),
            ]
        if r is not None:
            rows += [
                (f"detectable mean change ({r['power']:.0%} power)", r["aggregate_mde"]),
                (f"detectable item change (RCI, {r['power']:.0%} power, an item near 50%)", r["item_mde"]),
            ]
        rows.append(("exit code", self.exit_code))
        return pd.DataFrame(rows, columns=["metric", "value"])

    def _n_fitted(self) -> int:
        """The items the change model was fitted to (every matched item; the posterior's mean dp covers them)."""
        return len(self.items) if self.items is not None else self.classical["n_items"]

    def _headline(self) -> str:
        what = self.margin["label"] if self.margin is not None else ("found" if self.found else "nothing found")
        return f"{self.versions[0]} -> {self.versions[1]}, fail on {self.fail_on}: {what} ({self.status})"


def _num(v: float | None) -> float:
    """A number for formatting (a JSON null, i.e. a NaN before saving, as NaN)."""
    return float("nan") if v is None else v


def _interval_text(centre: float | None, lo: float | None, hi: float | None) -> str:
    """``+0.012 (-0.004 to +0.027)``: an estimate with its interval (NaN for nulls)."""
    return f"{_num(centre):+.3f} ({_num(lo):+.3f} to {_num(hi):+.3f})"


def _verdict(res: CompareResult) -> str:
    """The summary's first words: undecided (exit 3), the margin's decision (exit 0 / 1 / 4), found (exit 1) or
    nothing found (exit 0)."""
    if res.status != "ok":
        return "⚠️ **inconclusive**: the posterior fit failed its convergence gate (exit 3); rerun with more draws"
    if res.margin is not None:
        mark = {"pass": "✅", "fail": "❌", "inconclusive": "❔"}[res.decision]
        return f"{mark} **{res.margin['label']}** (exit {res.exit_code}; margin {res.margin['margin']:g})"
    found = {"deteriorated": "deteriorated items found", "changed": "changed items found"}
    if res.found:
        return f"❌ **{found.get(res.fail_on, 'aggregate accuracy dropped')}** (exit 1)"
    none_found = {"deteriorated": "deteriorated items", "changed": "changed items"}
    return f"✅ **no {none_found.get(res.fail_on, 'credible aggregate drop')}** (exit 0)"


def _counts_table(res: CompareResult) -> str:
    """Both methods' counts side by side: the Bayesian one decides, the RCI is shown beside it."""
    b, c = res.bayes, res.classical
    rows = [
        [
            f"Bayesian change model (FDR q = {res.q:g})",
            b["n_improved"],
            b["n_deteriorated"],
            f"expected false discoveries {_num(b['expected_false']):.2f}",
        ],
        [
            f"Classical RCI (z = {c['z']:g}, no FDR control)",
            c["improved"],
            c["deteriorated"],
            f"{c['n_analysable']} of {c['n_items']} items analysable; rule (a): {c['min_valid_rule']}",
        ],
    ]
    return markdown_table(["", CLASS_LABELS[IMPROVED], CLASS_LABELS[DETERIORATED], "notes"], rows, align="lrrl")


def _aggregate_line(res: CompareResult) -> str:
    """The mean accuracy change: posterior with its 90% interval over every fitted item, classical with its 95% CI
    over the analysable ones."""
    c, a = res.classical, res.bayes["aggregate"]
    ci = c["aggregate"]["ci95"]
    return (
        f"Mean accuracy change over all {res._n_fitted()} items (change model): {a['mean']:+.3f} "
        f"(90% credible interval {_num(a['lo90']):+.3f} to {_num(a['hi90']):+.3f}; "
        f"P(drop) = {a['p_below_0']:.3f}); classical, over the {c['n_analysable']} analysable items (rule (a)): "
        f"{_num(c['aggregate']['mean_delta']):+.3f} "
        f"(95% CI {_num(ci[0]):+.3f} to {_num(ci[1]):+.3f})."
    )


def _flagged_table(flagged: pd.DataFrame) -> str:
    """One row per flagged item: class, Δp with its 90% interval, P(direction), the RCI's class."""
    rows = [
        [
            r["item_id"],
            r["domain"],
            r["bayes_class"],
            f"{r['dp_mean']:+.2f} ({r['dp_lo90']:+.2f}, {r['dp_hi90']:+.2f})",
            f"{max(r['p_improve'], r['p_deteriorate']):.3f}",
            r["rci_class"],
        ]
        for _, r in flagged.iterrows()
    ]
    return markdown_table(
        ["item", "domain", "class", "Δp (90% CrI)", "P(direction)", "RCI class"], rows, align="llllrl"
    )


def markdown_summary(res: CompareResult, *, max_items: int = 10) -> str:
    """A short Markdown summary for a pull-request comment.

    Examples
    --------
    >>> print(markdown_summary(compare(counts)))  # a pull-request comment  # doctest: +SKIP
    """
    v1, v2 = res.versions
    gate = f" `--rope {res.margin['margin']:g}`" if res.margin is not None else ""
    lines = [
        f"### bayesrc compare: `{v1}` → `{v2}`",
        "",
        f"{_verdict(res)} — gate `--fail-on {res.fail_on}`{gate}, q = {res.q:g}.",
        "",
        *margin_lines(res),
    ]
    if res.resolution is not None:
        lines += [f"Resolution: {resolution_sentence(res.resolution)}", ""]
    lines += [_counts_table(res), "", _aggregate_line(res)]
    if res.noise is not None:
        lines += ["", f"Noise: {noise_sentence(res.noise)}"]
    flagged = res.items[res.items["bayes_class"] != NO_CHANGE].head(max_items)
    if len(flagged):
        lines += [
            "",
            f"<details><summary>Flagged items (first {len(flagged)})</summary>",
            "",
            _flagged_table(flagged),
            "",
            "</details>",
        ]
    d = res.bayes["diagnostics"]
    fit_line = (
        f"<sub>Fit: max R-hat {_num(d.get('max_rhat')):.3f}, min ESS bulk {_num(d.get('min_ess_bulk')):.0f}, "
        f"{d.get('divergences', 0)} divergences; status {res.status}.</sub>"
    )
    lines += ["", fit_line, ""]
    return "\n".join(lines)


def margin_lines(res: CompareResult) -> list[str]:
    """The margin decision's reasons as Markdown bullets (nothing without a margin, or after a failed fit).

    Examples
    --------
    >>> print("\\n".join(margin_lines(compare(counts, margin=0.02))))  # doctest: +SKIP
    """
    m = res.margin
    if m is None or res.status != "ok":
        return []
    weighed = "the mean change has" if res.fail_on == "aggregate" else "the mean change and every flagged item have"
    within = f"|Δp| ≤ {m['margin']:g}" if m["side"] == "two" else f"Δp ≥ −{m['margin']:g}"
    rule = (
        f"Within the margin means {within}; pass when {weighed} posterior mass ≥ {1 - res.q:.2f} within it, "
        f"fail when {'it' if res.fail_on == 'aggregate' else 'any'} has ≤ {res.q:.2f}, otherwise inconclusive. Why:"
    )
    return [rule, "", *[f"- {r}" for r in m["reasons"]], ""]
