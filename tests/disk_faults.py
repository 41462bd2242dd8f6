"""Full disk (ENOSPC) and read-only outputs, on a real size-limited tmpfs mounted as root (used
by tests/test_faults_collect.py and benchmarks/faults.py).

Each command runs as a real CLI process with its output on a tmpfs that has only ``free``
bytes left (a preallocated filler file takes the rest), or that is remounted read-only:

- ``collect`` (fast engine, real Gemma GGUF) into a new run directory: it must end with one
  line and exit 2 (or complete, where the space sufficed); every journal part on disk must be
  whole; then the filler is removed (space back) and ``collect --resume`` must complete with
  the trials of an uninterrupted run;
- ``rci`` and ``merge`` over an output that holds an older version: one line and exit 2, the
  old version unchanged and nothing left beside it; with space back, the command succeeds.

*lost*: a row of the uninterrupted run missing or different after the resume, an old version
changed, or a command that fails once space is back; *duplicated*: a repeated trial or a
temporary file, stage or set-aside folder left behind; *tracebacks*: a failing command whose
error is not one ``bayesrc: error:`` line with exit 2.

    python tests/disk_faults.py --root /tmp/disk --sizes 0,8,16,24  # free KiB; JSON summary
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
CORE = ["item_index", "k", "seed", "response", "extracted", "is_correct"]
MOUNT_BYTES = 4 << 20


def can_mount(root: Path) -> bool:
    """Whether this process may mount a tmpfs (root in a container that allows it)."""
    probe = Path(root) / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", str(probe)], check=True)
    probe.rmdir()
    return ok


@contextmanager
def tmpfs(mnt: Path) -> Iterator[Path]:
    """A fresh tmpfs of MOUNT_BYTES at ``mnt`` for the block."""
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={MOUNT_BYTES}", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def fill(mnt: Path, free: int) -> Path:
    """Preallocate a filler file so that about ``free`` bytes are left on ``mnt``; return it."""
    filler = mnt / "filler"
    st = os.statvfs(mnt)
    size = st.f_bavail * st.f_frsize - free
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if size > 0:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return filler


def readonly(mnt: Path, on: bool) -> None:
    """Remount ``mnt`` read-only (or read-write again)."""
    subprocess.run(["mount", "-o", f"remount,{'ro' if on else 'rw'}", str(mnt)], check=True)


def cli(*args: str) -> subprocess.CompletedProcess:
    """One real ``bayesrc`` process."""
    return subprocess.run([sys.executable, "-m", "bayesrc", *args], capture_output=True, text=True, timeout=300, env=ENV, cwd=ROOT)


def clean_failure(res: subprocess.CompletedProcess) -> bool:
    """A failure reported as it must be: exit 2 and one ``bayesrc: error:`` line naming a path."""
    lines = res.stderr.strip().splitlines()
    return res.returncode == 2 and len(lines) == 1 and lines[0].startswith("bayesrc: error: /")


def snapshot(folder: Path) -> dict[str, bytes] | None:
    """Relative path -> bytes of every file under ``folder`` (lock files left out)."""
    if not folder.is_dir():
        return None
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def leftovers(folder: Path) -> list[str]:
    """Temporary files, stages and set-aside folders under ``folder`` (the mount)."""
    return sorted(p.name for p in folder.rglob(".*") if p.name.endswith(".tmp") or ".new-" in p.name or ".old-" in p.name)


def collect_args(bank: Path, out: Path, *extra: str) -> list[str]:
    return ["collect", "--model", str(CARD), "--items", str(bank), "--out", str(out), "--k", "3", "--threads", "1", "--seed-rule", "shared", "--no-progress", *extra]


def trials(run: Path) -> pd.DataFrame:
    from bayesrc.collect import read_run_trials

    return read_run_trials(run)[CORE].reset_index(drop=True)


def collect_case(mnt: Path, bank: Path, reference: pd.DataFrame, *, free: int | None) -> dict:
    """Collect onto a mount with ``free`` bytes left (None: read-only); then space back, resume."""
    out = mnt / "run"
    filler = fill(mnt, free) if free is not None else None
    if free is None:
        readonly(mnt, True)
    first = cli(*collect_args(bank, out))
    torn = 0
    from bayesrc.collect.rundir import done_items, part_path

    for index in done_items(out) if out.is_dir() else ():
        try:
            torn += len(pd.read_parquet(part_path(out, index))) != 3
        except Exception:  # noqa: BLE001 (any unreadable part is torn)
            torn += 1
    parts_before = len(done_items(out)) if out.is_dir() else 0
    if free is None:
        readonly(mnt, False)
    else:
        filler.unlink()
    again = cli(*collect_args(bank, out, *(["--resume"] if (out / "run.json").exists() else [])))
    outcome = _compare(reference, out, again)
    return {"case": f"collect, {'read-only' if free is None else f'{free // 1024} KiB free'}", "exit": first.returncode, "clean": first.returncode == 0 or clean_failure(first),
            "parts_before": parts_before, "torn": torn, **outcome, "leftovers": leftovers(mnt), "stderr": first.stderr.strip()[-300:]}  # fmt: skip


def _compare(reference: pd.DataFrame, out: Path, again: subprocess.CompletedProcess) -> dict:
    """Lost and duplicated rows of a resumed run against the uninterrupted one."""
    if again.returncode != 0:
        return {"lost": len(reference), "duplicated": 0}
    got = trials(out)
    dup = int(got.duplicated(["item_index", "k"]).sum())
    merged = reference.merge(got.drop_duplicates(["item_index", "k"]), on=["item_index", "k"], how="left", suffixes=("", "_got"))
    same = pd.Series(True, index=merged.index)
    for col in (c for c in CORE if c not in ("item_index", "k")):
        a, b = merged[col], merged[f"{col}_got"]
        same &= (a == b).fillna(False) | (a.isna() & b.isna())
    return {"lost": int((~same).sum()), "duplicated": dup}


def writer_case(mnt: Path, name: str, argv: list[str], *, free: int | None) -> dict:
    """A writer over an output holding an older version (``merge``: into a new run directory, as it
    never overwrites a run), with ``free`` bytes left (None: read-only)."""
    out = mnt / "out"
    if name != "merge":
        first = cli(*argv, "--out", str(out))
        assert first.returncode == 0, first.stderr
    old = snapshot(out)
    filler = fill(mnt, free) if free is not None else None
    if free is None:
        readonly(mnt, True)
    res = cli(*argv, "--out", str(out))
    kept = res.returncode == 0 or snapshot(out) == old or (name == "merge" and not (out / "run.json").exists())
    left = leftovers(mnt)
    if free is None:
        readonly(mnt, False)
    else:
        filler.unlink()
    again = cli(*argv, "--out", str(out)) if res.returncode != 0 else res
    return {"case": f"{name}, {'read-only' if free is None else f'{free // 1024} KiB free'}", "exit": res.returncode, "clean": res.returncode == 0 or clean_failure(res),
            "torn": 0, "lost": int(not kept) + int(again.returncode != 0), "duplicated": len(left), "leftovers": left, "stderr": res.stderr.strip()[-300:]}  # fmt: skip


def prepare(root: Path, *, writers: bool = True) -> dict:
    """Inputs outside the mount: a 4-item bank, the uninterrupted run (and for the writers two shards and a trials pair)."""
    from bayesrc.collect import builtin_bank
    from bayesrc.data import simulate_pair

    root.mkdir(parents=True, exist_ok=True)
    bank = builtin_bank(root / "bank.jsonl", n_items=4, seed=7)
    ref = root / "reference"
    runs = [collect_args(bank, ref)] + ([collect_args(bank, root / "s0", "--shard", "0/2"), collect_args(bank, root / "s1", "--shard", "1/2")] if writers else [])
    for args in runs:
        res = cli(*args)
        assert res.returncode == 0, res.stderr
    pair = simulate_pair(30, 10, seed=3)
    pair.trials_v1.to_parquet(root / "v1.parquet", index=False)
    pair.trials_v2.to_parquet(root / "v2.parquet", index=False)
    writers = {
        "rci": ["rci", "--pair", "A", str(root / "v1.parquet"), str(root / "v2.parquet"), "--splits", "50", "--permutations", "50"],
        "merge": ["merge", str(root / "s0"), str(root / "s1")],
    }
    return {"bank": bank, "reference": trials(ref), "writers": writers}


def disk_faults(root: Path, sizes: list[int], *, writers: bool = True) -> dict:
    """Every case at every free size (KiB) and read-only; the totals."""
    inputs = prepare(root / "inputs", writers=writers)
    cases = []
    for free in [*(s * 1024 for s in sizes), None]:
        with tmpfs(root / "mnt") as mnt:
            cases.append(collect_case(mnt, inputs["bank"], inputs["reference"], free=free))
        for name, argv in inputs["writers"].items() if writers else ():  # merge: its output is a few KiB
            if name == "merge" and free is not None and free > 64 * 1024:
                continue
            with tmpfs(root / "mnt") as mnt:
                cases.append(writer_case(mnt, name, argv, free=free))
    shutil.rmtree(root / "inputs", ignore_errors=True)
    return {
        "tried": len(cases),
        "failed_cleanly": sum(c["exit"] == 2 and c["clean"] for c in cases),
        "tracebacks": sum(not c["clean"] for c in cases),
        "torn": sum(c["torn"] for c in cases),
        "lost": sum(c["lost"] for c in cases),
        "duplicated": sum(c["duplicated"] for c in cases),
        "cases": cases,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--sizes", default="0,8,16,32", help="free space on the full disk, KiB, comma-separated")
    ap.add_argument("--no-writers", action="store_true", help="collection only")
    args = ap.parse_args()
    print(json.dumps(disk_faults(args.root, [int(s) for s in args.sizes.split(",")], writers=not args.no_writers)))


if __name__ == "__main__":
    main()
