"""Benchmark: the prior grid (``bayesrc sensitivity prior``, the default grid) reweighted against refitted.

    .venv/bin/python benchmarks/prior_sensitivity.py [--data sim300,q3] [--seed 0]

For each dataset, two fresh processes (each with an empty JAX compilation cache, as a user's
first run) run :func:`bayesrc.sensitivity.prior_sensitivity` on the default grid
(:data:`~bayesrc.sensitivity.PRIOR_GRID`, 5 priors): the default, the default prior's fit moved
to the others by importance weights where they pass their gate (``reweight=True``), and five NUTS
fits (``reweight=False``). Prints each
process's wall time (import and compile included), the ratio refit / reweight, which rows were
reweighted (Pareto k, ESS), and how far each reweighted row is from its refit: |d pi_mean|,
|d sigma_delta_mean|, |d rci_estimated_fdp| and the change in the items selected.

Datasets: ``sim300``, 300 simulated items (4 domains, a 4-letter covariate, as
``benchmarks/bayes.py``); ``q3``, the bundled exact Q4_K_M -> Q3_K_M pair sampled at K = 10
(``bayesrc truth``'s replicate 0, 300 items). Goal (issue 28, 2 cores): <= 1 min at 300 items.
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
t0 = time.perf_counter()
import numpy as np
name, reweight, seed = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
if name == "q3":
    from bayesrc import datasets
    from bayesrc.data.exact import load_exact
    from bayesrc.truth.score import replicate_datasets
    root = datasets.path("exact_gemma")
    [(_, counts, _, _)] = replicate_datasets(load_exact(root / "q4"), load_exact(root / "q3"), k=10, seed=0,
                                             replicates=[seed])
else:
    from bayesrc.data import item_counts, simulate_pair
    from bayesrc.data.simulate import item_truth
    truth = item_truth(300, domains=["physics", "law", "psychology", "economics"], sigma_theta=2.0, sigma_delta=1.0,
                       seed=1 + seed)
    truth["correct_answer"] = np.array(list("ABCD"))[np.random.default_rng(1 + seed).integers(0, 4, 300)]
    sim = simulate_pair(truth=truth, k=10, seed=1 + seed)
    counts = item_counts(sim.trials_v1, sim.trials_v2)
from bayesrc.bayes import SamplerConfig
from bayesrc.sensitivity import prior_sensitivity
t = prior_sensitivity(counts, config=SamplerConfig(seed=seed, progress=False), reweight=reweight)
cols = ["prior", "method", "gate_passed", "pareto_k", "ess", "pi_mean", "sigma_delta_mean", "rci_estimated_fdp",
        "detections", "improved", "deteriorated"]
print(json.dumps({"wall_s": time.perf_counter() - t0, "rows": t[cols].to_dict(orient="records")}))
"""


def run(name: str, reweight: bool, seed: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), BAYESRC_JAX_CACHE=tempfile.mkdtemp(prefix="bayesrc-bench-jax-"))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name, "1" if reweight else "0", str(seed)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        sys.exit(f"{name}: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(lines[-1])


def compare(name: str, rw: dict, rf: dict) -> None:
    print(
        f"== {name}: reweight {rw['wall_s']:.1f} s, refit every prior {rf['wall_s']:.1f} s, "
        f"ratio {rf['wall_s'] / rw['wall_s']:.2f}x"
    )
    for a, b in zip(rw["rows"], rf["rows"]):
        diff = {k: abs(a[k] - b[k]) for k in ("pi_mean", "sigma_delta_mean", "rci_estimated_fdp")}
        print(
            f"  {a['prior']:<16} {a['method']:<10} gate {a['gate_passed']!s:<5} k {a['pareto_k']:.2f} "
            f"ESS {a['ess']:6.0f} | "
            f"pi {a['pi_mean']:.3f} vs {b['pi_mean']:.3f} (|d| {diff['pi_mean']:.3f}), "
            f"sigma_delta |d| {diff['sigma_delta_mean']:.3f}, "
            f"RCI FDP |d| {diff['rci_estimated_fdp']:.3f}, selected {a['improved']}+{a['deteriorated']} "
            f"vs {b['improved']}+{b['deteriorated']}"
        )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="sim300,q3", help="comma-separated: sim300, q3")
    ap.add_argument(
        "--seed", type=int, default=0, help="sampler seed and replicate (q3) / simulation seed offset (sim300)"
    )
    args = ap.parse_args(argv)
    for name in args.data.split(","):
        rw, rf = run(name, True, args.seed), run(name, False, args.seed)
        compare(name, rw, rf)


if __name__ == "__main__":
    main()
