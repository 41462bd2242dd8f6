"""Gate a model upgrade: what changed between two versions, and does it fail the build?

:func:`compare` fits the paired change model (:func:`bayesrc.bayes.fit`, collapsed,
Bayesian FDR selection at level ``q``; SPEC 3) to a version pair, puts the classical
RCI result (SPEC 2) beside it, and decides what the CI job should do:

``fail_on = "deteriorated"`` (default)
    fail if the FDR selection flags at least one item as deteriorated;
``"changed"``
    fail if it flags any item, improved or deteriorated;
``"aggregate"``
    fail if the mean accuracy over items has dropped credibly:
    ``P(mean_i dp_i < 0 | data) >= 1 - q`` under the same posterior.

The decision is the Bayesian one; the RCI counts are reported beside it (they carry
no FDR control, so they never decide). A fit that fails the convergence gate decides
nothing: the CLI exits 3 (outputs marked ``status = failed``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes import fit
from bayesrc.classical import reliable_change
from bayesrc.classical.rci import CLASS_LABELS, DETERIORATED, IMPROVED, NO_CHANGE
from bayesrc.io import atomic_write_text
from bayesrc.markdown import markdown_table
from bayesrc.results import Result, register

FAIL_ON = ("deteriorated", "changed", "aggregate")


@register
class CompareResult(Result):
    """A gate decision with the evidence behind it (``compare.json`` + ``items.parquet``; ``summary.md``
    is written beside them).

    Examples
    --------
    >>> res = compare(counts, fail_on="deteriorated", q=0.10)  # doctest: +SKIP
    >>> res.exit_code, res.summary()  # doctest: +SKIP
    """

    main_file = "compare.json"
    kind = "compare"

    def __init__(self, payload: dict, tables: dict | None = None, posterior: Any = None, *, fit: Any = None) -> None:
        super().__init__(payload, tables, posterior)
        self.fit = fit  # the BayesFit behind the decision (None for a loaded result)

    @classmethod
    def from_decision(cls, versions: tuple[str, str], fail_on: str, q: float, found: bool, status: str, bayes: dict, classical: dict, items: pd.DataFrame, fit: Any = None) -> CompareResult:
        """The result from its parts: ``bayes`` (n_improved, n_deteriorated, expected_false, aggregate), ``classical``
        (RCI counts, S_diff, aggregate, rule (a)), ``items`` (flagged items first) and the fit."""
        exit_code = 3 if status != "ok" else (1 if found else 0)
        payload = {"versions": list(versions), "fail_on": fail_on, "q": q, "found": found, "status": status, "exit_code": exit_code, "bayes": bayes, "classical": classical}
        return cls(payload, {"items": items}, fit=fit)

    versions = property(lambda self: tuple(self.payload["versions"]))
    fail_on = property(lambda self: self.payload["fail_on"])
    q = property(lambda self: self.payload["q"])
    found = property(lambda self: self.payload["found"])
    status = property(lambda self: self.payload["status"])  # "ok" or "failed" (convergence gate)
    bayes = property(lambda self: self.payload["bayes"])  # n_improved, n_deteriorated, expected_false, aggregate {mean, lo90, hi90, p_below_0}
    classical = property(lambda self: self.payload["classical"])  # RCI counts, S_diff, aggregate mean dp with t interval, rule (a)
    items = property(lambda self: self.tables.get("items"))  # flagged items first (bayes class, posterior, RCI class)

    @property
    def exit_code(self) -> int:
        """0 nothing found, 1 found, 3 fit failed its convergence gate."""
        if self.status != "ok":
            return 3
        return 1 if self.found else 0

    def table_names_on_disk(self, folder: Path) -> dict[str, Path]:
        return {"items": folder / "items.parquet"} if (folder / "items.parquet").is_file() else {}

    def _save_extra(self, stage: Path) -> None:
        atomic_write_text(stage / "summary.md", markdown_summary(self))

    def summary(self) -> pd.DataFrame:
        b, c = self.bayes, self.classical
        rows = [
            ("versions", f"{self.versions[0]} -> {self.versions[1]}"), ("fail on", self.fail_on), ("q", self.q),
            ("status", self.status), ("found", self.found),
            ("Bayes improved", b["n_improved"]), ("Bayes deteriorated", b["n_deteriorated"]),
            ("expected false discoveries", b["expected_false"]), ("mean dp (posterior)", b["aggregate"]["mean"]),
            ("P(mean dp < 0)", b["aggregate"]["p_below_0"]),
            ("RCI improved", c["improved"]), ("RCI deteriorated", c["deteriorated"]), ("RCI analysable", c["n_analysable"]),
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=["metric", "value"])

    def _headline(self) -> str:
        return f"{self.versions[0]} -> {self.versions[1]}, fail on {self.fail_on}: {'found' if self.found else 'nothing found'} ({self.status})"


def _num(v: float | None) -> float:
    """A number for formatting (a JSON null, i.e. a NaN before saving, as NaN)."""
    return float("nan") if v is None else v


def aggregate_change(dp_draws: np.ndarray) -> dict:
    """Posterior of the mean dp over items: mean, 90% interval and ``P(mean dp < 0)``.

    ``dp_draws`` has shape (draws, items).
    """
    m = np.asarray(dp_draws, float).mean(axis=1)
    return {"mean": float(m.mean()), "lo90": float(np.quantile(m, 0.05)), "hi90": float(np.quantile(m, 0.95)), "p_below_0": float(np.mean(m < 0))}


def decide(fail_on: str, q: float, n_improved: int, n_deteriorated: int, p_below_0: float) -> bool:
    """Whether what ``fail_on`` names was found (see the module docstring)."""
    if fail_on == "deteriorated":
        return n_deteriorated > 0
    if fail_on == "changed":
        return n_improved + n_deteriorated > 0
    if fail_on == "aggregate":
        return p_below_0 >= 1.0 - q
    raise ValueError(f"fail_on must be one of {FAIL_ON}, got {fail_on!r}")


def compare(
    counts: xr.Dataset,
    *,
    fail_on: str = "deteriorated",
    q: float = 0.10,
    config=None,
    max_rhat: float = 1.01,
    min_ess: float = 400.0,
    max_divergences: int = 0,
    escalate: bool = True,
) -> CompareResult:
    """Fit the change model to a version pair and decide the gate.

    Parameters
    ----------
    counts : item counts of the two versions (:func:`bayesrc.data.item_counts`); the first
        version is the baseline.
    fail_on : "deteriorated", "changed" or "aggregate" (module docstring).
    q : Bayesian FDR level of the item selection, and the tail level of the aggregate rule.
    config : :class:`bayesrc.bayes.SamplerConfig` (default: its defaults).
    escalate : after a failed gate, sample again with longer warm-up (:func:`bayesrc.bayes.fit`).

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(120, 10, pi_change=0.0, seed=1)
    >>> res = compare(item_counts(sim.trials_v1, sim.trials_v2))  # doctest: +SKIP
    >>> res.exit_code  # doctest: +SKIP
    0
    """
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}, got {fail_on!r}")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    res = fit(counts, model="change", collapsed=True, config=config, rule="fdr", fdr=q,
              max_rhat=max_rhat, min_ess=min_ess, max_divergences=max_divergences, escalate=escalate,
              rci_kwargs={"n_splits": 200, "n_permutations": 200})  # fmt: skip
    sel = res.selection
    dp = res.posterior["posterior"]["dp"].values
    agg = aggregate_change(dp.reshape(-1, dp.shape[-1]))
    bayes = {"n_improved": int(sel["n_improved"]), "n_deteriorated": int(sel["n_deteriorated"]),
             "expected_false": float(sel["expected_false"]), "aggregate": agg, "diagnostics": res.diagnostics.to_dict(),
             "model": "change (collapsed)", "selection": f"Bayesian FDR q = {q:g}"}  # fmt: skip

    rci = reliable_change(counts, n_splits=200, n_permutations=200)
    ca = rci.counts["analysable"]
    classical = {
        "improved": ca["improved"], "deteriorated": ca["deteriorated"], "n_analysable": ca["n"],
        "n_items": rci.exclusions["n_before"], "s_diff": rci.s_diff, "z": rci.params["z"],
        "min_valid_rule": rci.exclusions["min_valid_rule"], "sd_basis": rci.params["sd_basis"], "aggregate": rci.aggregate,
    }  # fmt: skip
    found = decide(fail_on, q, bayes["n_improved"], bayes["n_deteriorated"], agg["p_below_0"])
    items = res.items.copy()
    rank = items["bayes_class"].map({DETERIORATED: 0, IMPROVED: 1}).fillna(2)
    items = items.assign(_r=rank, _p=-np.maximum(items["p_improve"], items["p_deteriorate"])).sort_values(["_r", "_p"], kind="stable")
    items = items.drop(columns=["_r", "_p"]).reset_index(drop=True)
    versions = tuple(map(str, res.params["versions"]))
    return CompareResult.from_decision(versions, fail_on, q, bool(found), res.status, bayes, classical, items, res)


def _verdict(res: CompareResult) -> str:
    """The summary's first words: inconclusive (exit 3), found (exit 1) or nothing found (exit 0)."""
    if res.status != "ok":
        return "⚠️ **inconclusive**: the posterior fit failed its convergence gate (exit 3); rerun with more draws"
    if res.found:
        return f"❌ **{ {'deteriorated': 'deteriorated items found', 'changed': 'changed items found', 'aggregate': 'aggregate accuracy dropped'}[res.fail_on] }** (exit 1)"
    return f"✅ **no {'deteriorated items' if res.fail_on == 'deteriorated' else 'changed items' if res.fail_on == 'changed' else 'credible aggregate drop'}** (exit 0)"


