"""``bayesrc demo``: the main job on the built-in default.

Until real collection lands, the demo simulates a realistic pair of versions (two
pairs, so the cross-pair analysis runs too) with known truth, runs the classical
analysis and writes its tables and a Markdown report under ``runs/``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job on the built-in default and write a report")
    p.add_argument("--out", type=Path, default=Path("runs/demo"))
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from bayesrc.classical import analyse_pairs
    from bayesrc.data import item_counts, save_trials, simulate_pair
    from bayesrc.io import atomic_write_json, atomic_write_text, staged_output

    sims = {
        "minor": simulate_pair(args.items, args.k, models=("sim-v1", "sim-v1.1"), seed=args.seed),
        "major": simulate_pair(args.items, args.k, models=("sim-v2", "sim-v3"), seed=args.seed + 1, pi_change=0.7, sigma_delta=4.0),
    }
    pairs = {n: item_counts(s.trials_v1, s.trials_v2) for n, s in sims.items()}
    analysis = analyse_pairs(pairs, seed=args.seed)
    with staged_output(args.out) as stage:
        (stage / "trials").mkdir()
        for n, s in sims.items():
            save_trials(s.trials_v1, stage / "trials" / f"{n}_v1.parquet")
            save_trials(s.trials_v2, stage / "trials" / f"{n}_v2.parquet")
            s.truth.to_parquet(stage / "trials" / f"{n}_truth.parquet", index=False)
            analysis.pairs[n].to_frame().to_parquet(stage / f"items_{n}.parquet", index=False)
        atomic_write_json(stage / "rci.json", analysis.to_dict())
        atomic_write_text(stage / "report.md", markdown_report(analysis))
    print(analysis.summary().to_string(index=False))
    print(f"report: {args.out / 'report.md'}")
    return 0


def markdown_report(analysis) -> str:
    """A plain Markdown summary of a classical analysis (tables only)."""
    lines = ["# bayesrc: reliable-change report", ""]
    for name, pair in analysis.pairs.items():
        lines += [f"## {name}: {pair.versions[0]} -> {pair.versions[1]}", "", f"SD basis: {pair.params['sd_basis']}", ""]
        lines += ["| metric | value |", "|---|---|"]
        for _, row in pair.summary().iterrows():
            val = row["value"]
            lines.append(f"| {row['metric']} | {val:.4g} |" if isinstance(val, float) else f"| {row['metric']} | {val} |")
        lines += ["", "### Churn by baseline difficulty", "", markdown_table(pair.difficulty), ""]
    if analysis.cross_pair:
        cp = analysis.cross_pair
        lines += ["## Cross-pair", "", f"z = {cp['z']:.2f}, p = {cp['p']:.3g}; RCI correlation r = {cp['pearson_r']:.3f} over {cp['n_shared']} shared items", ""]
    return "\n".join(lines)


def markdown_table(df) -> str:
    """A DataFrame as a GitHub Markdown table (floats to 4 significant digits)."""
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])
