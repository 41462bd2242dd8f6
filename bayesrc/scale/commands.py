"""CLI: ``bayesrc fit-many`` (one fit per version pair of a manifest, serially or on Ray)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path


def add_ray_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """``--ray``, ``--workers``, ``--ray-address`` (shared by collect, sensitivity and fit-many)."""
    p.add_argument("--ray", action="store_true", help=f"run the {what} on Ray: $RAY_ADDRESS / --ray-address, else a local cluster")
    p.add_argument("--workers", type=int, default=2, help="Ray workers (actors or concurrent tasks; default 2)")
    p.add_argument("--ray-address", help="Ray cluster to join (default $RAY_ADDRESS; none: start a local one)")


def register(sub: argparse._SubParsersAction) -> None:
    from bayesrc.bayes.commands import add_fit_arguments

    p = sub.add_parser("fit-many", help="fit every version pair of a manifest (name,v1,v2) into OUT/NAME/ plus OUT/summary.csv")
    p.add_argument("manifest", type=Path, help="CSV/JSONL/Parquet table with columns name, v1, v2 (trials files)")
    add_fit_arguments(p)
    p.add_argument("--out", required=True, type=Path)
    add_ray_arguments(p, "fits (one task per pair)")
    p.set_defaults(func=run_fit_many)
    collect = sub.choices.get("collect")
    if collect is not None:  # Ray is another way to run collect's item shards: `bayesrc collect ... --ray`
        add_ray_arguments(collect, "item shards (one actor per worker, each loading the model once)")
        collect.set_defaults(func=functools.partial(run_collect_maybe_ray, collect.get_default("func")))


def mapper_for(args: argparse.Namespace, num_cpus: float = 1):
    """(context manager, mapper) for ``--ray`` or serial runs."""
    import contextlib

    from bayesrc.errors import InputError
    from bayesrc.scale.cluster import ray_map, ray_session, serial_map

    if not args.ray:
        return contextlib.nullcontext(), serial_map
    if args.workers < 1:
        raise InputError(f"must be >= 1, got {args.workers}", field="--workers")
    return ray_session(args.ray_address, num_cpus=int(args.workers * num_cpus)), functools.partial(ray_map, num_cpus=num_cpus)


def run_fit_many(args: argparse.Namespace) -> int:
    from bayesrc.scale.fits import default_devices, fit_many, read_manifest

    read_manifest(args.manifest)  # bad input fails here, before JAX and Ray start
    from bayesrc.bayes.commands import fit_kwargs
    from bayesrc.errors import ConvergenceError

    kwargs = fit_kwargs(args)
    n_devices = default_devices(args.chains)
    session, mapper = mapper_for(args)
    with session:
        table = fit_many(
            args.manifest, args.out, mapper=mapper, fit_kwargs=kwargs, allow_pin=tuple(args.allow_pin), force=args.force,
            allow_unmatched=args.allow_unmatched, n_devices=n_devices,
        )  # fmt: skip
    print(table.drop(columns=["v1", "v2", "fit_dir"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {len(table)} fits and {args.out / 'summary.csv'}")
    sensitive = table.loc[table["rci_fdp_prior_sensitive"].eq(True), "name"].tolist()
    if sensitive:
        print(f"bayesrc: warning: RCI's estimated FDP moves with the priors (not calibrated) for {', '.join(sensitive)}; see their fit.json warnings", file=sys.stderr)
    failed = table.loc[table["status"] != "ok", "name"].tolist()
    if failed:
        print(f"bayesrc: warning: convergence gate FAILED for {', '.join(failed)}; their outputs are marked status=failed", file=sys.stderr)
        if not args.allow_unconverged:
            raise ConvergenceError(f"{len(failed)} of {len(table)} fits failed the convergence gate ({', '.join(failed)}); pass --allow-unconverged to accept")
    return 0


def run_collect_maybe_ray(run_collect: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``bayesrc collect``: on Ray with ``--ray`` (:func:`run_collect_ray`), else ``run_collect(args)`` (one process)."""
    if not args.ray:
        return run_collect(args)
    if args.items_per_batch != 1:
        from bayesrc.errors import InputError

        raise InputError("--items-per-batch is not available with --ray (Ray shards do not keep batches whole)", field="--items-per-batch")
    return run_collect_ray(args)


def run_collect_ray(args: argparse.Namespace) -> int:
    """``bayesrc collect ... --ray``: the same options as a single-process run."""
    from bayesrc.collect.commands import run_spec
    from bayesrc.scale.collect import collect_ray, print_summary

    spec = run_spec(args)  # the single-process run's spec (seed rule, label, scheme, ... alike)
    progress = not args.no_progress and sys.stderr.isatty()
    res = collect_ray(args.model, args.items, args.out, workers=args.workers, address=args.ray_address, resume=args.resume, progress=progress, spec=spec)
    print_summary(res, args.k)
    return 0
