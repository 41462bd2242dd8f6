"""Many fits in one process: the memory mappings of JAX's compiled code do not pile up, and a fit of the same model
structure and shapes runs the code an earlier fit compiled.

Each NumPyro fit compiles code, ~2,000 memory mappings of it per change-model fit; Linux allows 65,530 per process,
and test workers, notebooks and sensitivity sweeps died after ~30 fits while JAX's in-process caches kept every
fit's code (bayesrc.config). JAX's caches are released after each fit; bayesrc keeps a bounded number of its own
compiled functions (bayesrc.bayes.compiled). The fits here are small (they test the mappings and the compiled code,
not the posterior), so the gate's outcome is not asserted.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref

import pytest

import bayesrc
from bayesrc.bayes import GateConfig, SamplerConfig, compiled, fit, model_inputs
from bayesrc.bayes.prior_predictive import prior_draws
from bayesrc.config import prepare_jax
from bayesrc.data import item_counts, simulate_pair

SMALL = SamplerConfig(chains=2, tune=50, draws=50, seed=1, progress=False)


def _n_mappings() -> int:
    with open("/proc/self/maps") as fh:
        return sum(1 for _ in fh)


def _mappings_added_by_a_fit(backend: str = "numpyro") -> int:
    """Memory mappings one small change-model fit leaves behind in this process."""
    sim = simulate_pair(30, 10, seed=0)
    before = _n_mappings()
    fit(
        item_counts(sim.trials_v1, sim.trials_v2),
        model="change",
        backend=backend,
        config=SMALL,
        gate=GateConfig(escalate=False),
        checks=False,
    )
    return _n_mappings() - before


@pytest.fixture
def restore_settings():
    before = bayesrc.configure()
    yield
    bayesrc.configure(release_compiled=before["release_compiled"], kept_compiled=before["kept_compiled"])


def test_numpyro_fits_of_one_shape_run_the_kept_code_and_keep_nothing_more(restore_settings):
    """A refit of the same shapes adds no mappings (it runs the kept sampler and item draws); with nothing kept a fit
    releases all its code; the control: with nothing kept and JAX's caches not released, ~2,000 more a fit."""
    _mappings_added_by_a_fit()  # the first fit loads what every fit shares (libraries, the JAX client)
    assert _mappings_added_by_a_fit() < 100  # 0 measured
    bayesrc.configure(kept_compiled=0)
    _mappings_added_by_a_fit()  # releases what was kept
    assert _mappings_added_by_a_fit() < 100 and not compiled._KEPT  # 0-3 measured
    bayesrc.configure(release_compiled=False)  # the control: JAX's caches kept, as before the release
    assert _mappings_added_by_a_fit() > 200  # ~1,900 measured


def test_pymc_fits_release_their_compiled_code(restore_settings):
    """The PyMC twin's model runs as JAX functions too (nutpie's JAX mode), released after each fit."""
    _mappings_added_by_a_fit("pymc")
    assert _mappings_added_by_a_fit("pymc") < 100  # 0-7 measured
    bayesrc.configure(kept_compiled=0, release_compiled=False)  # the control: nothing released, hundreds a fit
    _mappings_added_by_a_fit("pymc")  # releases what was kept
    assert _mappings_added_by_a_fit("pymc") > 200  # ~420 measured


def test_kept_compiled_code_is_bounded_and_what_falls_out_is_freed(restore_settings):
    """Only the ``kept_compiled`` most recently used functions stay, the least recently used falls out and is freed;
    a function used again moves to the front."""
    bayesrc.configure(kept_compiled=3)
    jax = prepare_jax()  # not imported at the top: JAX must start after bayesrc sets its devices
    jnp = jax.numpy

    def kept(i: int):
        return compiled.kept_compiled(jax, lambda: compiled.AheadOfTime(jax, jax.jit(lambda x: jnp.sin(x) * i)), i)

    first = kept(0)
    assert float(first(jnp.zeros(()))) == 0.0 and kept(0) is first  # kept: the same object
    gone = weakref.ref(first)
    del first
    kept(1), kept(2), kept(0), kept(3)  # 0 used again: 1 falls out, not 0
    assert [k[0][1] for k in compiled._KEPT] == [2, 0, 3]  # each key's structure by value: (int, i)
    kept(4), kept(5)
    gc.collect()
    assert len(compiled._KEPT) == 3 and gone() is None


