"""Benchmark: does the joint model of a family keep its promises on families with known truth?

    .venv/bin/python benchmarks/joint_coverage.py [--replicates 20] [--items 2000] [--quick] [--out rows.jsonl]

Simulates ``--replicates`` families of four versions (:func:`bayesrc.data.simulate_family`: 2,000
items, K = 10; half the items of each non-reference version changed, spread 1 logit, the versions'
mean shifts +0.4 / 0 / -0.4 logits, so two versions sit close to the reference and one a little
above and below), fits each with the default ``bayesrc.bayes.fit`` (joint model, default sampler,
gate and escalation) and scores, per replicate:

* **bands respect the true order**: every pair of versions in different rank bands is ordered as
  their true mean accuracies over the items are (the issue's goal: in >= 90% of replicates);
* **per-item change coverage**: the share of (item, non-reference version) pairs whose 90%
  interval of Delta p holds the true Delta p (goal 0.87-0.93);
* the number of bands, P(best) of the true best version, the gate and the fit's wall time.

One JSON row per replicate goes to ``--out``; replicates already there are skipped, so a long run
can be resumed. ``--quick``: 3 replicates of 300 items.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

SHIFTS = (0.4, 0.0, -0.4)  # per non-reference version, logits


def replicate_row(r: int, n_items: int, k: int) -> dict:
    """Simulate replicate ``r``'s family, fit it with the defaults and score it as ``bayesrc truth``
    scores a family (:func:`bayesrc.truth.family.fit_scores`, :func:`~bayesrc.truth.family.band_scores`)."""
    import pandas as pd

    from bayesrc.bayes import fit
    from bayesrc.data import simulate_family
    from bayesrc.truth.family import band_scores, fit_scores

    fam = simulate_family(
        n_items, k, versions=len(SHIFTS) + 1, shifts=list(SHIFTS), pi_change=0.5, sigma_delta=1.0, seed=1000 + r
    )
    t0 = time.perf_counter()
    res = fit(fam.counts)
    wall = time.perf_counter() - t0
    dp = {v: fam.p[:, j] - fam.p[:, 0] for j, v in enumerate(fam.versions) if j}
    scores = fit_scores("joint", res, fam.truth["item_id"].to_numpy(), dp)
    return {
        "replicate": r,
        "items": n_items,
        "k": k,
        "gate_passed": bool(res.diagnostics.passed),
        "attempts": len(res.payload.get("attempts") or []),
        **band_scores(res, pd.Series(fam.p.mean(0), index=fam.versions)),
        "change_coverage90": float(np.mean([row["coverage90"] for row in scores])),
        "true_mean": {v: float(m) for v, m in fam.mean_accuracy.items()},
        "band": {str(v): int(b) for v, b in res.versions_table.set_index("version")["band"].items()},
        "wall_s": round(wall, 1),
    }


def done_replicates(out: Path | None, n_items: int, k: int) -> dict[int, dict]:
    """Rows already in ``out`` for this size (a resumed run skips them)."""
    from bayesrc.io import iter_jsonl

    if out is None or not out.is_file():
        return {}
    return {row["replicate"]: row for _, row in iter_jsonl(out) if row["items"] == n_items and row["k"] == k}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 replicates of 300 items")
    ap.add_argument(
        "--out", type=Path, default=None, help="append one JSON row per replicate here; replicates there are skipped"
    )
    args = ap.parse_args()
    n_rep, n_items = (3, 300) if args.quick else (args.replicates, args.items)
    rows = done_replicates(args.out, n_items, args.k)
    for r in range(n_rep):
        if r in rows:
            continue
        rows[r] = replicate_row(r, n_items, args.k)
        print(json.dumps(rows[r]), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(rows[r]) + "\n")
    got = [rows[r] for r in range(n_rep)]
    cov = np.array([row["change_coverage90"] for row in got])
    print(f"{n_rep} families of {len(SHIFTS) + 1} versions, {n_items} items, K = {args.k}")
    print(f"gate passed: {sum(row['gate_passed'] for row in got)} of {n_rep}")
    print(f"bands respect the true order: {sum(row['order_respected'] for row in got)} of {n_rep} (goal >= 90%)")
    print(
        f"per-item change coverage (90% intervals): mean {cov.mean():.3f}, range {cov.min():.3f}-{cov.max():.3f} "
        "(goal 0.87-0.93)"
    )
    print(
        f"bands per family: {sorted(row['n_bands'] for row in got)}; "
        f"wall per fit {np.mean([row['wall_s'] for row in got]):.0f} s"
    )


if __name__ == "__main__":
    main()
