"""``bayesrc import lm-eval|inspect|examples``: other tools' logs -> a trials file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import lm-evaluation-harness or Inspect AI logs as a trials file")
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)

    lm = kinds.add_parser("lm-eval", help="lm-eval --log_samples samples_<task>_<date>.jsonl files or folders")
    lm.add_argument("src", nargs="+", type=Path, help="samples files or folders (files of one task = repeated runs)")
    lm.add_argument("--metric", help="0/1 metric for single-response records (default: the record's first)")
    lm.add_argument("--filter", help="lm-eval filter to keep when a file holds several")
    lm.add_argument("--domain-field", help="dotted path of the domain, e.g. doc.category (default: task name)")
    lm.add_argument("--item-id-field", help="dotted path of a stable item id, e.g. doc.question_id (default: TASK/doc_id)")
    _common(lm)
    lm.set_defaults(func=run_import)

    ins = kinds.add_parser("inspect", help="Inspect AI eval log (.json or .eval); epochs are the K samples")
    ins.add_argument("src", type=Path)
    ins.add_argument("--scorer", help="which scorer's value is correctness (default: the first)")
    ins.add_argument("--domain-field", help="dotted path of the domain (default: metadata.domain/category/subject)")
    ins.add_argument("--allow-partial", action="store_true", help="import a log whose run did not finish")
    _common(ins)
    ins.set_defaults(func=run_import)

    ex = kinds.add_parser("examples", help="write small example lm-eval and Inspect logs (two versions)")
    ex.add_argument("--out", type=Path, required=True)
    ex.add_argument("--items", type=int, default=24)
    ex.add_argument("--k", type=int, default=5)
    ex.add_argument("--seed", type=int, default=0)
    ex.set_defaults(func=run_examples)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="version label (default: lm-eval: required; Inspect: the log's model)")
    p.add_argument("--out", type=Path, required=True, help="trials file to write (.parquet)")


def run_import(args: argparse.Namespace) -> int:
    from bayesrc.data import save_trials
    from bayesrc.errors import InputError

    if args.out.suffix.lower() not in (".parquet", ".pq"):
        raise InputError("output must be a .parquet file", path=args.out, field="--out")
    notes: list[str] = []
    if args.kind == "lm-eval":
        from bayesrc.importers import read_lm_eval

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
    else:
        from bayesrc.importers import read_inspect

        trials = read_inspect(args.src, model=args.model, scorer=args.scorer, domain_field=args.domain_field, allow_partial=args.allow_partial, notes=notes)
    for note in notes:
        print(f"bayesrc: note: {note}", file=sys.stderr)
    save_trials(trials, args.out)
    k = trials.groupby("item_id")["k"].nunique()
    print(
        f"wrote {args.out}: {trials['item_id'].nunique()} items, K = {k.min()}"
        + (f"-{k.max()}" if k.max() != k.min() else "")
        + f", {len(trials)} trials, {int(trials['is_missing'].sum())} missing, model {trials['model'].iloc[0]!r}"
    )
    return 0


def run_examples(args: argparse.Namespace) -> int:
    from bayesrc.importers import write_examples

    written = write_examples(args.out, n_items=args.items, k=args.k, seed=args.seed)
    for kind, paths in written.items():
        for p in paths:
            print(f"{kind}: {p}")
    return 0
