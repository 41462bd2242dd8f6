"""Benchmark: Bayesian item models on 2,000 items x 2 versions x K = 10, side by side.

    .venv/bin/python benchmarks/bayes.py [--items 2000] [--skip-full] [--skip-change] [--skip-pymc]
        [--skip-collapsed] [--full-draws 1000]

Prints wall time (sampling + conversion, compile included) and ESS per second
(min bulk ESS over the gated quantities / wall time) for the collapsed beta-binomial
(NumPyro, PyMC; cold = XLA / numba compile included, warm = compile cached, and one chain
per core), full NUTS over every p (NumPyro, PyMC/nutpie; one chain per core, ``--full-draws``
warm-up steps and draws: ESS per second is a rate, so shorter full runs still compare),
with ratios to the first collapsed NumPyro run; then the paired change model's fit time and gate status: collapsed
(NumPyro, PyMC/nutpie; NUTS on the hyperparameters, exact item draws) and full (NumPyro).
Goals (issue 3): collapsed <= 3 s with ESS >= 1000; change model <= 120 s on 2 cores, gate passed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={os.cpu_count() or 1}")
# A fresh XLA compile cache, so that "cold" runs really compile (bayesrc keeps one under ~/.cache).
os.environ.setdefault("BAYESRC_JAX_CACHE", tempfile.mkdtemp(prefix="bayesrc-bench-jax-"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--skip-pymc", action="store_true")
    ap.add_argument("--skip-change", action="store_true")
    ap.add_argument("--skip-collapsed", action="store_true", help="only the full NUTS runs (and the change model)")
    ap.add_argument("--full-draws", type=int, default=1000, help="draws (and warm-up steps) of the full NUTS runs")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from bayesrc.bayes import SamplerConfig, gate, gated_vars, model_inputs, sample
    from bayesrc.data import item_counts, simulate_pair

    sim = simulate_pair(args.items, 10, seed=args.seed)
    data = model_inputs(item_counts(sim.trials_v1, sim.trials_v2))
    print(f"{data.n_items} items x 2 versions x K = 10, {len(data.domains)} domains, {args.chains} chains, cores={os.cpu_count()}")

    # The collapsed samplers twice: cold (XLA / numba compile included) and warm (compile cached);
    # then one chain per core (one parallel round, as `make demo` runs the change model).
    one_round = max(2, min(args.chains, os.cpu_count() or 1))
    collapsed = SamplerConfig(chains=args.chains, draws=1000, tune=500, seed=args.seed)
    per_core = SamplerConfig(chains=one_round, draws=1000, tune=500, seed=args.seed)
    if args.skip_collapsed:
        runs = [(f"collapsed, {one_round} chains", "numpyro", True, per_core)]  # the baseline of the ratios (cold)
    else:
        runs = [("collapsed", "numpyro", True, collapsed), ("collapsed, warm", "numpyro", True, collapsed)]
        runs += [] if one_round == args.chains else [(f"collapsed, warm, {one_round} chains", "numpyro", True, per_core)]
        if not args.skip_pymc:
            runs += [("collapsed", "pymc", True, collapsed), ("collapsed, warm", "pymc", True, collapsed)]
    if not args.skip_full:
        full = SamplerConfig(chains=one_round, draws=args.full_draws, tune=args.full_draws, seed=args.seed)
        runs.append((f"full, {one_round} chains", "numpyro", False, full))
        if not args.skip_pymc:
            runs.append((f"full, {one_round} chains", "pymc", False, full))
    rows = []
    for kind, backend, collapsed, cfg in runs:
        t0 = time.perf_counter()
        dt = sample(data, "betabinom", backend, collapsed=collapsed, config=cfg)
        wall = time.perf_counter() - t0
        hyper = gate(dt, ["logit_mu", "log_kappa"])
        allp = gate(dt, gated_vars("betabinom"))
        rows.append((f"bb {kind} [{backend}]", wall, hyper.min_ess_bulk, allp.min_ess_bulk, allp.passed))
        print(f"  done: {rows[-1][0]}: {wall:.2f} s, min ESS bulk {allp.min_ess_bulk:.0f}", flush=True)
    base = rows[0]
    print(f"\n{'run':34s} {'wall s':>8s} {'ESS hyper':>10s} {'ESS all':>9s} {'ESS/s':>9s} {'time x':>7s} {'ESS/s x':>8s} gate")
    for name, wall, ess_h, ess_all, passed in rows:
        rate = ess_all / wall
        print(f"{name:34s} {wall:8.2f} {ess_h:10.0f} {ess_all:9.0f} {rate:9.1f} {wall / base[1]:7.2f} {(base[3] / base[1]) / rate:8.1f} {'passed' if passed else 'FAILED'}")
    print("(time x: wall / collapsed-numpyro wall; ESS/s x: collapsed-numpyro ESS/s over this run's)")
    for name, wall, _, ess_all, _ in rows:
        if "collapsed" in name:
            print(f"goal collapsed <= 3 s with ESS >= 1000, {name}: {wall:.2f} s, min ESS {ess_all:.0f} -> {'met' if wall <= 3 and ess_all >= 1000 else 'NOT met'}")

    if not args.skip_change:
        change_runs = [("collapsed", "numpyro", True)] + ([] if args.skip_pymc else [("collapsed", "pymc", True)])
        change_runs += [] if args.skip_full else [("full", "numpyro", False)]
        print()
        # Collapsed: one chain per core in one round (2 on 2 cores), 500 warm-up steps, as `make demo`.
        for kind, backend, collapsed in change_runs:
            cfg = SamplerConfig(chains=one_round if collapsed else args.chains, draws=1000, tune=500 if collapsed else 1000, seed=args.seed)
            t0 = time.perf_counter()
            dt = sample(data, "change", backend, collapsed=collapsed, config=cfg)
            wall = time.perf_counter() - t0
            g = gate(dt, gated_vars("change", collapsed=collapsed))
            print(
                f"change model {kind} [{backend}]: {wall:.1f} s, max R-hat {g.max_rhat:.4f}, min ESS bulk {g.min_ess_bulk:.0f} / "
                f"tail {g.min_ess_tail:.0f}, divergences {g.divergences}, gate {'passed' if g.passed else 'FAILED: ' + g.worst}; "
                f"goal <= 120 s with the gate passed -> {'met' if wall <= 120 and g.passed else 'NOT met'}",
                flush=True,
            )


if __name__ == "__main__":
    main()
