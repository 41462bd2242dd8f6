"""``bayesrc rci``: the classical reliable-change analysis from trials files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rci", help="classical reliable change (Jacobson-Truax RCI) for version pairs")
    p.add_argument("--pair", nargs=3, action="append", required=True, metavar=("NAME", "V1_TRIALS", "V2_TRIALS"), help="a version pair (repeatable)")
    p.add_argument("--greedy", nargs=3, action="append", default=[], metavar=("NAME", "V1_GREEDY", "V2_GREEDY"), help="single-shot greedy results for pair NAME")
    p.add_argument("--sd-basis", choices=("analysable", "all"), default="analysable", help="items whose SD gives SEM (default: analysable)")
    p.add_argument(
        "--s-diff",
        choices=("reference", "binomial"),
        default="reference",
        help="S_diff: 'reference' (the paper's SEM-based S_diff; miscalibrated with many floor/ceiling items, "
        "a warning says by how much) or 'binomial' (per-item binomial SE; calibrated). Default reference",
    )
    p.add_argument("--reliability-basis", choices=("all", "analysed"), default="all", help="items whose split halves give r_xx (default all, the paper)")
    p.add_argument("--null-replicates", type=int, default=200, help="replicates of the sample-level no-change null (default 200; 0: skip it and the no-change test)")
    p.add_argument("--z", type=float, default=1.96, help="RCI threshold (default 1.96)")
    p.add_argument("--z-conservative", type=float, default=2.58)
    p.add_argument("--min-valid", type=int, default=None, help="exclusion rule (a) as a fixed minimum of valid responses (default: ceil(0.6*K) of each item's K, 6 at K = 10)")
    p.add_argument("--splits", type=int, default=1000, help="random split-halves (default 1000)")
    p.add_argument("--permutations", type=int, default=1000, help="direction-asymmetry test permutations (default 1000)")
    p.add_argument("--allow-unmatched", action="store_true", help="analyse items present in both versions; list the others")
    from bayesrc.collect.commands import add_pin_arguments  # one definition of --allow-pin / --force; inside, as a commands.py imports only the standard library at module level

    add_pin_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, type=Path)
    p.set_defaults(func=run_rci)


def run_rci(args: argparse.Namespace) -> int:
    from bayesrc.classical import analyse_pairs
    from bayesrc.data import input_notes, load_counts
    from bayesrc.errors import InputError

    names = [name for name, _, _ in args.pair]
    if len(set(names)) != len(names):
        raise InputError(f"pair name {names[0]!r} given twice", field="--pair")
    from bayesrc.collect.pins import check_comparable

    for _, a, b in args.pair:  # refuse runs that differ in more than the model (SPEC 6)
        check_comparable(a, b, allow=args.allow_pin, force=args.force)
    on_unmatched = "drop" if args.allow_unmatched else "raise"
    pairs = {name: load_counts([a, b], on_unmatched=on_unmatched) for name, a, b in args.pair}
    greedy = {}
    for name, a, b in args.greedy:
        if name not in pairs:
            raise InputError(f"--greedy names pair {name!r}, but the pairs are {names}", field="--greedy")
        greedy[name] = load_counts([a, b], on_unmatched="drop", greedy=True)
    if args.null_replicates < 0:
        raise InputError("must be >= 0", field="--null-replicates")
    for ds in pairs.values():
        for note in input_notes(ds, args.min_valid):
            print(f"bayesrc: note: {note}", file=sys.stderr)

    analysis = analyse_pairs(
        pairs,
        greedy=greedy,
        z=args.z,
        z_conservative=args.z_conservative,
        min_valid=args.min_valid,
        sd_basis=args.sd_basis,
        s_diff=args.s_diff,
        reliability_basis=args.reliability_basis,
        n_null=args.null_replicates,
        n_splits=args.splits,
        n_permutations=args.permutations,
        seed=args.seed,
    )
    result = analysis.save(args.out)  # rci.json + items_NAME.parquet (bayesrc.classical.RCIRun)
    print(result.summary().to_string(index=False))
    for name, pair in analysis.pairs.items():
        for w in pair.warnings:
            print(f"bayesrc: warning: {name}: {w}", file=sys.stderr)
    print(f"wrote {args.out / 'rci.json'}")
    return 0
