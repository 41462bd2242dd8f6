"""Full disk (ENOSPC) and read-only outputs, on a real size-limited tmpfs mounted as root (used
by tests/test_faults_collect.py and benchmarks/faults.py).

Each command runs as a real CLI process with its output on a tmpfs that has only ``free``
bytes left (a preallocated filler file takes the rest), or that is remounted read-only:

- ``collect`` (fast engine, real Gemma GGUF) into a new run directory: it must end with one
  line and exit 2 (or complete, where the space sufficed); every journal part on disk must be
  whole; then the filler is removed (space back) and ``collect --resume`` must complete with
  the trials of an uninterrupted run;
- the writers (``rci``, ``merge``, ``report``, ``power``, ``switch --bayes none``, ``import lm-eval``
  (its output one file), ``sensitivity threshold``; sampling with NUTS: ``fit`` and ``fit-many`` with the
  beta-binomial, ``truth``, ``switch`` with its factor models, ``compare``, and ``demo`` on 8 items,
  its collection, Q3_K_M weights, fit and report on a 1 GiB mount) over an output that holds an older version: one
  line and exit 2, the old version unchanged and nothing left beside it; with space back, the command succeeds and its
  output holds every file of a clean run. Each writer is also tried with half its output's size free (some of its
  files fit, the rest do not).

*lost*: a row of the uninterrupted run missing or different after the resume, an old version
changed, or a command that fails (or writes an incomplete output) once space is back;
*duplicated*: a repeated trial or a temporary file, stage or set-aside folder left behind;
*tracebacks*: a failing command whose error is not one ``bayesrc: error:`` line with exit 2.

    python tests/disk_faults.py --root /tmp/disk --sizes 0,8,16,24  # free KiB; JSON summary
    python tests/disk_faults.py --root /tmp/disk --sizes 0,4 --no-collect --writers report,power
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
CORE = ["item_index", "k", "seed", "response", "extracted", "is_correct"]
SWITCH_CELLS = ROOT / "bayesrc" / "datasets" / "switch_matrix_cells.csv"
MOUNT_BYTES = 4 << 20
#: every writer prepare() builds inputs for, cheapest first (from ``fit`` on they sample with NUTS: ``fit``,
#: ``fit-many`` and ``truth`` about a minute a run, ``switch-bayes`` (the default switch run, its two factor models)
#: and ``compare`` (the CI gate's default change-model fit) a minute or two, ``demo`` (collection, fit and report)
#: two or three)
WRITERS = (
    "rci",
    "merge",
    "report",
    "power",
    "switch",
    "import",
    "sensitivity",
    "fit",
    "fit-many",
    "truth",
    "switch-bayes",
    "compare",
    "demo",
)
SLOW_WRITERS = ("fit", "fit-many", "truth", "switch-bayes", "compare", "demo")
#: exits that wrote a whole output: compare's 1 is a failed gate (a deterioration found) and 4 an inconclusive one
#: (30 items cannot resolve the default margin), the demo's 3 a fit that failed its gate (its report says so), not
#: errors
SUCCESS = {"compare": (0, 1, 4), "demo": (0, 3)}
#: writers whose output needs a larger mount than MOUNT_BYTES: the demo's holds its collection and the Q3_K_M weights
MOUNT_SIZE = {"demo": 1 << 30}
OUT_NAME = {"import": "out.parquet"}  # writers whose output is one file, not a folder
#: writers that never overwrite (a run directory; fits already in the folder are refused): each case writes a new
#: output, whole once this file is in it, and nothing of it may be left after a failure
NEW_OUTPUT = {"merge": "run.json", "fit-many": "summary.csv"}
EXACT = ROOT / "bayesrc" / "datasets" / "exact_gemma"


def can_mount(root: Path) -> bool:
    """Whether this process may mount a tmpfs (root in a container that allows it)."""
    probe = Path(root) / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    ok = (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True).returncode
        == 0
    )
    if ok:
        subprocess.run(["umount", str(probe)], check=True)
    probe.rmdir()
    return ok


@contextmanager
def tmpfs(mnt: Path, size: int = MOUNT_BYTES) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` bytes at ``mnt`` for the block."""
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
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
    return subprocess.run(
        [sys.executable, "-m", "bayesrc", *args], capture_output=True, text=True, timeout=300, env=ENV, cwd=ROOT
    )


