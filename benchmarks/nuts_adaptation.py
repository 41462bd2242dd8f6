"""Benchmark: how the warm-up's mass matrix sets the default change fit's leapfrog steps, and what nutpie does.

    .venv/bin/python benchmarks/nuts_adaptation.py [--seeds 0,1] [--variants numpyro,gradient,early,nutpie]

On the bundled exact Q4_K_M -> Q3_K_M pair (300 items, K = 10; ``benchmarks/bayes.py``'s ``q3``), the default
collapsed change model's potential (NumPyro's, the sampler's tables as arguments), two chains of 500 warm-up
transitions and 500 draws (one per JAX device, as a fit's first round), one fresh process per row:

* ``numpyro``: NumPyro's NUTS and its windowed warm-up (Stan's schedule: the unit mass matrix for 75 transitions, then
  windows of 25, 50, 100 and 200 whose draws' variance sets the diagonal), as a default fit runs it;
* ``gradient``: the same schedule, each window's diagonal set from its draws *and their gradients*,
  ``sqrt(var(z) / var(grad))`` (nutpie's estimate), and inside the first window every 25 transitions as well;
* ``early``: the gradient estimate inside the first window only, NumPyro's own after it;
* ``nutpie``: nutpie (its Rust NUTS and its adaptation, 500 + 500) on the same potential, each value and gradient a
  compiled JAX call from Python (the PyMC twin's route is the same, on PyTensor's JAX function).

Each row: wall time of the sampling (compilation included), leapfrog steps per transition in the first 100 warm-up
transitions, the rest of the warm-up and the draws, the smallest bulk / tail ESS and the largest R-hat over the
unconstrained coordinates (two chains of 500), and that ESS per 1,000 leapfrog steps (what a fit's time to its gate
follows). ``benchmarks/bayes.py`` times whole default fits; this says why a variant does or does not pay.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from bayes import BUNDLED_PAIR, ROOT

CHILD = r"""
import json, sys, time
import numpy as np
from bayesrc.config import precision, prepare_jax
jax = prepare_jax()
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from numpyro.infer.hmc import hmc
from numpyro.infer.hmc_util import build_adaptation_schedule
from numpyro.infer.util import initialize_model
from bayesrc.bayes import model_inputs
from bayesrc.bayes.change_collapsed import collapsed_model_numpyro
from bayesrc.bayes.diagnostics import convergence
from bayesrc.data import item_counts, sample_from_exact
from bayesrc.datasets import path

variant, seed = sys.argv[1], int(sys.argv[2])
TUNE = DRAWS = 500
counts = BUNDLED_PAIR


def gradient_metric(x, g):  # (chain, draw, coordinate): nutpie's estimate, shrunk as NumPyro shrinks its own
    n = x.shape[1]
    var = np.sqrt(x.var(1) / np.maximum(g.var(1), np.finfo(float).tiny))
    return (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))


def with_inverse_mass(state, inverse_mass):  # a new dual averaging from the current step size, as NumPyro's windows
    a = state.adapt_state
    x_t, x_avg, g_avg, t, _ = a.ss_state
    fresh = (jnp.zeros_like(x_t), jnp.zeros_like(x_avg), jnp.zeros_like(g_avg), jnp.zeros_like(t),
             jnp.log(10.0 * a.step_size))
    root = jnp.sqrt(inverse_mass)
    return state._replace(adapt_state=a._replace(inverse_mass_matrix=inverse_mass, mass_matrix_sqrt=1 / root,
                                                 mass_matrix_sqrt_inv=root, ss_state=fresh))


def numpyro_chains(info, args, keys, windows):
    init_kernel, sample_kernel = hmc(potential_fn_gen=info.potential_fn, algo="NUTS")
    start = jax.pmap(lambda k, z, d: init_kernel(z, TUNE, target_accept_prob=0.85, model_kwargs=d, rng_key=k),
                     in_axes=(0, 0, None))

    def advance(st, d, n):
        def step(s, _):
            s = sample_kernel(s, model_kwargs=d)
            return s, (ravel_pytree(s.z)[0], ravel_pytree(s.z_grad)[0], s.num_steps)
        return jax.lax.scan(step, st, None, length=n)

    advance = jax.pmap(advance, in_axes=(0, None, None), static_broadcasted_argnums=2)
    swap = jax.pmap(with_inverse_mass)
    st = start(keys, info.param_info.z, args)
    z, g, n = [], [], []
    for done in range(25, TUNE + DRAWS + 1, 25):
        st, (zc, gc, nc) = advance(st, args, 25)
        z.append(np.asarray(zc)); g.append(np.asarray(gc)); n.append(np.asarray(nc))
        if done in windows:
            x, grad = np.concatenate(z, 1)[:, windows[done]:done], np.concatenate(g, 1)[:, windows[done]:done]
            st = swap(st, gradient_metric(x, grad))
    jax.block_until_ready(st)
    return np.concatenate(z, 1)[:, TUNE:], np.concatenate(n, 1)


