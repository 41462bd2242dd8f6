"""What ``bayesrc rci`` runs: :mod:`bayesrc.classical.commands` parses the options and names
these functions (``func="bayesrc.classical.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import sys

from bayesrc.classical import analyse_pairs
from bayesrc.classical.commands import rci_options
from bayesrc.classical.pairwise import pairwise_rci
from bayesrc.data import check_comparable, input_notes, load_comparable_counts, load_counts, load_items
from bayesrc.errors import InputError
from bayesrc.results import headline_text


def run_rci(args: argparse.Namespace) -> int:
    if args.family:
        return run_family(args)
    if args.family_alpha is not None:
        raise InputError(
            "a family-wise rate needs a family (--family V1 V2 V3 ...); a pair takes --z", field="--family-alpha"
        )
    names = [name for name, _, _ in args.pair]
    if len(set(names)) != len(names):
        raise InputError(f"pair name {names[0]!r} given twice", field="--pair")
    for _, a, b in args.pair:  # refuse runs that differ in more than the model (SPEC 6)
        check_comparable(a, b, allow=args.allow_pin, force=args.force)
    on_unmatched = "drop" if args.allow_unmatched else "raise"
    pairs = {name: load_items([a, b], on_unmatched=on_unmatched) for name, a, b in args.pair}  # or graded scores
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
    analysis.save(args.out)  # rci.json + items_NAME.parquet
    print(headline_text(analysis, args.out / analysis.main_file))
    for name, pair in analysis.pairs.items():
        for w in pair.warnings:
            print(f"bayesrc: warning: {name}: {w}", file=sys.stderr)
    print(f"wrote {args.out / 'rci.json'}")
    return 0


def run_family(args: argparse.Namespace) -> int:
    """``--family V1 V2 V3 ...``: RCI for every pair of the family -> ``pairwise_rci.json``
    (:func:`bayesrc.classical.pairwise_rci`)."""
    if len(args.family) < 3:
        raise InputError(
            f"a family is three or more trials files, got {len(args.family)} (for two, use --pair NAME V1 V2)",
            field="--family",
        )
    if args.greedy:
        raise InputError("greedy comparisons are per named pair (--pair), not with --family", field="--greedy")
    if args.family_alpha is not None and args.z is not None:
        raise InputError("give --z (per pair) or --family-alpha (family-wise), not both", field="--family-alpha")
    if args.family_alpha is not None and not 0 < args.family_alpha < 1:
        raise InputError(f"must be in (0, 1), got {args.family_alpha}", field="--family-alpha")
    options = rci_options(args)
    counts = load_comparable_counts(  # SPEC 6: only the model may differ (pins checked first); graded trials too
        args.family,
        allow=args.allow_pin,
        force=args.force,
        on_unmatched="drop" if args.allow_unmatched else "raise",
        graded=True,
    )
    for note in input_notes(counts, args.min_valid):
        print(f"bayesrc: note: {note}", file=sys.stderr)
    result = pairwise_rci(counts, family_alpha=args.family_alpha, **options)
    result.save(args.out)  # pairwise_rci.json + pairwise_rci_pairs.parquet + pairwise_rci_items.parquet
    summary = result.summary()
    # the sentence and the warnings on lines of their own
    print(summary[~summary["metric"].isin(["multiplicity", "warning"])].to_string(index=False))
    print(result.multiplicity_sentence())
    for w in result.warnings:
        print(f"bayesrc: warning: {w}", file=sys.stderr)
    print(f"wrote {args.out / result.main_file}")
    return 0
