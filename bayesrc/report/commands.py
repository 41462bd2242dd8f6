"""``bayesrc report``, ``bayesrc show`` and ``bayesrc sensitivity``."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.bayes.commands import add_progress_argument, add_sampler_size_arguments
from bayesrc.data.commands import add_pin_arguments
from bayesrc.scale.commands import add_ray_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write one self-contained report per comparison of a run directory")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--format", dest="fmt", choices=("html", "md", "latex"), default="html")
    p.add_argument("--pair", action="append", help="only this comparison (repeatable)")
    p.add_argument("--out", type=Path, help="output folder (default: RUN_DIR)")
    p.set_defaults(func="bayesrc.report.handlers:run_report")

    show = sub.add_parser("show", help="print a saved result's whole summary (the commands print its headline rows)")
    show.add_argument("path", type=Path, help="a result file (rci.json, fit.json, ...) or the folder it is in")
    show.set_defaults(func="bayesrc.report.handlers:run_show")

    s = sub.add_parser("sensitivity", help="how the reliable-change conclusions move with the analysis choices")
    s.add_argument(
        "analysis",
        choices=("threshold", "exclusion", "k", "prior", "fdr", "all"),
        help="prior and fdr fit the paired change model (prior: one fit, reweighted to the grid's other priors "
        "where its importance weights pass the gate, else refitted)",
    )
    s.add_argument("v1", type=Path, help="trials of version 1")
    s.add_argument("v2", type=Path, help="trials of version 2")
    s.add_argument(
        "--truth", type=Path, help="known truth of a simulated pair (item_id, delta_p, changed): adds realized FDP"
    )
    s.add_argument("--z-grid", type=float, nargs="+", help="RCI thresholds (default 1.645 1.96 2.326 2.58 3.0)")
    s.add_argument("--min-valid-grid", type=int, nargs="+", help="rule (a) grid (default 2 4 6 8 10)")
    s.add_argument("--k-grid", type=int, nargs="+", help="samples per item to keep (default 3 5 ... K)")
    s.add_argument("--q-grid", type=float, nargs="+", help="Bayesian FDR levels (default 0.01 0.05 0.10 0.20)")
    add_sampler_size_arguments(s)  # the change model's fits (prior, fdr)
    add_progress_argument(s, "progress bar over the prior grid's fits")
    s.add_argument(
        "--refit",
        action="store_true",
        help="prior: refit every prior of the grid with NUTS (default: reweight the default prior's fit "
        "where Pareto k <= 0.7 and ESS >= 400)",
    )
    s.add_argument("--sd-basis", choices=("analysable", "all"), default="analysable")
    s.add_argument(
        "--s-diff",
        action="append",
        choices=("reference", "binomial"),
        help="threshold: S_diff methods to tabulate (repeatable; default reference and binomial)",
    )
    s.add_argument(
        "--reliability-basis",
        action="append",
        choices=("all", "analysed"),
        help="threshold: r_xx bases of the reference method (repeatable; default all and analysed)",
    )
    s.add_argument(
        "--null-replicates",
        type=int,
        default=200,
        help="threshold: replicates of the no-change null per method (default 200; 0: skip)",
    )
    s.add_argument("--allow-unmatched", action="store_true")
    add_pin_arguments(s)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", type=Path, required=True)
    add_ray_arguments(s, "prior grid's refits (one task per prior)")
    s.set_defaults(func="bayesrc.report.handlers:run_sensitivity")
