"""Benchmark: ``bayesrc truth`` replicates, this code side by side with an earlier release.

    .venv/bin/python benchmarks/shared_adaptation.py [--pair q3] [--replicates 3] [--methods change]
        [--baseline d90fef9] [--k 10]

Each tree (this code, then ``--baseline`` checked out in a ``git worktree``) runs ``bayesrc truth`` on the
bundled exact pair Q4_K_M -> ``--pair`` in one fresh process with an empty JAX compilation cache, as a user's
first run does. Printed per tree: the process's wall time, each replicate's fit time (``runtime_s``), whether
it passed its gate, and what the replicates score (90% coverage of the exact dp, RCI's false-discovery
estimate against the realised): the speed-up must not move them beyond the replicates' spread. Since
``bayesrc.bayes.shared_adaptation`` (issue 57), each replicate's fit after the first starts from the last
one's adaptation (a 50-transition burn-in instead of a 500-transition warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from bayes import ROOT, baseline_tree

EXACT = ROOT / "bayesrc" / "datasets" / "exact_gemma"


def run_truth(tree: Path, pair: str, replicates: int, methods: str, k: int) -> dict:
    """``bayesrc truth`` on ``tree``'s code in a fresh process: wall time and the replicates' table."""
    out = Path(tempfile.mkdtemp(prefix="bayesrc-truth-bench-")) / "truth"
    env = dict(os.environ, PYTHONPATH=str(tree), BAYESRC_JAX_CACHE=tempfile.mkdtemp(prefix="bayesrc-bench-jax-"))
    cmd = [sys.executable, "-m", "bayesrc", "truth", str(EXACT / "q4"), str(EXACT / pair), "--k", str(k)]
    cmd += ["--replicates", str(replicates), "--methods", methods, "--no-progress", "--out", str(out)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1], "wall_s": wall}
    table = next(out.glob("*replicates*.parquet"))
    return {"wall_s": wall, "replicates": pd.read_parquet(table)}


def describe(name: str, r: dict) -> None:
    if "error" in r:
        print(f"{name}: failed after {r['wall_s']:.1f} s: {r['error']}")
        return
    rep = r["replicates"]
    rep = rep[rep["kind"] == "bayes"]
    print(f"{name}: process {r['wall_s']:.1f} s")
    for method, rows in rep.groupby("method", sort=False):
        fits = ", ".join(f"{s:.1f}" for s in rows["runtime_s"])
        cover = ", ".join(f"{c:.3f}" for c in rows["coverage90"])
        fdp = ", ".join(f"{e:.3f}/{a:.3f}" for e, a in zip(rows["rci_fdp_estimate"], rows["rci_fdp_realised"]))
        print(f"  {method}: fits {fits} s; gate {rows['gate_passed'].tolist()}; coverage90 {cover}")
        print(f"  {method}: RCI-FDP estimate/realised {fdp}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="q3", help="the exact run beside q4 in bayesrc/datasets/exact_gemma")
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument("--methods", default="change")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--baseline", default="d90fef9", help="git ref of the earlier code ('' to skip)")
    args = ap.parse_args()
    trees = {"this": ROOT} | ({args.baseline: baseline_tree(args.baseline)} if args.baseline else {})
    results = {name: run_truth(tree, args.pair, args.replicates, args.methods, args.k) for name, tree in trees.items()}
    for name, r in results.items():
        describe(name, r)
    if args.baseline and not any("error" in r for r in results.values()):
        ratio = results[args.baseline]["wall_s"] / results["this"]["wall_s"]
        print(f"process wall time, {args.baseline} / this: {ratio:.2f}x")
    print(json.dumps({n: r["wall_s"] for n, r in results.items()}))


if __name__ == "__main__":
    main()
