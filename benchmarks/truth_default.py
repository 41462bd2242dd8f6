"""The default change model against real truth, replicate by replicate (issue 12).

    .venv/bin/python benchmarks/truth_default.py [--pairs q3,q4-prompt2,q4] [--replicates 2] [--first 1] [--seed 0]
        [--k 10] [--model change] [--sampler fast|default] [--jobs 1]
    .venv/bin/python benchmarks/truth_default.py --summarise ROWS.jsonl

For each bundled exact pair (Gemma-3-270M Q4_K_M against ``q3``: its Q3_K_M re-quantisation,
``q4-prompt2``: a prompt change, ``q4``: itself, a null pair with exact Delta p = 0; a pair
with ``-reset`` appended, e.g. ``q4-prompt2-reset``: that change with its changes below delta_min = 0.05 undone,
:func:`reset_small_changes`) it draws
the same K = 10 (``--k``) replicate datasets as ``bayesrc truth --seed S`` (replicate r from
``SeedSequence(S)``), fits the change model (``--model``: ``change``, the default, or
``change_v0``, the model before issue 12) with the ``--fast`` settings (2 chains x 400 draws
after 300 warm-up, sampler seed 1; ``--sampler default``: the default 4 chains x 500 after 500, seed 1) and
prints one JSON row per replicate and pair, replicate by replicate: items selected at q = 0.10 and their
realised FDP (sign / material), coverage of the exact Delta p by the 90% intervals, the model's estimate of
RCI's FDP beside RCI's realised one (RCI as the fit cross-checks it) with the same estimates under power-scaled priors
(``prior_sensitivity``: does the fit warn), the posterior of ``sigma_delta`` and ``pi``, and PSIS-LOO.
``--first`` continues an earlier run (rows append to the same file); ``--summarise`` prints the
per-pair table of such a file. One fit takes 3-9 minutes on 2 cores; ``--jobs N`` runs N fits at
a time (2N cores; rows then come in the order the fits finish). ``bayesrc truth`` runs the
same on every method with its own aggregation; this script is the per-replicate view that the
docs' "current default" table (docs/validation/truth.md) comes from.
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from bayesrc.classical.calibration import NO_CHANGE_ALPHA
from bayesrc.config import DELTA_MIN


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", default="q3,q4-prompt2,q4")
    ap.add_argument("--replicates", type=int, default=2)
    ap.add_argument("--first", type=int, default=1, help="number of the first replicate (1-based)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=10, help="samples per item and version in each replicate dataset")
    ap.add_argument(
        "--model",
        default="change",
        help="a model of bayesrc truth: change (the default) or change_v0 (before issue 12); several: comma-separated",
    )
    ap.add_argument(
        "--sampler",
        default="fast",
        choices=("fast", "default"),
        help="fast: 2 chains x 400 draws after 300 (the docs' tables); default: the fit's default sampler",
    )
    ap.add_argument(
        "--jobs", type=int, default=1, help="fits at a time, each in its own process (2 cores each: one per chain)"
    )
    ap.add_argument(
        "--summarise", metavar="JSONL", help="print the per-pair table of rows this script printed earlier, and stop"
    )
    args = ap.parse_args()
    if args.summarise:
        print(summarise(args.summarise))
        return
    # Replicate by replicate, every pair and model in each: a run cut short still covers them evenly.
    tasks = [
        (number, pair, model, args.seed, args.k, args.sampler)
        for number in range(args.first - 1, args.first - 1 + args.replicates)  # 0-based, as bayesrc truth counts them
        for pair in args.pairs.split(",")
        for model in args.model.split(",")
    ]
    if args.jobs <= 1:
        for task in tasks:
            print(json.dumps(fit_row(*task)), flush=True)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for job in as_completed([pool.submit(fit_row, *task) for task in tasks]):
            print(json.dumps(job.result()), flush=True)


def fit_row(number: int, pair: str, model: str, seed: int, k: int = 10, sampler: str = "fast") -> dict:
    """Fit ``model`` to replicate ``number`` (0-based, ``k`` samples per item and version) of Q4_K_M
    against the bundled exact run ``pair`` (``sampler``: ``fast`` or ``default`` settings, seed 1); one row."""
    from bayesrc import datasets
    from bayesrc.bayes import SamplerConfig, SelectionConfig, fit
    from bayesrc.data.exact import load_exact
    from bayesrc.truth.score import MODEL_SPECS, _elpd_loo, _model_scores, replicate_datasets, score_classes

    root = datasets.path("exact_gemma")
    v1 = load_exact(root / "q4")
    v2 = (
        reset_small_changes(v1, load_exact(root / pair.removesuffix(RESET)))
        if pair.endswith(RESET)
        else load_exact(root / pair)
    )
    [(r, counts, dp, _)] = replicate_datasets(v1, v2, k=k, seed=seed, replicates=[number])
    cfg = SamplerConfig(chains=2, tune=300, draws=400, seed=1) if sampler == "fast" else SamplerConfig(seed=1)
    res = fit(counts, config=cfg, selection=SelectionConfig(fdr=0.1), **MODEL_SPECS[model])
    it = res.items.set_index("item_id").reindex(counts["item"].values)
    own = score_classes(it["bayes_class"].to_numpy(dtype=object), dp)
    rci = score_classes(it["rci_class"].to_numpy(dtype=object), dp)
    sd = res.posterior["posterior"]["sigma_delta"]
    return {
        "model": model,
        "pair": pair,
        "k": k,
        "sampler": sampler,
        "replicate": r + 1,
        "selected": own["flagged"],
        "fdp_sign": own["fdp_sign"],
        "fdp_material": own["fdp_material"],
        "coverage90": _model_scores(it, dp)["coverage90"],
        "rci_fdp_estimate": res.crosscheck["rci_estimated_fdp"],
        "rci_fdp_realised": rci["fdp_sign"],
        "rci_flagged": rci["flagged"],
        "rci_fdp_estimate_material": res.crosscheck["rci_estimated_fdp_material"],
        "rci_fdp_realised_material": rci["fdp_material"],
        "rci_fdp_interval90": res.crosscheck.get("rci_estimated_fdp_interval90"),
        "rci_fdp_material_interval90": res.crosscheck.get("rci_estimated_fdp_material_interval90"),
        "prior_sensitivity": res.crosscheck.get("prior_sensitivity"),
        "no_change_p": res.crosscheck["no_change_test"]["p_value"],
        "sigma_delta": [float(sd.mean()), float(sd.std())],
        "pi": float(res.posterior["posterior"]["pi"].mean()),
        "sigma_delta_by_level": dict(zip(map(str, sd["group"].values), map(float, sd.mean(("chain", "draw")).values)))
        if "group" in sd.dims
        else None,
        "max_rhat": float(res.diagnostics.max_rhat),
        "runtime_s": res.runtime_s,
        **_elpd_loo(res, counts),
    }


RESET = "-reset"  # pair suffix: that version change with its changes below DELTA_MIN undone (reset_small_changes)


def reset_small_changes(v1, v2, below: float = DELTA_MIN):
    """``v2`` with every item whose exact ``|Delta p|`` is below ``below`` given ``v1``'s answer
    distribution instead (exact Delta p = 0), the others as they are: a second truth whose K-sample data
    hardly differ from ``v2``'s where the changes undone are small next to K-sample noise.

    Why: on a prompt change every item moves a little (median ``|Delta p|`` 0.03), so a flag on a
    tiny mover is a sign false discovery half the time; here every such flag is one. A flag is a
    material false discovery (``|Delta p| < delta_min`` counts as false) in both truths or in
    neither, so the material FDP hardly differs between them; the sign FDP does: how far apart
    the change model's two estimates are, against how far apart the realised FDPs are, says what
    K-sample data can decide. Same answer order per item, so a replicate's
    draws (``replicate_datasets``) coincide wherever the two distributions nearly do.
    """
    from dataclasses import replace

    from bayesrc.data.exact import exact_truth

    dp = exact_truth(v1, v2).set_index("item_id")["delta_p"]
    undo = set(dp.index[dp.abs() < below])
    keep = lambda df: ~df["item_id"].isin(undo)  # noqa: E731
    items = (
        pd.concat([v2.items[keep(v2.items)], v1.items[~keep(v1.items)]])
        .set_index("item_id")
        .loc[v2.items["item_id"]]
        .reset_index()
    )
    dist = pd.concat([v2.dist[keep(v2.dist)], v1.dist[~keep(v1.dist)]], ignore_index=True)
    order = pd.Series(range(len(items)), index=items["item_id"])
    dist = dist.sort_values("item_id", key=lambda ids: ids.map(order), kind="stable", ignore_index=True)
    return replace(v2, label=v2.label + RESET, items=items, dist=dist)


def summarise(path: str) -> str:
    """Per (model, pair, K): replicates, mean items selected, the model's own FDP (mean over
    replicates and pooled over its selections), mean 90% coverage, the mean estimate of RCI's
    FDP beside RCI's mean realised FDP (replicates where RCI flagged something), and how often
    the fit warned that the estimate moves with its priors (:func:`_warned`), whether its 90% interval
    held RCI's realised FDP (:func:`_held`) and how often the no-change test rejected (:func:`_rejected`)."""
    rows = pd.read_json(path, lines=True)
    rows["false_sign"] = rows["fdp_sign"] * rows["selected"]
    rows["k"] = rows["k"].fillna(10).astype(int) if "k" in rows else 10  # rows from before --k: K = 10
    out = []
    for (model, pair, k), g in rows.groupby(["model", "pair", "k"], sort=False):
        has = g["rci_flagged"] > 0
        out.append(
            {
                "model": model,
                "pair": pair,
                "k": k,
                "replicates": len(g),
                "selected": g["selected"].mean(),
                "fdp_sign": g["fdp_sign"].mean(),
                "fdp_sign_pooled": g["false_sign"].sum() / max(g["selected"].sum(), 1),
                "coverage90": g["coverage90"].mean(),
                "coverage90_min": g["coverage90"].min(),
                "rci_fdp_estimate": g.loc[has, "rci_fdp_estimate"].mean(),
                "rci_fdp_realised": g.loc[has, "rci_fdp_realised"].mean(),
                "rci_fdp_estimate_material": g.loc[has, "rci_fdp_estimate_material"].mean()
                if "rci_fdp_estimate_material" in g
                else float("nan"),
                "rci_fdp_realised_material": g.loc[has, "rci_fdp_realised_material"].mean()
                if "rci_fdp_realised_material" in g
                else float("nan"),
                **_warned(g[has]),
                **_held(g[has]),
                **_rejected(g),
                "gate_max_rhat": g["max_rhat"].max(),
                "elpd_loo": g["elpd_loo"].mean(),
                "runtime_s": g["runtime_s"].mean(),
            }
        )
    return pd.DataFrame(out).round(3).to_string(index=False)


