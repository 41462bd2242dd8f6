"""Benchmark: one value-and-gradient call of the collapsed change model's likelihood, this code
against an earlier release, side by side.

    .venv/bin/python benchmarks/change_likelihood.py [--pair q3] [--baseline bb41b19] [--rounds 3] [--calls 200]

NUTS spends nearly all of a change-model fit in value-and-gradient calls of the collapsed
likelihood. This times one jitted call (JAX, float64) on replicate 1 of a bundled real-truth
pair with the letter covariate (the shape ``bayesrc truth`` fits) at the prior's centre (the data as arguments, as
in the sampler), in a fresh process per round for this code and for ``--baseline`` (checked out in a ``git worktree``;
default the last commit before issue 28, whose likelihood integrated per stratum on a
standardised grid), alternating, and prints ms per call and the ratio. The two are different
quadratures of the same model (``tests/test_bayes_units.py`` checks this one against brute force).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import numpy as np
from bayesrc import datasets
try:  # the collapsed model's data side and likelihood, modules of their own since issue 61
    from bayesrc.bayes import change_grid as grid, change_likelihood as lik
except ImportError:  # an earlier release (the baseline): both in change_collapsed
    from bayesrc.bayes import change_collapsed as grid, change_collapsed as lik
from bayesrc.bayes.inputs import model_inputs
from bayesrc.config import precision, prepare_jax
from bayesrc.data.exact import load_exact
from bayesrc.truth.score import replicate_datasets
pair, calls = sys.argv[1], int(sys.argv[2])
v1, v2 = load_exact(datasets.path("exact_gemma/q4")), load_exact(datasets.path(f"exact_gemma/{pair}"))
[(_, counts, _, _)] = replicate_datasets(v1, v2, k=10, seed=0, replicates=[0])
data = model_inputs(counts, covariate="auto")
cells = grid.cell_stats(data)
jax = prepare_jax()
import jax.numpy as jnp
with precision():
    s = len(cells.stratum_dom)
    hyper = (jnp.full(s, -0.5), jnp.full(s, 1.5), jnp.full(s, 0.1), jnp.full(s, 0.4))
    if hasattr(grid, "likelihood_tables"):  # the logit grid: the data enter as arguments, as in the sampler
        band = getattr(grid, "SAMPLER_BAND_DTYPE", None)  # the samplers' band table precision, where the code has one
        tables = {k: jnp.asarray(v)
                  for k, v in (grid.likelihood_tables(cells, band) if band else grid.likelihood_tables(cells)).items()}
        f = lambda h, pi, tables: jnp.sum(tables["weight"] * lik.cell_loglik(lik._ops("jax"), *h, 0.0, pi, tables))
    else:  # the standardised per-stratum grid (before issue 28)
        tables = None
        f = lambda h, pi, tables: jnp.sum(cells.weight * lik.cell_loglik(lik._ops("jax"), *h, 0.0, pi, cells))
    g = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
    jax.block_until_ready(g(hyper, 0.8, tables))
    t0 = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(g(hyper, 0.8, tables))
print(json.dumps({"ms": (time.perf_counter() - t0) / calls * 1e3, "strata": s, "cells": cells.n_cells}))
"""


def run(tree: Path, pair: str, calls: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), BAYESRC_JAX_CACHE="")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, pair, str(calls)], env=env, cwd=tree, capture_output=True, text=True
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        raise SystemExit(f"{tree}: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="q3")
    ap.add_argument("--baseline", default="bb41b19")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    base = Path(tempfile.gettempdir()) / f"bayesrc-baseline-{args.baseline}"
    if not base.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
            check=True,
            capture_output=True,
        )
    for r in range(args.rounds):
        new, old = run(ROOT, args.pair, args.calls), run(base, args.pair, max(args.calls // 10, 10))
        print(
            f"round {r + 1}: this {new['ms']:.2f} ms, {args.baseline} {old['ms']:.2f} ms per value-and-gradient call "
            f"({new['strata']} strata, {new['cells']} cells): {old['ms'] / new['ms']:.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
