"""What ``bayesrc truth`` runs: :mod:`bayesrc.truth.commands` parses the options and names
these functions (``func="bayesrc.truth.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import os

from bayesrc.bayes.commands import check_sampler_sizes, progress_setting
from bayesrc.bayes.samplers import SamplerConfig, configure_host_devices
from bayesrc.collect.pins import check_comparable
from bayesrc.data.exact import load_exact
from bayesrc.errors import InputError
from bayesrc.truth import DEFAULT_METHODS, truth


def run_truth(args: argparse.Namespace) -> int:
    if not 0 < args.fdr < 1:
        raise InputError(f"must be in (0, 1), got {args.fdr}", field="--fdr")
    check_sampler_sizes(args)
    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    ex1, ex2 = load_exact(args.v1), load_exact(args.v2)
    check_comparable(args.v1, args.v2, allow=args.allow_pin, force=args.force)  # bad input fails here, before any fit; only the model may differ (SPEC 6)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip()) if args.methods else DEFAULT_METHODS
    res = truth(ex1, ex2, k=args.k, replicates=args.replicates, seed=args.seed, delta_min=args.delta_min, q=args.fdr,
                methods=methods, config=SamplerConfig(chains=args.chains, draws=args.draws, tune=args.tune), backend=args.backend, progress=progress_setting(args))  # fmt: skip
    res.save(args.out)
    print(res.summary().to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"wrote {args.out / 'truth.json'}")
    return 0
