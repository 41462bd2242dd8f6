"""Fault tolerance, counted: SIGKILL crash points of a result-folder write and of a collection, full disks, \
server faults and fuzzed reader inputs.

    .venv/bin/python benchmarks/faults.py [--quick] [--per-reader N] [--timed N] [--jobs N]
        [--crash-only | --server-only | --fuzz-only | --report-only | --disk-only] [--report-fit] [--disk-fit]

Components, each a table (the suite, tests/test_faults.py and tests/test_fuzz.py, runs the
same harnesses on a smaller seeded sample):

server
    tests/server_faults.py: ``collect --engine server`` (a real CLI process) through
    tests/fault_proxy.py in front of llama-cpp-python's real server: every transient fault
    (resets, HTTP 500 / 503 / 429 with and without Retry-After, a 503 cut short, a timeout,
    bodies cut short, cut JSON, an error object with HTTP 200, a restart) 2 (``--quick``) or 3
    times at seeded requests, against a clean run of the same command; then a server that keeps
    answering 500 and one that stays down (one line, exit 2), repaired and resumed by the same
    command. *lost* / *duplicated*: trials of the clean run missing or different / repeated or
    extra; *other*: a faulted run that does not complete, a failure that is not one clean line
    or leaves a torn journal, a resume that fails.
``staged_output``
    tests/crashpoints.py: a forked writer rewrites a result folder (old -> new) and is
    SIGKILLed before each filesystem event of the write (every one), and at ``--timed``
    times spread over a write slowed by an injected sleep; both swaps (Linux's
    ``renameat2`` exchange and the two-rename fallback). *lost*: after recovery the folder
    is not wholly old or wholly new (a mix counts as lost: the old version is gone);
    *duplicated*: a stage or an old copy left behind after recovery.
collection
    tests/collect_crashpoints.py: a forked collector (fast, exact and server engines; the server
    engine against llama-cpp-python's real server) SIGKILLed before every filesystem event of its
    run and at ``--calls`` points spread over its calls into ``bayesrc.collect``, then resumed
    (``--quick``: a seeded sample of 20 points for the fast and exact engines, 10 for the server's);
    tests/ray_crashpoints.py: the same points in a Ray shard's actor (2 shards, ``--calls`` / 2
    calls; ``--quick``: 3 of them), the shard retried by the driver. *lost*: trials (answer distributions for the exact
    engine) of the uninterrupted run missing or different after the resume, a torn journal part, a
    failed resume; *duplicated*: repeated rows and temporary files left; *other*: a killed actor
    whose shard was not retried exactly once.
full disk
    tests/disk_faults.py (as root): ``collect``, ``rci``, ``merge``, ``report``, ``power``,
    ``switch --bayes none``, ``import lm-eval`` and ``sensitivity threshold`` (and with ``--disk-fit``
    ``fit`` and ``fit-many`` with the beta-binomial, ``truth``, ``switch`` with its factor models,
    ``compare`` and ``demo``, whose fits take a minute or more a run), real CLI processes with their output on a
    tmpfs left with N KiB free, half the writer's output free, or remounted read-only, over an older version of the
    output.
    *exit 2*: one ``bayesrc: error:`` line; *old kept*: the older version byte for byte; *back*:
    with the space back the command completes (the resumed collection with the uninterrupted
    trials, a writer with every file of its output); *duplicated*: a stage, temporary or lock file
    left behind.
readers
    tests/fuzzing.py: ``--per-reader`` Hypothesis-generated malformed or truncated inputs
    (seeded) per reader the CLI uses, through the CLI in-process where a command reads it
    (``power``, ``import``) and the Python reader otherwise (item banks, model cards, exact
    runs, ``bayesrc.load``, counts NetCDF); besides, every field of a JSON / JSONL / TOML /
    ``.eval`` seed retyped once, ``--per-reader`` (options, input) pairs through the importers'
    and trials loaders' Python functions, and ``--per-reader`` in-memory frames through
    ``normalise_trials``. The fit.json / compare.json / posterior.nc seeds come from one real
    ``compare`` (about 90 s; the suite leaves them out). *tracebacks*: any exception other than InputError (the CLI's
    exit 2); *other faults*: an error not naming the file, output written by a failing
    command, an exit status other than 0 or 2.
report
    tests/fuzzing.py: REPORT_KINDS: ``--per-reader`` (``--quick``: 20) seeded inputs per result file the report
    reads (rci.json, its item table, run.json, power.json, pairwise_rci.json, switch.json,
    sensitivity.json, truth.json and its replicates table; with ``--report-fit``, fit.json and
    the fit's item table from one real ``compare``, loo_compare.json ranking that fit against itself,
    and joint.json from a joint fit), each field given another value of its type (null, NaN,
    ±inf, 0, negative, huge, an empty or one-element list, an empty object, deleted; a Parquet
    column within its dtype, no row or one), through ``bayesrc report`` (HTML) in-process; then
    each column of a table dropped in turn, and each field of a JSON file given each value of
    another type (a string, list, object, flag, null, -1, 1e308: tests/fuzzing.py:
    report_retyped; ``--quick``: 100 of them, seeded). *written*: a report; *clean errors*: exit 2 with one line
    naming the file and the field, nothing written; *tracebacks*, *other*: as for the readers.

The components run ``--jobs`` at a time (default 2), each in its own process, longest first. The
last line is ``lost L, duplicated D, tracebacks T`` over everything tried; the exit status is 1
when any count (other faults included) is not 0.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
sys.path.insert(0, str(TESTS))

import disk_faults  # noqa: E402  (tests/disk_faults.py: the tmpfs, the filler, the writers)
import fuzzing  # noqa: E402  (tests/fuzzing.py: the readers, their seeds and mutations)

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def crash_rows(timed: int) -> list[dict]:
    """One row per swap mode: every filesystem event a crash point, plus ``timed`` timed kills."""
    env = ENV
    rows = []
    for mode in ("exchange", "rename"):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                str(TESTS / "crashpoints.py"),
                "--root",
                f"{tmp}/w",
                "--mode",
                mode,
                "--points",
                "100000",
                "--timed",
                str(timed),
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        s = json.loads(res.stdout)
        rows.append(
            {
                "component": f"staged_output ({mode})",
                "tried": s["tried"],
                "killed": s["killed"],
                "events": s["events"],
                "states": ", ".join(f"{k} {v}" for k, v in sorted(s["states"].items())),
                "lost": s["lost"] + s["mixed"] + s["next_failed"],
                "duplicated": s["duplicated"],
                "tracebacks": 0,
                "other": 0,
            }
        )
    return rows


# --quick: crash points per collection engine (~7 s each here, a Ray point ~15 s)
QUICK_POINTS = {"fast": 20, "exact": 20, "server": 10, "ray": 3}


def collect_crash_rows(calls: int, quick: bool) -> list[dict]:
    """One row per engine (real Gemma GGUF): a collection SIGKILLed at every filesystem event and at
    ``calls`` points spread over its calls, resumed, compared row for row with an uninterrupted run;
    the server engine against llama-cpp-python's real server; then a Ray shard's actor killed the
    same way, its shard retried by the driver (tests/ray_crashpoints.py). ``quick``: a seeded sample of
    :data:`QUICK_POINTS` per engine (each Ray point starts new actors)."""
    from helpers import llama_server

    from bayesrc.collect import load_card, resolve_model

    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        llama_server(
            resolve_model(load_card(ROOT / "models" / "gemma-3-270m-q4_k_m.toml")),
            Path(tmp) / "server.log",
            n_threads=1,
        ) as url,
    ):
        for engine, items in (("fast", 4), ("exact", 3), ("server", 4)):
            cmd = [
                sys.executable,
                "-W",
                "ignore",
                str(TESTS / "collect_crashpoints.py"),
                "--engine",
                engine,
                "--items",
                str(items),
                "--k",
                "3",
                "--calls",
                str(calls),
            ]
            cmd += (["--base-url", url] if engine == "server" else []) + (
                ["--sample", str(QUICK_POINTS[engine])] if quick else []
            )
            rows.append(_crash_row(f"collect ({engine} engine)", cmd))
    cmd = [
        sys.executable,
        "-W",
        "ignore",
        str(TESTS / "ray_crashpoints.py"),
        "--items",
        "2",
        "--calls",
        str(calls // 2),
    ] + (["--sample", str(QUICK_POINTS["ray"])] if quick else [])
    rows.append(_crash_row("collect (a Ray shard's actor; fast engine)", cmd))
    return rows


def _crash_row(component: str, cmd: list[str]) -> dict:
    """Run a crash-point harness; its JSON summary (the last line of its output: Ray notes each killed worker
    before it) as a table row. *other*: a killed Ray actor whose shard was not retried exactly once."""
    start = time.monotonic()
    s = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, env=ENV).stdout.splitlines()[-1])
    return {
        "component": component,
        "tried": s["tried"],
        "killed": s["killed"],
        "events": f"{s['events']['fs']} fs, {s['events']['call']} calls",
        "lost": s["lost"] + s["torn"] + s["resume_failed"],
        "duplicated": s["duplicated"],
        "tracebacks": 0,
        "other": s["killed"] - s.get("retried", s["killed"]),
        "s": round(time.monotonic() - start),
    }


def disk_rows(sizes: list[int], writers: tuple[str, ...]) -> list[dict]:
    """collect and the writers on a real tmpfs with ``sizes`` KiB free, half each writer's output free, and
    read-only (needs root to mount)."""
    with tempfile.TemporaryDirectory() as tmp:
        if not disk_faults.can_mount(Path(tmp)):
            print("full disk / read-only: not run (mounting a tmpfs needs root)")
            return []
        start = time.monotonic()
        s = disk_faults.disk_faults(Path(tmp) / "d", sizes, writers=writers)
        seconds = round(time.monotonic() - start)
    rows = []
    for name in ("collect", *writers):
        cases = [c for c in s["cases"] if c["case"].startswith(name + ",")]
        rows.append(
            {
                "component": f"{name} (full disk, read-only)",
                "tried": len(cases),
                "exit 2": sum(c["exit"] == 2 for c in cases),
                "old kept": sum(c.get("kept", True) for c in cases),
                "back": sum(c["back"] for c in cases),
                "lost": sum(c["lost"] + c["torn"] for c in cases),
                "duplicated": sum(c["duplicated"] for c in cases),
                "tracebacks": sum(not c["clean"] for c in cases),
                "other": 0,
            }
        )
    print(f"full disk / read-only: {s['tried']} cases in {seconds} s", file=sys.stderr)
    return rows


def server_rows(quick: bool) -> list[dict]:
    """``collect --engine server`` through tests/fault_proxy.py in front of llama-cpp-python's real server (one thread),
    two requests in flight: every transient fault 2 (``--quick``) or 3 times at seeded points, against a clean run of
    the same command; then a server that keeps answering HTTP 500, and one that stays down, each repaired and
    resumed."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        print("server faults: not run (llama-cpp-python is not installed)")
        return []
    import server_faults as sf
    from fault_proxy import FAULTS
    from helpers import llama_server

    from bayesrc.collect import builtin_bank, load_card, resolve_model

    # 1 + n_items * k requests: room for the faults 3 apart (with two requests in flight, denser faults would often hit
    # one request more often than its 5 retries allow, a restart's refusals included: a fault storm, not transient
    # faults)
    n_items, k, times = (4, 16, 2) if quick else (6, 16, 3)
    timeout = 15.0  # two requests in flight on a one-thread server: a new item's prompt can wait behind another's
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        llama_server(resolve_model(load_card(sf.CARD)), Path(tmp) / "server.log", n_threads=1) as url,
    ):
        bank = Path(builtin_bank(Path(tmp) / "bank.jsonl", n_items=n_items, seed=3))
        clean = sf.run(sf.collect_command(bank, Path(tmp) / "clean", url, k=k, concurrency=2, timeout=120))
        if clean.returncode != 0:
            raise RuntimeError(f"the clean server run failed: {clean.stderr}")
        reference = sf.sorted_trials(Path(tmp) / "clean")
        start = time.monotonic()
        s = sf.transient_faults(
            url,
            bank,
            Path(tmp) / "faulted",
            reference,
            k=k,
            counts=dict.fromkeys(FAULTS, times),
            seed=33,
            concurrency=2,
            timeout=timeout,
            gap=3,
        )
        if s["exit"] != 0:
            print(f"server: the faulted run failed: {s['stderr'].strip()[-500:]}")
        rows.append(
            {
                "component": f"server: transient faults ({n_items} items, K = {k})",
                "tried": sum(s["injected"].values()),
                "faults": ", ".join(f"{f} {n}" for f, n in s["injected"].items()),
                "exit": s["exit"],
                "resumed": "",
                "retries": ", ".join(f"{f} {n}" for f, n in sorted(s["retries"].items()))
                + f" ({sum(s['retries'].values())})",
                "lost": s["lost"],
                "duplicated": s["duplicated"],
                "tracebacks": s["tracebacks"],
                "other": int(s["exit"] != 0),
                "s": round(time.monotonic() - start),
            }
        )
        for fault, label in (("500", "keeps answering HTTP 500"), ("down", "stays down (refused)")):
            start = time.monotonic()
            b = sf.stays_broken(
                url, bank, Path(tmp) / f"broken-{fault}", reference, k=k, fault=fault, after=1 + k + 2, concurrency=2
            )
            clean_stop = b["one_line"] and b["journal_whole"]
            rows.append(
                {
                    "component": f"server: {label} after {1 + k + 2} requests",
                    "tried": 1,
                    "faults": f"{fault} from then on ({b['injected'].get(fault, 0)} requests)",
                    "exit": f"{b['first'].returncode}, "
                    f"{'one line naming the URL' if b['one_line'] else 'NOT one clean line'}",
                    "resumed": f"exit {b['second'].returncode}",
                    "retries": ", ".join(f"{f} {n}" for f, n in sorted(b["retries"].items())),
                    "lost": b["lost"],
                    "duplicated": b["duplicated"],
                    "tracebacks": b["tracebacks"],
                    "other": int(not clean_stop) + int(b["second"].returncode != 0),
                    "s": round(time.monotonic() - start),
                }
            )
    return rows


