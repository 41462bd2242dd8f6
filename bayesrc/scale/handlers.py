"""What ``bayesrc fit-many`` and ``collect --ray`` run: :mod:`bayesrc.scale.commands` parses the options and names
these functions (``func="bayesrc.scale.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys

from bayesrc.bayes.commands import fit_kwargs
from bayesrc.collect.handlers import run_collect, run_spec
from bayesrc.errors import ConvergenceError, InputError
from bayesrc.scale.cluster import ray_map, ray_session, serial_map
from bayesrc.scale.collect import collect_ray, print_summary
from bayesrc.scale.fits import default_devices, fit_many, read_manifest


def mapper_for(args: argparse.Namespace, num_cpus: float = 1):
    """(context manager, mapper) for ``--ray`` or serial runs."""
    if not args.ray:
        return contextlib.nullcontext(), serial_map
    if args.workers < 1:
        raise InputError(f"must be >= 1, got {args.workers}", field="--workers")
    return ray_session(args.ray_address, num_cpus=int(args.workers * num_cpus)), functools.partial(
        ray_map, num_cpus=num_cpus
    )


def run_fit_many(args: argparse.Namespace) -> int:
    read_manifest(args.manifest)  # bad input fails here, before JAX and Ray start
    kwargs = fit_kwargs(args)
    n_devices = default_devices(args.chains)
    session, mapper = mapper_for(args)
    with session:
        table = fit_many(
            args.manifest,
            args.out,
            mapper=mapper,
            fit_kwargs=kwargs,
            allow_pin=tuple(args.allow_pin),
            force=args.force,
            allow_unmatched=args.allow_unmatched,
            n_devices=n_devices,
        )
    print(table.drop(columns=["v1", "v2", "fit_dir"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {len(table)} fits and {args.out / 'summary.csv'}")
    sensitive = table.loc[table["rci_fdp_prior_sensitive"].eq(True), "name"].tolist()
    if sensitive:
        print(
            f"bayesrc: warning: RCI's estimated FDP moves with the priors (not calibrated) for {', '.join(sensitive)}; "
            "see their fit.json warnings",
            file=sys.stderr,
        )
    failed = table.loc[table["status"] != "ok", "name"].tolist()
    if failed:
        print(
            f"bayesrc: warning: convergence gate FAILED for {', '.join(failed)}; "
            "their outputs are marked status=failed",
            file=sys.stderr,
        )
        if not args.allow_unconverged:
            raise ConvergenceError(
                f"{len(failed)} of {len(table)} fits failed the convergence gate ({', '.join(failed)}); "
                "pass --allow-unconverged to accept"
            )
    return 0


def run_collect_maybe_ray(args: argparse.Namespace) -> int:
    """``bayesrc collect``: on Ray with ``--ray`` (:func:`run_collect_ray`), else
    :func:`bayesrc.collect.handlers.run_collect` (one process)."""
    if not args.ray:
        return run_collect(args)
    if args.items_per_batch != 1:
        raise InputError(
            "--items-per-batch is not available with --ray (Ray shards do not keep batches whole)",
            field="--items-per-batch",
        )
    return run_collect_ray(args)


def run_collect_ray(args: argparse.Namespace) -> int:
    """``bayesrc collect ... --ray``: the same options as a single-process run."""
    spec = run_spec(args)  # the single-process run's spec (seed rule, label, scheme, ... alike)
    progress = not args.no_progress and sys.stderr.isatty()
    res = collect_ray(
        args.model,
        args.items,
        args.out,
        workers=args.workers,
        address=args.ray_address,
        resume=args.resume,
        progress=progress,
        spec=spec,
    )
    print_summary(res, args.k)
    return 0
