"""What ``bayesrc fit`` runs: :mod:`bayesrc.bayes.commands` parses the options and names
these functions (``func="bayesrc.bayes.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields
from pathlib import Path

from bayesrc.bayes import check, compare, fit
from bayesrc.bayes.commands import fit_kwargs
from bayesrc.bayes.fit import MODELS, pair_only_settings
from bayesrc.bayes.joint_fit import fit_joint
from bayesrc.bayes.samplers import configure_host_devices
from bayesrc.config import SelectionConfig
from bayesrc.data import check_comparable, load_comparable_counts, load_counts
from bayesrc.data.counts import seed_notes
from bayesrc.errors import InputError
from bayesrc.results import headline_text, summary_text


def run_fit(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        raise InputError("give two trials files (a pair) or three or more (a family)", field="TRIALS")
    kwargs = fit_kwargs(args)
    configure_host_devices(min(args.chains, os.cpu_count() or 1))
    if len(args.runs) >= 3:
        return _run_family(args, kwargs)
    args.v1, args.v2 = args.runs
    check_comparable(args.v1, args.v2, allow=args.allow_pin, force=args.force)  # SPEC 6: only the model may differ
    counts = load_counts([args.v1, args.v2], on_unmatched="drop" if args.allow_unmatched else "raise")
    for note in seed_notes(counts):
        print(f"bayesrc: warning: {note}", file=sys.stderr)
    if args.compare:
        return _run_compare(args, counts, kwargs)
    res = fit(counts, **kwargs)
    _report_fit(res, args.out)
    check(res, allow_unconverged=args.allow_unconverged)
    return 0


def _run_family(args: argparse.Namespace, kwargs: dict) -> int:
    """Three or more trials files: the joint change model of the family (V1 the reference), written to ``--out``."""
    # fit()'s keyword -> this command's options, where they differ
    flags = {"collapsed": ["--full"], "selection": _selection_flags(kwargs["selection"])}
    given = {k: kwargs[k] for k in ("collapsed", "slope", "selection")}
    bad = (
        ["--compare"] * bool(args.compare)
        + ["--model betabinom"] * (args.model == "betabinom")
        + [f for k in pair_only_settings(**given) for f in flags.get(k, [f"--{k}"])]
    )
    if bad:
        raise InputError(
            f"the joint model of {len(args.runs)} versions has no {', '.join(bad)} (give two trials files for a pair)",
            field="TRIALS",
        )
    counts = load_comparable_counts(  # SPEC 6: only the model may differ (pins checked first)
        args.runs, allow=args.allow_pin, force=args.force, on_unmatched="drop" if args.allow_unmatched else "raise"
    )
    res = fit_joint(
        counts, backend=kwargs["backend"], config=kwargs["config"], covariate=kwargs["covariate"], gate=kwargs["gate"]
    )
    _report_fit(res, args.out)
    check(res, allow_unconverged=args.allow_unconverged)
    return 0


def _selection_flags(selection: SelectionConfig) -> list[str]:
    """The options of ``selection`` set away from their defaults (``--rope``, ``--rule``, ``--fdr``, ...)."""
    default = SelectionConfig()
    return [
        f"--{f.name.replace('_', '-')}"
        for f in fields(selection)
        if getattr(selection, f.name) != getattr(default, f.name)
    ]


def compare_models(spec: str) -> list[str]:
    """The models of ``--compare`` (comma-separated, each once, at least two; exit 2 otherwise).

    Examples
    --------
    >>> compare_models("change, betabinom")
    ['change', 'betabinom']
    """
    models = [m.strip() for m in spec.split(",") if m.strip()]
    bad = [m for m in models if m not in MODELS]
    if bad or len(models) < 2 or len(set(models)) < len(models):
        raise InputError(f"give two or more different models of {', '.join(MODELS)}, got {spec!r}", field="--compare")
    return models


def _report_fit(res, out: Path) -> None:
    """Write a fit (marked failed if so, before the gate decides the exit status), print its summary and warnings."""
    res.write(out)
    print(headline_text(res, out / res.main_file))
    print(f"wrote {out / res.main_file}")
    for w in res.warnings:
        print(f"bayesrc: warning: {w}", file=sys.stderr)
    if not res.diagnostics.passed:
        print(
            f"bayesrc: warning: convergence gate FAILED ({res.diagnostics.worst}); "
            "every output is marked status=failed",
            file=sys.stderr,
        )


def _run_compare(args: argparse.Namespace, counts, kwargs: dict) -> int:
    """``--compare``: one fit per model into ``OUT/MODEL/``, their PSIS-LOO ranking into ``OUT/loo_compare.json``."""
    fits = {}
    for model in compare_models(args.compare):
        res = fit(counts, **{**kwargs, "model": model})
        _report_fit(res, args.out / model)
        fits[model] = res
    comparison = compare(fits)
    comparison.save(args.out)  # beside the fits' folders, which it keeps
    print(summary_text(comparison.summary()))
    print(comparison.sentence())
    print(f"wrote {args.out / comparison.main_file}")
    for res in fits.values():
        check(res, allow_unconverged=args.allow_unconverged)
    return 0
