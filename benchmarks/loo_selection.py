"""Does PSIS-LOO pick the model that generated the data? (issue 31)

    python benchmarks/loo_selection.py [--replicates 20] [--items 60] [--scenarios model betabinom] [--backend numpyro]

For each replicate of a simulated scenario of ``benchmarks/ppc_calibration.py`` (the same
datasets: ``model`` drawn from the change model itself, ``betabinom`` from the beta-binomial
itself), both candidates are fitted with every default (the change model without a covariate, as
the simulations have no letter structure, and the collapsed beta-binomial) and ranked by
:func:`bayesrc.bayes.compare`. Prints one JSON line per replicate (the winner, ELPD difference and
its SE, both gates) and per scenario the share of replicates whose winner is the generating model,
and the share where the difference also exceeds 2 SE. Goal (issue 31): the generating model picked
in >= 90% of replicates.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from ppc_calibration import counts_for, replicate_rows

CANDIDATES = {"model": "change", "betabinom": "betabinom"}  # scenario -> the model that generated it


def one(scenario: str, replicate: int, n_items: int, backend: str) -> dict:
    from bayesrc.bayes import compare, fit

    t0 = time.perf_counter()
    counts = counts_for(scenario, replicate, n_items)
    fits = {
        "change": fit(counts, covariate=None, backend=backend),
        "betabinom": fit(counts, model="betabinom", backend=backend),
    }
    table = compare(fits).table
    winner, runner_up = table.index[0], table.index[1]
    return {
        "scenario": scenario,
        "replicate": replicate,
        "backend": backend,
        "generating": CANDIDATES[scenario],
        "winner": winner,
        "picked": winner == CANDIDATES[scenario],
        "elpd_diff": float(-table.loc[runner_up, "elpd_diff"]),
        "dse": float(table.loc[runner_up, "dse"]),
        "gates": {name: bool(f.diagnostics.passed) for name, f in fits.items()},
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--first", type=int, default=0, help="first replicate number (to continue a run)")
    ap.add_argument("--items", type=int, default=60)
    ap.add_argument("--scenarios", nargs="+", choices=tuple(CANDIDATES), default=list(CANDIDATES))
    ap.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    args = ap.parse_args(argv)
    for scenario in args.scenarios:
        rows = replicate_rows(one, scenario, args)
        picked = np.mean([row["picked"] for row in rows])
        clear = np.mean([row["picked"] and row["elpd_diff"] > 2 * row["dse"] for row in rows])
        gates = np.mean([all(row["gates"].values()) for row in rows])
        print(
            json.dumps(
                {
                    "scenario": scenario,
                    "backend": args.backend,
                    "replicates": len(rows),
                    "picked_share": float(picked),
                    "picked_beyond_2se_share": float(clear),
                    "both_gates_passed": float(gates),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
