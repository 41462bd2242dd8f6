"""Benchmark: the collapsed change model's log-likelihood, product form vs direct sum, side by side.

    .venv/bin/python benchmarks/change_likelihood.py [--pair q3] [--rounds 5] [--calls 50]

NUTS spends nearly all of a change-model fit in value-and-gradient calls of the collapsed
likelihood (:func:`bayesrc.bayes.change_collapsed.cell_loglik`), and most of a call in the
integral over ``delta`` (``log g``). This times one jitted value-and-gradient call (JAX, float64)
with ``log g`` from :func:`~bayesrc.bayes.change_collapsed.log_change_integral` (one matrix
product per trial count, what the model uses) against the direct logsumexp over
:func:`~bayesrc.bayes.change_collapsed.change_integrand` (what it used before), on replicate 1
of a bundled real-truth pair with the letter covariate (the shape ``bayesrc truth`` fits),
alternating the two in rounds so that machine noise hits both; prints ms per call, the ratio,
and the largest difference of the two log-likelihoods.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", default="q3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()

    from bayesrc import datasets
    from bayesrc.config import precision, prepare_jax
    from bayesrc.data.exact import load_exact

    jax = prepare_jax()
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    from bayesrc.bayes import change_collapsed as cc
    from bayesrc.bayes.inputs import model_inputs
    from bayesrc.truth.score import replicate_datasets

    root = datasets.path("exact_gemma")
    [(_, counts, _, _)] = replicate_datasets(load_exact(root / "q4"), load_exact(root / args.pair), k=10, seed=0, replicates=[0])
    cells = cc.cell_stats(model_inputs(counts, covariate="auto"))
    n_strata = len(cells.stratum_dom)
    grid_u = cc.trapezoid_grid(cc.THETA_NODES, cc.THETA_HALF)
    grid_v = cc.trapezoid_grid(cc.DELTA_NODES, cc.DELTA_HALF)
    ops = cc._ops("jax")

    def loglik(mu, sd, shift, sigma_delta, product: bool):
        a, l_same, s = cc.cell_terms(ops, mu, sd, shift, 0.0, cells, grid_u)
        if product:
            log_g = cc.log_change_integral(ops, s, sigma_delta, cells, grid_v)
        else:
            log_g = logsumexp(cc.change_integrand(ops, s, sigma_delta, cells.key_y, cells.key_n, cells.key_dom, grid_v), axis=-1)
        l2 = jnp.logaddexp(jnp.log1p(-0.7) + l_same, jnp.log(0.7) + log_g)
        return jnp.sum(cells.weight * logsumexp(a + l2[cells.key], axis=-1))

    with precision():
        point = (jnp.linspace(-1.0, 1.0, n_strata), jnp.full(n_strata, 1.5), jnp.linspace(-0.5, 0.5, n_strata), 0.3)
        fns = {name: jax.jit(jax.value_and_grad(lambda *p, f=f: loglik(*p, f), argnums=(0, 1, 2, 3))) for name, f in (("product", True), ("direct", False))}
        values = {name: float(jax.block_until_ready(fn(*point))[0]) for name, fn in fns.items()}  # compiles
        total = dict.fromkeys(fns, 0.0)
        for _ in range(args.rounds):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    out = fn(*point)
                jax.block_until_ready(out)
                total[name] += time.perf_counter() - t0
    ms = {name: 1000 * t / (args.rounds * args.calls) for name, t in total.items()}
    print(f"{args.pair} replicate 1: {cells.n_cells} cells, {len(cells.key_y)} version-2 keys, {n_strata} strata")
    print(f"value and gradient: product form {ms['product']:.2f} ms, direct sum {ms['direct']:.2f} ms, ratio {ms['direct'] / ms['product']:.2f}x")
    print(f"log-likelihood difference: {abs(values['product'] - values['direct']):.2e}")


if __name__ == "__main__":
    main()
