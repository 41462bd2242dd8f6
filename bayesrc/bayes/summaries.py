"""Per-item posterior summaries, selection (Bayesian FDR / threshold) and the RCI cross-check.

Item probabilities (columns of ``items.parquet``):

* change model: ``p_changed = E[r_i]``, ``p_improve = P(changed_i and delta_i > 0)``,
  ``p_deteriorate = P(changed_i and delta_i < 0)`` - the probability of a *real* change in
  that direction (an unchanged item has dp = 0 exactly), so ``p_improve + p_deteriorate =
  p_changed``;
* beta-binomial model (no change component): ``p_improve = P(dp > rope)``,
  ``p_deteriorate = P(dp < -rope)``, ``p_changed = P(|dp| > rope)``;
* both: ``p_improve_material = P(dp >= delta_min)``, ``p_deteriorate_material = P(dp <= -delta_min)``
  from the item draws (a *material* change: SPEC 7's ``delta_min``, default 0.05).

Selection: an item's candidate direction is the more probable one, its posterior error
``e_i = 1 - P(direction)``. **Bayesian FDR** (Mueller et al. 2004; Storey's q-value
logic): sort by ``e_i`` and flag the largest prefix whose mean error is <= q; the expected
number of false discoveries is the sum of the flagged ``e_i``. **Threshold**: flag where
``P(direction) >= threshold`` (0.975).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import logsumexp

from bayesrc.bayes.diagnostics import chain_draw_last, convergence, ess_bulk, mcse_mean
from bayesrc.bayes.draws import item_block, item_slices
from bayesrc.classical.calibration import NO_CHANGE_ALPHA, not_rejected_phrase
from bayesrc.classical.rci import CLASSES, DETERIORATED, EXCLUDED, IMPROVED, NO_CHANGE
from bayesrc.config import DELTA_MIN

ITEM_COLUMNS = (
    "item_id",
    "domain",
    "p_v1_mean",
    "p_v2_mean",
    "dp_mean",
    "dp_lo90",
    "dp_hi90",
    "dp_ess_bulk",
    "dp_mcse",
    "p_changed",
    "p_improve",
    "p_deteriorate",
    "p_improve_material",
    "p_deteriorate_material",
    "bayes_class",
    "rci_class",
    "elpd_loo",
    "pareto_k",
    "loo_pit",
)
# items summarised at a time: the temporaries (sorted copies, ranks, indicators) stay ~25 MB at 2,000 draws
ITEM_BLOCK = 500


def draws_summary(da, *, prob: float = 0.9, ci_kind: str = "eti") -> pd.DataFrame:
    """Tidy per-element summary of posterior draws ``da`` (dims ``chain``, ``draw``, ...): intervals
    from arviz_stats, R-hat, ESS and MCSE from :func:`~bayesrc.bayes.diagnostics.convergence`.

    One row per element of the non-sample dims (their labels as columns): ``mean``, ``sd``,
    ``ci_low`` / ``ci_high`` (equal-tailed, ``ci_kind="eti"``, or highest-density, ``"hdi"``,
    interval of probability ``prob``), ``ess_bulk``, ``ess_tail``, ``mcse_mean``, ``r_hat``
    (rank-normalised split R-hat; NaN with one chain).

    Examples
    --------
    >>> draws_summary(item_block(dt.posterior, slice(0, 10))["dp"], prob=0.9)   # doctest: +SKIP
    """
    import arviz_stats as azs  # deferred: arviz_stats loads in ~3 s (bayes extra)

    if ci_kind not in ("eti", "hdi"):
        raise ValueError(f"ci_kind must be 'eti' or 'hdi', got {ci_kind!r}")
    da = xr.DataArray(da) if not isinstance(da, xr.DataArray) else da
    sample = ["chain", "draw"]
    ci = (azs.eti if ci_kind == "eti" else azs.hdi)(da, prob=prob, dim=sample)
    bound = [d for d in ci.dims if d not in da.dims][0]
    values = chain_draw_last(da)
    conv = convergence(values)
    per_entry = lambda a: da.mean(sample).copy(data=a)  # noqa: E731
    stats = {
        "mean": da.mean(sample),
        "sd": da.std(sample),
        "ci_low": ci.isel({bound: 0}, drop=True),
        "ci_high": ci.isel({bound: 1}, drop=True),
        "ess_bulk": per_entry(conv["ess_bulk"]),
        "ess_tail": per_entry(conv["ess_tail"]),
        "mcse_mean": per_entry(mcse_mean(values)),
        "r_hat": per_entry(conv["r_hat"]),
    }
    ds = xr.Dataset({k: v.reset_coords(drop=True) for k, v in stats.items()})
    if not [d for d in da.dims if d not in sample]:  # a scalar parameter: one row
        return pd.DataFrame([{k: float(v) for k, v in ds.data_vars.items()}])
    return ds.to_dataframe().reset_index()


def item_summary(dt, data, *, rope: float | None = 0.0, delta_min: float = DELTA_MIN) -> pd.DataFrame:
    """Posterior means, 90% equal-tailed interval of dp (arviz_stats, with its bulk ESS and
    Monte Carlo SE) and the change probabilities per item.

    ``p_improve_material`` / ``p_deteriorate_material``: ``P(dp >= delta_min)`` / ``P(dp <= -delta_min)``,
    a change in that direction of at least ``delta_min`` (SPEC 7's material change).

    With a ROPE (``rope > 0``) also ``p_rope = P(|dp| > rope)`` from the item draws, for
    either model (SPEC section 3); ``rope = None`` or 0: no ROPE.

    Examples
    --------
    >>> items = item_summary(res.posterior, data, rope=0.05)  # doctest: +SKIP
    >>> items[["item_id", "dp_mean", "dp_lo90", "dp_hi90", "p_changed"]].head()  # doctest: +SKIP
    """
    rope = float(rope or 0.0)
    post = dt["posterior"]
    blocks = [
        _item_block_summary(item_block(post, items), rope, delta_min) for items in item_slices(data.n_items, ITEM_BLOCK)
    ]
    out = pd.concat(blocks, ignore_index=True)
    out.insert(0, "domain", np.asarray(data.domains)[data.dom])
    out.insert(0, "item_id", data.items)
    return out


def _item_block_summary(post, rope: float, delta_min: float) -> pd.DataFrame:
    """:func:`item_summary`'s columns after ``domain`` for the items of ``post`` (an
    :func:`~bayesrc.bayes.draws.item_block`)."""
    import arviz_stats as azs  # deferred: arviz_stats loads in ~3 s (bayes extra)

    n_items = post.sizes["item"]
    p = post["p"].values.reshape(-1, n_items, 2)
    dp = post["dp"].values.reshape(-1, n_items)
    interval = azs.eti(post["dp"], prob=0.9, dim=["chain", "draw"]).transpose("item", ...).values  # (item, bound)
    # only the columns below: draws_summary's R-hat and tail ESS cost seconds at 10k items
    dp_chains = chain_draw_last(post["dp"])
    d = direction_draws(post, n_items, rope=rope, delta_min=delta_min)
    p_chg = post["r"].values.reshape(-1, n_items).mean(0, dtype=float) if "r" in post else (np.abs(dp) > rope).mean(0)
    out = pd.DataFrame(
        {
            "p_v1_mean": p[:, :, 0].mean(0, dtype=float),
            "p_v2_mean": p[:, :, 1].mean(0, dtype=float),
            "dp_mean": dp.mean(0, dtype=float),
            "dp_lo90": interval[:, 0].astype(float),
            "dp_hi90": interval[:, 1].astype(float),
            "dp_ess_bulk": ess_bulk(dp_chains),
            "dp_mcse": mcse_mean(dp_chains),
            "p_changed": p_chg,
            **{name: v.mean(0, dtype=float) for name, v in d.items()},
        }
    )
    if rope > 0:
        out["p_rope"] = (np.abs(dp) > rope).mean(0)
    return out


def direction_draws(
    post, n_items: int, *, rope: float = 0.0, delta_min: float = DELTA_MIN, rao_blackwell: bool = True
) -> dict[str, np.ndarray]:
    """Per posterior draw (rows) and item (columns) of ``post``, an :func:`~bayesrc.bayes.draws.item_block`:
    the four direction probabilities of :func:`item_summary`.

    Change model: ``p_improve = r * P(delta > 0 | changed)`` (Rao-Blackwellised), beta-binomial:
    ``dp > rope``; both: ``p_improve_material = dp >= delta_min``. Their means over draws are the
    item table's columns; weighted means give them under another prior (:func:`rci_fdp_prior_sensitivity`).
    ``rao_blackwell=False``: the change model's indicators of the draw itself, ``dp > 0`` (an item
    unchanged in the draw has ``dp = 0``), so each row is one possible world (:func:`rci_fdp_interval`).
    """
    dp = post["dp"].values.reshape(-1, n_items)
    if "r" in post and rao_blackwell:
        r = post["r"].values.reshape(-1, n_items)
        up = post["p_up"].values.reshape(-1, n_items)
        imp, det = r * up, r * (1 - up)
    else:
        cut = 0.0 if "r" in post else rope  # the change model's directions have no ROPE (module docstring)
        imp, det = dp > cut, dp < -cut
    return {
        "p_improve": imp,
        "p_deteriorate": det,
        "p_improve_material": dp >= delta_min,
        "p_deteriorate_material": dp <= -delta_min,
    }


def expected_flips(dt, data) -> dict:
    """Expected number of real majority flips from the item draws (SPEC 2.1).

    Negative: true accuracy above 0.5 in v1 and at most 0.5 in v2; positive: the reverse.
    Posterior mean and 90% interval of the counts (an unchanged item cannot flip).
    """
    neg, pos = 0, 0
    for items in item_slices(data.n_items, ITEM_BLOCK):
        p = item_block(dt["posterior"], items)["p"].values.reshape(-1, items.stop - items.start, 2)
        neg = neg + ((p[:, :, 0] > 0.5) & (p[:, :, 1] <= 0.5)).sum(1)
        pos = pos + ((p[:, :, 0] <= 0.5) & (p[:, :, 1] > 0.5)).sum(1)

    def describe(x: np.ndarray) -> dict:
        return {"mean": float(x.mean()), "lo90": float(np.quantile(x, 0.05)), "hi90": float(np.quantile(x, 0.95))}

    return {
        "expected_negative_flips": describe(neg),
        "expected_positive_flips": describe(pos),
        "n_items": int(data.n_items),
    }


def select(
    p_improve: np.ndarray, p_deteriorate: np.ndarray, *, rule: str = "fdr", fdr: float = 0.10, threshold: float = 0.975
) -> tuple[np.ndarray, dict]:
    """Classify items as improved / deteriorated / no_change; return (classes, summary).

    Examples
    --------
    >>> import numpy as np
    >>> cls, summ = select(np.array([0.999, 0.5, 0.01]), np.array([0.001, 0.5, 0.99]), fdr=0.10)
    >>> cls.tolist(), summ["n_improved"], summ["n_deteriorated"]
    (['improved', 'no_change', 'deteriorated'], 1, 1)
    """
    p_imp, p_det = np.asarray(p_improve, float), np.asarray(p_deteriorate, float)
    up = p_imp >= p_det
    best = np.where(up, p_imp, p_det)
    err = 1.0 - best
    if rule == "fdr":
        order = np.argsort(err, kind="stable")
        running = np.cumsum(err[order]) / np.arange(1, err.size + 1)
        ok = np.flatnonzero(running <= fdr)
        k = ok[-1] + 1 if ok.size else 0  # largest set whose mean posterior error is <= q
        flag = np.zeros(err.size, bool)
        flag[order[:k]] = True
    elif rule == "threshold":
        flag = best >= threshold
    else:
        raise ValueError(f"rule must be 'fdr' or 'threshold', got {rule!r}")
    cls = np.full(err.size, NO_CHANGE, dtype=object)
    cls[flag & up] = IMPROVED
    cls[flag & ~up] = DETERIORATED
    summary = {
        "rule": rule,
        "fdr": fdr if rule == "fdr" else None,
        "threshold": threshold if rule == "threshold" else None,
        "n_improved": int(np.sum(cls == IMPROVED)),
        "n_deteriorated": int(np.sum(cls == DETERIORATED)),
        "expected_false": float(err[flag].sum()),
        "expected_fdp": float(err[flag].mean()) if flag.any() else 0.0,
    }
    return cls, summary


def agreement_table(a: np.ndarray, b: np.ndarray) -> pd.DataFrame:
    """3 x 3 counts: rows ``a`` (model), columns ``b`` (RCI), in the order improved, no_change, deteriorated.

    Examples
    --------
    >>> agreement_table(["improved", "no_change"], ["improved", "deteriorated"]).to_numpy().tolist()
    [[1, 0, 0], [0, 0, 1], [0, 0, 0]]
    """
    tab = pd.crosstab(pd.Categorical(a, CLASSES), pd.Categorical(b, CLASSES), dropna=False)
    tab.index.name, tab.columns.name = "bayes", "rci"
    return tab.reindex(index=list(CLASSES), columns=list(CLASSES), fill_value=0)


def cohen_kappa(table: np.ndarray) -> float:
    """Cohen's kappa ``(p_o - p_e) / (1 - p_e)`` from a square agreement table.

    Examples
    --------
    >>> import numpy as np
    >>> cohen_kappa(np.diag([5, 7, 3]))  # perfect agreement
    1.0
    >>> round(cohen_kappa(np.array([[20, 5], [10, 15]])), 3)
    0.4
    """
    t = np.asarray(table, float)
    n = t.sum()
    if n == 0:
        return float("nan")
    p_o = np.trace(t) / n
    p_e = (t.sum(0) * t.sum(1)).sum() / n**2
    return float((p_o - p_e) / (1 - p_e)) if p_e < 1 else float("nan")


def discordance_reason(row, s_diff: float) -> str:
    """Why model and RCI disagree on one item (SPEC section 3).

    * ``floor_ceiling``: RCI excluded the item or it sits at 0 / 1 in a version - its binomial
      noise is far below RCI's single S_diff, so only the model uses its information;
    * ``binomial_noise``: the item's own binomial SE of dp exceeds S_diff (near p = 0.5),
      so RCI's homoscedastic threshold is too lenient for it;
    * ``shrinkage``: otherwise - the hierarchical prior (no-change mass, domain shift) pulls
      the item's estimate.
    """
    p1, p2, n1, n2 = row["p_v1_obs"], row["p_v2_obs"], max(row["n_v1"], 1), max(row["n_v2"], 1)
    if row["rci_class_raw"] == EXCLUDED or p1 in (0.0, 1.0) or p2 in (0.0, 1.0):
        return "floor_ceiling"
    se = np.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    if np.isfinite(s_diff) and se > s_diff:
        return "binomial_noise"
    return "shrinkage"


def crosscheck(items: pd.DataFrame, rci_items: pd.DataFrame, s_diff: float) -> tuple[dict, pd.DataFrame]:
    """Agreement of the model's classes with RCI's, kappa, discordant items, RCI's estimated FDP.

    RCI-excluded items count as ``no_change`` in the table (RCI claims no change for them).
    ``rci_estimated_fdp``: mean over RCI-flagged items of the posterior probability that the
    item did not change in the flagged direction, ``1 - P(improve)`` or ``1 - P(deteriorate)``
    (SPEC 7's *sign* false discovery). ``rci_estimated_fdp_material``: the same with a change of
    at least ``delta_min`` (:func:`item_summary`'s) in the flagged direction, ``1 - p_improve_material``
    or ``1 - p_deteriorate_material`` (a *material* false discovery: wrong sign or ``|dp| < delta_min``).

    Why both: where a version change moves every item a little (a prompt change: median
    ``|dp|`` 0.03) K = 10 samples cannot tell "exactly unchanged" from "changed by a few
    hundredths" (docs/validation/truth.md, "Real-model truth"), so the sign estimate rests on the prior there;
    whether a flagged change is at least ``delta_min`` is identified.

    Examples
    --------
    >>> cc, discordant = crosscheck(res.items, pair.to_frame(), pair.s_diff)  # doctest: +SKIP
    >>> cc["kappa"], cc["rci_estimated_fdp"]  # doctest: +SKIP
    """
    rci = rci_items.set_index("item_id").reindex(items["item_id"])
    raw = rci["class"].fillna(EXCLUDED).to_numpy(dtype=object)
    rci_cls = np.where(np.isin(raw, CLASSES), raw, NO_CHANGE)
    tab = agreement_table(items["bayes_class"].to_numpy(dtype=object), rci_cls)
    err, err_material = flag_errors(
        {
            k: items[k].to_numpy()[None]
            for k in ("p_improve", "p_deteriorate", "p_improve_material", "p_deteriorate_material")
        },
        rci_cls,
    )
    disc = items.assign(
        rci_class_raw=raw,
        p_v1_obs=rci["p_v1"].to_numpy(),
        p_v2_obs=rci["p_v2"].to_numpy(),
        n_v1=rci["n_v1"].to_numpy(),
        n_v2=rci["n_v2"].to_numpy(),
    )
    disc = disc[disc["bayes_class"].to_numpy() != rci_cls].copy()
    disc["reason"] = [discordance_reason(r, s_diff) for _, r in disc.iterrows()] if len(disc) else []
    analysed = np.isin(raw, CLASSES)  # κ only where RCI classified the item (SPEC 2.1)
    tab_an = agreement_table(items["bayes_class"].to_numpy(dtype=object)[analysed], raw[analysed])
    out = {
        "table": {r: {c: int(tab.loc[r, c]) for c in CLASSES} for r in CLASSES},
        "table_orientation": "rows: bayes_class, columns: rci_class (RCI-excluded items as no_change)",
        "kappa": cohen_kappa(tab_an.to_numpy()),
        "kappa_items": f"the {int(analysed.sum())} items RCI analysed (excluded items left out)",
        "kappa_n": int(analysed.sum()),
        "kappa_all_items": cohen_kappa(tab.to_numpy()),
        "rci_estimated_fdp": float(err[0]),  # NaN when RCI flags nothing
        "rci_estimated_fdp_material": float(err_material[0]),
        "rci_n_flagged": int(np.isin(rci_cls, (IMPROVED, DETERIORATED)).sum()),
        "n_discordant": int(len(disc)),
        "discordant_reasons": {k: int(v) for k, v in disc["reason"].value_counts().items()} if len(disc) else {},
    }
    cols = [
        "item_id",
        "domain",
        "p_v1_obs",
        "p_v2_obs",
        "dp_mean",
        "p_improve",
        "p_deteriorate",
        "bayes_class",
        "rci_class_raw",
        "reason",
    ]
    return out, disc[cols].rename(columns={"rci_class_raw": "rci_class"}).reset_index(drop=True)


def flag_errors(direction: dict[str, np.ndarray], rci_cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``direction`` (draws, or one row of posterior means): the mean over RCI's flagged
    items (``rci_cls`` "improved" / "deteriorated"; any other class is no flag) of the probability
    that the flag is false, in sign and material (NaN with no flag).

    Examples
    --------
    >>> d = {"p_improve": np.array([[0.9, 0.2]]), "p_deteriorate": np.array([[0.0, 0.7]]),
    ...      "p_improve_material": np.array([[0.8, 0.1]]), "p_deteriorate_material": np.array([[0.0, 0.5]])}
    >>> flag_errors(d, np.array(["improved", "deteriorated"]))
    (array([0.2]), array([0.35]))
    """
    up, down = rci_cls == IMPROVED, rci_cls == DETERIORATED
    n = up.sum() + down.sum()
    if n == 0:
        nan = np.full(len(direction["p_improve"]), np.nan)
        return nan, nan.copy()

    def err(imp: str, det: str) -> np.ndarray:
        miss = lambda a, flagged: (1.0 - a[:, flagged]).sum(1, dtype=float)  # noqa: E731  (indicator or probability draws)
        return (miss(direction[imp], up) + miss(direction[det], down)) / n

    return err("p_improve", "p_deteriorate"), err("p_improve_material", "p_deteriorate_material")


def flagged_errors(
    post, rci_cls: np.ndarray, *, rope: float = 0.0, delta_min: float = DELTA_MIN, rao_blackwell: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`flag_errors` of :func:`direction_draws` per posterior draw, from RCI's flagged items'
    draws alone (the others' would be read and never used: a few percent of the items are flagged,
    and at 12,000 items each direction draw of all of them is ~100 MB).

    Examples
    --------
    >>> import xarray as xr
    >>> dp = xr.DataArray([[[0.3, 0.0], [-0.2, 0.0]]], dims=("chain", "draw", "item"))
    >>> flagged_errors(xr.Dataset({"dp": dp}), np.array(["improved", "no_change"]))[0]
    array([0., 1.])
    """
    flagged = np.flatnonzero(np.isin(rci_cls, (IMPROVED, DETERIORATED)))
    if flagged.size == 0:
        nan = np.full(post.sizes["chain"] * post.sizes["draw"], np.nan)
        return nan, nan.copy()
    d = direction_draws(
        item_block(post, flagged), flagged.size, rope=rope, delta_min=delta_min, rao_blackwell=rao_blackwell
    )
    return flag_errors(d, np.asarray(rci_cls)[flagged])


def rci_fdp_interval(post, rci_cls: np.ndarray, *, rope: float = 0.0, delta_min: float = DELTA_MIN) -> dict:
    """Equal-tailed 90% posterior interval of the proportion of RCI's flags that are false (sign and material).

    In each posterior draw every item has a direction (its ``dp`` in the draw: up, down, or
    exactly 0 where the change model leaves it unchanged), so each draw gives one realised false
    proportion of RCI's flags, ``mean_i 1[dp_i not in the flagged direction]`` over the flagged
    ``i``; their mean is :func:`crosscheck`'s point estimate (up to Monte Carlo error: that one is
    Rao-Blackwellised), their 5% and 95% quantiles the interval. It
    holds both the uncertainty about the model's parameters and which of the flags are false,
    so it is the interval for *this* classification's realised proportion, not for a rate.

    Returns ``{"rci_estimated_fdp_interval90": [lo, hi], "rci_estimated_fdp_material_interval90": [lo, hi]}``
    (``None`` values when RCI flags nothing).

    Examples
    --------
    >>> import xarray as xr
    >>> dp = xr.DataArray(np.tile([[0.3], [-0.2]], (50, 1))[None], dims=("chain", "draw", "item"))  # 2 worlds
    >>> rci_fdp_interval(xr.Dataset({"dp": dp}), np.array(["improved"]))["rci_estimated_fdp_interval90"]
    [0.0, 1.0]
    """
    sign, material = flagged_errors(post, rci_cls, rope=rope, delta_min=delta_min, rao_blackwell=False)
    interval = lambda x: [float(v) for v in np.quantile(x, [0.05, 0.95])] if np.isfinite(x).all() else None  # noqa: E731
    return {"rci_estimated_fdp_interval90": interval(sign), "rci_estimated_fdp_material_interval90": interval(material)}


def allow_no_change(intervals: dict, no_change: dict, n_flagged: int) -> tuple[dict, list[str]]:
    """Widen the 90% intervals of RCI's FDP to 1 where the data do not reject "nothing changed".

    On identical versions every flag is false (realised FDP 1). A model that lets most items
    change cannot put posterior mass there when the data hardly tell "nothing moved" from
    "everything moved a little" (issue 12: the change model's interval held on 0 of 11 null
    replicates). With ``no_change`` the result of :func:`bayesrc.classical.calibration.no_change_test`:
    when its ``p_value >= NO_CHANGE_ALPHA`` (0.10, one minus their level) the upper ends become 1. Then on identical
    versions the interval holds whenever the test does not reject, with probability at least
    ``1 - NO_CHANGE_ALPHA = 0.90``; on changed versions it holds at least as often as the
    posterior interval (it only grows). Returns the intervals (with
    ``rci_fdp_interval_includes_no_change``) and the warning to print.

    Examples
    --------
    >>> intervals = {"rci_estimated_fdp_interval90": [0.3, 0.8], "rci_estimated_fdp_material_interval90": [0.4, 0.9]}
    >>> out, warn = allow_no_change(intervals, {"p_value": 0.4}, 20)
    >>> out["rci_estimated_fdp_interval90"], out["rci_fdp_interval_includes_no_change"]
    ([0.3, 1.0], True)
    """
    keys = ("rci_estimated_fdp_interval90", "rci_estimated_fdp_material_interval90")
    widen = bool(no_change["p_value"] >= NO_CHANGE_ALPHA and n_flagged > 0)
    out = dict(intervals) | {"rci_fdp_interval_includes_no_change": widen}
    if not widen:
        return out, []
    for key in keys:
        if out.get(key) is not None:
            out[key] = [out[key][0], 1.0]
    warning = (
        f"{not_rejected_phrase(no_change)}; if nothing did, all {n_flagged} of RCI's flags are false, "
        "so the 90% intervals of its false-discovery proportion run to 100%"
    )
    return out, [warning]


PRIOR_ALPHAS = (0.5, 2.0)  # power-scaling of the change-structure priors: each prior's density raised to alpha
PRIOR_TOLERANCE = 0.05  # SPEC 7's goal for RCI's estimated FDP: within +-0.05 of the realised one
PARETO_K_MAX = 0.7  # PSIS weights are reliable below this


def psis_weights(log_ratio: np.ndarray) -> tuple[np.ndarray, float]:
    """Pareto-smoothed importance weights (normalised) for draws with log importance ratios
    ``log_ratio``, and the Pareto k of their tail (Vehtari et al. 2024; reliable up to :data:`PARETO_K_MAX`).

    Examples
    --------
    >>> w, k = psis_weights(np.zeros(100))  # equal ratios: the draws themselves
    >>> round(float(w.sum()), 12), float(w.max()), k
    (1.0, 0.01, 0.0)
    """
    from arviz_stats.base import array_stats  # deferred: arviz_stats loads in ~3 s (bayes extra)

    log_ratio = np.asarray(log_ratio, float).ravel()
    if not np.ptp(log_ratio) > 0:  # equal ratios have no tail to fit
        return np.full(log_ratio.size, 1.0 / log_ratio.size), 0.0
    # psislw smooths the weights exp(-x) (its LOO use: x = log-likelihood), hence -log_ratio
    lw, khat = array_stats.psislw(-log_ratio, r_eff=1.0)
    return np.exp(lw - logsumexp(lw)), float(khat)


def rci_fdp_prior_sensitivity(
    post,
    rci_cls: np.ndarray,
    log_prior: np.ndarray,
    *,
    delta_min: float = DELTA_MIN,
    rope: float = 0.0,
    alphas: tuple[float, ...] = PRIOR_ALPHAS,
    tolerance: float = PRIOR_TOLERANCE,
) -> dict:
    """How far RCI's estimated FDP moves when the priors that decide "changed or not" are power-scaled.

    Power-scaling (Kallioinen et al. 2024, Stat Comput 34:57): the prior ``p(phi)`` becomes
    ``p(phi)^alpha``; the posterior under it is the fitted one reweighted by
    ``p(phi_s)^(alpha - 1)`` per draw (Pareto-smoothed importance weights, no refit). ``log_prior``:
    per draw, the log density of those priors (the change model's share of changed items ``pi`` and
    the spreads ``sigma_delta``, :func:`bayesrc.bayes.change.change_log_prior` over ``STRUCTURE_SITES``); ``alpha``
    0.5 and 2 turn Beta(4, 1) on ``pi`` into about Beta(2.5, 1) and Beta(7, 1).

    Why (issue 12): where every item moves by less than K samples can resolve (a prompt change,
    median ``|dp|`` 0.03 at K = 10), the data hardly tell "nothing moved" from "everything moved
    a little", ``pi`` is set by its prior, and so is the share of RCI's flags whose sign is wrong
    (estimated 0.43 where 0.23 were). That shows as an estimate that moves with the prior:
    ``sensitive`` when some alpha moves it by more than ``tolerance`` (or the weights of one are
    unreliable, Pareto k > 0.7: the prior moves the posterior far); then the estimate is not
    calibrated and the fit says so (:func:`bayesrc.bayes.fit.prior_sensitivity_warnings`).

    Returns ``{"alphas", "rci_estimated_fdp", "rci_estimated_fdp_material", "pareto_k",
    "sensitive", "sensitive_material"}`` (lists per alpha; ``None`` values when RCI flags nothing).

    Examples
    --------
    >>> log_prior = change_log_prior(dt["posterior"], sites=STRUCTURE_SITES)  # doctest: +SKIP
    >>> s = rci_fdp_prior_sensitivity(dt["posterior"], rci_cls, log_prior)  # doctest: +SKIP
    >>> s["rci_estimated_fdp"], s["sensitive"]  # doctest: +SKIP
    ([0.52, 0.31], True)
    """
    err, err_material = flagged_errors(post, rci_cls, rope=rope, delta_min=delta_min)
    out = {"alphas": list(alphas), "rci_estimated_fdp": [], "rci_estimated_fdp_material": [], "pareto_k": []}
    if not np.isfinite(err).all():
        return out | {
            k: None
            for k in ("rci_estimated_fdp", "rci_estimated_fdp_material", "pareto_k", "sensitive", "sensitive_material")
        }
    for alpha in alphas:
        w, khat = psis_weights((alpha - 1.0) * np.asarray(log_prior, float).ravel())
        out["rci_estimated_fdp"].append(float(w @ err))
        out["rci_estimated_fdp_material"].append(float(w @ err_material))
        out["pareto_k"].append(float(khat))
    # Pareto k > 0.7: the power-scaled posterior is too far from the fitted one for the weights to
    # say where it is (Vehtari et al. 2024, PSIS) - the prior moves it a lot, so count that as moved too
    unreliable = max(out["pareto_k"]) > PARETO_K_MAX
    moved = lambda est, base: unreliable or bool(np.max(np.abs(np.asarray(est) - base)) > tolerance)  # noqa: E731
    return out | {
        "sensitive": moved(out["rci_estimated_fdp"], err.mean()),
        "sensitive_material": moved(out["rci_estimated_fdp_material"], err_material.mean()),
    }


def domain_shift(dt, data) -> dict:
    """Per-domain shift: posterior mean and 90% interval of the mean dp over the domain's items,
    and (change model) of the logit-scale mean change ``shift_d`` among changed items.

    Examples
    --------
    >>> domain_shift(res.posterior, data)["physics"]  # {'mean': ..., 'lo90': ..., 'hi90': ...}  # doctest: +SKIP
    """
    post = dt["posterior"]
    onehot = np.eye(len(data.domains))[data.dom]  # (item, domain)
    sums = sum(
        item_block(post, items)["dp"].values.astype(float) @ onehot[items]
        for items in item_slices(data.n_items, ITEM_BLOCK)
    )
    by_domain = xr.DataArray(
        sums / onehot.sum(0),
        dims=("chain", "draw", "domain_of_item"),
        coords={"domain_of_item": np.asarray(data.domains)},
    )  # chain x draw x domain
    ms = draws_summary(by_domain, prob=0.9).set_index("domain_of_item")
    ls = draws_summary(post["shift"], prob=0.9).set_index("domain") if "shift" in post else None
    out = {}
    for d in data.domains:
        r = ms.loc[d]
        entry = {
            "mean": float(r["mean"]),
            "lo90": float(r["ci_low"]),
            "hi90": float(r["ci_high"]),
            "ess_bulk": float(r["ess_bulk"]),
            "mcse": float(r["mcse_mean"]),
            "scale": "mean dp (probability)",
        }
        if ls is not None:
            s = ls.loc[d]
            entry["logit_shift"] = {"mean": float(s["mean"]), "lo90": float(s["ci_low"]), "hi90": float(s["ci_high"])}
        out[str(d)] = entry
    return out
