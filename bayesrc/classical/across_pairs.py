"""Across version pairs: the cross-pair tests (:func:`cross_pair`), the greedy single-shot comparisons
(:func:`greedy_comparison`), and :func:`analyse_pairs`, which runs every pair and then both into an
:class:`~bayesrc.classical.RCIRun`."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from bayesrc.classical import rci as _rci
from bayesrc.classical.pipeline import reliable_change
from bayesrc.classical.result import PairResult, RCIRun
from bayesrc.classical.secondary import (
    greedy_agreement,
    greedy_change,
    mcnemar,
    two_proportion_z,
)


def _mcnemar_record(b: int, c: int) -> dict:
    """rci.json's McNemar record: ``b``, ``c``, ``chi2`` (NaN without discordant items) and ``p_exact``."""
    res = mcnemar(b, c)
    return {"b": b, "c": c, "chi2": float(res.statistic) if b + c else float("nan"), "p_exact": float(res.p_exact)}


def cross_pair(a: PairResult, b: PairResult) -> dict:
    """Compare two pairs (paper 001, section 3.8; SPEC 2.1).

    On shared items the comparison is paired: McNemar on flagged / not flagged over
    the items analysable in both pairs (``test = "mcnemar"``, ``p_test``). The paper's
    two-proportion z-test of the reliable-change rates (``z``, ``p``) is kept for
    reference; it is the primary test only when the item sets are disjoint. Pearson r
    of RCI over the items analysable in both pairs.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> a, b = (simulate_pair(200, 10, seed=s) for s in (1, 2))
    >>> ra, rb = (reliable_change(item_counts(s.trials_v1, s.trials_v2), n_splits=50, n_permutations=50, n_null=0)
    ...           for s in (a, b))
    >>> cross_pair(ra, rb)["z"]  # doctest: +SKIP
    """
    ca, cb = a.counts["analysable"], b.counts["analysable"]
    z, p = two_proportion_z(ca["improved"] + ca["deteriorated"], ca["n"], cb["improved"] + cb["deteriorated"], cb["n"])
    ia = a.items.loc[~a.items["excluded"], ["item_id", "rci", "class"]]
    ib = b.items.loc[~b.items["excluded"], ["item_id", "rci", "class"]]
    shared = ia.merge(ib, on="item_id", suffixes=("_a", "_b"))
    ok = shared[["rci_a", "rci_b"]].notna().all(axis=1)
    if ok.sum() >= 3 and shared.loc[ok, "rci_a"].std() > 0 and shared.loc[ok, "rci_b"].std() > 0:
        r, r_p = stats.pearsonr(shared.loc[ok, "rci_a"], shared.loc[ok, "rci_b"])
    else:
        r, r_p = float("nan"), float("nan")
    fa = shared["class_a"].isin([_rci.IMPROVED, _rci.DETERIORATED]).to_numpy()
    fb = shared["class_b"].isin([_rci.IMPROVED, _rci.DETERIORATED]).to_numpy()
    mc = _mcnemar_record(int(np.sum(fa & ~fb)), int(np.sum(~fa & fb)))
    paired = len(shared) > 0
    return {
        "pairs": [a.name, b.name],
        "rate_a": ca["churn"],
        "rate_b": cb["churn"],
        "test": "mcnemar" if paired else "two_proportion_z",
        "p_test": mc["p_exact"] if paired else p,
        "mcnemar": {
            **mc,
            "n_shared": int(len(shared)),
            "rate_a_shared": float(fa.mean()) if paired else float("nan"),
            "rate_b_shared": float(fb.mean()) if paired else float("nan"),
        },
        "z": z,
        "p": p,
        "z_test_note": "two-proportion z assumes independent item sets; with shared items use the McNemar test",
        "pearson_r": float(r),
        "pearson_p": float(r_p),
        "n_shared": int(len(shared)),
    }


def greedy_flips(greedy_counts: xr.Dataset, v1: str | None = None, v2: str | None = None) -> pd.DataFrame:
    """Per-item single-shot result of two versions: items scored in both, with their change.

    Examples
    --------
    >>> from bayesrc.data import load_counts
    >>> g = load_counts(["v1_greedy.jsonl", "v2_greedy.jsonl"], greedy=True)  # doctest: +SKIP
    >>> greedy_flips(g)["change"].value_counts()  # doctest: +SKIP
    """
    versions = list(map(str, greedy_counts["version"].values))
    v1 = versions[0] if v1 is None else v1
    v2 = versions[1] if v2 is None else v2
    a, b = greedy_counts.sel(version=v1), greedy_counts.sel(version=v2)
    ok = (a["n_valid"].values > 0) & (b["n_valid"].values > 0)
    g1 = a["p"].values[ok] >= 0.5
    g2 = b["p"].values[ok] >= 0.5
    return pd.DataFrame(
        {"item_id": greedy_counts["item"].values[ok], "g_v1": g1, "g_v2": g2, "change": greedy_change(g1, g2)}
    )


def greedy_comparison(greedy_counts: xr.Dataset, pair: PairResult) -> dict:
    """Greedy flips against RCI classes of the full-set analysis, as in paper 001 (3.9).

    Examples
    --------
    >>> greedy_comparison(greedy_counts, pair)["rci_changed_missed_by_greedy"]  # doctest: +SKIP
    """
    flips = greedy_flips(greedy_counts)
    joined = flips.merge(pair.items[["item_id", "class_all_items"]], on="item_id")
    joined = joined[joined["class_all_items"] != _rci.EXCLUDED]
    out = greedy_agreement(joined["change"].to_numpy(), joined["class_all_items"].to_numpy())
    out["greedy_items_scored_both"] = int(len(flips))
    out["classes_from"] = "all_items"
    return out


def analyse_pairs(
    pairs: dict[str, xr.Dataset],
    *,
    greedy: dict[str, xr.Dataset] | None = None,
    **kwargs,
) -> RCIRun:
    """Run :func:`reliable_change` on every pair; cross-pair tests for every two pairs;
    greedy comparisons for the pairs with greedy data (keyed by pair name).

    Returns the :class:`~bayesrc.classical.RCIRun` that ``bayesrc rci`` saves (``rci.json`` +
    ``items_NAME.parquet``) and ``bayesrc.load`` gives back: ``run[NAME]`` is the pair's
    :class:`~bayesrc.classical.PairResult`.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(200, 10, seed=1)
    >>> counts = item_counts(sim.trials_v1, sim.trials_v2)
    >>> run = analyse_pairs({"demo": counts}, n_splits=50, n_permutations=50, n_null=0)
    >>> run["demo"].n_flagged >= 0, run.names
    (True, ['demo'])
    >>> run.save("out/rci")  # doctest: +SKIP
    """
    results = {name: reliable_change(ds, name=name, **kwargs) for name, ds in pairs.items()}
    crosses = [cross_pair(results[x], results[y]) for x, y in combinations(results, 2)]
    greedy_out = {}
    for name, gds in (greedy or {}).items():
        if name not in results:
            raise ValueError(f"greedy data for unknown pair {name!r}; pairs are {sorted(results)}")
        greedy_out[name] = greedy_comparison(gds, results[name])
    return RCIRun.from_pairs(results, crosses, greedy_out)
