"""SIGKILL crash points for :func:`bayesrc.io.staged_output` (used by tests/test_faults.py and
benchmarks/faults.py).

An output folder holding an *old* version is rewritten with a *new* one by a child process
(forked, so each crash point costs milliseconds rather than an interpreter start) that is
killed with a real SIGKILL:

- at a **filesystem event**: an audit hook (:func:`sys.addaudithook`) counts every call that
  changes the filesystem (open for writing, mkdir, link, rename, the ``renameat2`` exchange,
  unlink, rmdir, ...) and the child SIGKILLs itself just before event *i*, so every gap
  between two operations of the write is a crash point;
- at a **time**: the parent SIGKILLs the child at times spread over a write slowed by an
  injected sleep after each file.

After each kill the folder must be wholly old or wholly new (or, between the two renames of
the fallback swap, missing with the old folder intact beside it); :func:`bayesrc.io.recover_output`
must leave it wholly old or new with no leftovers, and a next write must succeed (the dead
writer's lock file left behind) and leave exactly the next version.

    python tests/crashpoints.py --points 40 [--mode exchange|rename] [--timed 10]  # JSON summary
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from bayesrc import io

N_FILES = 6
MUTATING = frozenset(
    {
        "os.rename",
        "os.link",
        "os.symlink",
        "os.mkdir",
        "os.remove",
        "os.rmdir",
        "os.truncate",
        "os.chmod",
        "shutil.rmtree",
        "shutil.copyfile",
        "ctypes.call_function",
    }
)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _writes(args: tuple) -> bool:
    """Whether an ``open`` audit event opens for writing."""
    _, mode, flags = args
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return bool((flags or 0) & WRITE_FLAGS)


def _old_tree() -> dict[str, str]:
    files = {f"f{i}.txt": "old" for i in range(N_FILES)}
    return files | {"keep.txt": "kept", "kept_dir/x.txt": "kept", "sub/a.txt": "old", "sub/b.txt": "old"}


def expected(version: str, over: dict[str, str] | None = None) -> dict[str, str]:
    """The folder's files (relative path -> text) after writing ``version`` over ``over`` (the old
    version by default): the written files replace theirs, ``sub/`` is replaced whole, the rest stays."""
    if version == "old":
        return _old_tree()
    kept = {rel: text for rel, text in (over or _old_tree()).items() if not rel.startswith("sub/")}
    return (
        kept | {f"f{i}.txt": version for i in range(N_FILES)} | {f"added_{version}.txt": version, "sub/a.txt": version}
    )


def snapshot(folder: Path) -> dict[str, str] | None:
    """Relative path -> text of every file under ``folder`` (None when it does not exist)."""
    if not folder.is_dir():
        return None
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def write_version(out: Path, version: str, delay: float = 0.0) -> None:
    """Rewrite ``out`` through staged_output: N_FILES files, one new file, ``sub/`` replaced whole."""
    with io.staged_output(out) as stage:
        for i in range(N_FILES):
            io.atomic_write_text(stage / f"f{i}.txt", version)
            time.sleep(delay)  # the injected slow step
        (stage / "sub").mkdir()
        io.atomic_write_text(stage / "sub" / "a.txt", version)
        io.atomic_write_text(stage / f"added_{version}.txt", version)


def reset(root: Path) -> Path:
    """``root`` holding only ``out/`` with the old version (written plainly, not staged)."""
    shutil.rmtree(root, ignore_errors=True)
    out = root / "out"
    for rel, text in _old_tree().items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return out


def _child(out: Path, kill_at: int, delay: float, report_fd: int) -> None:
    """Write the new version; SIGKILL self before mutating event ``kill_at`` (0: never)."""
    count = [0]

    def hook(event: str, args: tuple) -> None:
        if event in MUTATING or (event == "open" and _writes(args)):
            count[0] += 1
            if count[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)
    try:
        write_version(out, "new", delay)
    except BaseException:
        traceback.print_exc()
        os._exit(3)
    os.write(report_fd, str(count[0]).encode())
    os._exit(0)


def run_child(
    out: Path, *, kill_at: int = 0, delay: float = 0.0, kill_after: float | None = None
) -> tuple[int, int | None]:
    """Fork a writer; return (signal that ended it or 0, events it counted when it finished)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(out, kill_at, delay, w)
    os.close(w)
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    data = os.read(r, 64)
    os.close(r)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status), None
    if os.WEXITSTATUS(status) != 0:
        raise RuntimeError(f"writer failed with exit {os.WEXITSTATUS(status)}")
    return 0, int(data)


