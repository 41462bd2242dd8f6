"""Run NUTS with either backend and return ArviZ data (an ``xarray.DataTree``).

* NumPyro: :class:`numpyro.infer.MCMC` + :func:`arviz_base.from_numpyro`. Chains run
  in parallel over host devices when JAX has enough of them (set
  ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts, as
  :func:`configure_host_devices` does), else vectorised on one device.
* PyMC: :func:`pymc.sample` with the nutpie sampler (``pymc`` itself is imported
  lazily: ``import pymc`` takes seconds).

Both return a DataTree whose ``sample_stats`` holds a boolean ``diverging``
(post-warm-up draws only); object-typed statistics that NetCDF cannot store are dropped.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class SamplerConfig:
    """NUTS settings shared by both backends."""

    chains: int = 4
    draws: int = 1000
    tune: int = 1000
    target_accept: float = 0.85
    seed: int = 0
    max_tree_depth: int = 10


def configure_host_devices(n: int | None = None) -> None:
    """Let JAX see ``n`` CPU devices (parallel chains). Effective only before JAX starts."""
    n = n or os.cpu_count() or 1
    if "jax" in sys.modules:
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def _jax():
    configure_host_devices()
    import jax

    jax.config.update("jax_enable_x64", True)  # binomial log-likelihoods near p = 0 / 1 need float64
    return jax


def run_numpyro(model: Callable, model_kwargs: dict[str, Any], cfg: SamplerConfig, coords: dict, dims: dict):
    """Sample ``model(**model_kwargs)`` with NumPyro NUTS; return a DataTree."""
    jax = _jax()
    import arviz_base as azb
    import numpyro.infer.initialization  # noqa: F401  (arviz_base.from_numpyro needs it loaded)
    from numpyro.infer import MCMC, NUTS

    # One device per chain when there are enough; otherwise vectorise the chains on one device.
    method = "parallel" if jax.local_device_count() >= cfg.chains else "vectorized"
    kernel = NUTS(model, target_accept_prob=cfg.target_accept, max_tree_depth=cfg.max_tree_depth)
    mcmc = MCMC(kernel, num_warmup=cfg.tune, num_samples=cfg.draws, num_chains=cfg.chains, chain_method=method, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(cfg.seed), **model_kwargs)
    dt = azb.from_numpyro(mcmc, coords=coords, dims=dims, pred_dims={})
    return _clean(dt, "numpyro")


def run_pymc(model, cfg: SamplerConfig):
    """Sample a built ``pymc.Model`` with nutpie via :func:`pymc.sample`; return a DataTree."""
    import pymc as pm

    with model:
        dt = pm.sample(
            draws=cfg.draws,
            tune=cfg.tune,
            chains=cfg.chains,
            cores=min(cfg.chains, os.cpu_count() or 1),
            random_seed=cfg.seed,
            nuts_sampler="nutpie",
            target_accept=cfg.target_accept,
            progressbar=False,
            compute_convergence_checks=False,
            nuts_sampler_kwargs={"maxdepth": cfg.max_tree_depth},
        )
    return _clean(dt, "pymc")


def _clean(dt, backend: str):
    """Keep NetCDF-storable sample stats; make ``diverging`` boolean; tag the backend."""
    ss = dt["sample_stats"].to_dataset()
    keep = [v for v in ss.data_vars if ss[v].dtype != object and ss[v].dtype.kind in "biuf"]
    ss = ss[keep]
    if "diverging" in ss:
        ss["diverging"] = ss["diverging"].astype(bool)
    else:
        ss["diverging"] = (("chain", "draw"), np.zeros((dt.posterior.sizes["chain"], dt.posterior.sizes["draw"]), bool))
    dt["sample_stats"] = ss
    dt.attrs["backend"] = backend
    return dt