def retyped_counts(name: str, root: Path) -> tuple[Counter, list[tuple]]:
    """Every field of the reader's seed retyped once (tests/fuzzing.py: retyped); none for readers without fields."""
    if name not in fuzzing.RETYPED:
        return Counter(), []
    ws = fuzzing.Workspace.make(fuzzing.READERS[name], root)
    return fuzzing.try_each(
        ws, fuzzing.retyped(ws.target, ws.seed_bytes), functools.partial(fuzzing.try_input, run=fuzzing.RETYPED[name])
    )


def options_counts(name: str, n: int, root: Path) -> tuple[Counter, list[tuple]]:
    """``n`` seeded (options, input) pairs through the reader's Python function (tests/fuzzing.py: OPTIONS)."""
    counts, faults = Counter(), []
    if name not in fuzzing.OPTIONS:
        return counts, faults
    ws = fuzzing.Workspace.make(fuzzing.READERS[name], root)

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(fuzzing.OPTIONS[name][0], st.just(ws.seed_bytes) | ws.reader.mutate(ws.seed_bytes))
    def one(options: dict, data: bytes) -> None:
        outcome, detail = fuzzing.try_input(ws, data, run=fuzzing.with_options(name, options))
        counts[outcome] += 1
        if outcome in fuzzing.FAULTS:
            faults.append((outcome, f"{options}: {detail}", data))

    one()
    return counts, faults


