"""Process-wide settings bayesrc applies only when asked: :func:`configure`.

Importing any ``bayesrc`` module changes nothing outside bayesrc: no matplotlib backend
is chosen (figures are explicit :class:`matplotlib.figure.Figure` objects), JAX is not
imported, and neither ``jax.config`` nor ``XLA_FLAGS`` is touched. A NumPyro fit then

* runs in float64 inside ``jax.enable_x64`` (binomial log-likelihoods near p = 0 / 1
  need it) and leaves the caller's ``jax_enable_x64`` as it was (a PyMC fit, whose model nutpie
  runs as JAX functions from its own threads, sets the flag process-wide while it samples and
  then restores it);
* asks for ``host_devices`` CPU devices (parallel chains) through ``XLA_FLAGS`` only if
  JAX has not been imported yet (after that, JAX's device count is fixed) and only if
  the caller's ``XLA_FLAGS`` does not set it already;
* points JAX's persistent compilation cache at ``compile_cache`` unless the caller set
  a cache directory of their own, and keeps every compiled function there, however quick to
  compile (a rerun on the same shapes, or the next fit after a release, skips the XLA compiles);
* clears JAX's in-process compilation caches when the fit returns (``release_compiled``,
  :func:`releases_jax_caches`): each fit's compiled code holds ~2,000 memory mappings that JAX
  would keep for the life of the process, and Linux allows 65,530 per process, so a notebook,
  sensitivity sweep or test worker died (a segfault in libgcc's unwinder, or LLVM's "cannot
  allocate memory for section" abort) after ~30 fits. The persistent cache keeps reruns fast.
  Within a fit the same happens between its steps (:func:`release_memory`, with glibc's free
  lists trimmed), so the item draws and checks do not stack on the sampler's leftovers;
* keeps the ``kept_compiled`` most recently used compiled functions of its own (a sampler, the item draws, ...)
  across fits, bounded, so that a fit of the same model structure and shapes runs them again instead of tracing
  and loading them anew (:mod:`bayesrc.bayes.compiled`).

:func:`configure` changes these defaults, or applies them now.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass


def _default_cache() -> str:
    return os.environ.get("BAYESRC_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "bayesrc", "jax"))


@dataclass
class Settings:
    x64: bool = True
    host_devices: int | None = None  # None: os.cpu_count()
    compile_cache: str = ""  # "" -> $BAYESRC_JAX_CACHE or ~/.cache/bayesrc/jax; "off" disables
    release_compiled: bool = True  # jax.clear_caches() after each fit (see the module docstring)
    kept_compiled: int = 8  # compiled functions kept across fits (bayesrc.bayes.compiled); 0 keeps none


SETTINGS = Settings()


def configure(
    *,
    x64: bool | None = None,
    host_devices: int | None = None,
    compile_cache: str | bool | None = None,
    release_compiled: bool | None = None,
    kept_compiled: int | None = None,
    apply: bool = False,
) -> dict:
    """Set how bayesrc's NumPyro fits use JAX (nothing is changed at import time).

    Parameters
    ----------
    x64 : run fits in float64 (default True). Scoped to the fit with ``jax.enable_x64``;
        the caller's own JAX code keeps its precision.
    host_devices : CPU devices for parallel chains (default: all cores). Takes effect only
        before JAX is first imported in the process.
    compile_cache : folder for JAX's persistent compilation cache, or ``False`` to leave
        JAX's cache alone (default ``$BAYESRC_JAX_CACHE`` or ``~/.cache/bayesrc/jax``).
    release_compiled : clear JAX's in-process compilation caches after each fit (default True;
        False keeps them, e.g. for JAX code of your own that should not recompile, at the
        cost of ~2,000 memory mappings per fit: the module docstring).
    kept_compiled : compiled functions of bayesrc's own kept across fits, the most recently used (default 8: a
        sampler and its fit's item draws and checks for a few model structures and shapes, ~75-150 MB and ~2,000
        memory mappings a shape); 0 keeps none.
    apply : set ``XLA_FLAGS`` (and, if JAX is loaded, the cache) now instead of at the first fit.

    Returns
    -------
    dict
        The settings now in force.

    Examples
    --------
    >>> import bayesrc
    >>> bayesrc.configure(host_devices=4, compile_cache=False)["host_devices"]
    4
    """
    if x64 is not None:
        SETTINGS.x64 = bool(x64)
    if host_devices is not None:
        if host_devices < 1:
            raise ValueError(f"host_devices must be >= 1, got {host_devices}")
        SETTINGS.host_devices = int(host_devices)
    if compile_cache is not None:
        SETTINGS.compile_cache = (
            "off" if compile_cache is False else ("" if compile_cache is True else str(compile_cache))
        )
    if release_compiled is not None:
        SETTINGS.release_compiled = bool(release_compiled)
    if kept_compiled is not None:
        if kept_compiled < 0:
            raise ValueError(f"kept_compiled must be >= 0, got {kept_compiled}")
        SETTINGS.kept_compiled = int(kept_compiled)
    if apply:
        request_host_devices(SETTINGS.host_devices)
        if "jax" in sys.modules:
            prepare_jax()
    return asdict(SETTINGS)


def request_host_devices(n: int | None = None) -> bool:
    """Ask for ``n`` CPU devices via ``XLA_FLAGS`` if JAX has not started; True if set here."""
    n = n or SETTINGS.host_devices or os.cpu_count() or 1
    if "jax" in sys.modules:
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    return True


def prepare_jax():
    """Import JAX for a fit: host devices (if JAX is not loaded yet) and the compile cache."""
    request_host_devices()
    _quiet_tqdm_auto()
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    cache = _default_cache() if SETTINGS.compile_cache == "" else SETTINGS.compile_cache
    if cache and cache != "off" and not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache)
        # Every compiled function, not only the slow ones: a fit's ~90 small ones (eager operations,
        # each step's helpers) compile again after each release of the in-process caches, ~2.5 s a fit
        # (docs/performance.md); loading them takes far less.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        # LRU-evicted; a sampler is ~1 MB, an eager op a few kB
        jax.config.update("jax_compilation_cache_max_size", 256 * 2**20)
    return jax


def _quiet_tqdm_auto() -> None:
    """Load ``tqdm.auto`` without its "IProgress not found" warning, which NumPyro's import (for progress bars bayesrc
    does not use) raises in a Jupyter kernel without ipywidgets, with this machine's site-packages path, into the
    notebook and the rendered docs; bayesrc's own bars choose text or widget themselves (``samplers.progress_bar``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        # deferred: only for a fit (in a notebook it loads IPython)
        import tqdm.auto  # noqa: F401


