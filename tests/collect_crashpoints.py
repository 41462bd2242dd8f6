"""SIGKILL crash points of a collection, then resume (used by tests/test_faults_collect.py and
benchmarks/faults.py).

The real Gemma GGUF is loaded once; each crash point forks a collector from that process (so a
point costs the run's compute, not an interpreter start and a model load) and kills it with a
real SIGKILL at a counted **event**, found by an audit hook (:func:`sys.addaudithook`):

- every **filesystem event** of the run (open for writing, mkdir, rename, unlink, ...): the
  run record, each journal part, the compacted outputs; every gap between two of them is a
  crash point;
- points spread over the run's **calls**: every Python function call in :mod:`bayesrc.collect`
  (counted by a profile hook, in every thread), so kills also land mid-item: while prompts
  are evaluated, tokens drawn, answers extracted or requests sent.

After each kill the run directory is checked (every journal part complete, never torn), then a
second forked collector resumes it to completion. Its trials (the fast and server engines) or
answer distributions (the exact engine) must equal those of an uninterrupted run row for row:
*lost* counts reference rows missing or different after the resume (or a resume that failed),
*duplicated* counts repeated rows and temporary files left behind.

    python tests/collect_crashpoints.py --engine fast --calls 40  # JSON summary
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's bayesrc, run as a script

from bayesrc.collect import Model, builtin_bank, collect, load_bank, load_card, resolve_model  # noqa: E402
from bayesrc.collect.rundir import done_items, read_run_trials  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
FS_EVENTS = frozenset(
    {"os.rename", "os.link", "os.symlink", "os.mkdir", "os.remove", "os.rmdir", "os.truncate", "shutil.rmtree"}
)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
COLLECT_CODE = str(ROOT / "bayesrc" / "collect")
KEYS = {"fast": ["item_index", "k"], "server": ["item_index", "k"], "exact": ["item_id", "answer"]}
TRIAL_CORE = ["item_id", "item_index", "k", "seed", "response", "extracted", "is_correct", "is_missing", "finish"]


def _is_fs_event(event: str, args: tuple) -> bool:
    """Whether an audit event changes the filesystem (``open`` only when it opens for writing)."""
    if event == "open":
        _, mode, flags = args
        return any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & WRITE_FLAGS)
    return event in FS_EVENTS


class Setup:
    """What every collection of one harness run shares: the loaded model, bank and options.

    Parameters
    ----------
    engine : ``"fast"``, ``"exact"`` or ``"server"``.
    n_items, k : bank size (built-in letter-pattern bank, seed 7) and samples per item.
    base_url : the server engine's endpoint.
    root : scratch folder for the bank and the runs.
    """

    def __init__(self, engine: str, root: Path, *, n_items: int = 4, k: int = 3, base_url: str | None = None):
        self.engine, self.root, self.k = engine, Path(root), k
        self.bank = load_bank(builtin_bank(self.root / "bank.jsonl", n_items=n_items, seed=7))
        self.model = None
        if engine != "server":
            card = load_card(CARD)
            self.model = Model(
                resolve_model(card), n_ctx=card.n_ctx, n_batch=card.n_batch, n_threads=1, label=card.label
            )
        self.kwargs = {"k": k, "engine": engine, "seed_rule": "shared"}
        if engine == "exact":
            self.kwargs |= {"epsilon": 1e-3, "max_expansions": 400}
        if engine == "server":
            self.kwargs["server"] = {"base_url": base_url, "concurrency": 2}

    def collect(self, out: Path, *, resume: bool) -> None:
        """One collection in this process (a fresh shared-prefix state, as a new process has)."""
        if self.model is not None:
            self.model.forget_prefix()
        collect(CARD, self.bank, out, model=self.model, resume=resume, **self.kwargs)

    def result(self, out: Path) -> dict[str, pd.DataFrame]:
        """The run's rows to compare: trials, or the exact engine's two tables."""
        if self.engine == "exact":
            return {name: pd.read_parquet(out / name) for name in ("dist.parquet", "items_exact.parquet")}
        return {"trials": read_run_trials(out)[TRIAL_CORE]}


def forked(setup: Setup, out: Path, *, resume: bool, kill_at: tuple[str, int] | None = None) -> tuple[int, dict]:
    """Run one collection in a forked child, SIGKILLed before event ``kill_at`` = (kind, i).

    Returns (the signal that ended it or 0, {"fs": n, "call": n} events counted by a finished child).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: count events, kill itself at the chosen one
        os.close(r)
        counts = {"fs": 0, "call": 0}

        def count(kind: str) -> None:
            counts[kind] += 1
            if kill_at == (kind, counts[kind]):
                os.kill(os.getpid(), signal.SIGKILL)

        def profile(frame, event: str, arg) -> None:
            if event == "call" and frame.f_code.co_filename.startswith(COLLECT_CODE):
                count("call")

        sys.addaudithook(lambda event, args: count("fs") if _is_fs_event(event, args) else None)
        sys.setprofile(profile)
        threading.setprofile(profile)  # the server engine's request threads
        try:
            setup.collect(out, resume=resume)
        except BaseException:
            traceback.print_exc()
            os._exit(3)
        os.write(w, json.dumps(counts).encode())
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    data = os.read(r, 256)
    os.close(r)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status), {}
    if os.WEXITSTATUS(status) != 0:
        raise RuntimeError(f"collector failed with exit {os.WEXITSTATUS(status)}")
    return 0, json.loads(data)


