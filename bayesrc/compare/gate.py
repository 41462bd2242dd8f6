"""Gate a model upgrade: what changed between two versions, and does it fail the build?

:func:`compare` fits the paired change model (:func:`bayesrc.bayes.fit`, collapsed,
Bayesian FDR selection at level ``q``; SPEC 3) to a version pair, puts the classical
RCI result (SPEC 2) beside it, and decides what the CI job should do. ``fail_on`` names what
the gate guards against; alone (``margin = None``) it decides as follows:

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

**Resolution first.** A pass must show the change to be within a practical margin on dp
(``margin = m``, the CLI's ``--rope`` / ``--min-delta`` / ``--margin``; by default
:data:`~bayesrc.config.DEFAULT_MARGIN`, two accuracy points), so a comparison too small to see
a change does not pass for finding none. The gate then has three outcomes, from the same
posterior. The quantities it weighs are the mean change over items ``M = mean_i dp_i`` and each
item the FDR selection flags in the direction(s) ``fail_on`` names (none for ``"aggregate"``);
for each, ``P(within)`` is the posterior mass inside the margin on the side ``fail_on`` guards:

=================  ====================  ==========================  ======================
``fail_on``        within                pass (exit 0)               fail (exit 1)
=================  ====================  ==========================  ======================
``deteriorated``   ``x >= -m``           no material deterioration   material deterioration
``changed``        ``|x| <= m``          no material change          material change
``aggregate``      ``M >= -m`` (only M)  non-inferior                inferior
=================  ====================  ==========================  ======================

**pass** when every one of them has ``P(within) >= 1 - q`` (with no flagged item: M's
alone) and the comparison resolves the margin (:func:`resolution`'s detectable mean change is
at most the margin, :func:`require_resolution`: a posterior that pools towards no change does
not pass where the data could not have shown it); **fail** when any has ``P(within) <= q`` (at
least ``1 - q`` of its mass beyond the margin); otherwise **inconclusive** (exit 4): the data
can neither show the change to be within the margin nor beyond it. ``q < 0.5`` keeps pass and
fail apart. An inconclusive result says what would decide it (:func:`what_would_decide`: how
many items at this K, or samples per item at this N, from this data's own split of the variance
into sampling and item-set noise, :func:`bayesrc.classical.noise_from_counts`, and which costs
fewer samples), and every result says what the comparison could have detected
(:func:`resolution`). ``margin = None`` (``--rope none``) leaves the decision to the FDR
selection alone (found / not found above), whatever the data resolve.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import ndtri

from bayesrc.bayes import fit
from bayesrc.classical import rci_detectable_change, reliable_change
from bayesrc.classical.noise import noise_from_counts, noise_sentence
from bayesrc.classical.rci import CLASS_LABELS, DETERIORATED, IMPROVED, NO_CHANGE
from bayesrc.config import DEFAULT_MARGIN
from bayesrc.io import atomic_write_text
from bayesrc.markdown import markdown_table
from bayesrc.results import Result, register

FAIL_ON = ("deteriorated", "changed", "aggregate")

#: the side of the margin each ``fail_on`` guards: ``"lower"`` (``x >= -m``) or ``"two"`` (``|x| <= m``)
MARGIN_SIDE = {"deteriorated": "lower", "changed": "two", "aggregate": "lower"}

#: what a pass and a fail mean under a margin, per ``fail_on``
MARGIN_LABELS = {
    "deteriorated": ("no material deterioration", "material deterioration"),
    "changed": ("no material change", "material change"),
    "aggregate": ("non-inferior", "inferior"),
}

#: the power of :func:`resolution`'s detectable changes
RESOLUTION_POWER = 0.8

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

    def table_names_on_disk(self, folder: Path) -> dict[str, Path]:
        return {"items": folder / "items.parquet"} if (folder / "items.parquet").is_file() else {}

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


def aggregate_change(dp_draws: np.ndarray) -> dict:
    """Posterior of the mean dp over items: mean, 90% interval and ``P(mean dp < 0)``.

    ``dp_draws`` has shape (draws, items).
    """
    m = np.asarray(dp_draws, float).mean(axis=1)
    return {
        "mean": float(m.mean()),
        "lo90": float(np.quantile(m, 0.05)),
        "hi90": float(np.quantile(m, 0.95)),
        "p_below_0": float(np.mean(m < 0)),
    }


def decide(fail_on: str, q: float, n_improved: int, n_deteriorated: int, p_below_0: float) -> bool:
    """Whether what ``fail_on`` names was found (see the module docstring)."""
    if fail_on == "deteriorated":
        return n_deteriorated > 0
    if fail_on == "changed":
        return n_improved + n_deteriorated > 0
    if fail_on == "aggregate":
        return p_below_0 >= 1.0 - q
    raise ValueError(f"fail_on must be one of {FAIL_ON}, got {fail_on!r}")


def p_within_margin(draws: np.ndarray, margin: float, side: str) -> np.ndarray:
    """Posterior mass inside the margin, per column of ``draws`` (shape (draws, quantities)).

    ``side="two"``: ``|x| <= margin``; ``"lower"``: ``x >= -margin`` (not materially worse).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[-0.03, 0.0], [-0.01, 0.05], [0.01, 0.01], [0.03, -0.01]])
    >>> p_within_margin(x, 0.02, "two").tolist(), p_within_margin(x, 0.02, "lower").tolist()
    ([0.5, 0.75], [0.75, 1.0])
    """
    x = np.asarray(draws, float)
    if side == "two":
        return (np.abs(x) <= margin).mean(axis=0)
    if side == "lower":
        return (x >= -margin).mean(axis=0)
    raise ValueError(f"side must be 'two' or 'lower', got {side!r}")


def three_way(p_within: np.ndarray, q: float) -> str:
    """ "pass" if every ``P(within) >= 1 - q``, "fail" if any ``<= q``, else "inconclusive".

    Examples
    --------
    >>> three_way([0.99, 0.95], 0.10), three_way([0.99, 0.04], 0.10), three_way([0.99, 0.5], 0.10)
    ('pass', 'fail', 'inconclusive')
    """
    p = np.asarray(p_within, float)
    if np.any(p <= q):
        return "fail"
    return "pass" if np.all(p >= 1.0 - q) else "inconclusive"


def within_text(side: str, margin: float, what: str = "mean dp") -> str:
    """The event ``P(within)`` measures, in words (``"|mean dp| <= 0.02"``, ``"mean dp >= -0.02"``).

    Examples
    --------
    >>> within_text("two", 0.02), within_text("lower", 0.02, "dp")
    ('P(|mean dp| <= 0.02)', 'P(dp >= -0.02)')
    """
    return f"P(|{what}| <= {margin:g})" if side == "two" else f"P({what} >= -{margin:g})"


def resolution(
    noise: dict, s_diff: float, rci_z: float, q: float, margin: float | None, power: float = RESOLUTION_POWER
) -> dict:
    """What this comparison could have detected, from its own N, K and variance (no fit needed).

    ``aggregate_mde``: the smallest mean change over items that a one-sided test at level ``q`` (the
    gate's: posterior mass ``1 - q`` decides) detects with probability ``power``,
    ``(z_{1-q} + z_power) SE`` with ``SE`` the observed SE of the accuracy difference
    (:func:`bayesrc.classical.noise_from_counts`: items with two or more valid answers in both
    versions). The same figure is the smallest margin a pair with no change passes with that
    probability, so ``resolves_margin`` says whether the margin is at least that (None without one).
    ``item_mde``: the smallest change in one item's accuracy the RCI (``rci_z``, ``s_diff``) flags with
    probability ``power`` at the median K, for an item near 50% (:func:`bayesrc.classical.rci_detectable_change`).

    Examples
    --------
    >>> r = resolution({"se": 0.01, "n_items": 100, "k": 10.0}, 0.2, 1.96, 0.1, 0.02)
    >>> round(r["aggregate_mde"], 4), r["resolves_margin"], round(r["item_mde"], 2)
    (0.0212, False, 0.51)
    """
    z = float(ndtri(1.0 - q) + ndtri(power))
    mde = z * noise["se"]
    k = int(round(noise["k"]))
    return {
        "power": power,
        "q": q,
        "n_items": noise["n_items"],
        "k": noise["k"],
        "se": noise["se"],
        "aggregate_mde": mde,
        "item_mde": rci_detectable_change(k, s_diff, rci_z, power),
        "rci_z": rci_z,
        "s_diff": s_diff,
        "margin": margin,
        "resolves_margin": None if margin is None else bool(margin >= mde),
    }


def _distance_to_decision(mean: float, margin: float, side: str) -> float:
    """How far the posterior mean lies from the margin's edge that would decide it (either way)."""
    return abs(margin - abs(mean)) if side == "two" else abs(mean + margin)


def what_would_decide(
    mean: float,
    sd: float,
    margin: float,
    side: str,
    q: float,
    noise: dict,
    *,
    mde: float | None = None,
    power: float = RESOLUTION_POWER,
) -> dict | None:
    """How many items at this K, or samples per item at this N, would decide an undecided mean change.

    Two requirements, the larger of which sets a factor ``f`` on the variance. The posterior's: if the
    mean change is what the posterior ``N(mean, sd)`` says, a posterior of SD ``s`` decides it (mass
    ``>= 1 - q`` on one side of the margin's edge that lies nearer, ``d`` away) with probability
    ``power`` once ``s = d / (z_{1-q} + z_power)``, so ``f = (sd / s)^2``. The resolution's (``mde``,
    :func:`resolution`'s detectable mean change, when given): a pass needs ``mde <= margin``, so
    ``f = (mde / margin)^2``. The observed variance split (``noise``: sampling within items ``v``,
    item set ``b``, :func:`bayesrc.classical.noise_decomposition`) says what buys it, taking the
    posterior's variance to scale as the observed one: ``N' = f N`` items at this K, or
    ``K' = K v / ((v + b) / f - b)`` samples per item at this N (none when the item-set part alone
    exceeds the target). ``extra_*``: the samples per version each costs; ``cheaper`` the one with
    fewer (a tie: more samples, which needs no new items). None when the mean sits on the edge
    (no amount of data would decide it, were it what the posterior says).

    Examples
    --------
    >>> nd = {"n_items": 100, "k": 10.0, "var_sampling": 4e-4, "var_items": 1e-4}
    >>> w = what_would_decide(-0.01, 0.0113, 0.02, "lower", 0.1, nd)
    >>> w["n_items"], w["k"], w["extra_samples_n"], w["extra_samples_k"], w["cheaper"]
    (576, None, 4760, None, 'items')
    >>> # the posterior decides; the resolution does not
    >>> what_would_decide(0.0, 0.001, 0.02, "lower", 0.1, nd, mde=0.03)["n_items"]
    225
    """
    d = _distance_to_decision(mean, margin, side)
    z = float(ndtri(1.0 - q) + ndtri(power))
    if d <= 0 or sd <= 0:
        return None
    f = max((sd * z / d) ** 2, (mde / margin) ** 2 if mde is not None else 0.0, 1.0)
    n, k = noise["n_items"], noise["k"]
    v, b = noise["var_sampling"], max(noise["var_items"], 0.0)
    n_new = int(np.ceil(f * n - 1e-9))
    room = (v + b) / f - b
    k_new = int(np.ceil(k * v / room - 1e-9)) if room > 0 and v > 0 else None
    extra_n = (n_new - n) * int(round(k))
    extra_k = None if k_new is None else n * (k_new - int(round(k)))
    cheaper = "samples" if extra_k is not None and extra_k <= extra_n else "items"
    return {
        "power": power,
        "sd_needed": d / z,
        "variance_factor": f,
        "n_items": n_new,
        "k": k_new,
        "extra_samples_n": extra_n,
        "extra_samples_k": extra_k,
        "cheaper": cheaper,
    }


def require_resolution(ev: dict, reso: dict) -> dict:
    """A pass only where the comparison resolves the margin: ``margin_evidence``'s pass becomes inconclusive when
    :func:`resolution`'s detectable mean change exceeds the margin (a fail, shown, stays one).

    Examples
    --------
    >>> ev = {"decision": "pass", "label": "no material deterioration", "margin": 0.02,
    ...       "reasons": ["P(mean dp >= -0.02) = 0.990"]}
    >>> out = require_resolution(ev, {"aggregate_mde": 0.048, "power": 0.8, "resolves_margin": False})
    >>> out["decision"], out["label"]
    ('inconclusive', 'inconclusive')
    >>> print(*out["reasons"][-1].split(": "), sep=":\\n")
    this comparison resolves a mean change of 0.048 or more (80% power), more than the margin 0.02:
    it cannot show a change within it
    """
    if ev["decision"] != "pass" or reso["resolves_margin"] is not False:
        return ev
    why = (
        f"this comparison resolves a mean change of {reso['aggregate_mde']:.3f} or more ({reso['power']:.0%} power), "
        f"more than the margin {ev['margin']:g}: it cannot show a change within it"
    )
    return ev | {"decision": "inconclusive", "label": "inconclusive", "reasons": [*ev["reasons"], why]}


def margin_evidence(
    dp_draws: np.ndarray, classes: np.ndarray, item_ids: np.ndarray, *, fail_on: str, margin: float, q: float
) -> dict:
    """The three-way decision under a margin (module docstring) and the evidence behind it.

    Parameters
    ----------
    dp_draws : posterior draws of every item's dp, shape (draws, items).
    classes : the FDR selection's class per item ("improved", "deteriorated", "no_change").
    item_ids : the items' ids (same order).
    fail_on, margin, q : the gate's settings.

    Returns
    -------
    dict
        ``margin``, ``side``, ``decision`` ("pass" / "fail" / "inconclusive"), ``label`` (what it
        means for ``fail_on``), ``aggregate`` (``p_within`` of M on the guarded side, ``p_abs_within``,
        ``p_below``, ``p_above`` the margin, ``within_text``), ``items`` (the flagged items
        weighed, least within first: ``item_id``, ``bayes_class``, ``p_within``) and ``reasons``
        (sentences for the summary).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> dp = rng.normal(0.0, 0.002, size=(1000, 50))   # every item within 0.02 of no change
    >>> ev = margin_evidence(dp, np.array(["no_change"] * 50), np.arange(50).astype(str), fail_on="changed",
    ...                      margin=0.02, q=0.1)
    >>> ev["decision"], ev["label"], ev["aggregate"]["p_within"]
    ('pass', 'no material change', 1.0)
    """
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}, got {fail_on!r}")
    side = MARGIN_SIDE[fail_on]
    x = np.asarray(dp_draws, float)
    m = x.mean(axis=1)
    classes = np.asarray(classes, dtype=object)
    weighed = {
        "deteriorated": classes == DETERIORATED,
        "changed": classes != NO_CHANGE,
        "aggregate": np.zeros(classes.size, bool),
    }[fail_on]
    p_items = p_within_margin(x[:, weighed], margin, side)
    agg = {
        "mean": float(m.mean()),
        "sd": float(m.std(ddof=1)),
        "p_within": float(p_within_margin(m[:, None], margin, side)[0]),
        "p_abs_within": float(np.mean(np.abs(m) <= margin)),
        "p_below": float(np.mean(m < -margin)),
        "p_above": float(np.mean(m > margin)),
        "within_text": within_text(side, margin),
    }
    order = np.argsort(p_items, kind="stable")
    items = [
        {"item_id": str(i), "bayes_class": str(c), "p_within": float(p)}
        for i, c, p in zip(np.asarray(item_ids)[weighed][order], classes[weighed][order], p_items[order])
    ]
    decision = three_way(np.concatenate([[agg["p_within"]], p_items]), q)
    label = {"pass": MARGIN_LABELS[fail_on][0], "fail": MARGIN_LABELS[fail_on][1], "inconclusive": "inconclusive"}[
        decision
    ]
    ev = {"margin": float(margin), "side": side, "decision": decision, "label": label, "aggregate": agg, "items": items}
    return ev | {"reasons": margin_reasons(ev, fail_on, q)}