def frame_row(n: int) -> tuple[dict, list[tuple]]:
    """``n`` seeded in-memory frames through normalise_trials (tests/fuzzing.py: trial_frames)."""
    counts, faults = Counter(), []
    start = time.monotonic()

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(fuzzing.trial_frames())
    def one(case: tuple) -> None:
        outcome, detail = fuzzing.try_frame(*case)
        counts[outcome] += 1
        if outcome in fuzzing.FAULTS:
            faults.append(("normalise_trials frames", outcome, detail, repr(case[0].to_dict()).encode()))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one()
    row = {
        "component": "normalise_trials frames",
        "tried": sum(counts.values()),
        "generated": sum(counts.values()),
        "retyped": 0,
        "options": 0,
        "ok": counts["ok"],
        "input error": counts["input error"],
        "lost": 0,
        "duplicated": 0,
        "tracebacks": counts["traceback"],
        "other": sum(counts[f] for f in fuzzing.FAULTS if f != "traceback"),
        "s": round(time.monotonic() - start, 1),
    }
    return row, faults


def fuzz_rows(per_reader: int) -> tuple[list[dict], list[tuple]]:
    """Per reader: ``per_reader`` generated inputs, every field retyped once, and ``per_reader`` (options, input)
    pairs where it takes options."""
    rows, faults = [], []
    for name, reader in fuzzing.READERS.items():
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            generated, found = fuzzing.fuzz(reader, per_reader, Path(tmp) / "gen")
            retyped, found_retyped = retyped_counts(name, Path(tmp) / "retyped")
            options, found_options = options_counts(name, per_reader, Path(tmp) / "options")
        counts = generated + retyped + options
        faults += [(name, *f) for f in found + found_retyped + found_options]
        rows.append(
            {
                "component": name,
                "tried": sum(counts.values()),
                "generated": sum(generated.values()),
                "retyped": sum(retyped.values()),
                "options": sum(options.values()),
                "ok": counts["ok"],
                "input error": counts["input error"],
                "lost": 0,
                "duplicated": 0,
                "tracebacks": counts["traceback"],
                "other": sum(counts[f] for f in fuzzing.FAULTS if f != "traceback"),
                "s": round(time.monotonic() - start, 1),
            }
        )
    row, found = frame_row(per_reader)
    return [*rows, row], faults + found


