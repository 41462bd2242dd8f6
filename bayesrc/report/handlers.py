"""What ``bayesrc report``, ``show`` and ``sensitivity`` run: :mod:`bayesrc.report.commands` parses the options and
names these functions (``func="bayesrc.report.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import pandas as pd

import bayesrc
from bayesrc.bayes import SamplerConfig, configure_host_devices
from bayesrc.bayes.commands import check_sampler_sizes, progress_setting
from bayesrc.classical.rci import RCISettings
from bayesrc.data import check_comparable, input_notes, load_counts
from bayesrc.errors import InputError
from bayesrc.report import build_report
from bayesrc.results import summary_text
from bayesrc.scale.handlers import mapper_for
from bayesrc.sensitivity import run_sensitivity_analyses, write_sensitivity


def run_report(args: argparse.Namespace) -> int:
    written = build_report(args.run_dir, fmt=args.fmt, out_dir=args.out, pairs=args.pair)
    for name, path in written.items():
        print(f"{name}: {path}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print the whole summary of a saved result (of each, for a folder holding several), 120 columns wide."""
    found = bayesrc.load(args.path)
    results = found if isinstance(found, dict) else {str(args.path): found}
    for name, res in results.items():
        if len(results) > 1:
            print(f"== {name}")
        print(summary_text(res.summary(), line_width=120))
    return 0


def run_sensitivity(args: argparse.Namespace) -> int:
    check_comparable(args.v1, args.v2, allow=args.allow_pin, force=args.force)  # only the model may differ (SPEC 6)
    counts = load_counts([args.v1, args.v2], on_unmatched="drop" if args.allow_unmatched else "raise")
    for note in input_notes(counts):
        print(f"bayesrc: note: {note}", file=sys.stderr)
    truth = _read_truth(args.truth) if args.truth is not None else None
    names = ("threshold", "exclusion", "k", "prior", "fdr") if args.analysis == "all" else (args.analysis,)
    grids = {"zs": args.z_grid, "min_valid_grid": args.min_valid_grid, "ks": args.k_grid, "qs": args.q_grid}
    _check_sensitivity_options(args)
    config = _change_model_config(args, names)
    session, mapper = _prior_grid_mapper(args, names)
    with session:
        tables = run_sensitivity_analyses(
            counts,
            names,
            truth=truth,
            settings=RCISettings(sd_basis=args.sd_basis),
            seed=args.seed,
            config=config,
            mapper=mapper,
            reweight=not args.refit,
            methods=_threshold_methods(args),
            null_replicates=args.null_replicates,
            **{k: v for k, v in grids.items() if v},
        )
    written = write_sensitivity(tables, args.out)
    for name, table in tables.items():
        print(f"== {name}")
        # wrapped into blocks of columns at 120 characters (a prior row has ~25 columns), long texts as notes
        print(summary_text(table.drop(columns="analysis"), float_format=lambda v: f"{v:.3f}", line_width=120))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _read_truth(path: Path):
    """The ``--truth`` table (Parquet or CSV) with its item ids as text; an unreadable one is an InputError."""
    try:
        truth = pd.read_parquet(path) if path.suffix in (".parquet", ".pq") else pd.read_csv(path)
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except Exception as exc:
        raise InputError(f"unreadable truth table ({type(exc).__name__})", path=path) from None
    missing = {"item_id", "delta_p", "changed"} - set(truth.columns)
    if missing:
        raise InputError("missing column(s) " + ", ".join(sorted(missing)), path=path, field=sorted(missing)[0])
    truth["item_id"] = truth["item_id"].astype(str)
    return truth


def _check_sensitivity_options(args: argparse.Namespace) -> None:
    """Sampler sizes, FDR levels and null replicates in range (exit 2 otherwise)."""
    check_sampler_sizes(args)
    if any(not 0 < q < 1 for q in args.q_grid or ()):
        raise InputError("FDR levels must be in (0, 1)", field="--q-grid")
    if args.null_replicates < 0:
        raise InputError("must be >= 0", field="--null-replicates")


def _threshold_methods(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The threshold analysis' (S_diff method, r_xx basis) pairs: the bases apply to the reference method only."""
    s_diffs = args.s_diff or ["reference", "binomial"]
    bases = args.reliability_basis or ["all", "analysed"]
    return [(m, b) for m in s_diffs for b in (bases if m == "reference" else ["all"])]


def _change_model_config(args: argparse.Namespace, names: tuple[str, ...]):
    """The change model's :class:`~bayesrc.bayes.SamplerConfig` when an analysis fits it (prior, fdr), else None."""
    if not {"prior", "fdr"} & set(names):
        return None
    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    return SamplerConfig(
        chains=args.chains, draws=args.draws, tune=args.tune, seed=args.seed, progress=progress_setting(args)
    )


def _prior_grid_mapper(args: argparse.Namespace, names: tuple[str, ...]):
    """(session, mapper) for the prior grid's refits: on Ray with ``--ray``, else here (mapper None)."""
    if args.ray and "prior" not in names:
        print(
            "bayesrc: note: --ray runs the prior grid's refits; this analysis has none, it runs here", file=sys.stderr
        )
    return mapper_for(args) if args.ray and "prior" in names else (contextlib.nullcontext(), None)
