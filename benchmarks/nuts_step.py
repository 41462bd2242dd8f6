"""Benchmark: where a NUTS step's time goes in the default change fit.

    .venv/bin/python benchmarks/nuts_step.py [--items 40|q3] [--calls 500]

On ``benchmarks/bayes.py``'s simulated dataset of ``--items`` items, one fresh process with one
JAX device (one chain at a time, so no chain competes for a core) prints:

* the collapsed likelihood's value and gradient, the sampler's own call (NumPyro's potential
  function, data as arguments), ``--calls`` times inside one compiled loop: ms per call;
* one chain of the default sampler settings (500 warm-up steps, 500 draws): ms per leapfrog
  step after warm-up (each compiled chunk's time over its transitions' leapfrog steps);
* the share of a step that is not the gradient: NUTS's own work (tree building, U-turn checks,
  XLA's per-operation overhead on CPU).

Issue 28's goal of seconds needs both parts cheaper; this says which one dominates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bayes import CHILD, ROOT

DATASET = CHILD.split("from bayesrc.bayes import fit\n")[0]  # benchmarks/bayes.py's simulated pair

POTENTIAL = r"""
import time
import jax, jax.numpy as jnp
from numpyro.infer.util import initialize_model
from bayesrc.bayes import model_inputs
from bayesrc.bayes import change_collapsed as cc

data = model_inputs(counts)
model, args = cc.collapsed_model_numpyro(data)  # the default collapsed change model, its tables as arguments
args = jax.tree.map(jnp.asarray, args)


def gradient_ms(info, tables, calls, batch=None):
    # ms per value-and-gradient call of the potential (of ``batch`` points at once, vmapped) inside one
    # compiled loop of ``calls`` calls, 3 runs
    value_and_grad = jax.value_and_grad(lambda z, t: info.potential_fn(**t)(z))
    if batch is not None:
        value_and_grad = jax.vmap(value_and_grad, (0, None))

    def loop(z, t):
        def body(i, acc):  # each call's input depends on the last, so none is hoisted out of the loop
            value, _ = value_and_grad(jax.tree.map(lambda a: a + 1e-12 * acc, z), t)
            return acc + 1e-12 * value.sum()
        return jax.lax.fori_loop(0, calls, body, 0.0)

    compiled = jax.jit(loop)
    jax.block_until_ready(compiled(info.param_info.z, tables))
    times = []
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(compiled(info.param_info.z, tables))
        times.append((time.perf_counter() - t) / calls * 1e3)
    return times
"""

MEASURE = r"""
from bayesrc.bayes import samplers
from bayesrc.config import SamplerConfig, precision

calls = int(sys.argv[4])
with precision():  # float64, as in a fit
    info = initialize_model(jax.random.PRNGKey(0), model, model_kwargs=args, dynamic_args=True)
    grad_ms = gradient_ms(info, args, calls)

chunks, real = [], samplers._advance_chunks
def timed(advance, state, data, length, chunk, bar, n_chains, into):
    def one(s, d):
        t = time.perf_counter()
        out = jax.block_until_ready(advance(s, d))
        chunks.append(time.perf_counter() - t)
        return out
    return real(one, state, data, length, chunk, bar, n_chains, into)
samplers._advance_chunks = timed
cfg = SamplerConfig(chains=1, seed=0, progress=False, max_draws=500)
dt = cc.change_collapsed_numpyro(data, config=cfg, items=False)
steps = dt["sample_stats"]["n_steps"].values.ravel()
per = samplers._chunk(cfg)  # transitions per compiled call
after = chunks[cfg.tune // per:]  # the calls after warm-up
step_ms = [1e3 * s / steps[i * per:(i + 1) * per].sum() for i, s in enumerate(after)]
print(json.dumps({"grad_ms": grad_ms, "step_ms": step_ms, "steps_per_transition": float(steps.mean())}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", default="40", help="items of the simulated pair, or q3: the bundled pair")
    ap.add_argument("--calls", type=int, default=500)
    args = ap.parse_args()
    env = dict(
        os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count=1 {os.environ.get('XLA_FLAGS', '')}".strip()
    )
    script = DATASET + POTENTIAL + MEASURE
    out = subprocess.run(
        [sys.executable, "-c", script, str(args.items), "change", "numpyro", str(args.calls)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        sys.exit((out.stderr.strip().splitlines() or ["?"])[-1])
    r = json.loads(lines[-1])
    grad, step = min(r["grad_ms"]), sorted(r["step_ms"])[len(r["step_ms"]) // 2]
    print(f"{args.items} items, one chain on one device")
    print(
        f"value and gradient, in a compiled loop: {grad:.3f} ms "
        f"(best of {len(r['grad_ms'])}: {', '.join(f'{x:.3f}' for x in r['grad_ms'])})"
    )
    print(
        f"leapfrog step in the sampler after warm-up: {step:.3f} ms "
        f"(median of {len(r['step_ms'])} chunks; {r['steps_per_transition']:.1f} steps per transition)"
    )
    print(f"not the gradient: {1 - grad / step:.0%} of a step")


if __name__ == "__main__":
    main()