def report_rows(per_kind: int, with_fit: bool, retyped_sample: int | None = None) -> tuple[list[dict], list[tuple]]:
    """Per result kind the report reads: ``per_kind`` seeded type-valid field values through ``bayesrc report``,
    and each column of a Parquet table dropped in turn or each field of a JSON file given each value of
    another type (``retyped_sample`` of those, seeded; all when None)."""
    rows, faults = [], []
    for name, kind in fuzzing.REPORT_KINDS.items():
        if kind.slow_seed and not with_fit:
            continue
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            counts, found = fuzzing.fuzz_report(kind, per_kind, Path(tmp) / "fuzz")
            if name.endswith(".parquet"):  # and each column dropped in turn
                dropped, found_dropped = fuzzing.report_without_each_column(kind, Path(tmp) / "dropped")
                counts, found = counts + dropped, found + found_dropped
            else:  # and each field given each value of another type (a seeded sample of them with --quick)
                retyped, found_retyped = fuzzing.report_retyped(kind, Path(tmp) / "retyped", sample=retyped_sample)
                counts, found = counts + retyped, found + found_retyped
        faults += [(f"report {name}", *f) for f in found]
        rows.append(
            {
                "component": f"report: {name}",
                "tried": sum(counts.values()),
                "written": counts["ok"],
                "clean errors": counts["input error"],
                "lost": 0,
                "duplicated": 0,
                "tracebacks": counts["traceback"],
                "other": sum(counts[f] for f in fuzzing.FAULTS if f != "traceback"),
                "s": round(time.monotonic() - start, 1),
            }
        )
        print(f"report: {name}: {dict(counts)} in {rows[-1]['s']} s", file=sys.stderr, flush=True)
    return rows, faults


