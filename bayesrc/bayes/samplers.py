"""Run NUTS with either backend and return ArviZ data (an ``xarray.DataTree``).

* NumPyro: its NUTS kernel (``numpyro.infer.hmc.hmc``) driven here, the data as arguments
  of one compiled sampler per shape (:func:`run_numpyro`). Chains run in parallel over host
  devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N`` set before JAX starts, as
  :func:`configure_host_devices` does), in rounds when there are more chains than devices: a later
  round's chains start from their own initial points with the first round's adapted mass matrix and
  a short burn-in (:data:`REUSED_METRIC_BURN_IN`) instead of a warm-up of their own, where the first
  round adapted well (:func:`_adapted_well`). Inside :func:`shared_adaptation` a fit's first round starts so
  from an earlier fit of the same shape in the block (replicates, a sweep).
* PyMC: :func:`pymc.sample` with the nutpie sampler on the model compiled by JAX
  (:func:`run_pymc`; ``pymc`` itself is imported lazily: ``import pymc`` takes seconds).

Both return a DataTree whose ``sample_stats`` holds a boolean ``diverging``
(post-warm-up draws only); object-typed statistics that NetCDF cannot store are dropped.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from math import gcd
from typing import Any, NamedTuple

import numpy as np
from tqdm.std import tqdm as text_bar

from bayesrc.bayes.compiled import AheadOfTime, kept_compiled
from bayesrc.bayes.diagnostics import chain_draw_last, convergence

# SamplerConfig is re-exported; defined with the other settings: the CLI reads its defaults without loading JAX
from bayesrc.config import GateConfig, SamplerConfig, precision, prepare_jax, request_host_devices  # noqa: F401


def configure_host_devices(n: int | None = None) -> None:
    """Let JAX see ``n`` CPU devices (parallel chains). Effective only before JAX starts.

    See :func:`bayesrc.configure` for every JAX setting bayesrc uses and when it applies them.

    Examples
    --------
    >>> configure_host_devices(4)  # before the first fit: 4 chains run in parallel  # doctest: +SKIP
    """
    request_host_devices(n)


def _jax():
    return prepare_jax()


def run_numpyro(model: Callable, data: dict[str, Any], cfg: SamplerConfig, coords: dict, dims: dict):
    """Sample ``model(**data)`` with NumPyro's NUTS kernel; return a DataTree.

    ``model`` has its structure bound (``functools.partial``); ``data`` holds arrays only
    (or ``None``), which enter the compiled sampler as *arguments*: every fit of the same
    shapes and structure shares one compiled sampler, kept in the process (:mod:`bayesrc.bayes.compiled`) and in
    JAX's persistent cache (:func:`bayesrc.configure`). Chains run in parallel, one
    per JAX device (``pmap``), in rounds when there are more chains than devices (a later round from the first
    round's adaptation: :data:`REUSED_METRIC_BURN_IN`); each round advances in chunks, so a progress bar can follow
    it (``cfg.progress``).
    """
    jax = _jax()
    with precision():  # float64 for this fit only; the caller's jax_enable_x64 is untouched
        return _run_numpyro(jax, model, data, cfg, coords, dims)


class _Sampler(NamedTuple):
    """One compiled NUTS sampler for a model's structure and its data's shapes.

    ``prototype``: one chain's unconstrained sites (names and shapes, the model's order); ``start(keys, z0, data)``:
    NUTS state per chain; ``advance(state, data)``: ``chunk`` transitions collecting (z, diverging, n_steps);
    ``constrain(z, data)``: the constrained values (deterministic sites included) of unconstrained draws;
    ``initial_points(keys)``: :func:`_initial_point`'s draw per key; ``with_metric(state, adapted)``:
    :func:`_with_metric`.
    """

    prototype: dict
    start: Callable
    advance: Callable
    constrain: Callable
    initial_points: Callable
    with_metric: Callable


def _sampler(jax, model: Callable, data: dict, cfg: SamplerConfig, chunk: int, burn: int) -> _Sampler:
    """The compiled sampler for ``model(**data)``, kept across fits of the same model structure, data types and
    settings compiled into it (:func:`~bayesrc.bayes.compiled.kept_compiled`)."""
    compiled_in = cfg.tune, cfg.target_accept, cfg.max_tree_depth, chunk, burn
    build = partial(_chain_functions, jax, model, data, cfg, chunk, burn)
    return kept_compiled(jax, build, ("NUTS", model, compiled_in), data)


def _chain_functions(jax, model: Callable, data: dict, cfg: SamplerConfig, chunk: int, burn: int) -> _Sampler:
    """A new :class:`_Sampler` for ``model``.

    ``start`` and ``advance`` run one chain per JAX device (``pmap``). Not several per device
    (``vmap``): a batched NUTS runs every chain's tree to the longest one's and evaluates both
    sides of its branches; 4 chains on 2 devices took 3.2x the time of 2 chains, against 2x in
    two rounds (40-item change model, idle 2-core machine).

    NumPyro's ``initialize_model`` runs abstractly (``jax.eval_shape``), for the potential, the transforms and the
    sites' shapes only: run as it is, it evaluates the model and its potential operation by operation (each one
    compiled on its own) and, given the chains' keys, compiles its search for valid initial points (the potential
    and its gradient in a loop) beside ``start`` and ``advance``, which compile them again: 3-4 s of a cold fit and
    ~1 s of a warm one (docs/performance.md, "Issue 57, thirteenth session"). The chains' initial points are drawn as
    that search draws them (:func:`_initial_point`) and checked by ``start`` (:func:`_started`).
    """
    from numpyro.infer.hmc import hmc  # deferred: NumPyro and JAX load in seconds (bayes extra)
    from numpyro.infer.util import initialize_model

    found = {}

    def model_info(data):  # the key only seeds the abstract run: the sites' shapes do not depend on it
        found["info"] = initialize_model(
            jax.random.PRNGKey(0), model, model_kwargs=data, dynamic_args=True, validate_grad=False
        )
        return found["info"].param_info.z

    shapes = jax.eval_shape(model_info, data)
    info = found.pop("info")  # its trace holds the abstract values: only its functions and the sites' order are used
    prototype = {name: shapes[name] for name in info.model_trace if name in shapes}  # the model's order, not sorted
    postprocess_fn = info.postprocess_fn
    init_kernel, sample_kernel = hmc(potential_fn_gen=info.potential_fn, algo="NUTS")

    def start(key, z0, data):
        return init_kernel(
            z0,
            cfg.tune,
            target_accept_prob=cfg.target_accept,
            max_tree_depth=cfg.max_tree_depth,
            model_kwargs=data,
            rng_key=key,
        )

    def advance(state, data):
        def step(st, _):
            st = sample_kernel(st, model_kwargs=data)
            return st, (st.z, st.diverging, st.num_steps)

        return jax.lax.scan(step, state, None, length=chunk)

    def constrain(z, data):
        return postprocess_fn(**data)(z)

    def initial_points(keys):
        return jax.vmap(partial(_initial_point, jax, prototype))(keys)

    def with_metric(state, adapted):
        return _with_metric(state, adapted, cfg.tune, burn)

    kept = partial(AheadOfTime, jax)
    # The initial points and the constrained draws are computed once a fit: compiled for compile time (the same
    # numbers); the chains' start and transitions stay optimised (unoptimised, their floats round otherwise).
    return _Sampler(
        prototype,
        kept(jax.pmap(start, in_axes=(0, 0, None))),
        kept(jax.pmap(advance, in_axes=(0, None))),
        kept(jax.jit(jax.vmap(constrain, (0, None))), optimized=False),
        kept(jax.jit(initial_points), optimized=False),
        kept(jax.pmap(with_metric)),
    )


#: Initial points a chain draws before it gives up (NumPyro's ``find_valid_initial_params`` tries as many).
INITIAL_POINT_TRIES = 100


def _initial_point(jax, prototype: dict, key, radius: float = 2.0):
    """One initial point, uniform on ``(-radius, radius)`` in unconstrained space, and the key's next key: the draws
    of NumPyro's ``init_to_uniform`` in ``find_valid_initial_params`` (site by site in the model's order from
    successive splits of the key), so a chain starts where NumPyro's own search would have started it."""
    key, sub = jax.random.split(key)
    point = {}
    for name, site in prototype.items():
        point[name] = jax.random.uniform(sub, np.shape(site), minval=-radius, maxval=radius)
        key, sub = jax.random.split(key)
    return point, key