def releases_jax_caches(fn: Callable) -> Callable:
    """Decorator for a function that runs NumPyro fits: JAX's in-process compilation caches are
    cleared when it returns or raises (``jax.clear_caches()``, if JAX is loaded and
    ``release_compiled`` is on): the module docstring says why.

    Examples
    --------
    >>> @releases_jax_caches
    ... def work():
    ...     return 1
    >>> work()
    1
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            release_memory()

    return wrapper


def release_memory() -> None:
    """Give back what a finished step of a fit held: JAX's in-process compiled code (if JAX is
    loaded and ``release_compiled`` is on) and the freed memory glibc keeps on its free lists
    (``malloc_trim``; a no-op on other C libraries).

    Called between a fit's steps (sampling, item draws, checks): at 12,000 items the sampler's
    and the item draws' leftovers otherwise stay resident under the next step's arrays
    (``benchmarks/fit_phases.py``: 0.5 GB of the peak).

    Examples
    --------
    >>> release_memory()
    """
    if SETTINGS.release_compiled and "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    libc = _libc()
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


@functools.cache
def _libc():
    # deferred: ctypes.util loads subprocess and tempfile (~30 ms), and `import bayesrc` loads this module
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None


def precision():
    """Context manager for a fit's float precision (``jax.enable_x64`` when ``x64``)."""
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    if not SETTINGS.x64:
        return contextlib.nullcontext()
    enable = getattr(jax, "enable_x64", None)
    if enable is None:  # older JAX
        from jax.experimental import enable_x64 as enable
    return enable(True)


