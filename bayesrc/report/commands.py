"""``bayesrc report`` and ``bayesrc sensitivity``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write one self-contained report per comparison of a run directory")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--format", dest="fmt", choices=("html", "md", "latex"), default="html")
    p.add_argument("--pair", action="append", help="only this comparison (repeatable)")
    p.add_argument("--out", type=Path, help="output folder (default: RUN_DIR)")
    p.set_defaults(func=run_report)

    s = sub.add_parser("sensitivity", help="how the reliable-change conclusions move with the analysis choices")
    s.add_argument(
        "analysis",
        choices=("threshold", "exclusion", "k", "prior", "fdr", "all"),
        help="prior and fdr fit the paired change model (prior: one fit, reweighted to the grid's other priors where its importance weights pass the gate, else refitted)",
    )
    s.add_argument("v1", type=Path, help="trials of version 1")
    s.add_argument("v2", type=Path, help="trials of version 2")
    s.add_argument("--truth", type=Path, help="known truth of a simulated pair (item_id, delta_p, changed): adds realized FDP")
    s.add_argument("--z-grid", type=float, nargs="+", help="RCI thresholds (default 1.645 1.96 2.326 2.58 3.0)")
    s.add_argument("--min-valid-grid", type=int, nargs="+", help="rule (a) grid (default 2 4 6 8 10)")
    s.add_argument("--k-grid", type=int, nargs="+", help="samples per item to keep (default 3 5 ... K)")
    s.add_argument("--q-grid", type=float, nargs="+", help="Bayesian FDR levels (default 0.01 0.05 0.10 0.20)")
    from bayesrc.bayes.commands import add_progress_argument, add_sampler_size_arguments  # one definition; inside, as a commands.py imports only the standard library at module level

    add_sampler_size_arguments(s)  # the change model's fits (prior, fdr)
    add_progress_argument(s, "progress bar over the prior grid's fits")
    s.add_argument("--refit", action="store_true", help="prior: refit every prior of the grid with NUTS (default: reweight the default prior's fit where Pareto k <= 0.7 and ESS >= 400)")
    s.add_argument("--sd-basis", choices=("analysable", "all"), default="analysable")
    s.add_argument("--s-diff", action="append", choices=("reference", "binomial"), help="threshold: S_diff methods to tabulate (repeatable; default reference and binomial)")
    s.add_argument("--reliability-basis", action="append", choices=("all", "analysed"), help="threshold: r_xx bases of the reference method (repeatable; default all and analysed)")
    s.add_argument("--null-replicates", type=int, default=200, help="threshold: replicates of the no-change null per method (default 200; 0: skip)")
    s.add_argument("--allow-unmatched", action="store_true")
    from bayesrc.collect.commands import add_pin_arguments  # one definition of --allow-pin / --force

    add_pin_arguments(s)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", type=Path, required=True)
    from bayesrc.scale.commands import add_ray_arguments

    add_ray_arguments(s, "prior grid's refits (one task per prior)")
    s.set_defaults(func=run_sensitivity)


def run_report(args: argparse.Namespace) -> int:
    from bayesrc.report import build_report

    written = build_report(args.run_dir, fmt=args.fmt, out_dir=args.out, pairs=args.pair)
    for name, path in written.items():
        print(f"{name}: {path}")
    return 0


def run_sensitivity(args: argparse.Namespace) -> int:
    from bayesrc.classical.rci import RCISettings
    from bayesrc.collect.pins import check_comparable
    from bayesrc.data import input_notes, load_counts
    from bayesrc.sensitivity import run_sensitivity_analyses, write_sensitivity

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
            counts, names, truth=truth, settings=RCISettings(sd_basis=args.sd_basis), seed=args.seed, config=config, mapper=mapper, reweight=not args.refit, methods=_threshold_methods(args),
            null_replicates=args.null_replicates,
            **{k: v for k, v in grids.items() if v},
        )  # fmt: skip
    written = write_sensitivity(tables, args.out)
    for name, table in tables.items():
        print(f"== {name}")
        print(table.drop(columns="analysis").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _read_truth(path: Path):
    """The ``--truth`` table (Parquet or CSV) with its item ids as text; an unreadable one is an InputError."""
    import pandas as pd

    from bayesrc.errors import InputError

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
    from bayesrc.bayes.commands import check_sampler_sizes
    from bayesrc.errors import InputError

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
    from bayesrc.bayes import SamplerConfig, configure_host_devices
    from bayesrc.bayes.commands import progress_setting

    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    return SamplerConfig(chains=args.chains, draws=args.draws, tune=args.tune, seed=args.seed, progress=progress_setting(args))


def _prior_grid_mapper(args: argparse.Namespace, names: tuple[str, ...]):
    """(session, mapper) for the prior grid's refits: on Ray with ``--ray``, else here (mapper None)."""
    import contextlib

    from bayesrc.scale.commands import mapper_for

    if args.ray and "prior" not in names:
        print("bayesrc: note: --ray runs the prior grid's refits; this analysis has none, it runs here", file=sys.stderr)
    return mapper_for(args) if args.ray and "prior" in names else (contextlib.nullcontext(), None)
