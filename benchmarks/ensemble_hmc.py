"""Benchmark: many chains in one vectorised HMC (ChEES) against the default NUTS fit, one process.

    pip install blackjax   # not a bayesrc dependency: this script only
    .venv/bin/python benchmarks/ensemble_hmc.py [--items 40] [--chains-per-device 8] [--warmup 500] [--draws 600]

Issue 28 asks for default fits in seconds and names "chains in parallel" as one way. NUTS cannot
batch chains well (a vmapped NUTS runs every chain's tree to the longest one's: docs/performance.md),
but HMC with one trajectory length for all chains can: ChEES-HMC (Hoffman, Radul & Sountsov 2021,
``blackjax.chees_adaptation`` with a diagonal mass matrix estimated across the ensemble) runs
``--chains-per-device`` chains as one batched gradient per leapfrog step, one ensemble per JAX
device. On ``benchmarks/bayes.py``'s simulated dataset, the change model's collapsed potential (the
sampler's own, data as arguments), this prints the value and gradient's cost for 1, 16 and 64
chains batched, and for both samplers, each run twice in the process
(first: with compilation; second: warm): wall time, leapfrog steps per draw, divergences, and the
gate's max R-hat and min ESS (bulk and tail) over the sampled sites, then the ratio NUTS / ChEES
of the warm runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bayes import ROOT
from nuts_step import DATASET, POTENTIAL

MEASURE = r"""
import numpy as np
import blackjax, optax
from bayesrc.bayes.diagnostics import convergence
from bayesrc.bayes.gating import gated_vars
from bayesrc.config import SamplerConfig, precision

per_device, n_warmup, n_draws = (int(a) for a in sys.argv[4:7])
n_dev = jax.local_device_count()

GATED = gated_vars("change", collapsed=True, covariate=data.n_groups > 1)  # what the default fit's gate checks


def gate(arrays):
    # arrays: name -> (chain, draw, ...); the gate's max R-hat and min bulk/tail ESS over their entries
    worst = [np.inf, np.inf, 0.0]
    for v in arrays.values():
        c = convergence(np.moveaxis(v.reshape(v.shape[0], v.shape[1], -1), -1, 0))
        worst = [min(worst[0], np.nanmin(c["ess_bulk"])), min(worst[1], np.nanmin(c["ess_tail"])),
                 max(worst[2], np.nanmax(c["r_hat"]))]
    return {"min_ess_bulk": round(float(worst[0])), "min_ess_tail": round(float(worst[1])),
            "max_rhat": round(float(worst[2]), 4)}


def nuts(seed):
    t = time.perf_counter()
    dt = cc.change_collapsed_numpyro(data, config=SamplerConfig(seed=seed, progress=False), items=False)
    wall = time.perf_counter() - t
    post, stats = dt["posterior"], dt["sample_stats"]
    sampled = {k: post[k].values for k in GATED if k in post}
    return {"sampler": "NUTS (default)", "wall_s": round(wall, 1),
            "chains x draws": f"{post.sizes['chain']} x {post.sizes['draw']}",
            "steps_per_draw": round(float(stats["n_steps"].mean()), 1), "divergences": int(stats["diverging"].sum()),
            **gate(sampled)}


def chees(seed):
    t = time.perf_counter()
    keys = jax.random.split(jax.random.PRNGKey(seed), per_device * n_dev)
    info = initialize_model(keys, model, model_kwargs={"tables": tables},
                            dynamic_args=True)  # dispersed starts, as NUTS's

    def ensemble(key, z0, tab):
        logdensity = lambda z: -info.potential_fn(tables=tab)(z)
        warmup = blackjax.chees_adaptation(logdensity, per_device, mass_matrix_estimation="diagonal")
        k_warm, k_draw = jax.random.split(key)
        (state, params), _ = warmup.run(k_warm, z0, 0.1, optax.adam(0.025), n_warmup)
        kernel = blackjax.dynamic_hmc(logdensity, **params)

        def draw(st, k):
            st, inf = jax.vmap(kernel.step)(jax.random.split(k, per_device), st)
            return st, (st.position, inf.is_divergent, inf.num_integration_steps)

        return jax.lax.scan(draw, state, jax.random.split(k_draw, n_draws))[1]

    z0 = jax.tree.map(lambda a: a.reshape((n_dev, per_device) + a.shape[1:]), info.param_info.z)
    z, divergent, steps = jax.block_until_ready(
        jax.pmap(ensemble, in_axes=(0, 0, None))(jax.random.split(jax.random.PRNGKey(seed + 1), n_dev), z0, tables))
    wall = time.perf_counter() - t
    # (device, draw, chain, ...) -> (chain, draw, ...)
    to_chains = lambda a: np.moveaxis(np.asarray(a), 2, 1).reshape((n_dev * per_device, n_draws) + a.shape[3:])
    constrained = jax.vmap(info.postprocess_fn(tables=tables))(
        jax.tree.map(lambda a: to_chains(a).reshape(-1, *a.shape[3:]), z))
    sampled = {k: np.asarray(v).reshape(n_dev * per_device, n_draws, *v.shape[1:]) for k, v in constrained.items()
               if k in GATED}
    return {"sampler": "ChEES-HMC", "wall_s": round(wall, 1), "chains x draws": f"{n_dev * per_device} x {n_draws}",
            "steps_per_draw": round(float(np.mean(steps)), 1), "divergences": int(np.sum(divergent)), **gate(sampled)}


with precision():
    starts = {b: initialize_model(jax.random.split(jax.random.PRNGKey(0), b), model, model_kwargs={"tables": tables},
                                  dynamic_args=True) for b in (1, 16, 64)}
    gradients = {b: min(gradient_ms(info, tables, 200, batch=b)) for b, info in starts.items()}
    rows = [nuts(0), nuts(1), chees(0), chees(1)]
print(json.dumps({"gradients": gradients, "rows": rows}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--chains-per-device", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--draws", type=int, default=600)
    args = ap.parse_args()
    script = DATASET + POTENTIAL + MEASURE
    extra = [str(args.chains_per_device), str(args.warmup), str(args.draws)]
    devices = f"--xla_force_host_platform_device_count={os.cpu_count() or 1}"  # as a fit has them: one device per core
    out = subprocess.run(
        [sys.executable, "-c", script, str(args.items), "change", "numpyro", *extra],
        env=dict(os.environ, XLA_FLAGS=f"{devices} {os.environ.get('XLA_FLAGS', '')}".strip()),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        sys.exit((out.stderr.strip().splitlines() or ["?"])[-1])
    got = json.loads(lines[-1])
    rows = got["rows"]
    print(
        "value and gradient, one device: "
        + ", ".join(f"{b} chains {ms:.3f} ms ({ms / int(b):.3f} per chain)" for b, ms in got["gradients"].items())
    )
    for run, r in zip(("first", "warm", "first", "warm"), rows):
        print(
            f"{r['sampler']:>15} {run:>5}: {r['wall_s']:6.1f} s, {r['chains x draws']:>9} draws, "
            f"{r['steps_per_draw']:5.1f} steps/draw, "
            f"{r['divergences']} divergent, max R-hat {r['max_rhat']:.3f}, min ESS bulk {r['min_ess_bulk']}, "
            f"tail {r['min_ess_tail']}"
        )
    print(
        f"NUTS / ChEES, warm wall time: {rows[1]['wall_s'] / rows[3]['wall_s']:.2f}x "
        "(the gate: R-hat <= 1.01, ESS >= 400, no divergences)"
    )


if __name__ == "__main__":
    main()