def _counts_table(res: CompareResult) -> str:
    """Both methods' counts side by side: the Bayesian one decides, the RCI is shown beside it."""
    b, c = res.bayes, res.classical
    rows = [
        [f"Bayesian change model (FDR q = {res.q:g})", b["n_improved"], b["n_deteriorated"], f"expected false discoveries {_num(b['expected_false']):.2f}"],
        [f"Classical RCI (z = {c['z']:g}, no FDR control)", c["improved"], c["deteriorated"], f"{c['n_analysable']} of {c['n_items']} items analysable; rule (a): {c['min_valid_rule']}"],
    ]
    return markdown_table(["", CLASS_LABELS[IMPROVED], CLASS_LABELS[DETERIORATED], "notes"], rows, align="lrrl")


def _aggregate_line(res: CompareResult) -> str:
    """The mean accuracy change: posterior with its 90% interval, classical with its 95% CI."""
    c, a = res.classical, res.bayes["aggregate"]
    return (
        f"Mean accuracy change over {c['n_items']} items: {a['mean']:+.3f} (90% credible interval {a['lo90']:+.3f} to {a['hi90']:+.3f}; "
        f"P(drop) = {a['p_below_0']:.3f}); classical {c['aggregate']['mean_delta']:+.3f} "
        f"(95% CI {c['aggregate']['ci95'][0]:+.3f} to {c['aggregate']['ci95'][1]:+.3f})."
    )


