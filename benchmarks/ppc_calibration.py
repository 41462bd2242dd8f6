"""How often does the posterior predictive check warn on data the model can have generated? (issue 31)

Scenarios (default sampler settings and gate, ``SamplerConfig()``; one fit per replicate):

* ``no_change``: both versions the same accuracies (``simulate_pair(pi_change=0)``), change model;
* ``model``: drawn from the change model itself (``item_truth``: its generative process), change model;
* ``betabinom``: drawn from the beta-binomial itself (each version's accuracies independent
  Beta draws per domain), beta-binomial;
* ``q3_v0`` / ``q3_default``: the bundled exact Q4_K_M -> Q3_K_M pair at K = 10 (``bayesrc truth``'s
  replicates), the change model before issue 12 (no letter covariate) / the default: the misfit
  the check should find (warn) and its fix (no warning).

Prints one JSON line per fit and a summary line per scenario: the share of fits that warned
(the first three should be at most 0.10; ``q3_v0`` at least 0.8, ``q3_default`` at most 0.2).

    python benchmarks/ppc_calibration.py --replicates 20 --scenarios no_change model
    python benchmarks/ppc_calibration.py --replicates 10 --scenarios q3_v0 q3_default
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

SIM = {
    "domains": ("x", "y"),
    "domain_mean": {"x": -0.3, "y": 0.5},
    "domain_shift": {"x": -0.2, "y": 0.2},
    "sigma_theta": 1.2,
}
SCENARIOS = ("no_change", "model", "betabinom", "q3_v0", "q3_default")


def counts_for(scenario: str, replicate: int, n_items: int):
    """The item counts of one replicate of ``scenario``."""
    from bayesrc.data import item_counts, simulate_pair

    if scenario.startswith("q3"):
        from bayesrc import datasets
        from bayesrc.data.exact import load_exact
        from bayesrc.truth.score import replicate_datasets

        root = datasets.path("exact_gemma")
        [(_, counts, _, _)] = replicate_datasets(
            load_exact(root / "q4"), load_exact(root / "q3"), k=10, seed=0, replicates=[replicate]
        )
        return counts
    seed = 10_000 + 100 * SCENARIOS.index(scenario) + replicate
    if scenario == "betabinom":
        s = simulate_pair(n_items, 10, seed=seed, truth=betabinom_truth(n_items, seed))
        return item_counts(s.trials_v1, s.trials_v2)
    truth = (
        {"pi_change": 0.0, "sigma_delta": 0.6} if scenario == "no_change" else {"pi_change": 0.7, "sigma_delta": 0.8}
    )
    s = simulate_pair(n_items, 10, seed=seed, **SIM, **truth)
    return item_counts(s.trials_v1, s.trials_v2)


def betabinom_truth(n_items: int, seed: int):
    """Item accuracies from the beta-binomial's own process: ``p_iv ~ Beta(mu_dv kappa_dv, (1 - mu_dv) kappa_dv)``,
    the versions independent (two domains; means 0.4 / 0.6 and 0.45 / 0.55, concentration 3 / 5)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    dom = np.repeat(["x", "y"], [n_items // 2, n_items - n_items // 2])
    mu = {"x": (0.4, 0.6), "y": (0.45, 0.55)}
    kappa = {"x": 3.0, "y": 5.0}
    p = np.array([[rng.beta(mu[d][v] * kappa[d], (1 - mu[d][v]) * kappa[d]) for v in (0, 1)] for d in dom])
    return pd.DataFrame(
        {
            "item_id": [f"b{i:05d}" for i in range(n_items)],
            "item_index": np.arange(n_items),
            "domain": dom,
            "p_v1": p[:, 0],
            "p_v2": p[:, 1],
        }
    )


def fit_kwargs(scenario: str) -> dict:
    from bayesrc.truth.score import MODEL_SPECS

    # The simulated scenarios have no letter structure (simulate_pair's letters are random): the change
    # model without the covariate is their generating model, and the check's strata are the domains.
    return {
        "no_change": {"covariate": None},
        "model": {"covariate": None},
        "betabinom": {"model": "betabinom"},
        "q3_v0": MODEL_SPECS["change_v0"],
        "q3_default": MODEL_SPECS["change"],
    }[scenario]


def one(scenario: str, replicate: int, n_items: int, backend: str) -> dict:
    from bayesrc.bayes import fit

    t0 = time.perf_counter()
    res = fit(counts_for(scenario, replicate, n_items), backend=backend, **fit_kwargs(scenario))
    ppc = res.ppc
    return {
        "scenario": scenario,
        "replicate": replicate,
        "backend": backend,
        "warned": bool(ppc["flagged"]),
        "n_flagged": len(ppc["flagged"]),
        "p_adjusted_min": ppc["p_adjusted_min"],
        "p_min": ppc["p_min"],
        "n_tests": ppc["n_tests"],
        "gate": res.diagnostics.passed,
        "first_flagged": [f"{r['stratum']}/{r['stat']}" for r in ppc["flagged"][:3]],
        "elpd": res.loo["elpd"],
        "n_high_k": res.loo["n_high_k"],
        "loo_pit_ks_p": res.loo["loo_pit_ks_p"],
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def replicate_rows(one, scenario: str, args) -> list[dict]:
    """``one(scenario, r, args.items, args.backend)`` for replicates ``args.first`` on, each row printed as it comes."""
    rows = []
    for r in range(args.first, args.first + args.replicates):
        rows.append(one(scenario, r, args.items, args.backend))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--first", type=int, default=0, help="first replicate number (to continue a run)")
    ap.add_argument("--items", type=int, default=60, help="items per simulated replicate (the q3 scenarios have 300)")
    ap.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=["no_change", "model", "betabinom"])
    ap.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    args = ap.parse_args(argv)
    for scenario in args.scenarios:
        rows = replicate_rows(one, scenario, args)
        warned = np.mean([row["warned"] for row in rows])
        gate = np.mean([row["gate"] for row in rows])
        print(
            json.dumps(
                {
                    "scenario": scenario,
                    "backend": args.backend,
                    "replicates": len(rows),
                    "warning_rate": float(warned),
                    "gate_passed": float(gate),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
