"""Validation of the likelihood's band product by FFT where fits go: each cell's log L at posterior draws.

    .venv/bin/python benchmarks/fft_band.py [--k 10,40] [--draws 400]

On the bundled exact Q4_K_M -> Q3_K_M pair sampled at each K (``benchmarks/bayes.py``'s ``q3`` at K = 10), the
default fit (``fit(counts, checks=False)``); at ``--draws`` of its posterior draws, every cell's log L by the
sampler's product (by FFT, double precision) and term by term over the dense band in double precision: the largest
difference, and how far below its rows' maxima the worst-explained cell's likelihood falls (the FFT's round-off can
dominate only below ~e^-20 of them: ``tests/test_bayes_units.py``, ``test_band_product_by_fft_keeps_every_cell_...``).
Prints one JSON line per K, with the fit's wall time and gate.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def score(k: int, n_draws: int) -> dict:
    from bayesrc.bayes import fit, model_inputs
    from bayesrc.bayes.change_grid import cell_stats, likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, cell_loglik, flat_hyper
    from bayesrc.data import item_counts, sample_from_exact
    from bayesrc.datasets import path

    counts = item_counts(
        sample_from_exact(path("exact_gemma/q4"), k=k, seed=1), sample_from_exact(path("exact_gemma/q3"), k=k, seed=2)
    )
    t0 = time.perf_counter()
    res = fit(counts, checks=False)
    wall = time.perf_counter() - t0
    cells = cell_stats(model_inputs(counts))
    by_fft, dense = likelihood_tables(cells), likelihood_tables(cells, pairs=False)
    real = slice(0, cells.n_cells)
    rows_max = (dense["lm1"][dense["cell_u"]] + dense["lm2"][dense["cell_t"]])[real]
    hyper = flat_hyper(res.posterior["posterior"].to_dataset(), cells)
    picks = np.random.default_rng(0).choice(len(hyper[-1]), min(n_draws, len(hyper[-1])), replace=False)
    ops, worst_error, lowest = _ops("numpy"), 0.0, 0.0
    for i in picks:
        h = [v[i] for v in hyper]
        a, b = cell_loglik(ops, *h[:4], 0.0, h[5], by_fft)[real], cell_loglik(ops, *h[:4], 0.0, h[5], dense)[real]
        worst_error = max(worst_error, float(np.abs(a - b).max()))
        lowest = min(lowest, float((b - rows_max).min()))
    d = res.payload["diagnostics"]
    return {
        "k": k,
        "fit_s": round(wall, 1),
        "gate": bool(d["passed"]),
        "max_rhat": round(d["max_rhat"], 4),
        "min_ess_bulk": round(d["min_ess_bulk"]),
        "cells": cells.n_cells,
        "draws": len(picks),
        "max_abs_dlogL": worst_error,
        "lowest_cell_logL_below_rows_max": round(lowest, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="10,40")
    ap.add_argument("--draws", type=int, default=400)
    args = ap.parse_args()
    for k in map(int, args.k.split(",")):
        print(json.dumps(score(k, args.draws)), flush=True)


if __name__ == "__main__":
    main()
