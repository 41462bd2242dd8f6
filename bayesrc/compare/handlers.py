"""What ``bayesrc compare`` runs: :mod:`bayesrc.compare.commands` parses the options and names
these functions (``func="bayesrc.compare.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import os
import sys

from bayesrc.bayes.commands import gate_config, sampler_config
from bayesrc.bayes.samplers import configure_host_devices
from bayesrc.compare import compare
from bayesrc.compare.github import write_github_files
from bayesrc.config import DEFAULT_MARGIN
from bayesrc.data import check_comparable, input_notes, load_counts, trials_file
from bayesrc.errors import InputError
from bayesrc.results import summary_text


def margin_value(text: str | None) -> float | None:
    """``--rope``'s value: the default margin when not given, None for ``none`` (the FDR selection alone decides), else
    a number in (0, 1).

    Examples
    --------
    >>> margin_value(None), margin_value("0.05"), margin_value("none")
    (0.02, 0.05, None)
    """
    if text is None:
        return DEFAULT_MARGIN
    if text.strip().lower() == "none":
        return None
    try:
        m = float(text)
    except ValueError:
        raise InputError(f"must be a number in (0, 1) or none, got {text!r}", field="--rope") from None
    if not 0 < m < 1:
        raise InputError(f"must be in (0, 1) or none, got {text}", field="--rope")
    return m


def run_compare(args: argparse.Namespace) -> int:
    if not 0 < args.q < 1:
        raise InputError(f"must be in (0, 1), got {args.q}", field="--q")
    args.margin = margin_value(args.margin)
    if args.margin is not None and args.q >= 0.5:
        raise InputError(
            "must be below 0.5 with a margin (pass needs mass >= 1 - q, fail <= q; --rope none for none), "
            f"got {args.q}",
            field="--q",
        )
    cfg = sampler_config(args)
    v1, v2 = trials_file(args.v1), trials_file(args.v2)
    check_comparable(v1, v2, allow=args.allow_pin, force=args.force)
    counts = load_counts([v1, v2], on_unmatched="drop" if args.allow_unmatched else "raise")
    if counts.sizes["item"] < 2:
        raise InputError(
            f"{counts.sizes['item']} matched item(s); the comparison needs at least 2", path=v2, field="item_id"
        )
    for note in input_notes(counts):
        print(f"bayesrc: note: {note}", file=sys.stderr)
    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    res = compare(
        counts,
        fail_on=args.fail_on,
        q=args.q,
        config=cfg,
        gate=gate_config(args),
        margin=args.margin,
    )
    res.save(args.out)  # compare.json, items.parquet and summary.md, all or nothing
    write_github_files(res, os.environ)  # in a GitHub Actions step: step outputs and the job summary
    print(summary_text(res.summary()))
    print(f"wrote {args.out / 'summary.md'}")
    if res.status == "ok" and res.margin is not None:
        print(f"decision: {res.margin['label']} (exit {res.exit_code}): " + "; ".join(res.margin["reasons"]))
    if res.status != "ok":
        print(
            "bayesrc: error: the change-model fit failed its convergence gate "
            f"({res.fit.diagnostics.worst}); nothing decided (exit 3)",
            file=sys.stderr,
        )
    return res.exit_code
