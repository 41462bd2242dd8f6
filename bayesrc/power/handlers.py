"""What ``bayesrc power`` and ``power-plan`` run: :mod:`bayesrc.power.commands` parses the options and names
these functions (``func="bayesrc.power.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import sys

from bayesrc.classical.noise import noise_sentence
from bayesrc.data import load_counts
from bayesrc.data.provenance import check_all_comparable
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_text, staged_output
from bayesrc.power.planner import PLAN_COLUMNS, plan_k_n
from bayesrc.power.report import leaderboard_noise, leaderboard_report
from bayesrc.power.scores import scores_from_counts
from bayesrc.results import summary_text


def run_power(args: argparse.Namespace) -> int:
    if len(args.scores) < 2:
        raise InputError("need at least two SCORES files (one per model)", path=args.scores[0], field="SCORES")
    check_all_comparable(args.scores, allow=args.allow_pin, force=args.force)  # only the model may differ (SPEC 6)
    counts = load_counts(args.scores, on_unmatched="drop")
    for v, ids in (counts.attrs.get("unmatched") or {}).items():
        print(
            f"bayesrc: note: version {v}: {len(ids)} item(s) not in every file (first: {ids[0]}); "
            "analysed matched items only",
            file=sys.stderr,
        )
    scores, domain, info = scores_from_counts(counts, aggregate=args.aggregate, missing=args.missing)
    if info["items_dropped_missing"]:
        print(
            f"bayesrc: note: {info['items_dropped_missing']} item(s) without a valid answer in some file dropped "
            "(--missing drop)",
            file=sys.stderr,
        )
    if len(scores) < 2:
        raise InputError("fewer than 2 items scored in every file", path=args.scores[0], field="is_correct")
    info.update(
        sources=[str(s) for s in args.scores], cluster_by=None if args.cluster_by == "none" else args.cluster_by
    )
    clusters = domain.to_numpy() if args.cluster_by == "domain" else None
    report = leaderboard_report(
        scores,
        clusters,
        alpha=args.alpha,
        power=args.power,
        comparisons=args.comparisons,
        anytime=args.anytime,
        binary=info["binary"],
        info=info,
    )
    report = report.with_noise(leaderboard_noise(counts, report, scores.index))  # K vs N (none for single-shot scores)
    table = report.to_frame()
    with staged_output(args.out) as stage:
        report.write_into(stage)  # power.json (bayesrc.power.PowerReport)
        atomic_write_text(stage / "power.md", report.to_markdown())
        atomic_write_text(stage / "pairs.csv", table.to_csv(index=False))
    print(table[["rank", "pair", "n", "delta", "n_star", "q", "p_exact", "resolved_fixed_n"]].to_string(index=False))
    print(summary_text(report.summary()))
    for r in report.noise:
        print(f"noise, {r['name_a']} vs {r['name_b']}: {noise_sentence(r)}")
    print(f"wrote {args.out / 'power.json'} and {args.out / 'power.md'}")
    return 0


def run_plan(args: argparse.Namespace) -> int:
    plan = plan_k_n(
        args.delta_p,
        k_grid=args.k,
        n_grid=args.n,
        pi_change=args.pi_change,
        replicates=args.replicates,
        power=args.power,
        seed=args.seed,
        cache_dir=args.cache_dir,
    )
    plan.save(args.out)  # plan.json, plan_cells.parquet and plan.md, all or nothing
    rec = plan.recommend()
    print(plan.to_frame()[list(PLAN_COLUMNS)].to_string(index=False))
    print(f"recommendation: K = {rec['k']}, N = {rec['n_items']}")
    return 0
