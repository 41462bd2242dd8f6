"""Command-line shell over the public Python API.

Each subpackage registers its own subcommands in ``<subpackage>/commands.py``
(``register(subparsers)``); heavy imports happen inside the command functions so
``bayesrc --help`` stays fast. Exit status: 0 ok, 2 bad input, 3 failed
convergence gate.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from bayesrc import __version__
from bayesrc.errors import BayesrcError

COMMAND_MODULES: tuple[str, ...] = (
    "bayesrc.classical.commands",
    "bayesrc.bayes.commands",
    "bayesrc.collect.commands",
    "bayesrc.power.commands",
    "bayesrc.demo",
    "bayesrc.switch.commands",
    "bayesrc.importers.commands",
    "bayesrc.report.commands",
    "bayesrc.truth.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bayesrc", description="Bayesian reliable-change analysis of LLM evaluations.")
    parser.add_argument("--version", action="version", version=f"bayesrc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BayesrcError as exc:
        print(f"bayesrc: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # unwritable output folder, disk full, ...
        target = f"{exc.filename}: " if exc.filename else ""
        print(f"bayesrc: error: {target}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bayesrc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
