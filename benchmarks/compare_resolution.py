"""Resolution first: `bayesrc compare`'s defaults on pairs with known truth, and whether "what would decide it" does.

    .venv/bin/python benchmarks/compare_resolution.py [--replicates 8]
        [--out benchmarks/results/compare_resolution.jsonl]

Part 1 runs :func:`bayesrc.compare.compare` with every default (the margin of 0.02 included) on the
simulated pairs of ``tests/test_compare_margin.py`` (no change on 2,000 items, a mean drop of 0.01 on
100, a clear deterioration on 60; same seeds) and the no-change pair of 120 items of the CI guide, and
prints each decision with what the comparison could have detected (``resolution``) and, where
inconclusive, what would decide it (``margin.would_decide``).

Part 2 checks that figure against the truth: the 0.01 drop is within the margin, so a comparison that
decides it should pass. It draws ``--replicates`` new benchmarks of the drop's design at the N the
100-item comparison named (same K, same share of items that drop), runs the gate on each and prints the
share decided (the figure's promise: 80% if the mean is what the 100-item posterior said; the true mean
may differ) and the share passed. Each row is stored in ``--out`` as it finishes (resumable).
About 20 minutes on 2 cores with 8 replicates.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tests' pair designs, one implementation

from test_compare_margin import DOWN, drop_truth  # noqa: E402

from bayesrc.bayes.samplers import configure_host_devices  # noqa: E402
from bayesrc.data import item_counts, simulate_pair  # noqa: E402


def pairs() -> dict:
    """name -> (simulated pair, true mean dp): the tests' three pairs and the guide's 120-item no-change pair."""
    return {
        "no change, 2,000 items": simulate_pair(2000, 10, models=("base", "cand"), seed=21, pi_change=0.0),
        "no change, 120 items": simulate_pair(120, 10, models=("base", "cand"), seed=0, pi_change=0.0),
        "0.01 drop, 100 items": simulate_pair(
            100, 10, models=("base", "cand"), seed=2, truth=drop_truth(100, 0.01, seed=2)
        ),
        "clear deterioration, 60 items": simulate_pair(
            60, 10, models=("base", "cand"), seed=21, pi_change=0.4, domain_shift=DOWN, sigma_delta=1.0
        ),
    }


def gate_row(name: str, sim) -> dict:
    """One default gate on a simulated pair: its decision, resolution and what would decide it."""
    from bayesrc.compare import compare
    from bayesrc.config import SamplerConfig

    t0 = time.perf_counter()
    res = compare(item_counts(sim.trials_v1, sim.trials_v2), config=SamplerConfig(seed=1, progress=False))
    m, r, a = res.margin, res.resolution, res.bayes["aggregate"]
    w = (m or {}).get("would_decide") or {}
    return {
        "pair": name,
        "true_mean_dp": round(float(sim.truth["delta_p"].mean()), 4),
        "decision": res.decision,
        "exit": res.exit_code,
        "p_within": round(m["aggregate"]["p_within"], 3),
        "mean_dp_90": f"{a['mean']:+.3f} ({a['lo90']:+.3f} to {a['hi90']:+.3f})",
        "mde": round(r["aggregate_mde"], 4),
        "resolves_margin": r["resolves_margin"],
        "item_mde": round(r["item_mde"], 2) if r["item_mde"] else None,
        "decide_n": w.get("n_items"),
        "decide_k": w.get("k"),
        "cheaper": w.get("cheaper"),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def replicate_row(n_items: int, replicate: int) -> dict:
    """The drop's design at ``n_items`` (a tenth of the items lose their share of 0.01), one replicate."""
    seed = 1000 + replicate
    sim = simulate_pair(
        n_items,
        10,
        models=("base", "cand"),
        seed=seed,
        truth=drop_truth(n_items, 0.01, seed=seed, n_changed=max(1, n_items // 10)),
    )
    return gate_row(f"0.01 drop, {n_items} items, replicate {replicate}", sim)


def cached(path: Path, key: str, make) -> dict:
    """The row stored under ``key`` in the JSONL file ``path``, or ``make()`` stored there."""
    if path.is_file():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["key"] == key:
                return row
    row = {"key": key, **make()}
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "compare_resolution.jsonl")
    args = ap.parse_args()
    configure_host_devices(2)
    import pandas as pd

    rows = [cached(args.out, name, lambda n=name, s=sim: gate_row(n, s)) for name, sim in pairs().items()]
    print(pd.DataFrame(rows).drop(columns="key").to_string(index=False))
    n_new = next(r["decide_n"] for r in rows if r["pair"].startswith("0.01 drop"))
    if n_new is None:
        print("the 100-item drop named no N: nothing to check")
        return
    reps = [cached(args.out, f"drop@{n_new}#{i}", lambda i=i: replicate_row(n_new, i)) for i in range(args.replicates)]
    table = pd.DataFrame(reps).drop(columns="key")
    print(table.to_string(index=False))
    decided = table["decision"].isin(["pass", "fail"])
    print(
        f"at N = {n_new} (named by the 100-item comparison): decided {decided.mean():.2f} of {len(table)} replicates "
        f"(the figure's 0.80), passed {(table['decision'] == 'pass').mean():.2f}"
    )


if __name__ == "__main__":
    main()
