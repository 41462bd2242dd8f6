"""Scale-out on Ray (SPEC section 8): collection across workers and machines, fit grids as tasks.

Public API (Ray is imported only when one of these runs; ``pip install 'bayesrc[scale]'``)::

    collect_ray(card, items, out, workers=2, address=None, ...) -> RayRunResult
    ray_session(address=None, num_cpus=None)   # connect to RAY_ADDRESS / address, else start a local cluster
    ray_map(fn, arg_tuples, num_cpus=1) / serial_map(fn, arg_tuples)
    fit_many(manifest, out, mapper=None, ...) -> pandas.DataFrame (the summary table)

Why results are identical to a single process: an item's trials depend only on (model,
prompt, settings, item, k, seed) (bayesrc.collect.engines), and a fit only on its counts,
settings and seed; Ray changes where the work runs, never what is computed.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ray_map": "cluster",
    "ray_session": "cluster",
    "serial_map": "cluster",
    "RayRunResult": "collect",
    "collect_ray": "collect",
    "fit_many": "fits",
    "read_manifest": "fits",
}
__all__ = ["RayRunResult", "collect_ray", "fit_many", "ray_map", "ray_session", "read_manifest", "serial_map"]


def __getattr__(name: str):
    # Lazy: the CLI imports bayesrc.scale.commands at start-up and must stay fast.
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"bayesrc.scale.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'bayesrc.scale' has no attribute {name!r}")
