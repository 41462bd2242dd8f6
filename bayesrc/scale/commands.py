"""CLI: ``bayesrc fit-many`` (one fit per version pair of a manifest, serially or on Ray) and
``bayesrc collect --ray``."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.bayes.commands import add_fit_arguments


def add_ray_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """``--ray``, ``--workers``, ``--ray-address`` (shared by collect, sensitivity and fit-many)."""
    p.add_argument(
        "--ray", action="store_true", help=f"run the {what} on Ray: $RAY_ADDRESS / --ray-address, else a local cluster"
    )
    p.add_argument("--workers", type=int, default=2, help="Ray workers (actors or concurrent tasks; default 2)")
    p.add_argument("--ray-address", help="Ray cluster to join (default $RAY_ADDRESS; none: start a local one)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit-many", help="fit every version pair of a manifest (name,v1,v2) into OUT/NAME/ plus OUT/summary.csv"
    )
    p.add_argument("manifest", type=Path, help="CSV/JSONL/Parquet table with columns name, v1, v2 (trials files)")
    add_fit_arguments(p)
    p.add_argument("--out", required=True, type=Path)
    add_ray_arguments(p, "fits (one task per pair)")
    p.set_defaults(func="bayesrc.scale.handlers:run_fit_many")
    collect = sub.choices.get("collect")
    if collect is not None:  # Ray is another way to run collect's item shards: `bayesrc collect ... --ray`
        add_ray_arguments(collect, "item shards (one actor per worker, each loading the model once)")
        # without --ray: collect's own handler
        collect.set_defaults(func="bayesrc.scale.handlers:run_collect_maybe_ray")