def nutpie_chains(info, args, z0, unravel):
    import nutpie
    from nutpie.compiled_pyfunc import from_pyfunc
    value_and_grad = jax.jit(jax.value_and_grad(lambda x, a: -info.potential_fn(**a)(unravel(x))))

    def make_logp():
        def logp(x, **_):
            v, gr = value_and_grad(jnp.asarray(x), args)
            return float(v), np.asarray(gr, dtype="float64", order="C")
        return logp

    def make_expand(*_):
        return lambda x, **__: {"z": np.asarray(x, dtype="float64")}

    model = from_pyfunc(z0.size, make_logp, make_expand, [np.dtype("float64")], [(z0.size,)], ["z"],
                        make_initial_point_fn=lambda s: np.random.default_rng(s).uniform(-2, 2, z0.size))
    tr = nutpie.sample(model, draws=DRAWS, tune=TUNE, chains=2, cores=2, seed=seed, progress_bar=False)
    n = np.concatenate([tr["warmup_sample_stats"]["n_steps"].values, tr["sample_stats"]["n_steps"].values], 1)
    return tr.posterior["z"].values, n


with precision():
    model, args = collapsed_model_numpyro(model_inputs(counts))
    args = jax.tree.map(jnp.asarray, args)
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    info = initialize_model(keys[2:], model, model_kwargs=args, dynamic_args=True)
    z0, unravel = ravel_pytree(jax.tree.map(lambda a: a[0], info.param_info.z))
    schedule = build_adaptation_schedule(TUNE)
    early = {end: end - 25 for end in range(25, schedule[0].end + 2, 25)}
    windows = {"numpyro": {}, "early": early, "gradient": early | {w.end + 1: w.start for w in schedule[1:-1]}}
    t0 = time.perf_counter()
    if variant == "nutpie":
        draws, steps = nutpie_chains(info, args, z0, unravel)
    else:
        draws, steps = numpyro_chains(info, args, keys[:2], windows[variant])
    wall = time.perf_counter() - t0
c = convergence(np.moveaxis(draws, -1, 0))
ess = float(np.nanmin(np.minimum(c["ess_bulk"], c["ess_tail"])))
print(json.dumps({"variant": variant, "seed": seed, "wall_s": round(wall, 1),
                  "steps_first100": round(float(steps[:, :100].mean()), 1),
                  "steps_warmup_rest": round(float(steps[:, 100:TUNE].mean()), 1),
                  "steps_draws": round(float(steps[:, TUNE:].mean()), 1),
                  "min_ess": round(ess), "max_rhat": round(float(np.nanmax(c["r_hat"])), 4),
                  "ess_per_1000_steps": round(1000 * ess / float(steps.sum()), 2)}))
""".replace("BUNDLED_PAIR", BUNDLED_PAIR)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--variants", default="numpyro,gradient,early,nutpie")
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="bayesrc-bench-jax-")  # one cache: the first row compiles, the rest load
    env = dict(os.environ, PYTHONPATH=str(ROOT), BAYESRC_JAX_CACHE=cache)
    cols = ("wall_s", "steps_first100", "steps_warmup_rest", "steps_draws", "min_ess", "max_rhat", "ess_per_1000_steps")
    print(f"{'variant':>9} {'seed':>4} | " + " ".join(f"{c:>18}" for c in cols), flush=True)
    for seed in args.seeds.split(","):
        for variant in args.variants.split(","):
            out = subprocess.run([sys.executable, "-c", CHILD, variant, seed], env=env, capture_output=True, text=True)
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if out.returncode or not lines:
                print(f"{variant:>9} {seed:>4} | error: {out.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            row = json.loads(lines[-1])
            print(f"{variant:>9} {seed:>4} | " + " ".join(f"{row[c]:>18}" for c in cols), flush=True)


if __name__ == "__main__":
    main()
