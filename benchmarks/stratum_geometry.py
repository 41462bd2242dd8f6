"""Benchmark: how the change model's stratum shifts are parametrised vs divergences on a real pair.

    .venv/bin/python benchmarks/stratum_geometry.py [--pair q3] [--replicate 0] [--k 10] [--seeds 0,1,2,3]
        [--variants model,noncentred,partial25,centred,projcentred,marginal]

The default change fit on the bundled exact Q4_K_M -> Q3_K_M pair (K = 10, the letter covariate:
11 strata of 3-66 items) diverged now and then after warm-up, at any target acceptance, so its
gate failed (issue 28), with one non-centred shift per stratum. This fits the collapsed change model with
``numpyro.infer.MCMC`` (2 chains in parallel, 500 warm-up steps, 500 draws, target acceptance 0.85) under each
parametrisation of the per-stratum shifts ``eta_s ~ Normal(0, sd)`` and prints, per seed, the divergences per chain,
the mean leapfrog steps, the step sizes and the worst-mixing quantity:

* ``model`` (the model's since then): ``eta = sd Q z``, ``z ~ N(0, 1)`` per interaction contrast
  (``Q``: :func:`bayesrc.data.inputs.interaction_basis`, the shifts no domain or level shift can make);
* ``noncentred`` (the model's before): ``z_s ~ N(0, 1)``, ``eta_s = sd z_s``;
* ``partialN``: ``z_s ~ N(0, sd^l_s)``, ``eta_s = sd^(1 - l_s) z_s`` with ``l_s = n_s / (n_s + N)``
  (``n_s`` the stratum's items: centred where the data pin the shift down);
* ``centred``: ``eta_s ~ N(0, sd)``;
* ``projcentred``: ``eta = Q u``, ``u ~ N(0, sd)`` per contrast;
* ``marginal``: each stratum's whole shift ``shift_d + gamma_g + eta_s`` from its marginal prior.

Same priors and likelihood as :func:`bayesrc.bayes.change_collapsed.change_collapsed_numpyro`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayesrc.config import request_host_devices


def stratum_shifts(variant: str, sd, data, sizes: np.ndarray):
    """``eta`` (one per stratum) under ``variant``, sampled as NumPyro sites."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    if variant == "centred":
        return numpyro.sample("stratum_shift", dist.Normal(0.0, sd).expand([sizes.size]).to_event(1))
    if variant == "projcentred":
        q = data.stratum_contrasts()
        u = numpyro.sample("stratum_shift_u", dist.Normal(0.0, sd).expand([q.shape[1]]).to_event(1))
        return numpyro.deterministic("stratum_shift", jnp.asarray(q) @ u)
    lam = (
        jnp.zeros(sizes.size)
        if variant == "noncentred"
        else jnp.asarray(sizes / (sizes + float(variant.removeprefix("partial"))))
    )
    z = numpyro.sample("stratum_shift_z", dist.Normal(0.0, sd**lam).to_event(1))
    return numpyro.deterministic("stratum_shift", sd ** (1.0 - lam) * z)