def _warned(g) -> dict:
    """Replicates whose estimate the fit warned about (it moves with the priors), and how many of
    the others are within +-0.05 of RCI's realised FDP: ``warned/replicates``, ``within/unwarned``
    (sign; material); blank for rows from before the warning."""
    if "prior_sensitivity" not in g or g["prior_sensitivity"].isna().any():
        return {"warned_sign": "", "unwarned_within_sign": "", "warned_material": "", "unwarned_within_material": ""}
    out = {}
    for kind, est, real, flag in (
        ("sign", "rci_fdp_estimate", "rci_fdp_realised", "sensitive"),
        ("material", "rci_fdp_estimate_material", "rci_fdp_realised_material", "sensitive_material"),
    ):
        warned = g["prior_sensitivity"].map(lambda d, f=flag: bool(d.get(f)))
        within = (g[est] - g[real]).abs() <= 0.05
        out[f"warned_{kind}"] = f"{int(warned.sum())}/{len(g)}"
        out[f"unwarned_within_{kind}"] = f"{int(within[~warned].sum())}/{int((~warned).sum())}"
    return out


def _rejected(g) -> dict:
    """Replicates where the no-change test rejected identical versions (elsewhere the intervals run to 1); blank for
    rows from before it."""
    if "no_change_p" not in g or g["no_change_p"].isna().any():
        return {"no_change_rejected": ""}
    return {"no_change_rejected": f"{int((g['no_change_p'] < NO_CHANGE_ALPHA).sum())}/{len(g)}"}


def _held(g) -> dict:
    """Replicates whose 90% interval of RCI's FDP held RCI's realised FDP: ``held/replicates with an
    interval`` (sign; material); blank for rows from before the interval."""
    from bayesrc.truth.score import interval_holds

    out = {}
    for kind, col, real in (
        ("sign", "rci_fdp_interval90", "rci_fdp_realised"),
        ("material", "rci_fdp_material_interval90", "rci_fdp_realised_material"),
    ):
        rows = g[g[col].notna()] if col in g else g.iloc[:0]
        if rows.empty:
            out[f"interval_held_{kind}"] = ""
            continue
        held = sum(interval_holds(bounds, r) for bounds, r in zip(rows[col], rows[real]))
        out[f"interval_held_{kind}"] = f"{int(held)}/{len(rows)}"
    return out


if __name__ == "__main__":
    main()