def _flagged_table(flagged: pd.DataFrame) -> str:
    """One row per flagged item: class, Δp with its 90% interval, P(direction), the RCI's class."""
    rows = [
        [r["item_id"], r["domain"], r["bayes_class"], f"{r['dp_mean']:+.2f} ({r['dp_lo90']:+.2f}, {r['dp_hi90']:+.2f})", f"{max(r['p_improve'], r['p_deteriorate']):.3f}", r["rci_class"]]
        for _, r in flagged.iterrows()
    ]
    return markdown_table(["item", "domain", "class", "Δp (90% CrI)", "P(direction)", "RCI class"], rows, align="llllrl")


def markdown_summary(res: CompareResult, *, max_items: int = 10) -> str:
    """A short Markdown summary for a pull-request comment.

    Examples
    --------
    >>> print(markdown_summary(compare(counts)))  # a pull-request comment  # doctest: +SKIP
    """
    v1, v2 = res.versions
    lines = [f"### bayesrc compare: `{v1}` → `{v2}`", "", f"{_verdict(res)} — gate `--fail-on {res.fail_on}`, q = {res.q:g}.", "", _counts_table(res), "", _aggregate_line(res)]
    flagged = res.items[res.items["bayes_class"] != NO_CHANGE].head(max_items)
    if len(flagged):
        lines += ["", f"<details><summary>Flagged items (first {len(flagged)})</summary>", "", _flagged_table(flagged), "", "</details>"]
    d = res.bayes["diagnostics"]
    fit_line = f"<sub>Fit: max R-hat {_num(d.get('max_rhat')):.3f}, min ESS bulk {_num(d.get('min_ess_bulk')):.0f}, {d.get('divergences', 0)} divergences; status {res.status}.</sub>"
    lines += ["", fit_line, ""]
    return "\n".join(lines)
