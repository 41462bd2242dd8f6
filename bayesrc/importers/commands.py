"""``bayesrc import lm-eval|inspect|promptfoo|examples``: other tools' logs -> a trials file."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import lm-evaluation-harness, Inspect AI or promptfoo logs as a trials file")
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)

    lm = kinds.add_parser("lm-eval", help="lm-eval --log_samples samples_<task>_<date>.jsonl files or folders")
    lm.add_argument("src", nargs="+", type=Path, help="samples files or folders (files of one task = repeated runs)")
    _options(
        lm,
        {
            "--metric": "0/1 metric for single-response records (default: the record's first)",
            "--filter": "lm-eval filter to keep when a file holds several",
            "--domain-field": "dotted path of the domain, e.g. doc.category (default: task name)",
            "--item-id-field": "dotted path of a stable item id, e.g. doc.question_id (default: TASK/doc_id)",
        },
    )

    ins = kinds.add_parser("inspect", help="Inspect AI eval log (.json or .eval); epochs are the K samples")
    ins.add_argument("src", type=Path)
    ins.add_argument("--allow-partial", action="store_true", help="import a log whose run did not finish")
    _options(
        ins,
        {
            "--scorer": "which scorer's value is correctness (default: the first)",
            "--domain-field": "dotted path of the domain (default: metadata.domain/category/subject)",
        },
    )

    pf = kinds.add_parser(
        "promptfoo", help="promptfoo eval --repeat N -o results.json output; one prompt under one provider is a version"
    )
    pf.add_argument("src", type=Path)
    _options(
        pf,
        {
            "--prompt": "the prompt label to import (default: the first, with a note, where several)",
            "--provider": "the provider id to import (default: the first, with a note, where several)",
            "--domain-field": "test variable naming the domain (default: domain, category or subject)",
            "--item-id-field": "test variable naming the item (default: the test case's description)",
        },
    )

    ex = kinds.add_parser("examples", help="write small example lm-eval and Inspect logs (two versions)")
    ex.add_argument("--out", type=Path, required=True)
    ex.add_argument("--items", type=int, default=24)
    ex.add_argument("--k", type=int, default=5)
    ex.add_argument("--seed", type=int, default=0)
    ex.set_defaults(func="bayesrc.importers.handlers:run_examples")


def _options(p: argparse.ArgumentParser, options: dict[str, str]) -> None:
    """A log kind's own options (each a string, ``--name``: its help), then the ones every kind takes,
    and its handler."""
    for name, text in options.items():
        p.add_argument(name, help=text)
    _common(p)
    p.set_defaults(func="bayesrc.importers.handlers:run_import")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        help="version label (default: lm-eval: required; Inspect: the log's model; "
        "promptfoo: the prompt's label, or the provider with one prompt)",
    )
    p.add_argument("--out", type=Path, required=True, help="trials file to write (.parquet)")
