"""Run NUTS with either backend and return ArviZ data (an ``xarray.DataTree``).

* NumPyro: :class:`numpyro.infer.MCMC` + :func:`arviz_base.from_numpyro`. Chains run
  in parallel over host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N``
  set before JAX starts, as :func:`configure_host_devices` does), in rounds when there
  are more chains than devices.
* PyMC: :func:`pymc.sample` with the nutpie sampler (``pymc`` itself is imported
  lazily: ``import pymc`` takes seconds).

Both return a DataTree whose ``sample_stats`` holds a boolean ``diverging``
(post-warm-up draws only); object-typed statistics that NetCDF cannot store are dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SamplerConfig:
    """NUTS settings shared by both backends.

    Examples
    --------
    >>> from bayesrc.bayes import fit
    >>> cfg = SamplerConfig(chains=2, draws=500, tune=500, seed=1)
    >>> res = fit(counts, config=cfg)  # doctest: +SKIP
    """

    chains: int = 4
    draws: int = 1000
    tune: int = 1000
    target_accept: float = 0.85
    seed: int = 0
    max_tree_depth: int = 10


def configure_host_devices(n: int | None = None) -> None:
    """Let JAX see ``n`` CPU devices (parallel chains). Effective only before JAX starts.

    See :func:`bayesrc.configure` for every JAX setting bayesrc uses and when it applies them.

    Examples
    --------
    >>> configure_host_devices(4)  # before the first fit: 4 chains run in parallel  # doctest: +SKIP
    """
    from bayesrc.config import request_host_devices

    request_host_devices(n)


def _jax():
    from bayesrc.config import prepare_jax

    return prepare_jax()


def run_numpyro(model: Callable, model_kwargs: dict[str, Any], cfg: SamplerConfig, coords: dict, dims: dict):
    """Sample ``model(**model_kwargs)`` with NumPyro NUTS; return a DataTree.

    Chains run in parallel, one per JAX device; with more chains than devices they run in
    rounds of that many. Why not ``chain_method="vectorized"``: every vectorised step waits
    for the longest of the chains' trees, and on CPU it was 4-8x slower per chain than
    rounds of parallel chains (46 ms vs 5.4 ms per step for the collapsed change model).
    """
    jax = _jax()
    from bayesrc.config import precision

    with precision():  # float64 for this fit only; the caller's jax_enable_x64 is untouched
        return _run_numpyro(jax, model, model_kwargs, cfg, coords, dims)


def _run_numpyro(jax, model: Callable, model_kwargs: dict[str, Any], cfg: SamplerConfig, coords: dict, dims: dict):
    import arviz_base as azb
    import numpyro.infer.initialization  # noqa: F401  (arviz_base.from_numpyro needs it loaded)
    from numpyro.infer import MCMC, NUTS

    per_round = max(1, min(cfg.chains, jax.local_device_count()))
    keys = jax.random.split(jax.random.PRNGKey(cfg.seed), cfg.chains)
    kernel = NUTS(model, target_accept_prob=cfg.target_accept, max_tree_depth=cfg.max_tree_depth)
    trees, mcmc = [], None
    for start in range(0, cfg.chains, per_round):
        size = min(per_round, cfg.chains - start)
        if mcmc is None or mcmc.num_chains != size:  # one MCMC per round size: its compiled sampler is reused
            method = "parallel" if size > 1 else "sequential"
            mcmc = MCMC(kernel, num_warmup=cfg.tune, num_samples=cfg.draws, num_chains=size, chain_method=method, progress_bar=False)
        mcmc.run(keys[start : start + size] if size > 1 else keys[start], **model_kwargs)
        trees.append(azb.from_numpyro(mcmc, coords=coords, dims=dims, pred_dims={}))
    return _clean(_concat_chains(trees), "numpyro")


def _concat_chains(trees: list):
    """One DataTree from several with the same groups: posterior and sample stats joined along ``chain``."""
    import xarray as xr

    if len(trees) == 1:
        return trees[0]
    out = trees[0].copy()
    for group in ("posterior", "sample_stats"):
        ds = xr.concat([t[group].to_dataset() for t in trees], dim="chain")
        out[group] = ds.assign_coords(chain=np.arange(ds.sizes["chain"]))
    return out


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
            nuts={"maxdepth": cfg.max_tree_depth},
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
