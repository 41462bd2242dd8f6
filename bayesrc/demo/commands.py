"""CLI: ``bayesrc demo`` (the job itself: :mod:`bayesrc.demo.handlers`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job on the built-in default and write a report")
    p.add_argument("--out", type=Path, default=Path("runs/demo"))
    p.add_argument("--items", type=int, default=None, help="items (default: 40 collected, 2000 simulated)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--simulated", action="store_true", help="simulated trials with known truth instead of collecting with Gemma"
    )
    p.add_argument("--no-bayes", action="store_true", help="skip the Bayesian change model")
    p.set_defaults(func="bayesrc.demo.handlers:run_demo")