def margin_reasons(ev: dict, fail_on: str, q: float) -> list[str]:
    """Why the margin decision came out as it did, one sentence per quantity that decided it.

    Examples
    --------
    >>> ev = {"margin": 0.02, "side": "lower", "decision": "inconclusive", "items": [],
    ...       "aggregate": {"p_within": 0.87, "within_text": "P(mean dp >= -0.02)"}}
    >>> print(*margin_reasons(ev, "deteriorated", 0.1), sep="\\n")
    P(mean dp >= -0.02) = 0.870: neither >= 0.90 (within the margin) nor <= 0.10 (beyond it)
    no item flagged deteriorated
    """
    hi, lo = 1.0 - q, q
    a, items = ev["aggregate"], ev["items"]
    item_event = within_text(ev["side"], ev["margin"], "dp")

    def verdict(p: float) -> str:
        if p >= hi:
            return f">= {hi:.2f} (within the margin)"
        if p <= lo:
            return f"<= {lo:.2f} (beyond the margin)"
        return f"neither >= {hi:.2f} (within the margin) nor <= {lo:.2f} (beyond it)"

    out = [f"{a['within_text']} = {a['p_within']:.3f}: {verdict(a['p_within'])}"]
    if fail_on == "aggregate":
        return out + ["items are not weighed (--fail-on aggregate: non-inferiority of the mean)"]
    kind = "deteriorated" if fail_on == "deteriorated" else "changed (either direction)"
    if not items:
        return out + [f"no item flagged {kind}"]
    worst = items[0]
    out.append(
        f"{len(items)} item(s) flagged {kind}; the least within: {worst['item_id']} ({worst['bayes_class']}), "
        f"{item_event} = {worst['p_within']:.3f}: {verdict(worst['p_within'])}"
    )
    n_beyond = sum(it["p_within"] <= lo for it in items)
    if n_beyond > 1:
        out.append(f"{n_beyond} flagged item(s) beyond the margin")
    return out


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
    margin: float | None = DEFAULT_MARGIN,
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
    margin : the practical margin on dp a pass must resolve (default :data:`~bayesrc.config.DEFAULT_MARGIN`, 0.02):
        the three-way decision of the module docstring (pass / fail / inconclusive, exit 0 / 1 / 4);
        None: the FDR selection alone decides (found / not found), whatever the data could resolve.

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
    if margin is not None and not (0 < margin < 1 and q < 0.5):
        raise ValueError(f"a margin needs 0 < margin < 1 and q < 0.5, got margin {margin}, q {q}")
    # one classical run: the fit's cross-check and the summary's
    rci = reliable_change(counts, n_splits=200, n_permutations=200)
    res = fit(
        counts,
        model="change",
        collapsed=True,
        config=config,
        rule="fdr",
        fdr=q,
        max_rhat=max_rhat,
        min_ess=min_ess,
        max_divergences=max_divergences,
        escalate=escalate,
        rci=rci,
    )
    sel = res.selection
    dp = res.item_draws()["dp"].values
    agg = aggregate_change(dp.reshape(-1, dp.shape[-1]))
    bayes = {
        "n_improved": int(sel["n_improved"]),
        "n_deteriorated": int(sel["n_deteriorated"]),
        "expected_false": float(sel["expected_false"]),
        "aggregate": agg,
        "diagnostics": res.diagnostics.to_dict(),
        "model": "change (collapsed)",
        "selection": f"Bayesian FDR q = {q:g}",
    }

    ca = rci.counts["analysable"]
    classical = {
        "improved": ca["improved"],
        "deteriorated": ca["deteriorated"],
        "n_analysable": ca["n"],
        "n_items": rci.exclusions["n_before"],
        "s_diff": rci.s_diff,
        "z": rci.params["z"],
        "min_valid_rule": rci.exclusions["min_valid_rule"],
        "sd_basis": rci.params["sd_basis"],
        "aggregate": rci.aggregate,
    }
    found = decide(fail_on, q, bayes["n_improved"], bayes["n_deteriorated"], agg["p_below_0"])
    items = res.items.copy()
    rank = items["bayes_class"].map({DETERIORATED: 0, IMPROVED: 1}).fillna(2)
    items = items.assign(_r=rank, _p=-np.maximum(items["p_improve"], items["p_deteriorate"])).sort_values(
        ["_r", "_p"], kind="stable"
    )
    items = items.drop(columns=["_r", "_p"]).reset_index(drop=True)
    versions = tuple(map(str, res.params["versions"]))
    noise = noise_from_counts(counts, versions)
    reso = resolution(noise, rci.s_diff, rci.params["z"], q, margin)
    ev = None
    if margin is not None:
        ev = margin_evidence(
            dp.reshape(-1, dp.shape[-1]),
            res.items["bayes_class"].to_numpy(dtype=object),
            res.items["item_id"].to_numpy(),
            fail_on=fail_on,
            margin=margin,
            q=q,
        )
        ev = require_resolution(ev, reso)
        if ev["decision"] == "inconclusive":
            w = what_would_decide(
                ev["aggregate"]["mean"], ev["aggregate"]["sd"], margin, ev["side"], q, noise, mde=reso["aggregate_mde"]
            )
            ev = ev | {"would_decide": w, "reasons": [*ev["reasons"], decide_sentence(w, noise["k"], noise["n_items"])]}
    return CompareResult.from_decision(
        versions,
        fail_on,
        q,
        bool(found),
        res.status,
        bayes,
        classical,
        items,
        res,
        margin=ev,
        noise=noise,
        resolution=reso,
    )


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


