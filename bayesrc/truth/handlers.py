"""What ``bayesrc truth`` runs: :mod:`bayesrc.truth.commands` parses the options and names
these functions (``func="bayesrc.truth.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import os

from bayesrc.bayes.commands import check_sampler_sizes, progress_setting
from bayesrc.bayes.samplers import SamplerConfig, configure_host_devices
from bayesrc.data.exact import load_exact
from bayesrc.data.provenance import check_all_comparable
from bayesrc.errors import InputError
from bayesrc.results import summary_text
from bayesrc.truth import DEFAULT_METHODS, FAMILY_METHODS, family_truth, truth


def run_truth(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        raise InputError("needs two exact runs, or three or more for a family", field="EXACT_V")
    if args.fdr is not None and not 0 < args.fdr < 1:
        raise InputError(f"must be in (0, 1), got {args.fdr}", field="--fdr")
    if args.fdr is not None and len(args.runs) > 2:
        raise InputError(
            "applies to a pair: the joint model of a family selects no items "
            "(its flags are the 90% intervals that exclude 0)",
            field="--fdr",
        )
    check_sampler_sizes(args)
    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    runs = [load_exact(r) for r in args.runs]
    # bad input fails here, before any fit; only the model may differ (SPEC 6)
    check_all_comparable(args.runs, allow=args.allow_pin, force=args.force)
    family = len(runs) > 2
    methods = (
        tuple(m.strip() for m in args.methods.split(",") if m.strip())
        if args.methods
        else (FAMILY_METHODS if family else DEFAULT_METHODS)
    )
    config = SamplerConfig(chains=args.chains, draws=args.draws, tune=args.tune)
    common = {
        "k": args.k,
        "replicates": args.replicates,
        "seed": args.seed,
        "delta_min": args.delta_min,
        "methods": methods,
        "config": config,
        "backend": args.backend,
        "progress": progress_setting(args),
    }
    res = (
        family_truth(runs, **common)
        if family
        else truth(*runs, **common, **({} if args.fdr is None else {"q": args.fdr}))
    )
    res.save(args.out)
    print(summary_text(res.summary(), float_format=lambda x: f"{x:.3f}"))
    if family and res.bands is not None:
        print(
            f"rank bands in the exact order: {res.bands['order_respected_share']:.0%} of replicates "
            f"({res.bands['bands_mean']:.1f} bands on average)"
        )
    print(f"wrote {args.out / res.main_file}")
    return 0
