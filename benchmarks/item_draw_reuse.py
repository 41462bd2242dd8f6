"""Benchmark: the change model's item draws reuse their compiled code across datasets and processes.

    .venv/bin/python benchmarks/item_draw_reuse.py [--items 40,300,2000] [--baseline REF]

For each size and code version (this tree, and REF's in a ``git worktree``), with one fresh JAX
persistent compilation cache per pair of runs: a fresh process draws the items of one simulated
dataset (``simulate_pair(n, 10, seed=0)``; cold: it compiles and fills the cache), then a second
fresh process those of another dataset of the same size (``seed=1``: other counts, other cells,
the same shape buckets). Each times ``item_draws`` over 4 chains x 500 draws of a fixed synthetic
hyperparameter posterior, as a default fit draws them after its gate. Where the data are constants
of the compiled code the second dataset compiles again; where they are arguments it finds the
first one's code in the cache. Prints both times per version and the ratio of the second runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bayes import ROOT, baseline_tree

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, xarray as xr
import bayesrc
from bayesrc.bayes.change_grid import cell_stats
from bayesrc.bayes.change_item_draws import item_draws
from bayesrc.bayes.inputs import model_inputs
from bayesrc.data import item_counts, simulate_pair

bayesrc.configure(compile_cache=sys.argv[4])
n, seed = int(sys.argv[2]), int(sys.argv[3])
sim = simulate_pair(n, 10, seed=seed)
cells = cell_stats(model_inputs(item_counts(sim.trials_v1, sim.trials_v2), covariate=None))
rng, d, shape = np.random.default_rng(0), sim.trials_v1["domain"].nunique(), (4, 500)
post = xr.Dataset({
    "mu_theta": (("chain", "draw", "domain"), rng.normal(0.5, 0.3, (*shape, d))),
    "sigma_theta": (("chain", "draw", "domain"), rng.gamma(4, 0.4, (*shape, d))),
    "shift": (("chain", "draw", "domain"), rng.normal(0, 0.2, (*shape, d))),
    "sigma_delta": (("chain", "draw"), rng.gamma(4, 0.3, shape)),
    "pi": (("chain", "draw"), rng.beta(2, 8, shape)),
})
start = time.perf_counter()
item_draws(post, cells, seed=3, progress=False)
print(json.dumps({"s": time.perf_counter() - start, "cells": cells.n_cells, "code": bayesrc.__file__}))
"""


def draw_seconds(tree: Path, n: int, seed: int, cache: str) -> float:
    """Wall time of ``item_draws`` in a fresh process on ``tree``'s code."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(n), str(seed), cache],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    r = json.loads(out.stdout.splitlines()[-1])
    assert r["code"].startswith(str(tree)), r["code"]
    return r["s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", default="40,300,2000")
    ap.add_argument(
        "--baseline",
        default="a5b1353",
        help="git ref of the earlier code (the data were constants of the compiled draw)",
    )
    args = ap.parse_args()
    trees = {"this": ROOT, args.baseline: baseline_tree(args.baseline)}
    print(
        f"{'items':>6} | "
        + " | ".join(f"{name + ': first, second dataset s':>34}" for name in trees)
        + " | second: ratio"
    )
    for n in map(int, args.items.split(",")):
        second = {}
        cells = []
        for name, tree in trees.items():
            with tempfile.TemporaryDirectory(prefix="bayesrc-bench-jax-") as cache:
                first = draw_seconds(tree, n, 0, cache)
                second[name] = draw_seconds(tree, n, 1, cache)
            cells.append(f"{first:>15.1f}, {second[name]:>16.1f}")
        this, base = second.values()
        print(f"{n:>6} | " + " | ".join(f"{c:>34}" for c in cells) + f" | {base / this:.1f}x")


if __name__ == "__main__":
    main()
