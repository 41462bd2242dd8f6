"""``bayesrc power``: resolution report for two or more models' per-item scores."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.data.commands import add_pin_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "power",
        help="resolution diagnostics (MDE, N*, q = N/N*, McNemar, stress tests) for paired comparisons",
        description="Is the benchmark large enough to resolve the comparison? Two SCORES files give one pair; "
        "more give a leaderboard ranked by accuracy and its adjacent-pair table.",
    )
    p.add_argument(
        "scores",
        nargs="+",
        type=Path,
        metavar="SCORES",
        help="trials files (greedy single-shot or K samples), one per model",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (power.json, power.md, pairs.csv)")
    p.add_argument(
        "--cluster-by",
        choices=("domain", "none"),
        default="none",
        help="item clusters for the design effect (default none)",
    )
    p.add_argument(
        "--aggregate",
        choices=("auto", "majority", "mean"),
        default="auto",
        help="per-item score from K samples: majority (auto for K > 1) or mean (non-binary: paired t-test)",
    )
    p.add_argument(
        "--missing",
        choices=("drop", "incorrect"),
        default="drop",
        help="unparsed answers: drop the item (default) or score it as wrong",
    )
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--power", type=float, default=0.8)
    p.add_argument(
        "--comparisons",
        type=int,
        default=None,
        help="size of the comparison family (default: number of adjacent pairs)",
    )
    add_pin_arguments(p, "rank")
    p.add_argument(
        "--anytime", choices=("normal_mixture", "stitched"), default="normal_mixture", help="anytime-valid boundary"
    )
    p.set_defaults(func="bayesrc.power.handlers:run_power")

    q = sub.add_parser(
        "power-plan",
        help="what K and N to run: simulated RCI detection of a per-item change (cached)",
        description="Simulate benchmarks whose changed items move by DELTA_P and report, per (K, N), the share "
        "the classical RCI detects and the aggregate q; recommends the cheapest K and N meeting both targets.",
    )
    q.add_argument("--delta-p", type=float, required=True, help="per-item change in accuracy to detect (0-1)")
    q.add_argument("--k", type=int, nargs="+", default=[5, 10, 20], help="samples per item to try")
    q.add_argument("--n", type=int, nargs="+", default=[250, 500, 1000, 2000], help="items per benchmark to try")
    q.add_argument("--pi-change", type=float, default=0.3, help="share of items that change (default 0.3)")
    q.add_argument("--replicates", type=int, default=2)
    q.add_argument("--power", type=float, default=0.8)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="cache folder (default $BAYESRC_CACHE/power-plan or ~/.cache/bayesrc/power-plan)",
    )
    q.add_argument("--out", required=True, type=Path)
    q.set_defaults(func="bayesrc.power.handlers:run_plan")