def clean_failure(res: subprocess.CompletedProcess) -> bool:
    """A failure reported as it must be: exit 2 and one ``bayesrc: error:`` line naming a path."""
    lines = res.stderr.strip().splitlines()
    return res.returncode == 2 and len(lines) == 1 and lines[0].startswith("bayesrc: error: /")


def snapshot(folder: Path) -> dict[str, bytes] | None:
    """Relative path -> bytes of every file under ``folder`` (lock files left out); a file output: its name -> bytes."""
    if folder.is_file():
        return {folder.name: folder.read_bytes()}
    if not folder.is_dir():
        return None
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def leftovers(folder: Path) -> list[str]:
    """Temporary files, stages, set-aside folders and writer-lock files under ``folder`` (the mount),
    once no command runs (a run directory's own ``.lock`` stays by design)."""
    debris = (".tmp", ".lock")
    return sorted(
        p.name
        for p in folder.rglob(".*")
        if (p.name.endswith(debris) and p.name != ".lock")
        or ".new-" in p.name
        or ".old-" in p.name
        or p.name.startswith(".staging-")
    )


def output_bytes(files: dict[str, bytes] | None) -> int:
    """Total size of a :func:`snapshot`."""
    return sum(map(len, (files or {}).values()))


def complete(name: str, out: Path, clean_files: set[str]) -> bool:
    """Whether ``out`` holds a whole output: a new output's last file (:data:`NEW_OUTPUT`), or every file of a clean
    run, none empty."""
    if name in NEW_OUTPUT:
        return (out / NEW_OUTPUT[name]).is_file()
    files = snapshot(out) or {}
    return set(files) >= clean_files and all(files.values())


def free_label(free: int | None) -> str:
    """How a case's disk was left: ``read-only`` or ``N KiB free``."""
    return "read-only" if free is None else f"{free // 1024} KiB free"


def collect_args(bank: Path, out: Path, *extra: str) -> list[str]:
    return [
        "collect",
        "--model",
        str(CARD),
        "--items",
        str(bank),
        "--out",
        str(out),
        "--k",
        "3",
        "--threads",
        "1",
        "--seed-rule",
        "shared",
        "--no-progress",
        *extra,
    ]


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
    return {
        "case": f"collect, {'read-only' if free is None else f'{free // 1024} KiB free'}",
        "exit": first.returncode,
        "clean": first.returncode == 0 or clean_failure(first),
        "parts_before": parts_before,
        "torn": torn,
        **outcome,
        "leftovers": leftovers(mnt),
        "stderr": first.stderr.strip()[-300:],
    }


def _compare(reference: pd.DataFrame, out: Path, again: subprocess.CompletedProcess) -> dict:
    """Lost and duplicated rows of a resumed run against the uninterrupted one."""
    if again.returncode != 0:
        return {"lost": len(reference), "duplicated": 0, "back": False}
    got = trials(out)
    dup = int(got.duplicated(["item_index", "k"]).sum())
    merged = reference.merge(
        got.drop_duplicates(["item_index", "k"]), on=["item_index", "k"], how="left", suffixes=("", "_got")
    )
    same = pd.Series(True, index=merged.index)
    for col in (c for c in CORE if c not in ("item_index", "k")):
        a, b = merged[col], merged[f"{col}_got"]
        same &= (a == b).fillna(False) | (a.isna() & b.isna())
    return {"lost": int((~same).sum()), "duplicated": dup, "back": bool(same.all()) and not dup}


