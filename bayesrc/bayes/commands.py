"""``bayesrc fit``: a Bayesian item model for one version pair, or the joint change model of three or
more versions (exit 3 on a failed gate)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrc.config import GateConfig, SamplerConfig, SelectionConfig
from bayesrc.data.commands import add_pin_arguments
from bayesrc.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit",
        help="Bayesian item model (beta-binomial or paired change) for a version pair, "
        "or the joint change model of three or more versions",
    )
    p.add_argument(
        "runs",
        type=Path,
        nargs="+",
        metavar="TRIALS",
        help="V1 V2: a version pair; V1 V2 V3 ...: a family (the joint change model, V1 the reference)",
    )
    add_fit_arguments(p)
    p.add_argument(
        "--compare",
        default=None,
        metavar="MODELS",
        help="fit each of these models (comma-separated, e.g. change,betabinom) into OUT/MODEL/ "
        "and rank them by PSIS-LOO ELPD -> OUT/loo_compare.json (--model is then ignored)",
    )
    p.add_argument("--out", required=True, type=Path)
    p.set_defaults(func="bayesrc.bayes.handlers:run_fit")


def add_sampler_arguments(p: argparse.ArgumentParser) -> None:
    """NUTS settings and the convergence gate (``fit``, ``fit-many``, ``compare``): see :func:`sampler_config`
    and :func:`gate_config`.

    The defaults are :class:`~bayesrc.bayes.SamplerConfig`'s and :class:`~bayesrc.bayes.GateConfig`'s, the one
    definition every command uses.
    """
    d, g = SamplerConfig(), GateConfig()
    add_sampler_size_arguments(p)
    p.add_argument("--target-accept", type=float, default=d.target_accept)
    p.add_argument("--max-rhat", type=float, default=g.max_rhat)
    p.add_argument("--min-ess", type=float, default=g.min_ess)
    p.add_argument("--max-divergences", type=int, default=g.max_divergences)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--no-escalate",
        action="store_true",
        help="one sampling attempt only "
        "(default: after a failed gate, two more with longer warm-up, more draws, higher target acceptance)",
    )
    add_progress_argument(p)


def add_sampler_size_arguments(p: argparse.ArgumentParser) -> None:
    """``--chains``, ``--draws``, ``--tune`` with :class:`~bayesrc.bayes.SamplerConfig`'s defaults, as every
    command that fits takes them (checked by :func:`check_sampler_sizes`)."""
    d = SamplerConfig()
    p.add_argument("--chains", type=int, default=d.chains, help=f"NUTS chains (default {d.chains})")
    p.add_argument("--draws", type=int, default=d.draws, help=f"draws per chain after warm-up (default {d.draws})")
    p.add_argument("--tune", type=int, default=d.tune, help=f"warm-up steps per chain (default {d.tune})")


def check_sampler_sizes(args: argparse.Namespace) -> None:
    """Exit 2 (an :class:`~bayesrc.errors.InputError`) unless chains and draws are >= 1 and tune >= 0."""
    if args.chains < 1 or args.draws < 1 or args.tune < 0:
        raise InputError("chains and draws must be >= 1, tune >= 0", field="--chains")


def add_progress_argument(p: argparse.ArgumentParser, what: str = "progress bars") -> None:
    """``--no-progress``, as every command that fits or sweeps fits takes it (read by :func:`progress_setting`)."""
    p.add_argument("--no-progress", action="store_true", help=f"no {what} (default: on a terminal)")


def progress_setting(args: argparse.Namespace) -> bool | None:
    """:class:`~bayesrc.bayes.SamplerConfig`'s ``progress`` of ``--no-progress``: False, else None (bars on a
    terminal or in Jupyter)."""
    return False if args.no_progress else None


def add_pairing_arguments(p: argparse.ArgumentParser, what: str = "fit") -> None:
    """How two versions' trials are paired: unmatched items and run pins (SPEC 6)."""
    p.add_argument("--allow-unmatched", action="store_true", help="analyse items present in both versions")
    add_pin_arguments(p, what)


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    """The model, sampler, gate and pin options of ``fit`` (shared with ``fit-many``)."""
    p.add_argument("--model", choices=("betabinom", "change"), default="change")
    p.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--collapsed",
        action="store_true",
        help="NUTS on the hyperparameters + exact conditional item draws (the default, as in the Python API)",
    )
    mode.add_argument("--full", action="store_true", help="NUTS over every item parameter too (the cross-check)")
    p.add_argument("--slope", action="store_true", help="change model: slope of delta on baseline difficulty")
    p.add_argument(
        "--covariate",
        default="auto",
        help="change model: item covariate shifting the mean change "
        "(default auto: the correct answer's letter when the trials carry it; 'none': no covariate)",
    )
    s = SelectionConfig()
    p.add_argument("--fdr", type=float, default=s.fdr, help=f"Bayesian FDR level q (default {s.fdr:.2f})")
    p.add_argument("--rule", choices=("fdr", "threshold"), default=s.rule, help=f"selection rule (default {s.rule})")
    p.add_argument("--threshold", type=float, default=s.threshold, help="threshold rule: P(direction) >= this")
    p.add_argument(
        "--rope",
        type=float,
        default=s.rope,
        help="ROPE on |dp|: items.parquet gets p_rope = P(|dp| > ROPE) (both models); "
        "betabinom also uses it for P(change)",
    )
    p.add_argument(
        "--delta-min",
        type=float,
        default=s.delta_min,
        help=f"a material change in accuracy (default {s.delta_min:g}): items get P(dp >= it) and P(dp <= -it), "
        "the cross-check RCI's material FDP",
    )
    add_sampler_arguments(p)
    p.add_argument(
        "--allow-unconverged", action="store_true", help="exit 0 even if the gate fails (outputs still marked failed)"
    )
    add_pairing_arguments(p)


