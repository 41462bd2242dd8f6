"""Benchmark: how the change model's stratum shifts are parametrised vs divergences on a real pair.

    .venv/bin/python benchmarks/stratum_geometry.py [--pair q3] [--replicate 0] [--seeds 0,1,2,3]
        [--variants noncentred,partial25,centred]

The default change fit on the bundled exact Q4_K_M -> Q3_K_M pair (K = 10, the letter covariate:
11 strata of 3-66 items) diverges now and then after warm-up, at any target acceptance, so its
gate fails (issue 28). This fits the collapsed change model with ``numpyro.infer.MCMC`` (2 chains
in parallel, 500 warm-up steps, 500 draws, target acceptance 0.85) under each parametrisation of
the per-stratum shifts ``eta_s ~ Normal(0, sd)`` and prints, per seed, the divergences per chain,
the mean leapfrog steps, the step sizes and the worst-mixing quantity:

* ``noncentred`` (the model's): ``z_s ~ N(0, 1)``, ``eta_s = sd z_s``;
* ``partialN``: ``z_s ~ N(0, sd^l_s)``, ``eta_s = sd^(1 - l_s) z_s`` with ``l_s = n_s / (n_s + N)``
  (``n_s`` the stratum's items: centred where the data pin the shift down);
* ``centred``: ``eta_s ~ N(0, sd)``.

Same priors and likelihood as :func:`bayesrc.bayes.change_collapsed.change_collapsed_numpyro`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayesrc.config import request_host_devices


def stratum_shifts(variant: str, sd, sizes: np.ndarray):
    """``eta`` (one per stratum) under ``variant``, sampled as NumPyro sites."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    if variant == "centred":
        return numpyro.sample("stratum_shift", dist.Normal(0.0, sd).expand([sizes.size]).to_event(1))
    lam = jnp.zeros(sizes.size) if variant == "noncentred" else jnp.asarray(sizes / (sizes + float(variant.removeprefix("partial"))))
    z = numpyro.sample("stratum_shift_z", dist.Normal(0.0, sd**lam).to_event(1))
    return numpyro.deterministic("stratum_shift", sd ** (1.0 - lam) * z)


def model(tables, *, cells, data, variant: str):
    """The collapsed change model with the letter covariate, its stratum shifts as ``variant`` says."""
    import numpyro
    import numpyro.distributions as dist

    from bayesrc.bayes import change_collapsed as cc
    from bayesrc.bayes.change import hyperpriors_numpyro, prior_settings

    pr = prior_settings(None)
    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_numpyro(data.n_domains, False, pr, data.n_groups)
    alpha = numpyro.sample("group_level", dist.ZeroSumNormal(pr["group_level_sd"], event_shape=(data.n_groups,)))
    gamma = numpyro.sample("group_shift", dist.ZeroSumNormal(pr["group_shift_sd"], event_shape=(data.n_groups,)))
    sd = numpyro.sample("stratum_shift_sd", dist.HalfNormal(pr["stratum_shift_sd"]))
    eta = stratum_shifts(variant, sd, np.bincount(data.strata()[0], minlength=cells.n_strata))
    strata = cc.strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta)
    numpyro.factor("y", cc._jax_loglik(False)(*strata, b, pi, tables))


def run(counts, variant: str, seed: int) -> str:
    """One 2-chain fit; its line of the table."""
    from functools import partial

    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    from bayesrc.bayes import change_collapsed as cc
    from bayesrc.bayes.diagnostics import convergence
    from bayesrc.bayes.inputs import model_inputs
    from bayesrc.config import precision

    data = model_inputs(counts, covariate="auto")
    cells = cc.cell_stats(data)
    with precision():
        tables = {k: jnp.asarray(v) for k, v in cc.likelihood_tables(cells, cc.SAMPLER_BAND_DTYPE).items()}
        t0 = time.perf_counter()
        mcmc = MCMC(NUTS(partial(model, cells=cells, data=data, variant=variant), target_accept_prob=0.85), num_warmup=500, num_samples=500, num_chains=2, progress_bar=False)
        mcmc.run(jax.random.PRNGKey(seed), tables=tables, extra_fields=("num_steps", "diverging"))
        extra = jax.block_until_ready(mcmc.get_extra_fields(group_by_chain=True))
        wall = time.perf_counter() - t0
        worst = min(
            ((name, convergence(np.moveaxis(np.asarray(v).reshape(*np.shape(v)[:2], -1), (0, 1), (-2, -1)))) for name, v in mcmc.get_samples(group_by_chain=True).items()),
            key=lambda nc: float(np.nanmin(np.minimum(nc[1]["ess_bulk"], nc[1]["ess_tail"]))),
        )  # fmt: skip
    name, c = worst
    return (
        f"{variant:>11} {seed:>4} | divergences {np.asarray(extra['diverging']).sum(1).tolist()} | steps {np.asarray(extra['num_steps']).mean():5.1f} | "
        f"step size {np.asarray(mcmc.last_state.adapt_state.step_size).round(3).tolist()} | worst {name}: R-hat {np.nanmax(c['r_hat']):.3f}, "
        f"ESS {np.nanmin(c['ess_bulk']):.0f}/{np.nanmin(c['ess_tail']):.0f} | {wall:.0f} s"
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="q3")
    ap.add_argument("--replicate", type=int, default=0)
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--variants", default="noncentred,partial25,centred")
    args = ap.parse_args()
    request_host_devices(2)  # both chains in parallel: before JAX starts
    from bayesrc import datasets
    from bayesrc.data.exact import load_exact
    from bayesrc.truth.score import replicate_datasets

    v1, v2 = load_exact(datasets.path("exact_gemma") / "q4"), load_exact(datasets.path("exact_gemma") / args.pair)
    [(_, counts, _, _)] = replicate_datasets(v1, v2, k=10, seed=0, replicates=[args.replicate])
    for variant in args.variants.split(","):
        for seed in map(int, args.seeds.split(",")):
            print(run(counts, variant, seed), flush=True)


if __name__ == "__main__":
    main()