def _started(jax, sampler: _Sampler, keys, z0, next_keys, data):
    """NUTS state of one round's chains (``keys``: their sampler keys) from their initial points ``z0`` where the
    potential energy and its gradient, computed by ``sampler.start``, are finite, else from the next valid draw of
    :func:`_initial_point` (``next_keys``): the check NumPyro's search for initial points makes, here without
    compiling it apart."""
    for _ in range(INITIAL_POINT_TRIES):
        state = sampler.start(keys, z0, data)
        grad_ok = [np.isfinite(np.asarray(g)).reshape(len(keys), -1).all(1) for g in jax.tree.leaves(state.z_grad)]
        ok = np.logical_and.reduce([np.isfinite(np.asarray(state.potential_energy)), *grad_ok])
        if ok.all():
            return state
        redrawn, later_keys = sampler.initial_points(next_keys)
        keep = lambda a, b: np.where(ok.reshape((-1,) + (1,) * (np.ndim(a) - 1)), a, b)  # noqa: E731
        z0, next_keys = jax.tree.map(keep, z0, redrawn), keep(next_keys, later_keys)
    raise RuntimeError(
        f"no valid initial point in {INITIAL_POINT_TRIES} draws: the model's potential energy or its gradient is not "
        "finite there"
    )


#: Transitions a chain of a later round runs before its draws, adapting its step size only (NumPyro's last warm-up
#: window), from an earlier round's adapted mass matrix and step size: it starts from its own initial point, so the
#: rounds' chains stay independent starts for R-hat, but skips the warm-up whose first ~100 transitions take 64-85
#: leapfrog steps each (against ~20 after it; docs/performance.md, "Issue 57, fourth session").
REUSED_METRIC_BURN_IN = 50


