"""``bayesrc switch``: switch matrices and the additive prefix/suffix factor model."""

from __future__ import annotations

import argparse
import re
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("switch", help="switch-matrix effects and the additive prefix/suffix factor model (paper 004)")
    p.add_argument("input", type=Path, help="episode scores (episode, prefix_model, suffix_model, score) or cell summaries (CSV/JSONL/Parquet)")
    p.add_argument("--benchmark", default=None, help="analyse only this benchmark")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of episodes (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bayes", choices=("both", "numpyro", "pymc", "none"), default="both", help="Bayesian backend(s) (default both)")
    from bayesrc.bayes.commands import add_progress_argument, add_sampler_size_arguments  # one definition; inside, as a commands.py imports only the standard library at module level

    add_sampler_size_arguments(p)
    add_progress_argument(p, "progress bars on the Bayesian fits")
    p.add_argument("--pairing-rho", type=float, default=0.0, help="cell data: assumed within-episode correlation for the SE of Δ (default 0, the unpaired bound)")
    p.add_argument("--allow-unconverged", action="store_true", help="exit 0 even if a Bayesian fit fails the diagnostics gate")
    p.add_argument("--out", required=True, type=Path)
    p.set_defaults(func=run_switch)

    r = sub.add_parser("switch-run", help="run a switch matrix (built-in kv-recall task) on local GGUF models; writes episode scores")
    r.add_argument(
        "--model",
        nargs=3,
        action="append",
        required=True,
        metavar=("LABEL", "CARD", "STYLE"),
        help="a model: label, model card (TOML), prompt style (plain|sentence, optionally @TEMPERATURE, e.g. plain@0.8); repeat, at least twice",
    )
    r.add_argument("--temperature", type=float, default=0.0, help="default temperature (0: greedy)")
    r.add_argument("--episodes", type=int, default=20)
    r.add_argument("--turns", type=int, default=3, help="assistant turns per episode; the suffix model writes the last (default 3)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--cache", type=Path, default=None, help="prefix cache folder (default OUT/prefix-cache)")
    r.add_argument("--out", required=True, type=Path)
    r.set_defaults(func=run_switch_run)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def run_switch(args: argparse.Namespace) -> int:
    from bayesrc.bayes.commands import check_sampler_sizes, progress_setting
    from bayesrc.errors import ConvergenceError, InputError
    from bayesrc.io import staged_output
    from bayesrc.switch.analysis import analyse_switch, plot_effects, plot_residuals
    from bayesrc.switch.data import load_switch

    if args.bootstrap < 100:
        raise InputError(f"need at least 100 resamples, got {args.bootstrap}", field="--bootstrap")
    check_sampler_sizes(args)
    if not -1.0 < args.pairing_rho < 1.0:
        raise InputError(f"must lie in (-1, 1), got {args.pairing_rho}", field="--pairing-rho")
    data = load_switch(args.input, benchmark=args.benchmark)
    backends = {"both": ("numpyro", "pymc"), "none": ()}.get(args.bayes, (args.bayes,))
    result = analyse_switch(
        data, n_boot=args.bootstrap, seed=args.seed, backends=backends, draws=args.draws, tune=args.tune, chains=args.chains, pairing_rho=args.pairing_rho, progress=progress_setting(args)
    )  # bayesrc.switch.SwitchResult
    with staged_output(args.out) as stage:
        result.write_into(stage)
        for bench in result.benchmarks:
            plot_effects(result, bench, stage / f"effects_{_safe(bench)}.png")
            plot_residuals(result, bench, stage / f"residuals_{_safe(bench)}.png")
    print(result.summary().to_string(index=False))
    if result.correlation:
        c = result.correlation
        print(f"correlation across benchmarks: alpha r = {c['alpha']:.2f}, beta r = {c['beta']:.2f}")
    print(f"wrote {args.out / 'switch.json'}")
    failed = result.failed_fit_reasons()
    if failed and not args.allow_unconverged:
        worst = "; ".join(f"{f}: {why}" for f, why in failed.items())
        raise ConvergenceError(f"Bayesian fit(s) failed the diagnostics gate ({worst}); outputs are marked passed=false")
    return 0


def run_switch_run(args: argparse.Namespace) -> int:
    from bayesrc.errors import InputError
    from bayesrc.io import atomic_write_text
    from bayesrc.switch.runner import RunnerModel, run_switch_matrix

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
    df = run_switch_matrix(models, n_episodes=args.episodes, n_turns=args.turns, cache_dir=args.cache or args.out / "prefix-cache", seed=args.seed)
    atomic_write_text(args.out / "episodes.csv", df.to_csv(index=False))
    print(df.pivot_table(index="prefix_model", columns="suffix_model", values="score").round(3).to_string())
    print(f"wrote {args.out / 'episodes.csv'}  (analyse: bayesrc switch {args.out / 'episodes.csv'} --out DIR)")
    return 0
