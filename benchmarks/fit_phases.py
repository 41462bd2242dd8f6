"""Benchmark: where a default fit's time and memory go, phase by phase, this code beside an earlier one.

    .venv/bin/python benchmarks/fit_phases.py [--items 12000|q3] [--baseline REF]

One fresh process per code version runs the default ``bayesrc.bayes.fit(counts)`` on
``benchmarks/bayes.py``'s simulated dataset of ``--items`` items (14 domains x 10 letters at
12,000) and prints, for each step of the fit (sampling, item draws, item table, checks, ...), its
wall time, the resident memory before it, the peak *during* it (Linux: the peak is reset before
each step through ``/proc/self/clear_refs``) and the resident memory after it. ``--baseline REF`` runs the same
process on REF's code (a ``git worktree``, as ``benchmarks/bayes.py`` does) after this code's, and prints both side
by side with the ratio of the peaks. Goal (issue 28): the whole 12,000-item fit within 1.5 GB.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bayes import CHILD, ROOT, baseline_tree, run_child

PHASES = {  # module -> the functions timed (the modules and functions a version lacks are left out)
    "bayesrc.bayes.change_collapsed": ["run_numpyro", "item_draws", "store_item_quantities"],  # item draws: to issue 61
    "bayesrc.bayes.change_item_draws": ["item_draws", "store_item_quantities"],  # the item draws since issue 61
    "bayesrc.bayes.fit": [
        "item_summary",
        "rci_fdp_interval",
        "rci_fdp_prior_sensitivity",
        "prior_predictive",
        "posterior_predictive_check",
        "loo_checks",
    ],
}

WRAP = r"""
import importlib, json, time
PHASES, ROWS = json.loads(sys.argv[4]), []
def _status_gb(key):
    return int([l for l in open("/proc/self/status") if l.startswith(key)][0].split()[1]) / 2**20
def _timed(name, f):
    def g(*a, **k):
        open("/proc/self/clear_refs", "w").write("5")  # the peak from here on
        before, t = _status_gb("VmRSS"), time.perf_counter()
        out = f(*a, **k)
        ROWS.append({"phase": name, "s": time.perf_counter() - t, "before_gb": before, "peak_gb": _status_gb("VmHWM"),
                     "after_gb": _status_gb("VmRSS")})
        return out
    return g
for mod, names in PHASES.items():
    try:
        m = importlib.import_module(mod)
    except ModuleNotFoundError:
        continue
    for name in names:
        if hasattr(m, name):
            setattr(m, name, _timed(name, getattr(m, name)))
fit = importlib.import_module("bayesrc.bayes.fit").fit
"""


def child_script() -> str:
    """``benchmarks/bayes.py``'s child with every phase wrapped, printing the rows as its last line."""
    head, tail = CHILD.split("from bayesrc.bayes import fit\n")
    return head + WRAP + tail.replace('"peak_gb"', '"phases": ROWS, "peak_gb"')


def run(tree: Path, n: str) -> dict:
    r = run_child(tree, n, "change", "numpyro", "", child_script(), json.dumps(PHASES))
    if "error" in r:
        sys.exit(f"{tree}: {r['error']}")
    r["peak_gb"] = max([r["peak_gb"]] + [p["peak_gb"] for p in r["phases"]])  # the resets also reset ru_maxrss
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--items",
        default="12000",
        help="items of the simulated pair, or q3: the bundled Q4_K_M -> Q3_K_M pair (benchmarks/bayes.py)",
    )
    ap.add_argument("--baseline", default="", help="git ref of the earlier code ('' to skip)")
    args = ap.parse_args()
    runs = {"this": run(ROOT, args.items)}
    if args.baseline:
        runs[args.baseline] = run(baseline_tree(args.baseline), args.items)
    names = [r["phase"] for r in runs["this"]["phases"]]
    print(f"{args.items} items; per phase: wall s / resident GB before it / peak during it / resident after it")
    print(f"{'phase':28}" + "".join(f"{k:>38}" for k in runs))
    for name in dict.fromkeys(names):
        cells = []
        for r in runs.values():
            rows = [p for p in r["phases"] if p["phase"] == name]
            # rows of older runs lack them
            rss = lambda row, key: f"{row[key]:5.2f}" if key in row else "    -"  # noqa: E731
            cells.append(
                f"{sum(p['s'] for p in rows):10.1f} / {rss(rows[0], 'before_gb')} / "
                f"{max(p['peak_gb'] for p in rows):5.2f} / {rss(rows[-1], 'after_gb')} GB"
                if rows
                else f"{'-':>38}"
            )
        print(f"{name:28}" + "".join(f"{c:>38}" for c in cells))
    print(
        f"{'whole process':28}"
        + "".join(f"{r['process_s']:10.1f} / peak {r['peak_gb']:5.2f} GB".rjust(38) for r in runs.values())
    )
    if args.baseline:
        print(f"peak ratio {args.baseline} / this: {runs[args.baseline]['peak_gb'] / runs['this']['peak_gb']:.2f}")


if __name__ == "__main__":
    main()