def _chunk(cfg: SamplerConfig) -> int:
    """Transitions per compiled call: a common divisor of warm-up, draws and a later round's burn-in (progress
    steps), or all of them."""
    step = gcd(gcd(cfg.tune, cfg.draws), REUSED_METRIC_BURN_IN)
    while step > 250 and step % 2 == 0:
        step //= 2
    return step if step >= 25 else cfg.tune + cfg.draws


def _burn_in(cfg: SamplerConfig, chunk: int) -> int:
    """A later round's burn-in: :data:`REUSED_METRIC_BURN_IN`, or the whole warm-up (the round adapts as the first)
    where the burn-in is not whole chunks or not shorter than the warm-up."""
    short = REUSED_METRIC_BURN_IN
    return short if short < cfg.tune and short % chunk == 0 else cfg.tune


def _adapted_well(calls: list, skip: int, cfg: SamplerConfig) -> bool:
    """Whether a round's adaptation (its calls' transitions, the first ``skip`` before its draws) is fit for other
    chains: none of its draws diverged, and its trees did not run to the maximum depth on average. A stuck chain's
    step size collapses (a chain of a later round would take 1,023 leapfrog steps a transition from it: 289 s against
    27 s on a failing fit); then each round warms up on its own."""
    diverging = np.concatenate([np.asarray(d) for _, d, _ in calls], 1)[:, skip:]
    steps = np.concatenate([np.asarray(n) for _, _, n in calls], 1)[:, skip:]
    return not diverging.any() and steps.mean() < 2**cfg.max_tree_depth - 1


_SHARED_ADAPTATION: ContextVar[dict | None] = ContextVar("bayesrc_shared_adaptation", default=None)