def resolution_sentence(r: dict) -> str:
    """What the comparison could have detected (:func:`resolution`), in one sentence.

    Examples
    --------
    >>> import textwrap
    >>> s = resolution_sentence(resolution({"se": 0.01, "n_items": 100, "k": 10.0}, 0.2, 1.96, 0.1, 0.02))
    >>> print(textwrap.fill(s, 100))
    With 80% power this comparison detects a mean change of 0.021 or more (the 100 items with 2+ valid
    answers in both versions, K = 10, SE 0.0100), and the RCI flags one item whose accuracy moves by
    0.51 or more (an item near 50%); the margin 0.02 is below what it resolves.
    """
    item = (
        f"the RCI flags one item whose accuracy moves by {r['item_mde']:.2f} or more (an item near 50%)"
        if r["item_mde"] is not None
        else "the RCI flags no single item's change with that power at this K"
    )
    head = (
        f"With {r['power']:.0%} power this comparison detects a mean change of {r['aggregate_mde']:.3f} or more "
        f"(the {r['n_items']} items with 2+ valid answers in both versions, K = {r['k']:g}, SE {r['se']:.4f}), "
        f"and {item}"
    )
    if r["margin"] is None:
        return head + "; no margin: the item selection alone decides, whatever the data resolve."
    return head + f"; the margin {r['margin']:g} is {'within' if r['resolves_margin'] else 'below'} what it resolves."


def decide_sentence(w: dict | None, k: float, n: int) -> str:
    """What would decide an inconclusive mean change (:func:`what_would_decide`), in one sentence.

    Examples
    --------
    >>> import textwrap
    >>> w = {"power": 0.8, "n_items": 575, "k": 87, "extra_samples_n": 4750, "extra_samples_k": 7700,
    ...      "cheaper": "items"}
    >>> print(textwrap.fill(decide_sentence(w, 10.0, 100), 100))
    would decide the mean with 80% power, if it is what the posterior says: ~575 items at K = 10 (+4750
    samples per version) or K = 87 samples per item on these 100 items (+7700 per version); more items
    is cheaper
    """
    if w is None:
        return "the mean sits on the margin's edge: no amount of data would decide it, were it what the posterior says"
    by_k = (
        f"K = {w['k']} samples per item on these {n} items (+{w['extra_samples_k']} per version)"
        if w["k"] is not None
        else f"no K on these {n} items (their item-set noise alone is too wide)"
    )
    return (
        f"would decide the mean with {w['power']:.0%} power, if it is what the posterior says: "
        f"~{w['n_items']} items at K = {k:g} "
        f"(+{w['extra_samples_n']} samples per version) or {by_k}; more {w['cheaper']} is cheaper"
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