def writer_case(mnt: Path, name: str, argv: list[str], *, free: int | None, half: bool = False) -> dict:
    """A writer over an output holding an older version (:data:`NEW_OUTPUT`'s writers: into a new folder, as
    they never overwrite, where nothing of it may be left after a failure), with ``free`` bytes left (None:
    read-only; ``half``: half the size of the older version, or of a clean new output, so that some of its
    files fit and the rest do not)."""
    out, ok = mnt / OUT_NAME.get(name, "out"), SUCCESS.get(name, (0,))
    first = out if name not in NEW_OUTPUT else mnt / "clean"  # a new output's size: a clean run's, then removed
    if name not in NEW_OUTPUT or half:
        res = cli(*argv, "--out", str(first))
        assert res.returncode in ok, res.stderr
    old = snapshot(out)
    if half:
        free = half_free(name, first)
    shutil.rmtree(mnt / "clean", ignore_errors=True)
    filler = fill(mnt, free) if free is not None else None
    if free is None:
        readonly(mnt, True)
    res = cli(*argv, "--out", str(out))
    kept = res.returncode in ok or snapshot(out) == old or (name in NEW_OUTPUT and not snapshot(out))
    left = leftovers(mnt)
    if free is None:
        readonly(mnt, False)
    else:
        filler.unlink()
    again = cli(*argv, "--out", str(out)) if res.returncode not in ok else res
    whole = again.returncode in ok and complete(name, out, set(old or ()))
    label = f"half its output, {free_label(free)}" if half else free_label(free)
    return {
        "case": f"{name}, {label}",
        "exit": res.returncode,
        "clean": res.returncode in ok or clean_failure(res),
        "kept": kept,
        "back": whole,
        "torn": 0,
        "lost": int(not kept) + int(not whole),
        "duplicated": len(left),
        "leftovers": left,
        "stderr": res.stderr.strip()[-300:],
    }


def half_free(name: str, output: Path) -> int:
    """Free bytes for a writer's "half its output" case: half the size of ``output`` (a whole output; the
    demo's without its collection, so that its results fit and its report does not); for ``fit-many``, room for its
    first pair's fit and half the next one's, so that the second fails after the first is written (a posterior is
    refused up front without its bytes plus ``HDF5_OVERHEAD`` free)."""
    from bayesrc.results import HDF5_OVERHEAD

    if name == "demo":  # its collection is resumed as it is: half of what it writes again (results and report)
        return output_bytes({p: b for p, b in (snapshot(output) or {}).items() if not p.startswith("collect/")}) // 2
    if name != "fit-many":
        return output_bytes(snapshot(output)) // 2
    pair = output_bytes(snapshot(output / "A"))
    return int(pair * (1 + HDF5_OVERHEAD[0])) + HDF5_OVERHEAD[1] + pair // 2