def test_prior_draws_in_a_loop_run_one_kept_compiled_draw(restore_settings):
    """A loop of prior predictive draws (SBC) ran a process out of memory mappings when each call compiled anew:
    the compiled draw is kept and run again; the control: draws of three other sizes, each compiled and kept."""
    sim = simulate_pair(30, 10, seed=0)
    data = model_inputs(item_counts(sim.trials_v1, sim.trials_v2))
    prior_draws(data, n_draws=10)  # the first call loads what every call shares
    before = _n_mappings()
    for seed in range(3):
        prior_draws(data, n_draws=10, seed=seed)
    assert _n_mappings() - before < 30
    before = _n_mappings()
    for n_draws in (11, 12, 13):
        prior_draws(data, n_draws=n_draws)
    assert _n_mappings() - before > 30


#: a fresh process's set-up: a small fit, the compilation-cache events JAX reports for it, the entries in the cache
FRESH_PROCESS = """
import collections, json, os
import bayesrc
import jax.monitoring
from bayesrc.bayes import GateConfig, SamplerConfig, compiled, fit
from bayesrc.data import item_counts, simulate_pair

sim = simulate_pair(30, 10, seed=0)
counts = item_counts(sim.trials_v1, sim.trials_v2)
small = SamplerConfig(chains=2, tune=50, draws=50, seed=1, progress=False)
events = collections.Counter()
jax.monitoring.register_event_listener(lambda name, **_: events.update([name]))


def a_fit(**kwargs):
    events.clear()
    fit(counts, model="change", config=small, gate=GateConfig(escalate=False), checks=False, **kwargs)
    return {
        "misses": events["/jax/compilation_cache/cache_misses"],
        "entries": len(os.listdir(os.environ["BAYESRC_JAX_CACHE"])),  # a compilation writes one
        "kept": [id(f) for f in compiled._KEPT.values()],
    }
"""


@pytest.fixture(scope="module")
def cache_events(tmp_path_factory) -> dict:
    """One fresh process with an empty compilation cache (this process's cache has a past): a fit, the same fit
    again, a refit under another prior, and a fit with nothing kept."""
    code = """
seen = {"first": a_fit(), "second": a_fit(), "refit": a_fit(prior={"pi_a": 1.0, "pi_b": 9.0})}
bayesrc.configure(kept_compiled=0)
seen["nothing_kept"] = a_fit()
print(json.dumps(seen))
"""
    env = dict(os.environ, BAYESRC_JAX_CACHE=str(tmp_path_factory.mktemp("jax_cache")))
    out = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS + code], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_refit_of_the_same_shapes_runs_the_kept_code_and_compiles_nothing(cache_events):
    """The second fit and a refit under another prior (the prior's numbers are the sampler's arguments,
    ``prior_arguments``) run the first fit's kept sampler and item draws, the same objects, and compile nothing."""
    first = cache_events["first"]
    assert first["entries"] > 10 and len(first["kept"]) >= 2  # an empty cache: the sampler, the item draws, ...
    for name in ("second", "refit"):
        again = cache_events[name]
        assert again["kept"] == first["kept"] and again["entries"] == first["entries"] and again["misses"] == 0, name


def test_a_fit_with_nothing_kept_loads_every_function_it_compiles_from_the_persistent_cache(cache_events):
    """With nothing kept, a fit compiles its sampler and item draws again (JAX's in-process caches are released after
    each fit), and the persistent cache has all of them, not only what took a second to compile
    (``jax_persistent_cache_min_compile_time_secs``): nothing new is written to it."""
    first, again = cache_events["first"], cache_events["nothing_kept"]
    assert again["kept"] == [] and again["entries"] == first["entries"] and again["misses"] == 0
