"""What ``bayesrc import`` runs: :mod:`bayesrc.importers.commands` parses the options and names
these functions (``func="bayesrc.importers.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import sys

from bayesrc.data import is_graded, save_trials, score_kind
from bayesrc.errors import InputError
from bayesrc.importers import read_inspect, read_lm_eval, read_promptfoo, write_examples


def run_import(args: argparse.Namespace) -> int:
    if args.out.suffix.lower() not in (".parquet", ".pq"):
        raise InputError("output must be a .parquet file", path=args.out, field="--out")
    notes: list[str] = []
    if args.kind == "lm-eval":
        if not args.model:
            raise InputError("lm-eval logs do not name the version; pass --model NAME", field="--model")
        trials = read_lm_eval(
            args.src,
            model=args.model,
            metric=args.metric,
            filter=args.filter,
            domain_field=args.domain_field,
            item_id_field=args.item_id_field,
            notes=notes,
        )
    elif args.kind == "promptfoo":
        trials = read_promptfoo(
            args.src,
            model=args.model,
            prompt=args.prompt,
            provider=args.provider,
            item_id_field=args.item_id_field,
            domain_field=args.domain_field,
            notes=notes,
        )
    else:
        trials = read_inspect(
            args.src,
            model=args.model,
            scorer=args.scorer,
            domain_field=args.domain_field,
            allow_partial=args.allow_partial,
            notes=notes,
        )
    for note in notes:
        print(f"bayesrc: note: {note}", file=sys.stderr)
    save_trials(trials, args.out)
    k = trials.groupby("item_id")["k"].nunique()
    print(
        f"wrote {args.out}: {trials['item_id'].nunique()} items, K = {k.min()}"
        + (f"-{k.max()}" if k.max() != k.min() else "")
        + f", {len(trials)} trials, {int(trials['is_missing'].sum())} missing, model {trials['model'].iloc[0]!r}"
        + _graded_note(trials)
    )
    return 0


def _graded_note(trials) -> str:
    """What the import line adds for graded trials: their scores' kind, and that the right/wrong analyses skip them."""
    if not is_graded(trials):
        return ""
    kind = score_kind(trials.loc[~trials["is_missing"], "score"])
    return f"; graded ({kind} scores, no right / wrong: bayesrc.data.item_scores reads them)"


def run_examples(args: argparse.Namespace) -> int:
    written = write_examples(args.out, n_items=args.items, k=args.k, seed=args.seed)
    for kind, paths in written.items():
        for p in paths:
            print(f"{kind}: {p}")
    return 0
