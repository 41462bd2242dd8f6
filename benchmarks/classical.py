"""Classical pipeline speed: vectorised vs a naive per-split pandas loop, side by side.

    .venv/bin/python benchmarks/classical.py [--items 2000] [--k 10] [--repeats 3]

Times (i) bayesrc's complete classical analysis of 2 pairs x N items x K samples
(reliability with 1000 splits, ICC, RCI, exclusions, 1000-permutation direction test, the
200-replicate sample-level null, domain test, bins, effect sizes, stratified S_diff,
reliability vs K, cross-pair; also without the null and with the binomial S_diff) and (ii) the
way a reference script computes just the split-half reliabilities and the empirical
null: one pandas pivot / merge per split and per permutation. Both run in this process on
the same in-memory trials; the ratio is what matters (shared machines drift).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from bayesrc.classical import analyse_pairs
from bayesrc.data import item_counts, simulate_pair


def naive_split_half(trials: pd.DataFrame, n_splits: int = 1000) -> float:
    pivot = trials.assign(c=trials["is_correct"].astype(float)).pivot_table(
        index="item_id", columns="k", values="c", aggfunc="first"
    )
    cols = sorted(pivot.columns)
    rng = np.random.RandomState(42)
    vals = []
    for _ in range(n_splits):
        perm = rng.permutation(cols)
        a = pivot[list(perm[: len(cols) // 2])].mean(axis=1)
        b = pivot[list(perm[len(cols) // 2 :])].mean(axis=1)
        r = np.corrcoef(a, b)[0, 1]
        vals.append(2 * r / (1 + r))
    return float(np.median(vals))


def naive_null(t1: pd.DataFrame, t2: pd.DataFrame, r1: float, r2: float, n_perm: int = 1000) -> float:
    acc = lambda t: t.groupby("item_id")["is_correct"].mean().rename("p").reset_index()  # noqa: E731
    a, b = acc(t1), acc(t2)
    rng = np.random.RandomState(42)
    counts = []
    for _ in range(n_perm):
        m = a.merge(b, on="item_id", suffixes=("_1", "_2"))
        swap = rng.randint(0, 2, len(m)).astype(bool)
        p1 = np.where(swap, m["p_2"], m["p_1"])
        p2 = np.where(swap, m["p_1"], m["p_2"])
        s = np.hypot(np.std(p1, ddof=1) * np.sqrt(1 - r1), np.std(p2, ddof=1) * np.sqrt(1 - r2))
        counts.append(np.sum((p2 - p1) / s > 1.96))
    return float(np.percentile(counts, 95))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sims = [simulate_pair(args.items, args.k, seed=s) for s in (1, 2)]
    pairs = {f"pair{i}": item_counts(s.trials_v1, s.trials_v2) for i, s in enumerate(sims)}

    fast = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        analyse_pairs(pairs, seed=0)
        fast.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    for s in sims:
        r1, r2 = naive_split_half(s.trials_v1), naive_split_half(s.trials_v2)
        naive_null(s.trials_v1, s.trials_v2, r1, r2)
    naive = time.perf_counter() - t0

    def best_of(**kw) -> float:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            analyse_pairs(pairs, seed=0, **kw)
            times.append(time.perf_counter() - t0)
        return min(times)

    no_null = best_of(n_null=0)
    binom = best_of(s_diff="binomial")

    best = min(fast)
    print(f"classical pipeline, 2 pairs x {args.items} items x K={args.k}")
    print(
        f"  bayesrc full analysis (vectorised): {best:8.3f} s  "
        f"(best of {args.repeats}: {', '.join(f'{x:.3f}' for x in fast)})"
    )
    print(
        f"    of which the sample-level null  : {best - no_null:8.3f} s  "
        f"(200 replicates per pair; analysis without it {no_null:.3f} s)"
    )
    print(f"    with --s-diff binomial          : {binom:8.3f} s")
    print(f"  naive per-split pandas loops      : {naive:8.3f} s  (split-half + null only)")
    print(f"  ratio naive / bayesrc             : {naive / best:8.1f}x")


if __name__ == "__main__":
    main()
