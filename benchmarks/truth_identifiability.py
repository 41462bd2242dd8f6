"""Can K-sample data decide RCI's sign false-discovery proportion on a small version change? (issue 12)

    .venv/bin/python benchmarks/truth_identifiability.py [--pair q4-prompt2] [--replicates 20] [--seed 0]
        [--k 10,20,40] [--rows ROWS.jsonl ...]

Two truths for the same pair of versions: the real change (``--pair``, against Gemma-3-270M
Q4_K_M) and the same change with every item that moved by less than delta_min = 0.05 set back
(``reset_small_changes`` in ``truth_default.py``: exact Delta p = 0 there). It prints

1. per replicate dataset (the K = 10 datasets of ``bayesrc truth --seed S``), RCI in each truth
   (reference classes, as the change model's cross-check runs it): how many items it classes
   alike, and its realised sign and material FDP in each;
2. for each K in ``--k``, how well the best possible test tells the two truths apart from the
   version-2 counts of the reset items (version 1 is the same in both): the Neyman-Pearson
   likelihood-ratio test knowing every item's exact p in both truths (``signs known``), and
   knowing only each item's p_v1 and |Delta p|, its direction a coin flip (``signs unknown``: what
   any method that has not been told the directions can at best do). ``TV`` is the total
   variation distance of the two data distributions, ``bayes_error`` the error rate of the best
   test with equal prior odds (0.5: a coin);
3. with ``--rows``: the change model's estimates in both truths, replicate by replicate, from
   ``truth_default.py`` rows of ``PAIR`` and ``PAIR-reset``.

If the realised sign FDPs differ by more than 0.1 while the best test's error is near 0.5, no
estimator can be within +-0.05 of both: the data do not decide that number, and a method can only
report it with an interval or read the material FDP, which is the same in both truths.
The oracle treats each count as Binomial(K, p) (the exact runs' missing mass is below 0.02).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from truth_default import RESET, reset_small_changes

from bayesrc.bayes.fit import CROSSCHECK_RCI_KWARGS
from bayesrc.config import DELTA_MIN


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", default="q4-prompt2")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", default="10,20,40", help="K values for the oracle test (part 2); part 1 uses the first")
    ap.add_argument("--oracle-datasets", type=int, default=20_000)
    ap.add_argument("--rows", nargs="*", default=[], help="truth_default.py rows (JSONL) with PAIR and PAIR-reset fits")
    args = ap.parse_args()
    from bayesrc import datasets
    from bayesrc.data.exact import exact_truth, load_exact

    root = datasets.path("exact_gemma")
    v1, v2 = load_exact(root / "q4"), load_exact(root / args.pair)
    reset = reset_small_changes(v1, v2, DELTA_MIN)
    real, undone = exact_truth(v1, v2), exact_truth(v1, reset)
    small = real["delta_p"].abs().to_numpy() < DELTA_MIN
    # the construction itself: the reset items do not move, the others move as in the real change
    assert (undone["delta_p"].to_numpy()[small] == 0).all() and (
        undone["delta_p"].to_numpy()[~small] == real["delta_p"].to_numpy()[~small]
    ).all()
    ks = [int(k) for k in args.k.split(",")]
    print(
        f"{args.pair}: {small.sum()} of {len(small)} items moved by |dp| < {DELTA_MIN} "
        f"(median |dp| {real['delta_p'].abs().median():.3f}); reset in the second truth\n"
    )
    print(
        rci_in_both(v1, v2, reset, k=ks[0], seed=args.seed, replicates=args.replicates).round(3).to_string(index=False),
        "\n",
    )
    p0, p1 = real["p_v1"].to_numpy()[small], real["p_v2"].to_numpy()[small]
    rng = np.random.default_rng(args.seed)
    oracle = [
        {"k": k, **best_test(p0, p1, k, signs_known=known, n=args.oracle_datasets, rng=rng)}
        for k in ks
        for known in (True, False)
    ]
    print(pd.DataFrame(oracle).round(3).to_string(index=False), "\n")
    if args.rows:
        print(model_in_both(args.rows, args.pair).round(3).to_string(index=False))


def rci_in_both(v1, v2, reset, *, k: int, seed: int, replicates: int) -> pd.DataFrame:
    """RCI on replicate r of each truth (the same seeds, so the draws coincide wherever the two
    distributions nearly do): flags, items classed alike, realised sign and material FDP."""
    from bayesrc.classical import reliable_change
    from bayesrc.truth.replicates import replicate_datasets
    from bayesrc.truth.score import score_classes

    rows = []
    pairs = zip(
        replicate_datasets(v1, v2, k=k, seed=seed, replicates=range(replicates)),
        replicate_datasets(v1, reset, k=k, seed=seed, replicates=range(replicates)),
    )
    for (r, counts, dp, _), (_, counts_reset, dp_reset, _) in pairs:
        classes, scores = [], []
        for c, d in ((counts, dp), (counts_reset, dp_reset)):
            # as the fits' cross-check
            rci = reliable_change(c, "v1", "v2", **CROSSCHECK_RCI_KWARGS).to_frame().set_index("item_id")["class"]
            cls = rci.reindex(c["item"].values).fillna("excluded").to_numpy(dtype=object)
            classes.append(cls)
            scores.append(score_classes(cls, d))
        (s_real, s_reset), same = scores, int((classes[0] == classes[1]).sum())
        rows.append(
            {
                "replicate": r + 1,
                "flagged": s_real["flagged"],
                "flagged_reset": s_reset["flagged"],
                "classed_alike": same,
                "fdp_sign": s_real["fdp_sign"],
                "fdp_sign_reset": s_reset["fdp_sign"],
                "fdp_material": s_real["fdp_material"],
                "fdp_material_reset": s_reset["fdp_material"],
            }
        )
    return with_mean_row(pd.DataFrame(rows))


def best_test(p0: np.ndarray, p1: np.ndarray, k: int, *, signs_known: bool, n: int, rng) -> dict:
    """The likelihood-ratio test of "these items moved from p0 to p1" against "they did not move"
    on one dataset of K-sample counts per item, by simulation (``n`` datasets under each).

    ``signs_known=False``: each item moved to ``p1`` or to its mirror ``2 p0 - p1`` with even odds
    (the magnitudes known, the directions not), which factorises over items.
    Returns ``TV`` (total variation distance of the two count distributions: the best test's
    power minus its size), ``bayes_error`` (``(1 - TV) / 2``, the best test's error with equal
    prior odds) and the best test's ``power_at_5pct``.
    """
    from scipy.stats import binom

    mirror = np.clip(2 * p0 - p1, 1e-9, 1 - 1e-9)

    def llr(y):
        moved = binom.logpmf(y, k, p1)
        if not signs_known:
            moved = np.logaddexp(moved, binom.logpmf(y, k, mirror)) - np.log(2)
        return (moved - binom.logpmf(y, k, p0)).sum(1)

    still = rng.binomial(k, p0, size=(n, len(p0)))
    moved = rng.binomial(k, p1, size=(n, len(p0)))
    if not signs_known:
        moved = np.where(rng.random(moved.shape) < 0.5, moved, rng.binomial(k, mirror, size=moved.shape))
    l_still, l_moved = llr(still), llr(moved)
    tv = float((l_moved > 0).mean() - (l_still > 0).mean())
    return {
        "signs": "known" if signs_known else "unknown",
        "items": len(p0),
        "TV": tv,
        "bayes_error": (1 - tv) / 2,
        "power_at_5pct": float((l_moved > np.quantile(l_still, 0.95)).mean()),
    }


def model_in_both(paths: list[str], pair: str) -> pd.DataFrame:
    """The change model's estimate of RCI's FDP (sign, material) beside the realised one in both
    truths, per replicate fitted in both, from ``truth_default.py`` rows."""
    rows = pd.concat([pd.read_json(p, lines=True) for p in paths], ignore_index=True)
    rows = rows[rows["model"].eq("change") & rows["k"].fillna(10).eq(10)].drop_duplicates(
        ["pair", "replicate"], keep="last"
    )
    cols = [
        "replicate",
        "rci_fdp_estimate",
        "rci_fdp_realised",
        "rci_fdp_estimate_material",
        "rci_fdp_realised_material",
    ]
    both = rows[rows["pair"].eq(pair)][cols].merge(
        rows[rows["pair"].eq(pair + RESET)][cols], on="replicate", suffixes=("", "_reset")
    )
    both["estimates_differ_by"] = (both["rci_fdp_estimate"] - both["rci_fdp_estimate_reset"]).abs()
    return with_mean_row(both)


def with_mean_row(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (one row per replicate) with a last row ``replicate = "mean"`` of its columns' means."""
    return pd.concat(
        [table, table.drop(columns="replicate").mean().to_frame().T.assign(replicate="mean")], ignore_index=True
    )


if __name__ == "__main__":
    main()
