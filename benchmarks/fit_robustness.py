"""Benchmark: does the default change-model fit pass its own gate on the data users bring?

    .venv/bin/python benchmarks/fit_robustness.py [--quick] [--kinds K1,K2] [--backend numpyro|pymc] [--out rows.jsonl]

Fits ``bayesrc.bayes.fit(counts)`` with every default (gate R-hat <= 1.01, bulk and tail ESS
>= 400, no divergences; escalation on) to 63 datasets of eight kinds and prints, per kind, how
many passed on the first attempt, after escalation, or failed, with wall time per fit; on the
bundled exact pairs also the truth scores (coverage of the 90% intervals of Delta p, RCI's
estimated against realised false-discovery proportion). ``--quick`` fits a seeded eighth
(every eighth dataset); ``--kinds`` only the kinds named (e.g. ``null-300-k10,exact-q3-k10``). One JSON row per
fit goes to ``--out``; datasets already there are skipped, so a long run can be resumed (the table covers them all).

Kinds:

* ``null-N-kK``: no-change pairs (p_v2 = p_v1) of N = 40, 300, 2,000 simulated items at K = 5, 10, 20;
* ``exact-PAIR-kK``: the bundled exact Gemma-3-270M runs sampled at K = 10 and 40: Q4_K_M
  against its Q3_K_M re-quantisation (``q3``), a re-templated prompt (``prompt2``), that prompt
  change with its moves under 0.05 undone (``prompt2-reset``), and Q4_K_M against itself (``same``);
* ``letters``: letter-shaped simulated changes (:func:`bayesrc.data.simulate.letter_shift_truth`), 300 items;
* ``mmlu-pro``: MMLU-Pro-shaped simulations: 14 domains x 10 letters, 2,000 items, K = 10.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))


def null_pair(n_items: int, k: int, seed: int):
    """Counts of two identical versions of ``n_items`` simulated items."""
    from bayesrc.data import item_counts, simulate_pair
    from bayesrc.data.simulate import item_truth

    truth = item_truth(n_items, sigma_theta=1.5, pi_change=0.0, seed=seed)
    sim = simulate_pair(truth=truth, k=k, seed=seed)
    return item_counts(sim.trials_v1, sim.trials_v2), None


def exact_pair(pair: str, k: int, replicate: int):
    """Counts of replicate ``replicate`` of a bundled exact pair at K = ``k``, and the exact Delta p."""
    from truth_default import reset_small_changes

    from bayesrc import datasets
    from bayesrc.data.exact import load_exact
    from bayesrc.truth.score import replicate_datasets

    v1 = load_exact(datasets.path("exact_gemma/q4"))
    v2 = {
        "q3": lambda: load_exact(datasets.path("exact_gemma/q3")),
        "prompt2": lambda: load_exact(datasets.path("exact_gemma/q4-prompt2")),
        "prompt2-reset": lambda: reset_small_changes(v1, load_exact(datasets.path("exact_gemma/q4-prompt2"))),
        "same": lambda: v1,
    }[pair]()
    [(_, counts, dp, _)] = replicate_datasets(v1, v2, k=k, seed=1000 + k, replicates=[replicate])
    return counts, dp


def letters(seed: int):
    from bayesrc.data import item_counts, simulate_pair
    from bayesrc.data.simulate import letter_shift_truth

    sim = simulate_pair(truth=letter_shift_truth(300, seed=seed), k=10, seed=seed)
    return item_counts(sim.trials_v1, sim.trials_v2), sim.truth["delta_p"].to_numpy()


def mmlu_pro_shaped(seed: int, n_items: int = 2000):
    """14 domains, 10 answer letters, half the items changed (the default covariate rule leaves the
    140 (domain, letter) strata out, as it does on real MMLU-Pro)."""
    from bayesrc.data import item_counts, simulate_pair
    from bayesrc.data.simulate import item_truth

    domains = [f"domain{d:02d}" for d in range(14)]
    truth = item_truth(n_items, domains=domains, sigma_theta=2.0, sigma_delta=1.0, seed=seed)
    truth["correct_answer"] = np.array(list("ABCDEFGHIJ"))[np.random.default_rng(seed).integers(0, 10, n_items)]
    sim = simulate_pair(truth=truth, k=10, seed=seed)
    return item_counts(sim.trials_v1, sim.trials_v2), truth["delta_p"].to_numpy()


def datasets_to_fit():
    """(kind, label, loader) for the 63 datasets, in a fixed order."""
    out = []
    for n_items in (40, 300, 2000):
        for k in (5, 10, 20):
            for seed in (1, 2, 3):
                out.append((f"null-{n_items}-k{k}", f"seed {seed}", lambda n=n_items, k=k, s=seed: null_pair(n, k, s)))
    for pair in ("q3", "prompt2", "prompt2-reset", "same"):
        for k, reps in ((10, 5), (40, 2)):
            for r in range(reps):
                out.append((f"exact-{pair}-k{k}", f"replicate {r + 1}", lambda p=pair, k=k, r=r: exact_pair(p, k, r)))
    out += [("letters", f"seed {s}", lambda s=s: letters(s)) for s in range(4)]
    out += [("mmlu-pro", f"seed {s}", lambda s=s: mmlu_pro_shaped(s)) for s in range(4)]
    return out


def fit_row(kind: str, label: str, loader, backend: str) -> dict:
    from bayesrc.bayes import fit, realised_fdp

    counts, dp = loader()
    t0 = time.perf_counter()
    res = fit(counts, backend=backend)
    row = {
        "kind": kind,
        "dataset": label,
        "n_items": int(counts.sizes["item"]),
        "backend": backend,
        "wall_s": round(time.perf_counter() - t0, 2),
        "attempts": len(res.payload["attempts"]),
        "passed": bool(res.diagnostics.passed),
        "worst": res.diagnostics.worst,
        "max_rhat": res.diagnostics.max_rhat,
        "min_ess_bulk": res.diagnostics.min_ess_bulk,
        "min_ess_tail": res.diagnostics.min_ess_tail,
        "divergences": res.diagnostics.divergences,
        "rci_fdp_estimate": res.crosscheck["rci_estimated_fdp"],
    }
    if dp is not None:
        it = res.items.set_index("item_id").reindex(counts["item"].values)
        row["coverage90"] = float(np.mean((it["dp_lo90"].to_numpy() <= dp) & (dp <= it["dp_hi90"].to_numpy())))
        row["rci_fdp_realised"] = realised_fdp(it["rci_class"].to_numpy(dtype=object), dp)
    return row


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per kind: datasets, passed first time, passed after escalation, failed, median wall; truth scores where known."""
    g = rows.groupby("kind", sort=False)
    out = pd.DataFrame(
        {
            "datasets": g.size(),
            "first": g.apply(lambda d: int((d.passed & (d.attempts == 1)).sum())),
            "escalated": g.apply(lambda d: int((d.passed & (d.attempts > 1)).sum())),
            "failed": g.apply(lambda d: int((~d.passed).sum())),
            "median_wall_s": g["wall_s"].median(),
        }
    )
    if "coverage90" in rows:
        out["coverage90"] = g["coverage90"].mean().round(3)
        out["rci_fdp_est"] = g["rci_fdp_estimate"].mean().round(3)
        out["rci_fdp_real"] = g["rci_fdp_realised"].mean().round(3)
    return out


