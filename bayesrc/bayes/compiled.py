"""Compiled JAX code kept across fits, so that a fit of the same structure and shapes runs the executables an
earlier fit compiled.

bayesrc clears JAX's in-process caches after each fit (:func:`bayesrc.config.release_memory`: each fit's code
holds memory mappings a process has only so many of), and its models are built per fit (a model function with its
structure bound, closures over it), so JAX's own caches would not serve the next fit anyway: each fit traced,
lowered and loaded its code from the persistent cache again, ~2 s of a 60-item fit's ~6 s (docs/performance.md,
"Issue 57, fourteenth session"). Here a few of the most recently used compiled functions are kept by what they
depend on, compared by value (:func:`kept_compiled`), and hold their executables themselves (:class:`AheadOfTime`):
a notebook's refit, ``bayesrc truth``'s replicates, a sensitivity sweep's refits and ``fit-many``'s pairs of one
shape reuse them. Bounded (``bayesrc.configure(kept_compiled=...)``): the code of a 300-item change fit holds
~75 MB and ~2,000 memory mappings.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from functools import partial
from types import BuiltinFunctionType, FunctionType
from typing import Any

import numpy as np

from bayesrc.config import SETTINGS

_KEPT: OrderedDict = OrderedDict()  # the kept functions, the most recently used last

#: XLA compiler options of code compiled for its compile time, not its run time (:class:`AheadOfTime`).
UNOPTIMIZED = {"xla_backend_optimization_level": 0}


def kept_compiled[T](jax, build: Callable[[], T], structure: Any, args: Any = ()) -> T:
    """``build()``, or what it returned before for the same ``structure`` (compared by value, :func:`by_value`), the
    same types of ``args`` (the data the compiled code takes as arguments), float precision and JAX devices.

    Where ``structure`` holds something that cannot be compared by value, ``build()`` each time.

    Examples
    --------
    >>> import jax                                                                      # doctest: +SKIP
    >>> f = kept_compiled(jax, lambda: AheadOfTime(jax, jax.jit(jnp.sin)), ("sin",))    # doctest: +SKIP
    """
    try:
        key = by_value(structure), signature(jax, args), jax.dtypes.canonicalize_dtype(np.float64), jax.device_count()
    except TypeError:
        return build()
    if key not in _KEPT:
        _KEPT[key] = build()
    _KEPT.move_to_end(key)
    kept = _KEPT[key]
    while len(_KEPT) > SETTINGS.kept_compiled:  # a sampler counts as one
        _KEPT.popitem(last=False)
    return kept


def by_value(obj) -> Any:
    """A hashable value standing for ``obj``: numbers, strings, NumPy arrays, tuples, lists, dicts, dataclasses,
    ``functools.partial`` and functions without a closure (a module's function: its identity is its value); a
    TypeError for anything else.

    Examples
    --------
    >>> by_value(partial(max, 1, key=np.arange(2))) == by_value(partial(max, 1, key=np.arange(2)))
    True
    """
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return type(obj), obj
    if isinstance(obj, np.ndarray):
        return "array", obj.shape, obj.dtype.str, obj.tobytes()
    if isinstance(obj, (tuple, list)):
        return type(obj), tuple(by_value(v) for v in obj)
    if isinstance(obj, dict):
        return dict, tuple(sorted((k, by_value(v)) for k, v in obj.items()))
    if is_dataclass(obj) and not isinstance(obj, type):
        return type(obj), tuple((f.name, by_value(getattr(obj, f.name))) for f in fields(obj))
    if isinstance(obj, partial):
        return partial, obj.func, by_value(obj.args), by_value(obj.keywords)
    if isinstance(obj, BuiltinFunctionType) or isinstance(obj, FunctionType) and obj.__closure__ is None:
        return obj
    raise TypeError(f"not comparable by value: {type(obj).__name__}")


def signature(jax, args) -> tuple:
    """The tree and the JAX types (shape, dtype, weak type) of ``args``: what compiled code is specialised to."""
    leaves, tree = jax.tree.flatten(args)
    return tree, tuple(jax.typeof(a) for a in leaves)


class AheadOfTime:
    """A jitted or pmapped function compiled ahead of time at its first call with each argument signature (the
    ``kept`` most recently used ones), holding its executables itself: they outlive ``jax.clear_caches()``
    (:func:`bayesrc.config.release_memory`) for as long as this object is kept.

    ``optimized=False`` compiles at XLA's backend optimisation level 0 (:data:`UNOPTIMIZED`): for code a fit runs once
    for milliseconds, whose compilation in a process with an empty JAX cache takes seconds (a fit's initial points
    and constrained draws, the prior's draws: ~2 s of a cold bundled-pair fit, docs/performance.md "Issue 57,
    fifteenth session").

    Examples
    --------
    >>> import jax                                             # doctest: +SKIP
    >>> twice = AheadOfTime(jax, jax.jit(lambda x: 2 * x))     # doctest: +SKIP
    >>> twice(jax.numpy.ones(3))                               # doctest: +SKIP
    Array([2., 2., 2.], dtype=float32)
    """

    def __init__(self, jax, fn: Callable, kept: int = 4, optimized: bool = True):
        self._jax, self._fn, self._kept, self._compiled = jax, fn, kept, OrderedDict()
        self._options = {} if optimized else UNOPTIMIZED

    def __call__(self, *args):
        key = signature(self._jax, args)
        if key not in self._compiled:
            self._compiled[key] = self._fn.lower(*args).compile(compiler_options=self._options)
            while len(self._compiled) > self._kept:
                self._compiled.popitem(last=False)
        self._compiled.move_to_end(key)
        return self._compiled[key](*args)
