"""``bayesrc rci``: the classical reliable-change analysis from trials files: named version pairs
(``--pair``, -> ``rci.json``) or every pair of a family of versions (``--family``, -> ``pairwise_rci.json``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.data.commands import add_pin_arguments
from bayesrc.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rci",
        help="classical reliable change (Jacobson-Truax RCI) for version pairs, or every pair of a family of versions",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--pair",
        nargs=3,
        action="append",
        metavar=("NAME", "V1_TRIALS", "V2_TRIALS"),
        help="a version pair (repeatable) -> rci.json; right / wrong trials, or graded ones (a score per sample: "
        "RCI on the items' mean scores)",
    )
    target.add_argument(
        "--family",
        nargs="+",
        type=Path,
        metavar="TRIALS",
        help="three or more trials files, one per version (names from their model field): "
        "RCI for every pair, the multiplicity stated -> pairwise_rci.json",
    )
    p.add_argument(
        "--family-alpha",
        type=float,
        default=None,
        metavar="ALPHA",
        help="with --family: a family-wise rate instead of --z: every pair at Bonferroni's z, "
        "2(1 - Phi(z)) = ALPHA / pairs, so an unchanged item "
        "is flagged in some pair with probability <= ALPHA",
    )
    p.add_argument(
        "--greedy",
        nargs=3,
        action="append",
        default=[],
        metavar=("NAME", "V1_GREEDY", "V2_GREEDY"),
        help="single-shot greedy results for pair NAME",
    )
    p.add_argument(
        "--sd-basis",
        choices=("analysable", "all"),
        default="analysable",
        help="items whose SD gives SEM (default: analysable)",
    )
    p.add_argument(
        "--s-diff",
        choices=("reference", "binomial"),
        default=None,
        help="S_diff: 'reference' (the paper's SEM-based S_diff; miscalibrated with many floor/ceiling items, "
        "a warning says by how much) or 'binomial' (per-item binomial SE; calibrated). "
        "Default reference with --pair, binomial with --family",
    )
    p.add_argument(
        "--reliability-basis",
        choices=("all", "analysed"),
        default="all",
        help="items whose split halves give r_xx (default all, the paper)",
    )
    p.add_argument(
        "--null-replicates",
        type=int,
        default=200,
        help="replicates of the sample-level no-change null (default 200; 0: skip it and the no-change test)",
    )
    p.add_argument(
        "--z",
        type=float,
        default=None,
        help="RCI threshold (default 1.96; with --family, per pair: not adjusted for the number of pairs)",
    )
    p.add_argument("--z-conservative", type=float, default=2.58)
    p.add_argument(
        "--min-valid",
        type=int,
        default=None,
        help="exclusion rule (a) as a fixed minimum of valid responses "
        "(default: ceil(0.6*K) of each item's K, 6 at K = 10)",
    )
    p.add_argument("--splits", type=int, default=1000, help="random split-halves (default 1000)")
    p.add_argument(
        "--permutations", type=int, default=1000, help="direction-asymmetry test permutations (default 1000)"
    )
    p.add_argument(
        "--allow-unmatched", action="store_true", help="analyse items present in both versions; list the others"
    )
    add_pin_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, type=Path)
    p.set_defaults(func="bayesrc.classical.handlers:run_rci")


def rci_options(args: argparse.Namespace) -> dict:
    """Keywords of :func:`bayesrc.classical.reliable_change` (and :func:`~bayesrc.classical.pairwise_rci`) from the
    options; ``--z`` and ``--s-diff`` only where given, so each function's own default applies."""
    if args.null_replicates < 0:
        raise InputError("must be >= 0", field="--null-replicates")
    given = {"z": args.z, "s_diff": args.s_diff}
    return {
        "z_conservative": args.z_conservative,
        "min_valid": args.min_valid,
        "sd_basis": args.sd_basis,
        "reliability_basis": args.reliability_basis,
        "n_null": args.null_replicates,
        "n_splits": args.splits,
        "n_permutations": args.permutations,
        "seed": args.seed,
        **{k: v for k, v in given.items() if v is not None},
    }