@contextmanager
def shared_adaptation(start: dict | None = None) -> Iterator[dict]:
    """In this block, a NumPyro fit starts from the adaptation of the block's last fit of the same shape.

    Fits of one shape (the same model, its sites' shapes, warm-up length and chains per round), such as the
    replicates of ``bayesrc truth``, a sensitivity sweep's refits or a notebook's refits of new data, spend much of
    their sampling in the same warm-up, whose first ~100 transitions take 3-4 times the leapfrog steps of the
    later ones. Here a fit's chains start from their own initial points with the mass matrix and step size an
    earlier fit's chains adapted, and adapt only the step size over :data:`REUSED_METRIC_BURN_IN` transitions
    before their draws (as a later round of chains in one fit does). Only an adaptation whose draws did not diverge
    and whose trees stayed below the maximum depth is passed on; the gate judges each fit as always, and an
    escalated attempt after a failed gate warms up on its own (:func:`own_adaptation`). The draws then depend on
    the fits before them in the block: rerunning the block gives the same draws, one fit alone does not.

    Yields the block's adaptations by shape. ``start``: the block begins with a copy of those (an earlier block's;
    its arrays may be NumPy's, e.g. handed to another process), and what its fits adapt is not written back into
    ``start``: so fits that each start from one fit's adaptation (the prior grid's refits from its base fit) give the
    same draws in any order and in any process.

    Examples
    --------
    >>> from bayesrc.bayes import fit, shared_adaptation
    >>> with shared_adaptation():                                  # doctest: +SKIP
    ...     fits = [fit(counts) for counts in replicates]
    >>> with shared_adaptation() as base_adaptation:               # doctest: +SKIP
    ...     base = fit(counts)
    >>> with shared_adaptation(base_adaptation):                   # doctest: +SKIP
    ...     refit = fit(counts, prior={"pi_a": 2.0})
    """
    adaptations = dict(start or {})
    with _adaptations(adaptations):
        yield adaptations


@contextmanager
def own_adaptation() -> Iterator[None]:
    """In this block every fit warms up on its own, also inside :func:`shared_adaptation` (a retry after a failed
    gate: :func:`bayesrc.bayes.gating.sample_gated`), and passes nothing on."""
    with _adaptations(None):
        yield


@contextmanager
def _adaptations(shared: dict | None) -> Iterator[None]:
    """The block's adaptations by shape (None: none shared), restored to the enclosing block's after it."""
    token = _SHARED_ADAPTATION.set(shared)
    try:
        yield
    finally:
        _SHARED_ADAPTATION.reset(token)


def _adaptation_key(prototype: dict, cfg: SamplerConfig, n_dev: int) -> tuple:
    """What an adaptation must match to serve a fit: the sites and their shapes (one chain's), the warm-up length
    (its window schedule) and the chains per round (the states' leading axis)."""
    return tuple(sorted((k, np.shape(v)) for k, v in prototype.items())), cfg.tune, n_dev


def _with_metric(state, adapted, tune: int, burn: int):
    """One chain's ``state`` (at its initial point) ``burn`` transitions before the end of warm-up, in its last window
    (step size only), from the mass matrix and step size of ``adapted`` (an earlier round's chain after warm-up): a
    new dual averaging of the step size, as NumPyro starts each window. Run under ``pmap`` (one chain per device), so
    the state is laid out as the sampler's own and its compiled ``advance`` serves it as it is."""
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    a = adapted.adapt_state
    x_t, x_avg, g_avg, t, _ = a.ss_state
    fresh = (
        jnp.zeros_like(x_t),
        jnp.zeros_like(x_avg),
        jnp.zeros_like(g_avg),
        jnp.zeros_like(t),
        jnp.log(10.0 * a.step_size),
    )
    last_window = a._replace(ss_state=fresh, window_idx=a.window_idx - 1, rng_key=state.adapt_state.rng_key)
    return state._replace(adapt_state=last_window, i=jnp.full_like(state.i, tune - burn))