def run_parts(parts: dict[str, tuple], jobs: int) -> dict[str, tuple[list[dict], list[tuple]]]:
    """Each component ``name: (function, args)`` -> ``(rows, faults)``, ``jobs`` at a time in fresh processes (spawned:
    JAX, Ray and llama.cpp start no threads in this one), longest first as given; progress lines go to stderr as they
    come."""
    if jobs <= 1:
        return {name: _as_pair(fn(*fn_args)) for name, (fn, fn_args) in parts.items()}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {name: pool.submit(fn, *fn_args) for name, (fn, fn_args) in parts.items()}
        return {name: _as_pair(future.result()) for name, future in futures.items()}


def _as_pair(result) -> tuple[list[dict], list[tuple]]:
    """Components return rows, or (rows, faults) where they report faults by input."""
    return result if isinstance(result, tuple) else (result, [])


def table(rows: list[dict], columns: list[str]) -> str:
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = [" | ".join(c.ljust(widths[c]) for c in columns), "-|-".join("-" * widths[c] for c in columns)]
    lines += [" | ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="100 inputs per reader (20 per result kind through the report), 10 timed kills per swap mode",
    )
    ap.add_argument("--per-reader", type=int, help="fuzzed inputs per reader (default 1000; --quick 100)")
    ap.add_argument("--timed", type=int, help="timed kills per swap mode (default 50; --quick 10)")
    ap.add_argument(
        "--calls",
        type=int,
        help="collection kills spread over the collector's calls, per engine (default 60; --quick 18)",
    )
    ap.add_argument(
        "--crash-only", action="store_true", help="only the crash points (a result folder's write, collections)"
    )
    ap.add_argument(
        "--fuzz-only",
        action="store_true",
        help="only the fuzzed reader inputs (no crash points, collection, disk or server rows)",
    )
    ap.add_argument(
        "--server-only",
        action="store_true",
        help="only the server faults (fault proxy in front of llama-cpp-python's server)",
    )
    ap.add_argument("--report-only", action="store_true", help="only the result fields through bayesrc report")
    ap.add_argument(
        "--disk-only", action="store_true", help="only the full disk / read-only outputs (tests/disk_faults.py)"
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="components run side by side, each in its own process (default 2)",
    )
    ap.add_argument(
        "--disk-fit",
        action="store_true",
        help="also the writers that sample with NUTS (fit, fit-many, truth, switch with its factor models, compare, "
        "demo: minutes each)",
    )
    ap.add_argument(
        "--report-fit",
        action="store_true",
        help="also fit.json, the fit's item table, loo_compare.json and joint.json through the report "
        "(one real compare and one joint fit, and figures of a posterior per input)",
    )
    args = ap.parse_args()
    calls = args.calls if args.calls is not None else (18 if args.quick else 60)
    sizes = [0, 4, 40] if args.quick else [0, 4, 8, 16, 24, 32, 40, 48, 64]
    writers = tuple(w for w in disk_faults.WRITERS if args.disk_fit or w not in disk_faults.SLOW_WRITERS)
    per_reader = args.per_reader or (100 if args.quick else 1000)
    timed = args.timed if args.timed is not None else (10 if args.quick else 50)
    per_kind = args.per_reader or (20 if args.quick else 1000)  # a report draws every figure: ~1 s each
    start = time.monotonic()
    only = {
        "crash": args.crash_only,
        "fuzz": args.fuzz_only,
        "server": args.server_only,
        "report": args.report_only,
        "disk": args.disk_only,
    }
    runs = {component: flag or not any(only.values()) for component, flag in only.items()}  # an --X-only picks X alone
    parts = {  # longest first (--quick, 2 cores: ~400, 365, 340, 125, 120, 45 s), so that two lanes end together
        "collect_crash": (runs["crash"], collect_crash_rows, (calls, args.quick)),
        "fuzz": (runs["fuzz"], fuzz_rows, (per_reader,)),
        "disk": (runs["disk"], disk_rows, (sizes, writers)),
        "server": (runs["server"], server_rows, (args.quick,)),
        "report": (runs["report"], report_rows, (per_kind, args.report_fit, 100 if args.quick else None)),
        "crash": (runs["crash"], crash_rows, (timed,)),
    }
    done = run_parts({name: (fn, fn_args) for name, (wanted, fn, fn_args) in parts.items() if wanted}, args.jobs)
    rows_of = {name: done.get(name, ([], []))[0] for name in parts}
    faults = [f for name in parts for f in done.get(name, ([], []))[1]]
    if runs["crash"]:
        print("crash points (SIGKILL) of staged_output: a result folder rewritten old -> new\n")
        print(
            table(
                rows_of["crash"],
                ["component", "events", "tried", "killed", "states", "lost", "duplicated", "tracebacks"],
            )
        )
        sampled = (
            f"; --quick: a seeded {', '.join(f'{n} ({e})' for e, n in QUICK_POINTS.items())} of them"
            if args.quick
            else ""
        )
        print(
            f"\ncrash points (SIGKILL) of a collection, resumed: every filesystem event + {calls} points "
            f"over its calls{sampled}\n"
        )
        print(
            table(
                rows_of["collect_crash"],
                ["component", "events", "tried", "killed", "lost", "duplicated", "tracebacks", "s"],
            )
        )
    if rows_of["disk"]:
        print(
            f"\nfull disk ({', '.join(map(str, sizes))} KiB free on a tmpfs, and half each writer's output) "
            "and read-only outputs\n"
        )
        print(
            table(
                rows_of["disk"],
                ["component", "tried", "exit 2", "old kept", "back", "lost", "duplicated", "tracebacks"],
            )
        )
    if rows_of["server"]:
        print(
            "\nserver faults: collect --engine server through a fault proxy in front of llama-cpp-python's server, "
            "against a clean run\n"
        )
        print(
            table(
                rows_of["server"],
                ["component", "tried", "faults", "exit", "resumed", "retries", "lost", "duplicated", "tracebacks", "s"],
            )
        )
    if runs["fuzz"]:
        print(
            f"\nfuzzed reader inputs ({per_reader} generated per reader, every field retyped once, "
            f"{per_reader} option sets where a reader takes options; seeded)\n"
        )
        print(
            table(
                rows_of["fuzz"],
                [
                    "component",
                    "tried",
                    "generated",
                    "retyped",
                    "options",
                    "ok",
                    "input error",
                    "lost",
                    "duplicated",
                    "tracebacks",
                    "other",
                    "s",
                ],
            )
        )
    if runs["report"]:
        print(
            f"\nresult fields through bayesrc report ({per_kind} seeded inputs per result file, "
            "each field another value of its type; each column of a table dropped in turn; "
            f"each JSON field given each value of another type{', 100 of them' if args.quick else ''})\n"
        )
        print(table(rows_of["report"], ["component", "tried", "written", "clean errors", "tracebacks", "other", "s"]))
    for name, outcome, detail, data in faults[:20]:
        print(f"\n{name}: {outcome}: {detail.strip().splitlines()[-1]}\n  input: {data[:120]!r}")
    rows = [r for name in ("crash", "collect_crash", "disk", "server", "fuzz", "report") for r in rows_of[name]]
    totals = {k: sum(r[k] for r in rows) for k in ("tried", "lost", "duplicated", "tracebacks", "other")}
    print(
        f"\n{totals['tried']} crash points and inputs in {time.monotonic() - start:.0f} s; "
        f"other faults {totals['other']}"
    )
    print(f"lost {totals['lost']}, duplicated {totals['duplicated']}, tracebacks {totals['tracebacks']}")
    return int(any(totals[k] for k in ("lost", "duplicated", "tracebacks", "other")))


if __name__ == "__main__":
    sys.exit(main())
