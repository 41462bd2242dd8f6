"""``bayesrc switch``: switch matrices and the additive prefix/suffix factor model."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.bayes.commands import add_progress_argument, add_sampler_size_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("switch", help="switch-matrix effects and the additive prefix/suffix factor model (paper 004)")
    p.add_argument(
        "input",
        type=Path,
        help="episode scores (episode, prefix_model, suffix_model, score) or cell summaries (CSV/JSONL/Parquet)",
    )
    p.add_argument("--benchmark", default=None, help="analyse only this benchmark")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of episodes (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--bayes",
        choices=("both", "numpyro", "pymc", "none"),
        default="both",
        help="Bayesian backend(s) (default both)",
    )
    add_sampler_size_arguments(p)
    add_progress_argument(p, "progress bars on the Bayesian fits")
    p.add_argument(
        "--pairing-rho",
        type=float,
        default=0.0,
        help="cell data: assumed within-episode correlation for the SE of Δ (default 0, the unpaired bound)",
    )
    p.add_argument(
        "--allow-unconverged", action="store_true", help="exit 0 even if a Bayesian fit fails the diagnostics gate"
    )
    p.add_argument("--out", required=True, type=Path)
    p.set_defaults(func="bayesrc.switch.handlers:run_switch")

    r = sub.add_parser(
        "switch-run", help="run a switch matrix (built-in kv-recall task) on local GGUF models; writes episode scores"
    )
    r.add_argument(
        "--model",
        nargs=3,
        action="append",
        required=True,
        metavar=("LABEL", "CARD", "STYLE"),
        help="a model: label, model card (TOML), prompt style "
        "(plain|sentence, optionally @TEMPERATURE, e.g. plain@0.8); repeat, at least twice",
    )
    r.add_argument("--temperature", type=float, default=0.0, help="default temperature (0: greedy)")
    r.add_argument("--episodes", type=int, default=20)
    r.add_argument(
        "--turns", type=int, default=3, help="assistant turns per episode; the suffix model writes the last (default 3)"
    )
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--cache", type=Path, default=None, help="prefix cache folder (default OUT/prefix-cache)")
    r.add_argument("--out", required=True, type=Path)
    r.set_defaults(func="bayesrc.switch.handlers:run_switch_run")