def classify(root: Path) -> dict[str, object]:
    """Check the folder after a kill, recover it, write once more; say what was seen."""
    out = root / "out"
    old, new = expected("old"), expected("new")
    seen = snapshot(out)
    asides = sorted(root.glob(".out.old-*"))
    if seen == old:
        state = "old"
    elif seen == new:
        state = "new"
    elif seen is None and len(asides) == 1 and snapshot(asides[0]) == old:
        state = "set aside"  # between the two renames of the fallback swap
    else:
        state = "mixed" if seen is not None else "lost"
    io.recover_output(out)
    after = snapshot(out)
    recovered = "old" if after == old else "new" if after == new else "lost" if after is None else "mixed"
    leftovers = sorted(p.name for p in root.iterdir() if p.name not in ("out", ".out.lock"))
    write_version(out, "next")
    next_ok = snapshot(out) == expected("next", after) and sorted(p.name for p in root.iterdir()) == ["out"]
    return {"state": state, "recovered": recovered, "leftovers": leftovers, "next_ok": next_ok}


def crash_points(
    root: Path, *, points: int, mode: str = "exchange", timed: int = 0, delay: float = 0.005
) -> dict[str, object]:
    """Kill the writer at ``points`` filesystem events (spread over all of them) and at ``timed`` times."""
    io.USE_EXCHANGE = mode == "exchange"
    _, n_events = run_child(reset(root))
    assert snapshot(root / "out") == expected("new")
    picks = sorted({1 + round(j * (n_events - 1) / max(points - 1, 1)) for j in range(points)}) if points else []
    outcomes = []
    for kill_at in picks:
        sig, _ = run_child(reset(root), kill_at=kill_at)
        outcomes.append({"kill": f"event {kill_at}", "signal": sig, **classify(root)})
    start = time.monotonic()
    run_child(reset(root), delay=delay)
    duration = time.monotonic() - start
    for j in range(timed):
        sig, _ = run_child(reset(root), delay=delay, kill_after=duration * (j + 0.5) / timed)
        outcomes.append({"kill": f"{duration * (j + 0.5) / timed:.3f} s", "signal": sig, **classify(root)})
    return summarise(outcomes, mode=mode, n_events=n_events)


def summarise(outcomes: list[dict], *, mode: str, n_events: int) -> dict[str, object]:
    killed = [o for o in outcomes if o["signal"] == signal.SIGKILL]
    return {
        "mode": mode,
        "events": n_events,
        "tried": len(outcomes),
        "killed": len(killed),
        "states": dict(Counter(o["state"] for o in outcomes)),
        "recovered": dict(Counter(o["recovered"] for o in outcomes)),
        "lost": sum(o["recovered"] not in ("old", "new") for o in outcomes),
        "mixed": sum(o["state"] not in ("old", "new", "set aside") for o in outcomes),
        "duplicated": sum(bool(o["leftovers"]) for o in outcomes),
        "next_failed": sum(not o["next_ok"] for o in outcomes),
        "outcomes": outcomes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--points", type=int, default=40)
    ap.add_argument("--mode", choices=("exchange", "rename"), default="exchange")
    ap.add_argument("--timed", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps(crash_points(args.root, points=args.points, mode=args.mode, timed=args.timed)))


if __name__ == "__main__":
    main()
