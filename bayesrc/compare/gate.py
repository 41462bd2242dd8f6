"""Gate a model upgrade: what changed between two versions, and does it fail the build?

:func:`compare` fits the paired change model (:func:`bayesrc.bayes.fit`, collapsed,
Bayesian FDR selection at level ``q``; SPEC 3; without the predictive checks and PSIS-LOO, which
``bayesrc fit`` adds) to a version pair, puts the classical
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

import numpy as np
import xarray as xr

from bayesrc.bayes import GateConfig, SelectionConfig, fit
from bayesrc.classical import reliable_change
from bayesrc.classical.noise import noise_from_counts
from bayesrc.classical.rci import DETERIORATED, IMPROVED
from bayesrc.compare.result import CompareResult
from bayesrc.compare.rules import (
    FAIL_ON,
    aggregate_change,
    decide,
    decide_sentence,
    margin_evidence,
    require_resolution,
    resolution,
    what_would_decide,
)
from bayesrc.config import DEFAULT_MARGIN


def compare(
    counts: xr.Dataset,
    *,
    fail_on: str = "deteriorated",
    q: float = 0.10,
    config=None,
    gate: GateConfig | None = None,
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
    gate : the convergence gate and whether a failed gate samples again with longer warm-up
        (:class:`bayesrc.bayes.GateConfig`, default its defaults; :func:`bayesrc.bayes.fit`).
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
        gate=gate,
        selection=SelectionConfig(rule="fdr", fdr=q),
        rci=rci,
        checks=False,  # the decision reads the items' draws, never the predictive checks or PSIS-LOO
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
