"""Benchmark: each cell's integrals by adaptive Gauss-Hermite quadrature against today's logit grid (not adopted).

    .venv/bin/python benchmarks/cell_quadrature.py [--points 4] [--calls 300]

The collapsed change model's marginal likelihood of a cell (:mod:`bayesrc.bayes.change_likelihood`, no slope)::

    L(c) = (1 - pi) int N(theta | mu, sigma) B1(theta) B2(theta) dtheta
           + pi int int N(theta | mu, sigma) N(x | theta + shift, tau) B1(theta) B2(x) dx dtheta

Today both integrals run on one fixed logit grid (step 0.2, 101 nodes), whose step is set by the narrowest normal,
and the change term is a 101 x 201 band product per (stratum, outcome) pair. Both integrands are log-concave, so
each cell's integral can instead be taken around its own mode: a few Newton steps to the mode of the log integrand
(1-D and 2-D, in closed form), then Gauss-Hermite nodes scaled by its curvature (``k1`` nodes, ``k2 x k2``). The
mode and the scales carry no gradient (the integral does not depend on them, up to the rule's error), so the
gradient is the rule's own. On the bundled exact Q4_K_M -> Q3_K_M pair (300 items, K = 10, the default covariate's
strata) at ``--points`` random hyperparameter points (one value per stratum), this prints per rule:

* ``|log L - log L_ref|`` per cell (median, 90%, max) against a brute-force double sum on a 0.02-logit grid over
  +-12 logits (the model's integrals, its normals' 0.1-logit jitter included, without the grid's ends at +-10);
* one value and gradient of the summed log-likelihood in a compiled loop of ``--calls`` calls (ms), today's
  (:func:`bayesrc.bayes.change_likelihood.cell_loglik` on the sampler's tables) against each rule's.

Not wired into the model: a quadrature there is a change of the model's numerics (the twins, the item draws, the
checks, the joint model) to be validated as such (docs/performance.md, "Issue 57, eighth session").
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bayes import BUNDLED_PAIR
from numpy.polynomial.hermite import hermgauss
from scipy.special import logsumexp

RULES = ((9, 7), (13, 9))  # (k1, k2): nodes of the no-change and the change integral


def agq_loglik(y1, n1, y2, n2, mu, sd, shift, tau, pi, k1: int, k2: int, iters: int = 12):
    """log L per cell by adaptive Gauss-Hermite quadrature (arrays over cells; the binomial coefficients left out)."""
    import jax.numpy as jnp
    from jax import lax
    from jax.scipy.special import logsumexp as lse

    t1, w1 = hermgauss(k1)
    t2, w2 = hermgauss(k2)
    sg = lax.stop_gradient
    mu_, sd_, sh_, tau_ = sg(mu), sg(sd), sg(shift), sg(tau)

    def logbin(y, n, t):
        return y * t - n * jnp.logaddexp(0.0, t)

    def slopes(y, n, t):  # first and second derivative of logbin
        p = 1.0 / (1.0 + jnp.exp(-t))
        return y - n * p, -n * p * (1 - p)

    th = mu_
    for _ in range(iters):  # Newton on the 1-D log integrand, steps clipped to 1.5 logits
        g1, h1 = slopes(y1, n1, th)
        g2, h2 = slopes(y2, n2, th)
        th = th - jnp.clip((-(th - mu_) / sd_**2 + g1 + g2) / (-1 / sd_**2 + h1 + h2), -1.5, 1.5)
    s = 1 / jnp.sqrt(1 / sd_**2 - slopes(y1, n1, th)[1] - slopes(y2, n2, th)[1])
    z = th[..., None] + np.sqrt(2.0) * s[..., None] * t1
    f = -0.5 * ((z - mu[..., None]) / sd[..., None]) ** 2 - jnp.log(sd)[..., None]
    f = f + logbin(y1[..., None], n1[..., None], z) + logbin(y2[..., None], n2[..., None], z)
    l0 = lse(f + t1**2 + np.log(w1), axis=-1) + jnp.log(np.sqrt(2.0) * s) - 0.5 * np.log(2 * np.pi)
    # the change term over (theta, x): the prior's precision [[a, b], [b, c]] in closed form
    a, b, c = 1 / sd_**2 + 1 / tau_**2, -1 / tau_**2, 1 / tau_**2
    u, v = mu_, mu_ + sh_
    for _ in range(iters):
        ga, ha = slopes(y1, n1, u)
        gb, hb = slopes(y2, n2, v)
        du, dv = u - mu_, v - mu_ - sh_
        gu, gv = -(a * du + b * dv) + ga, -(b * du + c * dv) + gb
        p, q = a - ha, c - hb  # minus the Hessian: [[p, b], [b, q]]
        det = p * q - b * b
        su, sv = (q * gu - b * gv) / det, (p * gv - b * gu) / det
        r = jnp.minimum(1.0, 1.5 / jnp.sqrt(su * su + sv * sv + 1e-300))
        u, v = u + r * su, v + r * sv
    l11 = jnp.sqrt(a - slopes(y1, n1, u)[1])
    l21 = b / l11
    l22 = jnp.sqrt(c - slopes(y2, n2, v)[1] - l21**2)
    g_u, g_v = (m.reshape(-1) for m in np.meshgrid(t2, t2, indexing="ij"))
    wts = np.add.outer(np.log(w2), np.log(w2)).reshape(-1) + g_u**2 + g_v**2
    zu = u[..., None] + np.sqrt(2.0) * (g_u / l11[..., None] - (l21 / (l11 * l22))[..., None] * g_v)
    zv = v[..., None] + np.sqrt(2.0) * g_v / l22[..., None]
    du, dv = zu - mu[..., None], zv - mu[..., None] - shift[..., None]
    f = -0.5 * (du / sd[..., None]) ** 2 - 0.5 * ((dv - du) / tau[..., None]) ** 2 - jnp.log(sd * tau)[..., None]
    f = f + logbin(y1[..., None], n1[..., None], zu) + logbin(y2[..., None], n2[..., None], zv)
    l1 = lse(f + wts, axis=-1) + np.log(2.0) - jnp.log(l11 * l22) - np.log(2 * np.pi)
    return jnp.logaddexp(jnp.log1p(-pi) + l0, jnp.log(pi) + l1)


def jittered(sigma):
    """The model's spread of a normal: ``sqrt(sigma^2 + 0.1^2)`` (its 0.1-logit jitter,
    :func:`bayesrc.bayes.change_likelihood.grid_spread`)."""
    return (sigma**2 + 0.01) ** 0.5


def brute_loglik(y1, n1, y2, n2, mu, sd, shift, tau, pi, step=0.02, half=12.0):
    """The same log L by a dense double sum (the reference)."""
    out = np.empty(len(y1))
    for i in range(len(y1)):
        g = np.arange(mu[i] - half, mu[i] + half, step)
        lp = -0.5 * ((g - mu[i]) / sd[i]) ** 2 - np.log(sd[i]) - 0.5 * np.log(2 * np.pi)
        b1 = y1[i] * g - n1[i] * np.logaddexp(0, g)
        b2 = y2[i] * g - n2[i] * np.logaddexp(0, g)
        l0 = logsumexp(lp + b1 + b2) + np.log(step)
        lk = -0.5 * ((g[None, :] - g[:, None] - shift[i]) / tau[i]) ** 2 - np.log(tau[i]) - 0.5 * np.log(2 * np.pi)
        l1 = logsumexp((lp + b1)[:, None] + lk + b2[None, :]) + 2 * np.log(step)
        out[i] = np.logaddexp(np.log1p(-pi) + l0, np.log(pi) + l1)
    return out


def timed(jax, value_and_grad, params, calls: int) -> float:
    """ms per value-and-gradient call in a compiled loop (each call's input depends on the last)."""

    def loop(p):
        def body(i, acc):
            value, _ = value_and_grad(jax.tree.map(lambda a: a + 1e-12 * acc, p))
            return acc + 1e-12 * value

        return jax.lax.fori_loop(0, calls, body, 0.0)

    compiled = jax.jit(loop)
    compiled(params).block_until_ready()
    t0 = time.perf_counter()
    compiled(params).block_until_ready()
    return (time.perf_counter() - t0) / calls * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    from bayesrc.bayes import change_grid as grid
    from bayesrc.bayes import change_likelihood as lik
    from bayesrc.bayes.inputs import model_inputs
    from bayesrc.config import precision, prepare_jax
    from bayesrc.data import item_counts, sample_from_exact  # noqa: F401 (BUNDLED_PAIR's names)
    from bayesrc.datasets import path  # noqa: F401

    jax = prepare_jax()
    import jax.numpy as jnp

    cells = grid.cell_stats(model_inputs(eval(BUNDLED_PAIR)))
    n_c, n_s = cells.n_cells, cells.n_strata
    s, y1, n1, y2, n2 = (np.asarray(a) for a in (cells.dom, cells.y1, cells.n1, cells.y2, cells.n2))
    print(f"bundled pair: {n_c} cells, {n_s} strata", flush=True)
    rng = np.random.default_rng(0)
    errors = {"grid": [], **{f"agq {k1}/{k2}x{k2}": [] for k1, k2 in RULES}}
    with precision():
        tables = jax.tree.map(jnp.asarray, grid.likelihood_tables(cells, grid.SAMPLER_BAND_DTYPE))
        for _ in range(args.points):
            mu, shift = rng.normal(0, 1.5, n_s), rng.normal(0, 0.7, n_s)
            sd, tau = (
                np.exp(rng.uniform(np.log(0.2), np.log(2.5), n_s)),
                np.exp(rng.uniform(np.log(0.2), np.log(2), n_s)),
            )
            pi = float(rng.uniform(0.1, 0.9))
            sd_j, tau_j = jittered(sd), jittered(tau)  # the model's spreads (today's grid applies it itself)
            ref = brute_loglik(y1, n1, y2, n2, mu[s], sd_j[s], shift[s], tau_j[s], pi)
            today = np.asarray(
                lik.cell_loglik(lik._ops("jax"), *map(jnp.asarray, (mu, sd, shift, tau)), 0.0, pi, tables)
            )
            errors["grid"].append(np.abs(today[:n_c] - ref))
            for k1, k2 in RULES:
                got = agq_loglik(y1, n1, y2, n2, mu[s], sd_j[s], shift[s], tau_j[s], pi, k1, k2)
                errors[f"agq {k1}/{k2}x{k2}"].append(np.abs(np.asarray(got) - ref))
        w = tables["weight"]
        params = tuple(jnp.asarray(a) for a in (np.zeros(n_s), np.zeros(n_s), np.zeros(n_s), np.zeros(n_s), -1.0))

        def grid_total(p):
            mu, lsd, shift, ltau, lpi = p
            ll = lik.cell_loglik(
                lik._ops("jax"), mu, jnp.exp(lsd), shift, jnp.exp(ltau), 0.0, jax.nn.sigmoid(lpi), tables
            )
            return jnp.sum(w * ll)

        def agq_total(k1, k2):
            def total(p):
                mu, lsd, shift, ltau, lpi = (a[s] if a.ndim else a for a in p)
                pi = jax.nn.sigmoid(lpi)
                sd, tau = jittered(jnp.exp(lsd)), jittered(jnp.exp(ltau))
                ll = agq_loglik(y1, n1, y2, n2, mu, sd, shift, tau, pi, k1, k2)
                return jnp.sum(np.asarray(cells.weight) * ll)

            return total

        ms = {"grid": timed(jax, jax.value_and_grad(grid_total), params, args.calls)}
        for k1, k2 in RULES:
            ms[f"agq {k1}/{k2}x{k2}"] = timed(jax, jax.value_and_grad(agq_total(k1, k2)), params, args.calls)
    print(f"{'rule':>14} | {'|log L - ref| median':>20} {'90%':>9} {'max':>9} | value+grad ms | ratio to grid")
    for name, errs in errors.items():
        e = np.concatenate(errs)
        print(
            f"{name:>14} | {np.median(e):>20.1e} {np.quantile(e, 0.9):>9.1e} {e.max():>9.1e} | {ms[name]:>13.3f} | "
            f"{ms['grid'] / ms[name]:.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
