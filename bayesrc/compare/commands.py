"""``bayesrc compare V1 V2``: the CI gate after an upgrade (exit 0 pass, 1 fail, 2 bad input, 3 fit failed, 4 inconclusive under a margin)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="CI gate: change model with FDR selection (RCI beside it); exit 1 when what --fail-on names is found",
        description="Exit status: 0 pass (nothing that --fail-on names was found; with --rope: shown to be within the margin), "
        "1 fail (found; with --rope: shown to be beyond the margin), 2 bad input, 3 the fit failed its convergence gate, "
        "4 inconclusive (only with --rope: neither shown).",
    )
    p.add_argument("v1", type=Path, metavar="V1", help="baseline trials file (or run directory)")
    p.add_argument("v2", type=Path, metavar="V2", help="candidate trials file (or run directory)")
    p.add_argument(
        "--fail-on",
        choices=("deteriorated", "changed", "aggregate"),
        default="deteriorated",
        help="deteriorated: any item flagged worse (default); changed: any item flagged; aggregate: mean accuracy credibly lower",
    )
    p.add_argument(
        "--q", type=float, default=0.10, help="Bayesian FDR level of the item selection (default 0.10); with --rope also the posterior mass that decides (>= 1 - q within: pass, <= q: fail)"
    )
    p.add_argument(
        "--rope",
        "--min-delta",
        "--margin",
        dest="margin",
        type=float,
        default=None,
        metavar="M",
        help="practical margin on the change in accuracy (e.g. 0.02): pass / fail / inconclusive (exit 0 / 1 / 4) on the posterior mass of the mean change "
        "and of every flagged item within it; with --fail-on aggregate a non-inferiority margin",
    )
    p.add_argument("--out", type=Path, required=True, help="folder for summary.md, compare.json, items.parquet")
    from bayesrc.bayes.commands import add_pairing_arguments, add_sampler_arguments  # fit's options, one definition

    add_sampler_arguments(p)
    add_pairing_arguments(p, "compare")
    p.set_defaults(func=run_compare)


def _trials_path(p: Path) -> Path:
    from bayesrc.errors import InputError

    if p.is_dir():
        if not (p / "trials.parquet").exists():
            raise InputError("run directory has no trials.parquet (is the run complete?)", path=p)
        return p / "trials.parquet"
    if not p.exists():
        raise InputError("file not found", path=p)
    return p


def run_compare(args: argparse.Namespace) -> int:
    from bayesrc.errors import InputError

    if not 0 < args.q < 1:
        raise InputError(f"must be in (0, 1), got {args.q}", field="--q")
    if args.margin is not None and not 0 < args.margin < 1:
        raise InputError(f"must be in (0, 1), got {args.margin}", field="--rope")
    if args.margin is not None and args.q >= 0.5:
        raise InputError(f"must be below 0.5 with --rope (pass needs mass >= 1 - q, fail <= q), got {args.q}", field="--q")
    from bayesrc.bayes.commands import sampler_config

    cfg = sampler_config(args)
    v1, v2 = _trials_path(args.v1), _trials_path(args.v2)
    from bayesrc.collect.pins import check_comparable

    check_comparable(v1, v2, allow=args.allow_pin, force=args.force)
    from bayesrc.data import input_notes, load_counts

    counts = load_counts([v1, v2], on_unmatched="drop" if args.allow_unmatched else "raise")
    if counts.sizes["item"] < 2:
        raise InputError(f"{counts.sizes['item']} matched item(s); the comparison needs at least 2", path=v2, field="item_id")
    for note in input_notes(counts):
        print(f"bayesrc: note: {note}", file=sys.stderr)
    from bayesrc.bayes.samplers import configure_host_devices

    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    from bayesrc.compare import compare

    res = compare(
        counts, fail_on=args.fail_on, q=args.q, config=cfg, max_rhat=args.max_rhat, min_ess=args.min_ess, max_divergences=args.max_divergences, escalate=not args.no_escalate, margin=args.margin
    )
    res.save(args.out)  # compare.json, items.parquet and summary.md, all or nothing
    print(res.summary().to_string(index=False))
    print(f"wrote {args.out / 'summary.md'}")
    if res.status == "ok" and res.margin is not None:
        print(f"decision: {res.margin['label']} (exit {res.exit_code}): " + "; ".join(res.margin["reasons"]))
    if res.status != "ok":
        print(f"bayesrc: error: the change-model fit failed its convergence gate ({res.fit.diagnostics.worst}); nothing decided (exit 3)", file=sys.stderr)
    return res.exit_code
