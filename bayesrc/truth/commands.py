"""``bayesrc truth``: score RCI and the Bayesian models against two exact runs (SPEC section 7), or a family of them."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.bayes.commands import add_progress_argument, add_sampler_size_arguments
from bayesrc.data.commands import add_pin_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "truth",
        help="score RCI and the Bayesian models on K-sample replicates drawn from two exact runs, "
        "or from a family of three or more",
    )
    p.add_argument(
        "runs",
        type=Path,
        nargs="+",
        metavar="EXACT_V",
        help="exact run directories (bayesrc collect --engine exact): two, "
        "or three or more for a family (the first the reference)",
    )
    p.add_argument("--k", type=int, default=10, help="samples per item and version in each replicate (default 10)")
    p.add_argument("--replicates", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--delta-min",
        type=float,
        default=0.05,
        help="|dp_exact| below this makes a flag a material false discovery (default 0.05)",
    )
    p.add_argument(
        "--fdr",
        type=float,
        default=None,
        help="Bayesian FDR level q of the pair models' own selection (default 0.10; a pair only)",
    )
    p.add_argument(
        "--methods",
        default=None,
        help="comma-separated Bayesian methods "
        "(default: all; a pair: bayesrc.truth.MODEL_SPECS, a family: joint, pair)",
    )
    p.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    add_sampler_size_arguments(p)
    add_progress_argument(p, "progress bar over the replicates")
    p.add_argument("--out", required=True, type=Path)
    add_pin_arguments(p, "score")
    p.set_defaults(func="bayesrc.truth.handlers:run_truth")