def torn_parts(out: Path, k: int | None) -> int:
    """Journal parts of the run in ``out`` that cannot be read or lack rows (``k`` per item; None:
    any number, the exact engine's); a kill must never leave one."""
    torn = 0
    for index in done_items(out):
        try:
            rows = len(pd.read_parquet(out / "parts" / f"item-{index:06d}.parquet"))
        except Exception:  # noqa: BLE001 (any unreadable part counts)
            rows = 0
        torn += rows == 0 or (k is not None and rows != k)
    return torn


def compare(setup: Setup, out: Path, want: dict[str, pd.DataFrame]) -> tuple[int, int]:
    """(lost, duplicated) rows of a resumed run against the uninterrupted one."""
    got = setup.result(out)
    lost = duplicated = 0
    for name, ref in want.items():
        lost_rows, repeated = table_differences(
            ref, got[name], KEYS[setup.engine] if name != "items_exact.parquet" else ["item_id"]
        )
        lost, duplicated = lost + lost_rows, duplicated + repeated
    leftovers = [p for p in out.rglob(".*.tmp")]
    return lost, duplicated + len(leftovers)


def table_differences(ref: pd.DataFrame, new: pd.DataFrame, keys: list[str]) -> tuple[int, int]:
    """(rows of ``ref`` missing from ``new`` or different there, rows of ``new`` repeating a key)."""
    duplicated = int(new.duplicated(keys).sum())
    both = ref.merge(new.drop_duplicates(keys), on=keys, how="left", suffixes=("", "_got"), indicator=True)
    differ = both["_merge"] != "both"
    for col in (c for c in ref.columns if c not in keys):
        a, b = both[col], both[f"{col}_got"]
        differ |= ~((a == b).fillna(False) | (a.isna() & b.isna()))
    return int(differ.sum()), duplicated


def crash_points(
    setup: Setup, *, calls: int, fs_points: int = 100_000, sample: int | None = None, seed: int = 0
) -> dict[str, object]:
    """Kill a collection at (up to) ``fs_points`` filesystem events and ``calls`` calls, each
    spread over the run (or a seeded random ``sample`` of those points); resume; compare."""
    ref = setup.root / "reference"
    start = time.monotonic()
    _, counts = forked(setup, ref, resume=False)
    run_seconds = time.monotonic() - start
    want = setup.result(ref)
    assert compare(setup, ref, want) == (0, 0) and compare(setup, ref, _altered(want)) == (1, 0), (
        "the comparison must see one changed row"
    )
    points = [("fs", i) for i in _spread(counts["fs"], fs_points)] + [
        ("call", i) for i in _spread(counts["call"], calls)
    ]
    if sample is not None:
        points = sorted(random.Random(seed).sample(points, min(sample, len(points))))
    outcomes = []
    for n, kill_at in enumerate(points):
        out = setup.root / f"run{n}"
        sig, _ = forked(setup, out, resume=False, kill_at=kill_at)
        torn = torn_parts(out, None if setup.engine == "exact" else setup.k)
        try:
            forked(setup, out, resume=True)
            lost, duplicated = compare(setup, out, want)
            failed = 0
        except Exception:  # noqa: BLE001 (a resume that fails loses the run)
            lost, duplicated, failed = sum(len(t) for t in want.values()), 0, 1
        outcomes.append(
            {
                "kill": f"{kill_at[0]} {kill_at[1]}",
                "signal": sig,
                "torn": torn,
                "lost": lost,
                "duplicated": duplicated,
                "failed": failed,
            }
        )
    return summarise(setup, outcomes, counts=counts, run_seconds=run_seconds, rows=sum(len(t) for t in want.values()))


def _altered(want: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The reference with one value of its first table changed (the harness checks it is seen)."""
    name, frame = next(iter(want.items()))
    frame = frame.copy()
    col = "response" if "response" in frame else "prob"
    frame.loc[frame.index[-1], col] = frame[col].iloc[0] + ("?" if col == "response" else 0.5)
    return {**want, name: frame}


def _spread(n_events: int, points: int) -> list[int]:
    """Up to ``points`` event numbers in 1..n_events, evenly spread, first and last included."""
    if n_events < 1 or points < 1:
        return []
    points = min(points, n_events)
    return sorted({1 + round(j * (n_events - 1) / max(points - 1, 1)) for j in range(points)})


def summarise(setup: Setup, outcomes: list[dict], *, counts: dict, run_seconds: float, rows: int) -> dict[str, object]:
    """Totals over the crash points (see the module docstring for lost and duplicated)."""
    return {
        "engine": setup.engine,
        "items": len(setup.bank),
        "k": setup.k,
        "rows": rows,
        "events": counts,
        "run_seconds": round(run_seconds, 2),
        "tried": len(outcomes),
        "killed": sum(o["signal"] == signal.SIGKILL for o in outcomes),
        "torn": sum(o["torn"] for o in outcomes),
        "lost": sum(o["lost"] for o in outcomes),
        "duplicated": sum(o["duplicated"] for o in outcomes),
        "resume_failed": sum(o["failed"] for o in outcomes),
        "by_kind": dict(Counter(o["kill"].split()[0] for o in outcomes)),
        "outcomes": outcomes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("fast", "exact", "server"), default="fast")
    ap.add_argument("--items", type=int, default=4)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--calls", type=int, default=40, help="kills spread over the engine calls")
    ap.add_argument(
        "--fs-points", type=int, default=100_000, help="kills spread over the filesystem events (default: every one)"
    )
    ap.add_argument("--sample", type=int, help="a seeded random sample of that many of those points")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--base-url", help="server engine: the endpoint")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup = Setup(args.engine, Path(tmp), n_items=args.items, k=args.k, base_url=args.base_url)
        print(
            json.dumps(
                crash_points(setup, calls=args.calls, fs_points=args.fs_points, sample=args.sample, seed=args.seed)
            )
        )


if __name__ == "__main__":
    main()
