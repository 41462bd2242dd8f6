"""The gate's decision rules: what ``fail_on`` finds, the three-way decision under a margin, and what a
comparison resolves and would need to decide (the rules :mod:`bayesrc.compare.gate` describes).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from bayesrc.classical import rci_detectable_change
from bayesrc.classical.rci import DETERIORATED, NO_CHANGE

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
    """Whether what ``fail_on`` names was found (see :mod:`bayesrc.compare.gate`)."""
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
    """The three-way decision under a margin (:mod:`bayesrc.compare.gate`) and the evidence behind it.

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
