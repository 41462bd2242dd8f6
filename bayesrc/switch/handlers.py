"""What ``bayesrc switch`` and ``switch-run`` run: :mod:`bayesrc.switch.commands` parses the options and names
these functions (``func="bayesrc.switch.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import re

from bayesrc.bayes.commands import check_sampler_sizes, progress_setting
from bayesrc.errors import ConvergenceError, InputError
from bayesrc.io import atomic_write_text, staged_output
from bayesrc.results import summary_text
from bayesrc.switch.analysis import analyse_switch, plot_effects, plot_residuals
from bayesrc.switch.data import load_switch
from bayesrc.switch.runner import RunnerModel, run_switch_matrix


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def run_switch(args: argparse.Namespace) -> int:
    if args.bootstrap < 100:
        raise InputError(f"need at least 100 resamples, got {args.bootstrap}", field="--bootstrap")
    check_sampler_sizes(args)
    if not -1.0 < args.pairing_rho < 1.0:
        raise InputError(f"must lie in (-1, 1), got {args.pairing_rho}", field="--pairing-rho")
    data = load_switch(args.input, benchmark=args.benchmark)
    backends = {"both": ("numpyro", "pymc"), "none": ()}.get(args.bayes, (args.bayes,))
    result = analyse_switch(
        data,
        n_boot=args.bootstrap,
        seed=args.seed,
        backends=backends,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        pairing_rho=args.pairing_rho,
        progress=progress_setting(args),
    )  # bayesrc.switch.SwitchResult
    with staged_output(args.out) as stage:
        result.write_into(stage)
        for bench in result.benchmarks:
            plot_effects(result, bench, stage / f"effects_{_safe(bench)}.png")
            plot_residuals(result, bench, stage / f"residuals_{_safe(bench)}.png")
    print(summary_text(result.summary()))
    if result.correlation:
        c = result.correlation
        print(f"correlation across benchmarks: alpha r = {c['alpha']:.2f}, beta r = {c['beta']:.2f}")
    print(f"wrote {args.out / 'switch.json'}")
    failed = result.failed_fit_reasons()
    if failed and not args.allow_unconverged:
        worst = "; ".join(f"{f}: {why}" for f, why in failed.items())
        raise ConvergenceError(
            f"Bayesian fit(s) failed the diagnostics gate ({worst}); outputs are marked passed=false"
        )
    return 0


def run_switch_run(args: argparse.Namespace) -> int:
    if args.episodes < 1:
        raise InputError(f"must be positive, got {args.episodes}", field="--episodes")
    models = []
    for label, card, style in args.model:
        style, _, temp = style.partition("@")
        try:
            t = float(temp) if temp else args.temperature
        except ValueError:
            raise InputError(f"expected STYLE@TEMPERATURE, got {style}@{temp}", item=label, field="--model") from None
        models.append(RunnerModel(label, card, style, temperature=t))
    df = run_switch_matrix(
        models,
        n_episodes=args.episodes,
        n_turns=args.turns,
        cache_dir=args.cache or args.out / "prefix-cache",
        seed=args.seed,
    )
    atomic_write_text(args.out / "episodes.csv", df.to_csv(index=False))
    print(df.pivot_table(index="prefix_model", columns="suffix_model", values="score").round(3).to_string())
    print(f"wrote {args.out / 'episodes.csv'}  (analyse: bayesrc switch {args.out / 'episodes.csv'} --out DIR)")
    return 0
