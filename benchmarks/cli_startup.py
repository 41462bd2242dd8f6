"""CLI start-up: `bayesrc --help` against `python -c "import numpy"`, side by side.

    .venv/bin/python benchmarks/cli_startup.py [--repeats 7]

Each command runs in a fresh interpreter (as a user's shell does); the median wall time
of each and their ratio are printed, plus whether `--help` imported pandas, xarray or
JAX (it must not: a command module holds only the options, and the analysis code is
imported with its handlers module when the command runs, see bayesrc/cli.py). Also times `bayesrc rci` end to end
on 2 pairs x 2,000 items x K = 10 (the docs' performance page, "a second or two") against the same numpy baseline.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall(cmd: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def heavy_modules_after_help() -> list[str]:
    code = (
        "import contextlib, io, sys\nfrom bayesrc.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
        "print(','.join(m for m in ('numpy', 'pandas', 'xarray', 'jax', 'scipy', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True).stdout
    return [m for m in out.strip().split(",") if m]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--skip-rci", action="store_true")
    args = ap.parse_args()
    py = sys.executable
    base = wall([py, "-c", "import numpy"], args.repeats)
    helpt = wall([py, "-m", "bayesrc", "--help"], args.repeats)
    print(f"python -c 'import numpy'   {base * 1000:7.0f} ms (median of {args.repeats})")
    print(f"bayesrc --help             {helpt * 1000:7.0f} ms   ratio {helpt / base:.2f}x")
    print(f"heavy modules imported by --help: {', '.join(heavy_modules_after_help()) or 'none'}")
    if args.skip_rci:
        return
    from bayesrc.data import save_trials, simulate_pair

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pairs = []
        for name, seed in (("a", 1), ("b", 2)):
            sim = simulate_pair(2000, 10, models=(f"{name}-v1", f"{name}-v2"), seed=seed)
            save_trials(sim.trials_v1, tmp / f"{name}1.parquet")
            save_trials(sim.trials_v2, tmp / f"{name}2.parquet")
            pairs += ["--pair", name, str(tmp / f"{name}1.parquet"), str(tmp / f"{name}2.parquet")]
        rci = wall([py, "-m", "bayesrc", "rci", *pairs, "--out", str(tmp / "out")], max(1, args.repeats // 2))
    print(f"bayesrc rci 2 x 2000 x K=10 {rci:7.2f} s    ratio {rci / base:.1f}x the numpy import")


if __name__ == "__main__":
    main()