@dataclass(frozen=True)
class GateConfig:
    """The convergence gate every fit is held to, and what a fit does when it fails.

    Here, beside :class:`SamplerConfig`, so the CLI's options read the defaults without importing the
    Bayesian layer; :func:`bayesrc.bayes.diagnostics.gate` checks a posterior against them and
    :func:`bayesrc.bayes.gating.sample_gated` samples again while they fail.

    Parameters
    ----------
    max_rhat : the largest rank-normalised split R-hat allowed (Vehtari et al. 2021: 1.01).
    min_ess : the smallest bulk and tail effective sample size allowed.
    max_divergences : the most divergent transitions allowed.
    escalate : when the gate fails, sample again before giving up
        (:func:`bayesrc.bayes.gating.escalated_config`: more draws when R-hat or ESS fell short,
        longer warm-up and a higher target acceptance after divergences), two more attempts at most.

    Examples
    --------
    >>> gate = GateConfig(min_ess=100.0)
    >>> gate.thresholds
    {'max_rhat': 1.01, 'min_ess': 100.0, 'max_divergences': 0}
    >>> GateConfig(escalate=False).escalate
    False
    """

    max_rhat: float = 1.01
    min_ess: float = 400.0
    max_divergences: int = 0
    escalate: bool = True

    @property
    def thresholds(self) -> dict:
        """The gate's thresholds as :class:`~bayesrc.bayes.diagnostics.Diagnostics` records them
        (``fit.json``'s ``diagnostics.thresholds``)."""
        return {"max_rhat": self.max_rhat, "min_ess": self.min_ess, "max_divergences": self.max_divergences}


#: ``bayesrc compare``'s margin on dp when the caller names none (``--rope``): a pass must show the change
#: within two accuracy points
DEFAULT_MARGIN = 0.02


#: A material change in accuracy (SPEC 7): :class:`SelectionConfig`'s default ``delta_min``
DELTA_MIN = 0.05


@dataclass(frozen=True)
class SelectionConfig:
    """How a pair's fit selects its changed items and what counts as a material change.

    :func:`bayesrc.bayes.select_items` forms the item table with ``rope`` and ``delta_min``
    (:func:`~bayesrc.bayes.summaries.item_summary`) and selects on it with ``rule``, ``fdr`` and ``threshold``
    (:func:`~bayesrc.bayes.summaries.select`);
    :func:`bayesrc.bayes.crosscheck_rci` estimates RCI's (material) false-discovery proportion with
    ``rope`` and ``delta_min``. Checked when made, so a bad setting fails before a fit samples. Here, beside
    :class:`SamplerConfig` and :class:`GateConfig`, so the CLI's options read the defaults without importing
    the Bayesian layer.

    Parameters
    ----------
    rule : ``"fdr"`` (Bayesian FDR at level ``fdr``) or ``"threshold"`` (``P(direction) >= threshold``).
    fdr : the Bayesian FDR level q of the ``"fdr"`` rule.
    threshold : the posterior probability of a direction the ``"threshold"`` rule asks for.
    rope : a ROPE on ``|dp|``: the item table gets ``p_rope = P(|dp| > rope)`` (None or 0: none).
    delta_min : a material change in accuracy (SPEC 7), in (0, 1): items get ``P(dp >= delta_min)``
        and ``P(dp <= -delta_min)``.

    Raises
    ------
    ValueError
        For an unknown ``rule`` or a ``delta_min`` outside (0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesrc.bayes import select
    >>> sel = SelectionConfig(fdr=0.05, rope=0.03)
    >>> sel.rule, sel.fdr, sel.delta_min
    ('fdr', 0.05, 0.05)
    >>> cls, summ = select(np.array([0.999, 0.5]), np.array([0.001, 0.5]), rule=sel.rule, fdr=sel.fdr)
    >>> cls.tolist()
    ['improved', 'no_change']
    >>> SelectionConfig(delta_min=1.5)
    Traceback (most recent call last):
    ...
    ValueError: delta_min must be in (0, 1), got 1.5
    """

    rule: str = "fdr"
    fdr: float = 0.10
    threshold: float = 0.975
    rope: float | None = None
    delta_min: float = DELTA_MIN

    def __post_init__(self) -> None:
        if self.rule not in ("fdr", "threshold"):
            raise ValueError(f"rule must be 'fdr' or 'threshold', got {self.rule!r}")
        if not 0 < self.delta_min < 1:  # before sampling: a fit is minutes
            raise ValueError(f"delta_min must be in (0, 1), got {self.delta_min}")


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
    draws: int = 500
    tune: int = 500
    target_accept: float = 0.85
    seed: int = 0
    max_tree_depth: int = 10
    progress: bool | None = None  # progress bars: None shows them on a terminal or in Jupyter
    # NumPyro: while R-hat or ESS of a sampled quantity fall short (and nothing diverged), the chains
    # go on from where they are, up to this many draws each (None: twice ``draws``; ``draws``: never).
    max_draws: int | None = None
