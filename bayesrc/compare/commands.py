"""``bayesrc compare V1 V2``: the CI gate after an upgrade (exit 0 pass, 1 fail, 2 bad input, 3 fit failed,
4 inconclusive)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.bayes.commands import add_pairing_arguments, add_sampler_arguments
from bayesrc.config import DEFAULT_MARGIN


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="CI gate: change model with FDR selection (RCI beside it); a pass must show the change within a margin "
        f"(--rope, default {DEFAULT_MARGIN:g})",
        description="Exit status: 0 pass (shown to be within the margin; with --rope none: nothing that --fail-on "
        "names was found), 1 fail (shown to be beyond the margin; with --rope none: found), 2 bad input, 3 the fit "
        "failed its convergence gate, 4 inconclusive (neither shown: the summary says what more items or samples "
        "would decide it).",
    )
    p.add_argument("v1", type=Path, metavar="V1", help="baseline trials file (or run directory)")
    p.add_argument("v2", type=Path, metavar="V2", help="candidate trials file (or run directory)")
    p.add_argument(
        "--fail-on",
        choices=("deteriorated", "changed", "aggregate"),
        default="deteriorated",
        help="deteriorated: any item flagged worse (default); changed: any item flagged; "
        "aggregate: mean accuracy credibly lower",
    )
    p.add_argument(
        "--q",
        type=float,
        default=0.10,
        help="Bayesian FDR level of the item selection (default 0.10); with --rope also the posterior mass that "
        "decides (>= 1 - q within: pass, <= q: fail)",
    )
    p.add_argument(
        "--rope",
        "--min-delta",
        "--margin",
        dest="margin",
        default=None,
        metavar="M",
        help=f"practical margin on the change in accuracy (default {DEFAULT_MARGIN:g}): pass / fail / inconclusive "
        "(exit 0 / 1 / 4) on the posterior mass "
        "of the mean change and of every flagged item within it; with --fail-on aggregate a non-inferiority margin; "
        "none: the FDR selection alone decides (exit 0 / 1), whatever the data could resolve",
    )
    p.add_argument("--out", type=Path, required=True, help="folder for summary.md, compare.json, items.parquet")
    add_sampler_arguments(p)
    add_pairing_arguments(p, "compare")
    p.set_defaults(func="bayesrc.compare.handlers:run_compare")