def previous_rows(out: Path | None) -> list[dict]:
    """The rows already in ``out`` (a resumed run skips their datasets)."""
    from bayesrc.io import iter_jsonl

    return [row for _, row in iter_jsonl(out)] if out is not None and out.is_file() else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every eighth dataset (8 fits)")
    ap.add_argument("--kinds", default="", help="only these kinds, comma-separated (default: all)")
    ap.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    ap.add_argument("--out", type=Path, default=None, help="append one JSON row per fit here (resumable)")
    args = ap.parse_args()
    todo = datasets_to_fit()
    known = dict.fromkeys(kind for kind, _, _ in todo)
    kinds = args.kinds.split(",") if args.kinds else list(known)
    if unknown := [k for k in kinds if k not in known]:
        ap.error(f"--kinds: no such kind {', '.join(unknown)} (kinds: {', '.join(known)})")
    todo = [t for t in (todo[::8] if args.quick else todo) if t[0] in kinds]
    wanted = {(kind, label) for kind, label, _ in todo}
    rows = [r for r in previous_rows(args.out) if r["backend"] == args.backend and (r["kind"], r["dataset"]) in wanted]
    done = {(r["kind"], r["dataset"]) for r in rows}
    for kind, label, loader in todo:
        if (kind, label) in done:
            continue
        row = fit_row(kind, label, loader, args.backend)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
    rows = pd.DataFrame(rows)
    print(table(rows).to_string())
    n, ok = len(rows), int(rows["passed"].sum())
    print(
        f"passed the gate: {ok} of {n} ({ok / n:.1%}); "
        f"first attempt {int((rows.passed & (rows.attempts == 1)).sum())}, "
        f"after escalation {int((rows.passed & (rows.attempts > 1)).sum())}"
    )


if __name__ == "__main__":
    main()
