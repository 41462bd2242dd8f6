"""Command-line shell over the public Python API.

Each subpackage registers its own subcommands in ``<subpackage>/commands.py``
(``register(subparsers)``: the options, and the name of the function that runs the command,
``func="bayesrc.<subpackage>.handlers:NAME"``); the functions live in ``<subpackage>/handlers.py``,
which imports the analysis code at its top. Exit status: 0 ok, 2 bad input, 3 failed
convergence gate; ``bayesrc compare`` also 1 (fail) and, with a margin, 4 (inconclusive); 141, quietly, when
the reader of standard output has closed it (``bayesrc show PATH | head``), as for a program stopped by SIGPIPE.

Start-up: ``bayesrc --help`` and argument errors import no pandas, xarray or JAX. A
``commands.py`` imports only the standard library, :mod:`bayesrc.config`, :mod:`bayesrc.errors`
and other ``commands.py`` modules (data's, :data:`OPTION_MODULES`, and bayes' are loaded before their users;
``bayesrc.scale``'s ``__init__`` is light). Importing it the usual way would run its package's
``__init__`` (which imports the analysis code); :func:`_command_module` therefore loads each
``commands.py`` file on its own, and the package and its ``handlers.py`` are imported only when
a command runs (:func:`_handler`). ``benchmarks/cli_startup.py`` measures it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import select
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from bayesrc import __version__
from bayesrc.errors import BayesrcError
from bayesrc.locking import output_lock

#: ``commands.py`` modules of options that other commands take, loaded before them; they register no command
OPTION_MODULES: tuple[str, ...] = ("bayesrc.data.commands",)  # --allow-pin / --force (add_pin_arguments)
COMMAND_MODULES: tuple[str, ...] = (
    "bayesrc.collect.commands",
    "bayesrc.classical.commands",
    "bayesrc.bayes.commands",
    "bayesrc.power.commands",
    "bayesrc.demo.commands",
    "bayesrc.switch.commands",
    "bayesrc.importers.commands",
    "bayesrc.compare.commands",
    "bayesrc.report.commands",
    "bayesrc.scale.commands",
    "bayesrc.truth.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesrc", description="Bayesian reliable-change analysis of LLM evaluations."
    )
    parser.add_argument("--version", action="version", version=f"bayesrc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in OPTION_MODULES:
        _command_module(name)
    for name in COMMAND_MODULES:
        _command_module(name).register(sub)
    return parser


def _command_module(name: str):
    """``importlib.import_module(name)`` without running the parent package's ``__init__``.

    The module is registered under its real name, so a later ``import name`` (after the
    package itself is imported by the command) returns this same module.
    """
    if name in sys.modules:
        return sys.modules[name]
    parts = name.split(".")
    parent = ".".join(parts[:-1])
    if parent == "bayesrc" or parent in sys.modules:
        return importlib.import_module(name)
    path = Path(__file__).resolve().parent.joinpath(*parts[1:]).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _handler(func: str):
    """The command's function: a commands.py names it (``set_defaults(func="package.handlers:NAME")``) and
    its module, with the analysis code it imports, is imported here, when the command runs.

    Examples
    --------
    >>> _handler("bayesrc.bayes.handlers:run_fit").__name__
    'run_fit'
    """
    module, _, name = func.partition(":")
    return getattr(importlib.import_module(module), name)


#: commands whose --out is a run directory guarded by its own lock (bayesrc.collect.rundir)
OWN_LOCK_COMMANDS = frozenset({"collect", "collect-demo"})


def _writer_lock(args: argparse.Namespace) -> AbstractContextManager:
    """The writer lock of the command's ``--out`` for its whole run: a second process writing
    the same output gets one line and exit 2 instead of interleaving its files. (Under a
    parent folder that does not exist yet, the lock is taken when the output is committed, so
    that bad input still leaves nothing behind.)"""
    out = getattr(args, "out", None)
    if not isinstance(out, Path) or args.command in OWN_LOCK_COMMANDS or not out.resolve().parent.is_dir():
        return nullcontext()
    return output_lock(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _writer_lock(args):
            code = int(_handler(args.func)(args) or 0)
        sys.stdout.flush()  # here, not at exit: a reader that has closed the pipe is met inside this try
        return code
    except BayesrcError as exc:
        print(f"bayesrc: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError as exc:
        if not _stdout_closed():  # a server's socket, say: an error like any other
            return _os_error(exc)
        # nothing more reaches the reader; stdout to /dev/null, so the interpreter's last flush stays quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # unwritable output folder, disk full, ...
        return _os_error(exc)
    except KeyboardInterrupt:
        print("bayesrc: interrupted", file=sys.stderr)
        return 130


def _os_error(exc: OSError) -> int:
    """One line for an operating-system error; exit status 2."""
    target = f"{exc.filename}: " if exc.filename else ""
    print(f"bayesrc: error: {target}{exc.strerror or exc}", file=sys.stderr)
    return 2


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (``poll`` reports an error on its write end)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or stdout not a file
        return False


if __name__ == "__main__":
    sys.exit(main())