def prepare(root: Path, *, writers: Sequence[str] = WRITERS, collect: bool = True) -> dict:
    """Inputs outside the mount, made by the real commands: a 4-item bank and the uninterrupted run
    (``collect``), two shards (``merge``), a simulated trials pair (``rci``, ``power``, ``sensitivity``, ``fit``,
    ``compare``), its lm-eval logs (``import``), a manifest of it (``fit-many``) and its rci run (``report``); the
    bundled exact Gemma runs (``truth``); the argv of each of ``writers`` (without ``--out``)."""
    from bayesrc.collect import builtin_bank
    from bayesrc.data import simulate_pair
    from bayesrc.importers import write_lm_eval_example

    root.mkdir(parents=True, exist_ok=True)
    bank = builtin_bank(root / "bank.jsonl", n_items=4, seed=7)
    pair = simulate_pair(30, 10, seed=3)
    v1, v2 = str(root / "v1.parquet"), str(root / "v2.parquet")
    pair.trials_v1.to_parquet(v1, index=False)
    pair.trials_v2.to_parquet(v2, index=False)
    write_lm_eval_example(pair.trials_v1, root / "lm-eval")
    # two pairs: one may fit, the other not
    pd.DataFrame({"name": ["A", "B"], "v1": [v1, v2], "v2": [v2, v1]}).to_csv(root / "manifest.csv", index=False)
    short_nuts = ["--chains", "2", "--draws", "300", "--tune", "300"]  # a disk fault, not the gate, is under test here
    argv = {
        "rci": ["rci", "--pair", "A", v1, v2, "--splits", "50", "--permutations", "50"],
        "merge": ["merge", str(root / "s0"), str(root / "s1")],
        "report": ["report", str(root / "rci")],
        "power": ["power", v1, v2],
        "switch": ["switch", str(SWITCH_CELLS), "--bayes", "none", "--bootstrap", "200", "--seed", "1"],
        "import": ["import", "lm-eval", str(root / "lm-eval"), "--model", "v1"],
        "sensitivity": ["sensitivity", "threshold", v1, v2],
        "fit": [
            "fit",
            v1,
            v2,
            "--model",
            "betabinom",
            *short_nuts,
            "--no-escalate",
            "--allow-unconverged",
            "--no-progress",
        ],
        "fit-many": [
            "fit-many",
            str(root / "manifest.csv"),
            "--model",
            "betabinom",
            *short_nuts,
            "--no-escalate",
            "--allow-unconverged",
            "--no-progress",
        ],
        "truth": [
            "truth",
            str(EXACT / "q4"),
            str(EXACT / "q3"),
            "--replicates",
            "1",
            "--methods",
            "betabinom",
            *short_nuts,
            "--no-progress",
        ],
        "switch-bayes": ["switch", str(SWITCH_CELLS), "--bootstrap", "200", "--seed", "1"],
        "compare": ["compare", v1, v2],
        "demo": ["demo", "--items", "8", "--k", "3"],
    }
    runs = [collect_args(bank, root / "reference")] if collect else []
    if "merge" in writers:
        runs += [collect_args(bank, root / "s0", "--shard", "0/2"), collect_args(bank, root / "s1", "--shard", "1/2")]
    if "report" in writers:
        runs.append([*argv["rci"], "--out", str(root / "rci")])
    for args in runs:
        res = cli(*args)
        assert res.returncode == 0, res.stderr
    return {
        "bank": bank,
        "reference": trials(root / "reference") if collect else None,
        "writers": {name: argv[name] for name in writers},
    }


def disk_faults(root: Path, sizes: list[int], *, writers: bool | Sequence[str] = True, collect: bool = True) -> dict:
    """Every case at every free size (KiB), at half each writer's output and read-only; the totals.

    ``writers``: the writers to try (True: all of WRITERS, False: none); ``collect``: the collection cases too.
    """
    names = WRITERS if writers is True else tuple(writers or ())
    inputs = prepare(root / "inputs", writers=names, collect=collect)
    cases = []
    for free in [*(s * 1024 for s in sizes), None]:
        if collect:
            with tmpfs(root / "mnt") as mnt:
                cases.append(collect_case(mnt, inputs["bank"], inputs["reference"], free=free))
        for name, argv in inputs["writers"].items():  # merge: its output is a few KiB
            if name == "merge" and free is not None and free > 64 * 1024:
                continue
            with tmpfs(root / "mnt", MOUNT_SIZE.get(name, MOUNT_BYTES)) as mnt:
                cases.append(writer_case(mnt, name, argv, free=free))
    for name, argv in inputs["writers"].items():
        with tmpfs(root / "mnt", MOUNT_SIZE.get(name, MOUNT_BYTES)) as mnt:
            cases.append(writer_case(mnt, name, argv, free=None, half=True))
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
    ap.add_argument(
        "--writers", default=",".join(WRITERS), help=f"comma-separated, of {', '.join(WRITERS)} (default all)"
    )
    ap.add_argument("--no-writers", action="store_true", help="collection only")
    ap.add_argument("--no-collect", action="store_true", help="the writers only")
    args = ap.parse_args()
    writers = [] if args.no_writers else [w for w in args.writers.split(",") if w]
    if unknown := set(writers) - set(WRITERS):
        ap.error(f"unknown writer(s): {', '.join(sorted(unknown))}")
    print(
        json.dumps(
            disk_faults(
                args.root, [int(s) for s in args.sizes.split(",")], writers=writers, collect=not args.no_collect
            )
        )
    )


if __name__ == "__main__":
    main()