def sampler_config(args: argparse.Namespace):
    """The :class:`~bayesrc.bayes.SamplerConfig` of :func:`add_sampler_arguments`' options (validated: exit 2 on bad
    values)."""
    check_sampler_sizes(args)
    return SamplerConfig(
        chains=args.chains,
        draws=args.draws,
        tune=args.tune,
        target_accept=args.target_accept,
        seed=args.seed,
        progress=progress_setting(args),
    )


def gate_config(args: argparse.Namespace) -> GateConfig:
    """The :class:`~bayesrc.bayes.GateConfig` of :func:`add_sampler_arguments`' gate options
    (``--max-rhat``, ``--min-ess``, ``--max-divergences``, ``--no-escalate``)."""
    return GateConfig(
        max_rhat=args.max_rhat,
        min_ess=args.min_ess,
        max_divergences=args.max_divergences,
        escalate=not args.no_escalate,
    )


def selection_config(args: argparse.Namespace) -> SelectionConfig:
    """The :class:`~bayesrc.bayes.SelectionConfig` of :func:`add_fit_arguments`' selection options (validated:
    exit 2 on bad values)."""
    if not 0 < args.fdr < 1:
        raise InputError(f"must be in (0, 1), got {args.fdr}", field="--fdr")
    if not 0 < args.delta_min < 1:
        raise InputError(f"must be in (0, 1), got {args.delta_min}", field="--delta-min")
    return SelectionConfig(
        rule=args.rule, fdr=args.fdr, threshold=args.threshold, rope=args.rope, delta_min=args.delta_min
    )


def fit_kwargs(args: argparse.Namespace) -> dict:
    """Keywords of :func:`bayesrc.bayes.fit` from the options of :func:`add_fit_arguments` (validated)."""
    selection = selection_config(args)
    collapsed = not args.full  # the Python API's default for both models
    cfg = sampler_config(args)
    return {
        "model": args.model,
        "backend": args.backend,
        "collapsed": collapsed,
        "slope": args.slope,
        "config": cfg,
        "gate": gate_config(args),
        "selection": selection,
        "covariate": None if args.covariate in ("none", "") else args.covariate,
    }
