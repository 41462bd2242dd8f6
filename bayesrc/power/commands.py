"""``bayesrc power``: resolution report for two or more models' per-item scores."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "power",
        help="resolution diagnostics (MDE, N*, q = N/N*, McNemar, stress tests) for paired comparisons",
        description="Is the benchmark large enough to resolve the comparison? Two SCORES files give one pair; more give a leaderboard ranked by accuracy and its adjacent-pair table.",
    )
    p.add_argument("scores", nargs="+", type=Path, metavar="SCORES", help="trials files (greedy single-shot or K samples), one per model")
    p.add_argument("--out", required=True, type=Path, help="output folder (power.json, power.md, pairs.csv)")
    p.add_argument("--cluster-by", choices=("domain", "none"), default="none", help="item clusters for the design effect (default none)")
    p.add_argument("--aggregate", choices=("auto", "majority", "mean"), default="auto", help="per-item score from K samples: majority (auto for K > 1) or mean (non-binary: paired t-test)")
    p.add_argument("--missing", choices=("drop", "incorrect"), default="drop", help="unparsed answers: drop the item (default) or score it as wrong")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--power", type=float, default=0.8)
    p.add_argument("--comparisons", type=int, default=None, help="size of the comparison family (default: number of adjacent pairs)")
    from bayesrc.collect.commands import add_pin_arguments  # one definition of --allow-pin / --force

    add_pin_arguments(p, "rank")
    p.add_argument("--anytime", choices=("normal_mixture", "stitched"), default="normal_mixture", help="anytime-valid boundary")
    p.set_defaults(func=run_power)

    q = sub.add_parser(
        "power-plan",
        help="what K and N to run: simulated RCI detection of a per-item change (cached)",
        description="Simulate benchmarks whose changed items move by DELTA_P and report, per (K, N), the share "
        "the classical RCI detects and the aggregate q; recommends the cheapest K and N meeting both targets.",
    )
    q.add_argument("--delta-p", type=float, required=True, help="per-item change in accuracy to detect (0-1)")
    q.add_argument("--k", type=int, nargs="+", default=[5, 10, 20], help="samples per item to try")
    q.add_argument("--n", type=int, nargs="+", default=[250, 500, 1000, 2000], help="items per benchmark to try")
    q.add_argument("--pi-change", type=float, default=0.3, help="share of items that change (default 0.3)")
    q.add_argument("--replicates", type=int, default=2)
    q.add_argument("--power", type=float, default=0.8)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--cache-dir", type=Path, default=None, help="cache folder (default $BAYESRC_CACHE/power-plan or ~/.cache/bayesrc/power-plan)")
    q.add_argument("--out", required=True, type=Path)
    q.set_defaults(func=run_plan)


def run_power(args: argparse.Namespace) -> int:
    from bayesrc.data import load_counts
    from bayesrc.errors import InputError
    from bayesrc.io import atomic_write_text, staged_output
    from bayesrc.power.report import leaderboard_noise, leaderboard_report, scores_from_counts

    if len(args.scores) < 2:
        raise InputError("need at least two SCORES files (one per model)", path=args.scores[0], field="SCORES")
    from bayesrc.collect.pins import check_all_comparable

    check_all_comparable(args.scores, allow=args.allow_pin, force=args.force)  # only the model may differ (SPEC 6)
    counts = load_counts(args.scores, on_unmatched="drop")
    for v, ids in (counts.attrs.get("unmatched") or {}).items():
        print(f"bayesrc: note: version {v}: {len(ids)} item(s) not in every file (first: {ids[0]}); analysed matched items only", file=sys.stderr)
    scores, domain, info = scores_from_counts(counts, aggregate=args.aggregate, missing=args.missing)
    if info["items_dropped_missing"]:
        print(f"bayesrc: note: {info['items_dropped_missing']} item(s) without a valid answer in some file dropped (--missing drop)", file=sys.stderr)
    if len(scores) < 2:
        raise InputError("fewer than 2 items scored in every file", path=args.scores[0], field="is_correct")
    info.update(sources=[str(s) for s in args.scores], cluster_by=None if args.cluster_by == "none" else args.cluster_by)
    clusters = domain.to_numpy() if args.cluster_by == "domain" else None
    report = leaderboard_report(scores, clusters, alpha=args.alpha, power=args.power, comparisons=args.comparisons, anytime=args.anytime, binary=info["binary"], info=info)
    report = report.with_noise(leaderboard_noise(counts, report, scores.index))  # K vs N (none for single-shot scores)
    table = report.to_frame()
    with staged_output(args.out) as stage:
        report.write_into(stage)  # power.json (bayesrc.power.PowerReport)
        atomic_write_text(stage / "power.md", report.to_markdown())
        atomic_write_text(stage / "pairs.csv", table.to_csv(index=False))
    print(table[["rank", "pair", "n", "delta", "n_star", "q", "p_exact", "resolved_fixed_n"]].to_string(index=False))
    print(report.summary().to_string(index=False))
    from bayesrc.classical.noise import noise_sentence

    for r in report.noise:
        print(f"noise, {r['name_a']} vs {r['name_b']}: {noise_sentence(r)}")
    print(f"wrote {args.out / 'power.json'} and {args.out / 'power.md'}")
    return 0


def run_plan(args: argparse.Namespace) -> int:
    from bayesrc.power.planner import PLAN_COLUMNS, plan_k_n

    plan = plan_k_n(args.delta_p, k_grid=args.k, n_grid=args.n, pi_change=args.pi_change, replicates=args.replicates, power=args.power, seed=args.seed, cache_dir=args.cache_dir)
    plan.save(args.out)  # plan.json, plan_cells.parquet and plan.md, all or nothing
    rec = plan.recommend()
    print(plan.to_frame()[list(PLAN_COLUMNS)].to_string(index=False))
    print(f"recommendation: K = {rec['k']}, N = {rec['n_items']}")
    return 0
