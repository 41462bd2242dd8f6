"""``bayesrc rci``: the classical reliable-change analysis from trials files: named version pairs
(``--pair``, -> ``rci.json``) or every pair of a family of versions (``--family``, -> ``pairwise_rci.json``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rci", help="classical reliable change (Jacobson-Truax RCI) for version pairs, or every pair of a family of versions")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--pair", nargs=3, action="append", metavar=("NAME", "V1_TRIALS", "V2_TRIALS"), help="a version pair (repeatable) -> rci.json")
    target.add_argument(
        "--family", nargs="+", type=Path, metavar="TRIALS",
        help="three or more trials files, one per version (names from their model field): RCI for every pair, the multiplicity stated -> pairwise_rci.json",
    )  # fmt: skip
    p.add_argument(
        "--family-alpha", type=float, default=None, metavar="ALPHA",
        help="with --family: a family-wise rate instead of --z: every pair at Bonferroni's z, 2(1 - Phi(z)) = ALPHA / pairs, so an unchanged item "
        "is flagged in some pair with probability <= ALPHA",
    )  # fmt: skip
    p.add_argument("--greedy", nargs=3, action="append", default=[], metavar=("NAME", "V1_GREEDY", "V2_GREEDY"), help="single-shot greedy results for pair NAME")
    p.add_argument("--sd-basis", choices=("analysable", "all"), default="analysable", help="items whose SD gives SEM (default: analysable)")
    p.add_argument(
        "--s-diff",
        choices=("reference", "binomial"),
        default=None,
        help="S_diff: 'reference' (the paper's SEM-based S_diff; miscalibrated with many floor/ceiling items, "
        "a warning says by how much) or 'binomial' (per-item binomial SE; calibrated). Default reference with --pair, binomial with --family",
    )
    p.add_argument("--reliability-basis", choices=("all", "analysed"), default="all", help="items whose split halves give r_xx (default all, the paper)")
    p.add_argument("--null-replicates", type=int, default=200, help="replicates of the sample-level no-change null (default 200; 0: skip it and the no-change test)")
    p.add_argument("--z", type=float, default=None, help="RCI threshold (default 1.96; with --family, per pair: not adjusted for the number of pairs)")
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


def rci_options(args: argparse.Namespace) -> dict:
    """Keywords of :func:`bayesrc.classical.reliable_change` (and :func:`~bayesrc.classical.pairwise_rci`) from the options;
    ``--z`` and ``--s-diff`` only where given, so each function's own default applies."""
    from bayesrc.errors import InputError

    if args.null_replicates < 0:
        raise InputError("must be >= 0", field="--null-replicates")
    given = {"z": args.z, "s_diff": args.s_diff}
    return {
        "z_conservative": args.z_conservative, "min_valid": args.min_valid, "sd_basis": args.sd_basis, "reliability_basis": args.reliability_basis,
        "n_null": args.null_replicates, "n_splits": args.splits, "n_permutations": args.permutations, "seed": args.seed,
        **{k: v for k, v in given.items() if v is not None},
    }  # fmt: skip


def run_rci(args: argparse.Namespace) -> int:
    if args.family:
        return run_family(args)
    from bayesrc.classical import analyse_pairs
    from bayesrc.data import input_notes, load_counts
    from bayesrc.errors import InputError

    if args.family_alpha is not None:
        raise InputError("a family-wise rate needs a family (--family V1 V2 V3 ...); a pair takes --z", field="--family-alpha")
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
    options = rci_options(args)
    for ds in pairs.values():
        for note in input_notes(ds, args.min_valid):
            print(f"bayesrc: note: {note}", file=sys.stderr)

    analysis = analyse_pairs(pairs, greedy=greedy, **options)
    result = analysis.save(args.out)  # rci.json + items_NAME.parquet (bayesrc.classical.RCIRun)
    print(result.summary().to_string(index=False))
    for name, pair in analysis.pairs.items():
        for w in pair.warnings:
            print(f"bayesrc: warning: {name}: {w}", file=sys.stderr)
    print(f"wrote {args.out / 'rci.json'}")
    return 0


def run_family(args: argparse.Namespace) -> int:
    """``--family V1 V2 V3 ...``: RCI for every pair of the family -> ``pairwise_rci.json`` (:func:`bayesrc.classical.pairwise_rci`)."""
    from bayesrc.classical.pairwise import pairwise_rci
    from bayesrc.collect.commands import family_counts
    from bayesrc.data import input_notes
    from bayesrc.errors import InputError

    if len(args.family) < 3:
        raise InputError(f"a family is three or more trials files, got {len(args.family)} (for two, use --pair NAME V1 V2)", field="--family")
    if args.greedy:
        raise InputError("greedy comparisons are per named pair (--pair), not with --family", field="--greedy")
    if args.family_alpha is not None and args.z is not None:
        raise InputError("give --z (per pair) or --family-alpha (family-wise), not both", field="--family-alpha")
    if args.family_alpha is not None and not 0 < args.family_alpha < 1:
        raise InputError(f"must be in (0, 1), got {args.family_alpha}", field="--family-alpha")
    options = rci_options(args)
    counts = family_counts(args.family, args)  # SPEC 6: only the model may differ (pins checked first)
    for note in input_notes(counts, args.min_valid):
        print(f"bayesrc: note: {note}", file=sys.stderr)
    result = pairwise_rci(counts, family_alpha=args.family_alpha, **options)
    result.save(args.out)  # pairwise_rci.json + pairwise_rci_pairs.parquet + pairwise_rci_items.parquet
    summary = result.summary()
    print(summary[~summary["metric"].isin(["multiplicity", "warning"])].to_string(index=False))  # the sentence and the warnings on lines of their own
    print(result.multiplicity_sentence())
    for w in result.warnings:
        print(f"bayesrc: warning: {w}", file=sys.stderr)
    print(f"wrote {args.out / result.main_file}")
    return 0
