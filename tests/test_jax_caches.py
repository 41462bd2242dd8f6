"""Many fits in one process: the memory mappings of JAX's compiled code do not pile up.

Each NumPyro fit compiles code that JAX's in-process caches would keep for the life of the
process, ~2,000 memory mappings of it per change-model fit; Linux allows 65,530 per process, and
test workers, notebooks and sensitivity sweeps died after ~30 fits (bayesrc.config). The fits
here are small (they test the mappings, not the posterior), so the gate's outcome is not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import bayesrc
from bayesrc.bayes import GateConfig, SamplerConfig, fit
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
    bayesrc.configure(release_compiled=before["release_compiled"])


@pytest.mark.parametrize("backend", ["numpyro", "pymc"])
def test_fits_release_their_compiled_code(restore_settings, backend):
    """Both twins: the PyMC twin's model runs as JAX functions too (nutpie's JAX mode)."""
    _mappings_added_by_a_fit(backend)  # the first fit loads what every fit shares (libraries, the JAX client)
    assert _mappings_added_by_a_fit(backend) < 300  # ~0 measured
    bayesrc.configure(release_compiled=False)  # the control: the caches kept, hundreds more per fit
    assert _mappings_added_by_a_fit(backend) > 200


def test_prior_draws_release_their_compiled_code(restore_settings):
    """NumPyro's Predictive compiles anew on every call: a loop of prior predictive draws (SBC)
    ran a process out of memory mappings before prior_draws released them."""
    from bayesrc.bayes import model_inputs
    from bayesrc.bayes.prior_predictive import prior_draws

    sim = simulate_pair(30, 10, seed=0)
    data = model_inputs(item_counts(sim.trials_v1, sim.trials_v2))
    prior_draws(data, n_draws=10)  # the first call loads what every call shares
    before = _n_mappings()
    for seed in range(3):
        prior_draws(data, n_draws=10, seed=seed)
    assert _n_mappings() - before < 100
    bayesrc.configure(release_compiled=False)  # the control: kept, they pile up
    before = _n_mappings()
    for seed in range(3):
        prior_draws(data, n_draws=10, seed=seed)
    assert _n_mappings() - before > 100


#: a fresh process's set-up: a small fit and the compilation-cache events JAX reports for it
FRESH_PROCESS = """
import collections, json
import jax.monitoring
from bayesrc.bayes import GateConfig, SamplerConfig, fit
from bayesrc.config import compiled_kept
from bayesrc.data import item_counts, simulate_pair

sim = simulate_pair(30, 10, seed=0)
counts = item_counts(sim.trials_v1, sim.trials_v2)
small = SamplerConfig(chains=2, tune=50, draws=50, seed=1, progress=False)
events = collections.Counter()
jax.monitoring.register_event_listener(lambda name, **_: events.update([name]))
n_maps = lambda: sum(1 for _ in open("/proc/self/maps"))


def cache_events_of_a_fit(**kwargs):
    events.clear()
    fit(counts, model="change", config=small, gate=GateConfig(escalate=False), checks=False, **kwargs)
    names = ("compile_requests_use_cache", "cache_hits", "cache_misses")
    return {k: events["/jax/compilation_cache/" + k] for k in names}
"""


@pytest.fixture(scope="module")
def cache_events(tmp_path_factory) -> dict:
    """One fresh process with an empty compilation cache (this process's cache has a past): two fits one after the
    other, then a ``compiled_kept`` block with a fit and a refit under another prior; JAX's cache events of each, and
    the memory mappings the block's end released."""
    code = """
seen = {"first": cache_events_of_a_fit(), "second": cache_events_of_a_fit()}
with compiled_kept():
    seen["kept"] = cache_events_of_a_fit()
    seen["refit"] = cache_events_of_a_fit(prior={"pi_a": 1.0, "pi_b": 9.0})
    kept = n_maps()
print(json.dumps(seen | {"released_maps": kept - n_maps()}))
"""
    env = dict(os.environ, BAYESRC_JAX_CACHE=str(tmp_path_factory.mktemp("jax_cache")))
    out = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS + code], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_fit_after_the_release_loads_every_function_it_compiles_from_the_persistent_cache(cache_events):
    """Releasing the in-process caches after each fit (and between its steps) makes the next fit ask
    for its ~50 compiled functions again; the persistent cache keeps all of them, not only those that
    took a second to compile (``jax_persistent_cache_min_compile_time_secs``), so a second fit of the
    same shapes compiles nothing: ~2.5 s less per fit (docs/performance.md)."""
    first, second = cache_events["first"], cache_events["second"]
    assert first["cache_misses"] > 20  # an empty cache: the first fit compiles (the sampler, the item draws, ...)
    # the release made the second fit ask again for everything the first one compiled, and the cache had it
    assert second["cache_hits"] >= first["cache_misses"]
    assert second["cache_misses"] == 0 and second["cache_hits"] == second["compile_requests_use_cache"]


def test_a_refit_under_another_prior_compiles_nothing_and_a_compiled_kept_block_keeps_the_code_to_its_end(
    cache_events,
):
    """A prior sweep's refits: the prior's numbers are the sampler's arguments (``prior_arguments``), so a refit
    under another prior compiles nothing; in a ``compiled_kept`` block (around ``bayesrc sensitivity``) it also
    asks the persistent cache for only the few functions every fit builds anew, the rest coming from the process's
    own caches; at the block's end the code is released as after any fit."""
    kept, refit = cache_events["kept"], cache_events["refit"]
    assert refit["cache_misses"] == 0  # before the prior was an argument: the sampler anew, ~10 s
    # the block's first fit, after a release, asked for all its functions; released after it, the refit would too
    assert refit["compile_requests_use_cache"] < kept["compile_requests_use_cache"] / 4
    assert cache_events["released_maps"] > 200  # the control of test_fits_release_their_compiled_code: hundreds a fit
