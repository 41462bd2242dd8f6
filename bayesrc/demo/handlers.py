"""What ``bayesrc demo`` runs: :mod:`bayesrc.demo.commands` parses the options and names
these functions (``func="bayesrc.demo.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bayesrc.bayes import SamplerConfig, configure_host_devices, fit
from bayesrc.classical import analyse_pairs
from bayesrc.collect import collect_demo_runs
from bayesrc.data import check_comparable, item_counts, load_counts, save_trials, simulate_pair
from bayesrc.io import atomic_write_json, read_run_record, staged_output, write_parquet
from bayesrc.power import leaderboard_report, scores_from_counts
from bayesrc.report import render_report
from bayesrc.results import headline_text


def _collect(out: Path, n_items: int, k: int, seed: int) -> tuple[dict, dict]:
    """Collect both versions with Gemma; return the item-counts pair and a pins record."""
    runs = collect_demo_runs(out / "collect", n_items=n_items, k=k, seed=seed, progress=sys.stderr.isatty())
    comparison = check_comparable(runs["v1"], runs["v2"])
    counts = load_counts([runs["v1"] / "trials.parquet", runs["v2"] / "trials.parquet"])
    record = {
        "format": "bayesrc-demo/1",  # demo.json, not a run record (run.json): the demo's two runs' pins, compared
        "comparison": comparison.to_dict(),
        "v1": read_run_record(runs["v1"]).get("pins", {}),
        "v2": read_run_record(runs["v2"]).get("pins", {}),
    }
    return {"demo": counts}, record


def _simulate(n_items: int, k: int, seed: int) -> dict:
    sims = {
        "minor": simulate_pair(n_items, k, models=("sim-v1", "sim-v1.1"), seed=seed),
        "major": simulate_pair(n_items, k, models=("sim-v2", "sim-v3"), seed=seed + 1, pi_change=0.7, sigma_delta=4.0),
    }
    return {n: item_counts(s.trials_v1, s.trials_v2) for n, s in sims.items()}, sims


def run_demo(args: argparse.Namespace) -> int:
    out: Path = args.out
    sims, record = None, None
    if args.simulated:
        pairs, sims = _simulate(args.items or 2000, args.k, args.seed)
    else:
        pairs, record = _collect(out, args.items or 40, args.k, args.seed)

    analysis = analyse_pairs(pairs, seed=args.seed)
    # the fit's cross-check uses the same RCI classification the report shows
    fits = (
        {} if args.no_bayes else {name: _fit_change(ds, args.seed, analysis.pairs[name]) for name, ds in pairs.items()}
    )
    scores, domain, _ = scores_from_counts(next(iter(pairs.values())))
    resolution = leaderboard_report(scores, domain)

    with staged_output(out) as stage:
        if sims is not None:
            (stage / "trials").mkdir()
            for n, s in sims.items():
                save_trials(s.trials_v1, stage / "trials" / f"{n}_v1.parquet")
                save_trials(s.trials_v2, stage / "trials" / f"{n}_v2.parquet")
                write_parquet(s.truth, stage / "trials" / f"{n}_truth.parquet")
        analysis.write_into(stage)  # rci.json + items_NAME.parquet
        resolution.write_into(stage)  # power.json (a PowerReport)
        if record is not None:
            atomic_write_json(stage / "demo.json", record)
        for n, f in fits.items():
            f.write(stage / n)
        # from the stage: results and reports land in one swap
        report = render_report(stage, run_name=out.resolve().name)
        report.write_into(stage)
    reports = {n: out / fname for n, fname in report.main.items()}

    print(headline_text(analysis, out / analysis.main_file))
    for n, f in fits.items():
        print(f"\n{n}: Bayesian change model ({f.backend})")
        print(headline_text(f, out / n / f.main_file))
    for n, path in reports.items():
        print(f"report {n}: {path}")
    failed = [n for n, f in fits.items() if not f.diagnostics.passed]
    if failed:
        print(
            f"bayesrc: warning: convergence gate failed for {', '.join(failed)}; the report marks it failed",
            file=sys.stderr,
        )
        return 3
    return 0


def _fit_change(counts, seed: int, rci=None):
    """The paired change model with NumPyro and the default sampler settings (``SamplerConfig()``,
    as ``bayesrc fit``: 4 chains, as many at a time as there are cores).

    On 2 cores the 4 chains take two rounds, yet cost no more than 2 chains in one: those more
    often needed extra draws or a second attempt to reach the gate's ESS.
    """
    config = SamplerConfig(seed=seed)
    configure_host_devices(min(config.chains, os.cpu_count() or 1))
    return fit(counts, model="change", backend="numpyro", config=config, rci=rci)