def marginal_shifts(sd, cells, pr):
    """Each stratum's whole change shift ``shift_d + gamma_g + eta_s``, sampled from its marginal
    prior ``MVN(0, s^2 D D' + g^2 G (I - 11'/L) G' + sd^2 I)`` (the domain and level shifts integrated out)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    d = np.eye(int(cells.stratum_dom.max()) + 1)[cells.stratum_dom]
    g = np.eye(int(cells.stratum_group.max()) + 1)[cells.stratum_group]
    zero_sum = np.eye(g.shape[1]) - 1.0 / g.shape[1]
    fixed = pr["shift_sd"] ** 2 * d @ d.T + pr["group_shift_sd"] ** 2 * g @ zero_sum @ g.T
    cov = jnp.asarray(fixed) + sd**2 * jnp.eye(fixed.shape[0])
    return numpyro.sample(
        "stratum_total_shift", dist.MultivariateNormal(jnp.zeros(fixed.shape[0]), covariance_matrix=cov)
    )


def model(tables, *, cells, data, variant: str):
    """The collapsed change model with the letter covariate, its stratum shifts as ``variant`` says."""
    import numpyro
    import numpyro.distributions as dist

    from bayesrc.bayes.change import group_effects_numpyro, hyperpriors_numpyro, prior_settings
    from bayesrc.bayes.change_grid import strata_hyper
    from bayesrc.bayes.change_likelihood import _jax_loglik

    pr = prior_settings(None)
    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_numpyro(data.n_domains, False, pr, data.n_groups)
    if variant == "model":
        alpha, gamma, eta = group_effects_numpyro(data.n_groups, pr, data.stratum_contrasts())
    else:
        alpha = numpyro.sample("group_level", dist.ZeroSumNormal(pr["group_level_sd"], event_shape=(data.n_groups,)))
        gamma = numpyro.sample("group_shift", dist.ZeroSumNormal(pr["group_shift_sd"], event_shape=(data.n_groups,)))
        sd = numpyro.sample("stratum_shift_sd", dist.HalfNormal(pr["stratum_shift_sd"]))
        if variant == "marginal":  # the whole shift per stratum: shift and gamma are prior-only sites here
            shift, gamma, eta = 0.0 * shift, 0.0 * gamma, marginal_shifts(sd, cells, pr)
        else:
            eta = stratum_shifts(variant, sd, data, np.bincount(data.strata()[0], minlength=cells.n_strata))
    strata = strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta)
    numpyro.factor("y", _jax_loglik(False)(*strata, b, pi, tables))


def run(counts, variant: str, seed: int) -> str:
    """One 2-chain fit; its line of the table."""
    from functools import partial

    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    from bayesrc.bayes.change_grid import SAMPLER_BAND_DTYPE, cell_stats, likelihood_tables
    from bayesrc.bayes.diagnostics import convergence
    from bayesrc.bayes.inputs import model_inputs
    from bayesrc.config import precision

    data = model_inputs(counts, covariate="auto")
    cells = cell_stats(data)
    with precision():
        tables = {k: jnp.asarray(v) for k, v in likelihood_tables(cells, SAMPLER_BAND_DTYPE).items()}
        t0 = time.perf_counter()
        mcmc = MCMC(
            NUTS(partial(model, cells=cells, data=data, variant=variant), target_accept_prob=0.85),
            num_warmup=500,
            num_samples=500,
            num_chains=2,
            progress_bar=False,
        )
        mcmc.run(jax.random.PRNGKey(seed), tables=tables, extra_fields=("num_steps", "diverging"))
        extra = jax.block_until_ready(mcmc.get_extra_fields(group_by_chain=True))
        wall = time.perf_counter() - t0
        worst = min(
            (
                (name, convergence(np.moveaxis(np.asarray(v).reshape(*np.shape(v)[:2], -1), (0, 1), (-2, -1))))
                for name, v in mcmc.get_samples(group_by_chain=True).items()
            ),
            key=lambda nc: float(np.nanmin(np.minimum(nc[1]["ess_bulk"], nc[1]["ess_tail"]))),
        )
    name, c = worst
    return (
        f"{variant:>11} {seed:>4} | divergences {np.asarray(extra['diverging']).sum(1).tolist()} | "
        f"steps {np.asarray(extra['num_steps']).mean():5.1f} | "
        f"step size {np.asarray(mcmc.last_state.adapt_state.step_size).round(3).tolist()} | "
        f"worst {name}: R-hat {np.nanmax(c['r_hat']):.3f}, "
        f"ESS {np.nanmin(c['ess_bulk']):.0f}/{np.nanmin(c['ess_tail']):.0f} | {wall:.0f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="q3")
    ap.add_argument("--replicate", type=int, default=0)
    ap.add_argument("--k", type=int, default=10, help="samples per item (default 10)")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--variants", default="model,noncentred")
    args = ap.parse_args()
    request_host_devices(2)  # both chains in parallel: before JAX starts
    from bayesrc import datasets
    from bayesrc.data.exact import load_exact
    from bayesrc.truth.replicates import replicate_datasets

    v1, v2 = load_exact(datasets.path("exact_gemma") / "q4"), load_exact(datasets.path("exact_gemma") / args.pair)
    [(_, counts, _, _)] = replicate_datasets(v1, v2, k=args.k, seed=0, replicates=[args.replicate])
    for variant in args.variants.split(","):
        for seed in map(int, args.seeds.split(",")):
            print(run(counts, variant, seed), flush=True)


if __name__ == "__main__":
    main()
