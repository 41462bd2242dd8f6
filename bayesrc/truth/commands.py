"""``bayesrc truth``: score RCI and the Bayesian models against two exact runs (SPEC section 7)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("truth", help="score RCI and the Bayesian models on K-sample replicates drawn from two exact runs")
    p.add_argument("v1", type=Path, metavar="EXACT_V1", help="exact run directory (bayesrc collect --engine exact)")
    p.add_argument("v2", type=Path, metavar="EXACT_V2")
    p.add_argument("--k", type=int, default=10, help="samples per item and version in each replicate (default 10)")
    p.add_argument("--replicates", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--delta-min", type=float, default=0.05, help="|dp_exact| below this makes a flag a material false discovery (default 0.05)")
    p.add_argument("--fdr", type=float, default=0.10, help="Bayesian FDR level q of the models' own selection (default 0.10)")
    p.add_argument("--methods", default=None, help="comma-separated Bayesian methods (default: all; see bayesrc.truth.MODEL_SPECS)")
    p.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    from bayesrc.bayes.commands import add_progress_argument, add_sampler_size_arguments  # one definition; inside, as a commands.py imports only the standard library at module level

    add_sampler_size_arguments(p)
    add_progress_argument(p, "progress bar over the replicates")
    p.add_argument("--out", required=True, type=Path)
    from bayesrc.collect.commands import add_pin_arguments  # one definition of --allow-pin / --force

    add_pin_arguments(p, "score")
    p.set_defaults(func=run_truth)


def run_truth(args: argparse.Namespace) -> int:
    from bayesrc.errors import InputError

    if not 0 < args.fdr < 1:
        raise InputError(f"must be in (0, 1), got {args.fdr}", field="--fdr")
    from bayesrc.bayes.commands import check_sampler_sizes, progress_setting
    from bayesrc.bayes.samplers import SamplerConfig, configure_host_devices

    check_sampler_sizes(args)
    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    from bayesrc.collect.pins import check_comparable
    from bayesrc.data.exact import load_exact
    from bayesrc.truth import DEFAULT_METHODS, truth

    ex1, ex2 = load_exact(args.v1), load_exact(args.v2)
    check_comparable(args.v1, args.v2, allow=args.allow_pin, force=args.force)  # bad input fails here, before any fit; only the model may differ (SPEC 6)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip()) if args.methods else DEFAULT_METHODS
    res = truth(ex1, ex2, k=args.k, replicates=args.replicates, seed=args.seed, delta_min=args.delta_min, q=args.fdr,
                methods=methods, config=SamplerConfig(chains=args.chains, draws=args.draws, tune=args.tune), backend=args.backend, progress=progress_setting(args))  # fmt: skip
    res.save(args.out)
    print(res.summary().to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"wrote {args.out / 'truth.json'}")
    return 0