def _run_numpyro(jax, model: Callable, data: dict[str, Any], cfg: SamplerConfig, coords: dict, dims: dict):
    # Arrays between the compiled calls are NumPy's: JAX's eager operations (a copy, an index) each compile once
    # per shape, again after every release of JAX's caches (bayesrc.config).
    data = jax.device_put(data)
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(cfg.seed), 2 * cfg.chains))
    chunk = _chunk(cfg)
    burn = _burn_in(cfg, chunk)
    sampler = _sampler(jax, model, data, cfg, chunk, burn)
    inits, next_keys = jax.tree.map(np.asarray, sampler.initial_points(keys[cfg.chains :]))
    n_dev = max(1, min(cfg.chains, jax.local_device_count()))
    rounds = -(-cfg.chains // n_dev)
    in_round = [min(n_dev, cfg.chains - r * n_dev) for r in range(rounds)]  # chains kept of each round
    shortened = burn < cfg.tune  # whether a burn-in can stand for the warm-up (_burn_in)
    shared, shape = _SHARED_ADAPTATION.get(), _adaptation_key(sampler.prototype, cfg, n_dev)
    earlier = shared.get(shape) if shared is not None and shortened else None  # an earlier fit's, in the block
    states, parts, skips = [], [], []  # skips: each round's transitions before its draws
    first_skip = cfg.tune if earlier is None else burn
    healthy = False  # whether the first round adapted well (_adapted_well) and a burn-in can follow it
    with progress_bar(
        cfg.progress, (first_skip + cfg.draws) * in_round[0] + (burn + cfg.draws) * sum(in_round[1:])
    ) as bar:
        for r in range(rounds):
            # an uneven last round repeats a chain, dropped below
            idx = np.arange(r * n_dev, (r + 1) * n_dev) % cfg.chains
            state = _started(jax, sampler, keys[idx], jax.tree.map(lambda a: a[idx], inits), next_keys[idx], data)
            # each chain of this round from one chain's adaptation: an earlier fit's, or the first round's if healthy
            source = earlier if r == 0 else states[0] if healthy else None
            skips.append(cfg.tune if source is None else burn)
            if source is not None:
                state = sampler.with_metric(state, source)
            elif r:  # a warm-up of its own after all: the bar counted a burn-in
                bar.total += (cfg.tune - burn) * in_round[r]
            parts.append([])
            states.append(
                _advance_chunks(sampler.advance, state, data, skips[r] + cfg.draws, chunk, bar, in_round[r], parts[r])
            )
            if r == 0:
                healthy = shortened and _adapted_well(parts[0], skips[0], cfg)
    if shared is not None and healthy:
        shared[shape] = states[0]
    dt = _datatree(jax, *_gathered(jax, parts, skips, cfg), sampler.constrain, data, coords, dims)
    budget = (cfg.max_draws or 2 * cfg.draws) - cfg.draws
    while budget >= chunk and _too_short(dt):
        more = max(chunk, min(budget, cfg.draws // 2) // chunk * chunk)  # half the draws at a time: often enough
        with progress_bar(cfg.progress, more * cfg.chains, desc="NUTS (more draws)") as bar:
            states = [
                _advance_chunks(sampler.advance, st, data, more, chunk, bar, in_round[r], parts[r])
                for r, st in enumerate(states)
            ]
        budget -= more
        dt = _datatree(jax, *_gathered(jax, parts, skips, cfg), sampler.constrain, data, coords, dims)
    # a later round's chains start from the first's adaptation: their draws depend on it
    dt.attrs["chains_per_round"] = n_dev
    dt.attrs["shared_adaptation"] = int(earlier is not None)  # its first round from an earlier fit's (in the block)
    return dt


def _advance_chunks(advance, state, data, length: int, chunk: int, bar, n_chains: int, into: list):
    """``length`` transitions of one round's chains in compiled calls of ``chunk`` (the progress bar's
    step), each call's (z, diverging, n_steps) appended to ``into``; returns the last state."""
    for _ in range(0, length, chunk):
        state, got = advance(state, data)
        into.append(got)
        bar.update(chunk * n_chains)
    return state


def _gathered(jax, parts: list[list], skips: list[int], cfg: SamplerConfig):
    """(z, diverging, n_steps) of every chain after its round's warm-up or burn-in (``skips``), (chain, draw, ...),
    from each round's calls."""
    # (device, draw, ...)
    rounds = [jax.tree.map(lambda *a: np.concatenate(a, 1)[:, skip:], *calls) for calls, skip in zip(parts, skips)]
    flat = lambda *a: np.concatenate(a, 0)[: cfg.chains]  # noqa: E731
    return tuple(jax.tree.map(flat, *field) for field in zip(*rounds))


def _too_short(dt) -> bool:
    """Whether the chains should go on: nothing diverged (then more draws would not help: the fit
    escalates instead), and some entry of a sampled or derived quantity has its R-hat or bulk or
    tail ESS short of the gate's defaults (:class:`~bayesrc.config.GateConfig`'s). Entries
    with NaN diagnostics (a constant, e.g. a pinned reference level) are passed over: more draws
    would not change them, and :func:`~bayesrc.bayes.diagnostics.gate` only sees the gated ones."""
    if dt["sample_stats"]["diverging"].values.any():
        return False
    limits = GateConfig()
    for da in dt["posterior"].data_vars.values():
        c = convergence(chain_draw_last(da))
        with np.errstate(invalid="ignore"):
            if (c["r_hat"] > limits.max_rhat).any() or (
                np.minimum(c["ess_bulk"], c["ess_tail"]) < limits.min_ess
            ).any():
                return True
    return False


def _datatree(
    jax, z: dict, diverging: np.ndarray, n_steps: np.ndarray, constrain, data: dict, coords: dict, dims: dict
):
    """ArviZ DataTree of the constrained draws (deterministic sites included) and sample stats."""
    import arviz_base as azb  # deferred: ArviZ loads in ~1 s (bayes extra)

    n_chain, n_draw = diverging.shape
    flat = jax.tree.map(lambda a: a.reshape(n_chain * n_draw, *a.shape[2:]), z)
    values = {k: np.asarray(v).reshape(n_chain, n_draw, *v.shape[1:]) for k, v in constrain(flat, data).items()}
    posterior = {k: v for k, v in values.items() if k not in data}
    stats = {"diverging": diverging.astype(bool), "n_steps": n_steps.astype(np.int64)}
    dims = {k: v for k, v in dims.items() if k in posterior}
    coords = {k: v for k, v in coords.items() if any(k in d for d in dims.values())}
    return _clean(azb.from_dict({"posterior": posterior, "sample_stats": stats}, coords=coords, dims=dims), "numpyro")


def progress_bar(progress: bool | None, total: int, desc: str = "NUTS", unit: str = "draw"):
    """A tqdm progress bar (a widget in Jupyter) that appears after 2 s, or a silent one.

    ``progress`` (:class:`SamplerConfig`'s): True shows it, False never, None when standard
    error is a terminal or the code runs in a Jupyter kernel. Sweeps over fits (sensitivity,
    truth) count fits or replicates (``unit``), their fits' own bars off.

    Examples
    --------
    >>> with progress_bar(False, 10) as bar:
    ...     bar.update(10)
    """
    bar = _bar_class()
    return bar(total=total, desc=desc, unit=unit, delay=2.0, disable=not show_progress(progress), leave=False)


def _bar_class():
    """tqdm's widget in a Jupyter kernel that has ipywidgets, else its text bar: ``tqdm.auto`` without ipywidgets
    warns "IProgress not found" with this machine's site-packages path, into the notebook (and the rendered docs)."""
    if "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm as widget_bar  # deferred: only inside a notebook (it imports ipywidgets)

        return widget_bar
    return text_bar


def show_progress(progress: bool | None) -> bool:
    """Whether to draw progress bars: ``progress``, or, when None, on a terminal or in Jupyter."""
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def run_pymc(model, cfg: SamplerConfig):
    """Sample a built ``pymc.Model`` with nutpie via :func:`pymc.sample`; return a DataTree.

    nutpie runs the model's log density and gradient as JAX functions (PyTensor's JAX mode), not
    numba's: on the change model numba's compilation alone took ~23 s and its sampling was several
    times slower (docs/performance.md, "Issue 28's fifth session").
    """
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)

    jax = _jax()
    with _global_x64(jax), _quiet_pymc_log(), model:
        dt = pm.sample(
            draws=cfg.draws,
            tune=cfg.tune,
            chains=cfg.chains,
            cores=min(cfg.chains, os.cpu_count() or 1),
            random_seed=cfg.seed,
            nuts_sampler="nutpie",
            target_accept=cfg.target_accept,
            progressbar=show_progress(cfg.progress),
            compute_convergence_checks=False,
            nuts={"maxdepth": cfg.max_tree_depth},
            compile_kwargs={"mode": "JAX", "gradient_backend": "jax"},
        )
    return _clean(dt, "pymc")


@contextmanager
def _quiet_pymc_log():
    """PyMC's own log below WARNING off while it samples, then as it was: it names each sampler and its
    variables at INFO on stderr ("NUTS[nutpie]: [mu, ...]"), beside the progress bar, and before a
    failing command's one error line."""
    log = logging.getLogger("pymc")
    before = log.level
    log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(before)


@contextmanager
def _global_x64(jax):
    """``jax_enable_x64`` on for the whole process while nutpie samples, then as it was.

    Why global: nutpie calls the JAX functions from its own threads, which a ``jax.enable_x64``
    context (thread-local) does not reach, and PyTensor's JAX mode sets the flag when it is first
    imported; without float64 the binomial terms near p = 0 / 1 lose their precision.
    """
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


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
