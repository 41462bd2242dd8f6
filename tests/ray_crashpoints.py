"""SIGKILL crash points of a Ray shard, retried by the driver (used by tests/test_scale_ray.py and
benchmarks/faults.py).

The fork harness (tests/collect_crashpoints.py) kills a whole collector; on Ray the process that
dies is one **actor** in the middle of a shard, and what must recover is the driver: it sees the
actor lost, starts a new one and resumes the shard in the same folder
(:func:`bayesrc.scale.collect.collect_ray`). Here every actor is a :class:`ShardCollector` that
counts, per shard, the same events as the fork harness (filesystem events through an audit hook,
calls into :mod:`bayesrc.collect` through a profile hook) and SIGKILLs itself at the chosen one
(once: a marker file keeps the retry alive). An uninterrupted Ray run gives the reference trials
and each shard's event counts; each crash point is a fresh Ray run of the same items that must end
with exactly those trials (no lost, no duplicated row), no torn journal part in any shard, and
exactly one retry.

    # JSON summary, the last line of stdout (Ray notes each killed worker before it)
    python tests/ray_crashpoints.py --calls 40
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's bayesrc, run as a script
sys.path.insert(0, str(Path(__file__).resolve().parent))

from collect_crashpoints import (
    CARD,
    COLLECT_CODE,
    FS_EVENTS,
    KEYS,
    TRIAL_CORE,
    WRITE_FLAGS,
    _spread,
    table_differences,
    torn_parts,
)  # noqa: E402

import bayesrc.scale.collect as ray_collect  # noqa: E402
from bayesrc.collect import builtin_bank, load_bank  # noqa: E402
from bayesrc.collect.rundir import read_run_trials  # noqa: E402

K, WORKERS = 3, 2


def crashing_collector(state: Path) -> type:
    """A :class:`~bayesrc.scale.collect.ShardCollector` that counts its events per shard into
    ``state/counts-SHARD.json`` and dies at the point named in ``state/kill.json`` (if any).

    Built inside this function, so Ray pickles the class by value (the modules it uses by name):
    the actors need no import of this file.
    """

    base = ray_collect.ShardCollector

    def run(self, card, bank, shard_dir, spec):
        shard = int(Path(shard_dir).name)
        kill_file, marker = state / "kill.json", state / "killed"
        kill = json.loads(kill_file.read_text()) if kill_file.exists() and not marker.exists() else None
        counts = {"fs": 0, "call": 0}

        def count(kind: str) -> None:
            counts[kind] += 1
            if kill is not None and kill["shard"] == shard and kill["kind"] == kind and kill["at"] == counts[kind]:
                self.counting = None  # the marker's own write is not an event
                marker.touch()
                os.kill(os.getpid(), signal.SIGKILL)

        # collect_crashpoints._is_fs_event, here so that it travels by value
        def is_fs_event(event: str, args: tuple) -> bool:
            if event == "open":
                _, mode, flags = args
                return any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & WRITE_FLAGS)
            return event in FS_EVENTS

        def profile(frame, event, arg) -> None:
            if event == "call" and frame.f_code.co_filename.startswith(COLLECT_CODE) and self.counting is not None:
                self.counting("call")

        if not getattr(self, "hooked", False):  # an audit hook stays for the process's life: one per actor
            sys.addaudithook(
                lambda event, args: (
                    self.counting("fs") if self.counting is not None and is_fs_event(event, args) else None
                )
            )
            self.hooked = True
        self.counting = count
        sys.setprofile(profile)
        threading.setprofile(profile)
        try:
            n_new = base.run(self, card, bank, shard_dir, spec)
        finally:
            self.counting = None
            sys.setprofile(None)
            threading.setprofile(None)
        (state / f"counts-{shard}.json").write_text(json.dumps(counts))
        return n_new

    return type("CrashingShardCollector", (base,), {"run": run, "counting": None})


def ray_run(bank, out: Path, state: Path, kill: dict | None) -> ray_collect.RayRunResult:
    """One Ray collection of ``bank`` into ``out`` on crashing actors (``kill``: where one dies)."""
    (state / "killed").unlink(missing_ok=True)
    (state / "kill.json").unlink(missing_ok=True)
    if kill is not None:
        (state / "kill.json").write_text(json.dumps(kill))
    saved = ray_collect.ShardCollector
    ray_collect.ShardCollector = crashing_collector(state)  # _run_shards makes its actors from this name
    try:
        return ray_collect.collect_ray(CARD, bank, out, k=K, workers=WORKERS, shards=len(bank), threads=1)
    finally:
        ray_collect.ShardCollector = saved


def lost_and_duplicated(out: Path, want) -> tuple[int, int]:
    """(lost, duplicated) trials of a finished run against the reference, temporary files left counting as
    duplicated."""
    lost, duplicated = table_differences(want, read_run_trials(out)[TRIAL_CORE], KEYS["fast"])
    return lost, duplicated + len(list(out.rglob(".*.tmp")))


def crash_points(
    root: Path, *, n_items: int = 4, calls: int = 40, sample: int | None = None, seed: int = 0
) -> dict[str, object]:
    """Kill one actor at each point (every filesystem event of every shard, and ``calls`` points
    spread over the shards' calls; or a seeded ``sample`` of them); each run must equal the reference."""
    bank = load_bank(builtin_bank(root / "bank.jsonl", n_items=n_items, seed=7))
    state = root / "state"
    state.mkdir()
    start = time.monotonic()
    ray_run(bank, root / "reference", state, None)
    run_seconds = time.monotonic() - start
    want = read_run_trials(root / "reference")[TRIAL_CORE]
    counts = {shard: json.loads((state / f"counts-{shard}.json").read_text()) for shard in range(len(bank))}
    per_shard_calls = max(1, -(-calls // len(bank)))
    points = [(s, "fs", i) for s, c in counts.items() for i in range(1, c["fs"] + 1)]
    points += [(s, "call", i) for s, c in counts.items() for i in _spread(c["call"], per_shard_calls)]
    if sample is not None:
        points = sorted(random.Random(seed).sample(points, min(sample, len(points))))
    outcomes = []
    for n, (shard, kind, at) in enumerate(points):
        out = root / f"run{n}"
        try:
            res = ray_run(bank, out, state, {"shard": shard, "kind": kind, "at": at})
            lost, duplicated = lost_and_duplicated(out, want)
            retries, failed = res.retries, 0
        except Exception:  # noqa: BLE001 (a run that fails loses its trials)
            lost, duplicated, retries, failed = len(want), 0, 0, 1
        killed = (state / "killed").exists()
        outcomes.append(
            {
                "kill": f"shard {shard} {kind} {at}",
                "killed": killed,
                "retries": retries,
                "torn": sum(torn_parts(d, K) for d in out.glob("shards/*")),
                "lost": lost,
                "duplicated": duplicated,
                "failed": failed,
            }
        )
    return {
        "engine": "fast on Ray",
        "items": n_items,
        "k": K,
        "rows": len(want),
        "events": {"fs": sum(c["fs"] for c in counts.values()), "call": sum(c["call"] for c in counts.values())},
        "run_seconds": round(run_seconds, 2),
        "tried": len(outcomes),
        "killed": sum(o["killed"] for o in outcomes),
        "retried": sum(o["retries"] == 1 for o in outcomes),
        "torn": sum(o["torn"] for o in outcomes),
        "lost": sum(o["lost"] for o in outcomes),
        "duplicated": sum(o["duplicated"] for o in outcomes),
        "resume_failed": sum(o["failed"] for o in outcomes),
        "outcomes": outcomes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=4)
    ap.add_argument("--calls", type=int, default=40, help="kills spread over the shards' calls")
    ap.add_argument("--sample", type=int, help="a seeded random sample of that many of the points")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from bayesrc.scale.cluster import ray_session

    with tempfile.TemporaryDirectory(prefix="brc-rc-", dir="/tmp") as tmp, ray_session(num_cpus=WORKERS):
        print(
            json.dumps(
                crash_points(Path(tmp), n_items=args.items, calls=args.calls, sample=args.sample, seed=args.seed)
            )
        )


if __name__ == "__main__":
    main()
