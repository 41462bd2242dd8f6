"""Faults of a collection on the real Gemma GGUF: SIGKILL crash points then resume (trial for
trial), two collectors or a collector and a ``merge`` on one run, read-only and full outputs.

The crash points are real SIGKILLs of forked collectors (tests/collect_crashpoints.py, run
as a subprocess: it forks, so it must not run inside pytest's threads); benchmarks/faults.py
runs the same harness at benchmark sizes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli_in_process

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _harness(*args: str) -> dict:
    cmd = [sys.executable, "-W", "ignore", str(HERE / "collect_crashpoints.py"), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.parametrize(("engine", "seed"), [("fast", 33), ("exact", 34)])
def test_collection_killed_at_seeded_crash_points_resumes_to_the_uninterrupted_trials(gemma, engine, seed):
    """Three seeded points (filesystem events and calls of the collector) of a 2-item run: each
    a real SIGKILL, then a resume; every part on disk is whole and the resumed run equals the
    uninterrupted one row for row (the harness checks that it sees one changed row)."""
    s = _harness("--engine", engine, "--items", "2", "--k", "2", "--calls", "40", "--sample", "3", "--seed", str(seed))
    assert s["tried"] == s["killed"] == 3, s["outcomes"]
    assert (s["torn"], s["lost"], s["duplicated"], s["resume_failed"]) == (0, 0, 0, 0), s["outcomes"]
    assert s["events"]["fs"] >= 20 and s["events"]["call"] >= 100


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bayesrc", *args], capture_output=True, text=True, timeout=120, env=ENV, cwd=ROOT
    )


def _collect_args(bank: Path, out: Path, *extra: str) -> list[str]:
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


def _stopped_collector(bank: Path, out: Path, *, when) -> subprocess.Popen:
    """A real collector (CLI process) frozen with SIGSTOP as soon as ``when(out)`` holds (it keeps its lock)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bayesrc", *_collect_args(bank, out)],
        env=ENV,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not when(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGSTOP)
    assert proc.poll() is None and when(out), "the collector finished before it could be stopped"
    return proc


def _run_locked(out: Path) -> bool:
    """Whether a collector holds the run directory's lock: its pid is in the lock file (written after ``flock``)."""
    try:
        return (out / ".lock").read_text().strip().isdigit()
    except FileNotFoundError:
        return False


def _one_line(res: subprocess.CompletedProcess, *words: str) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("bayesrc: error:"), res.stderr
    assert any(w in lines[0] for w in words), res.stderr


@pytest.fixture(scope="module")
def reference4(gemma, gemma_bank4, tmp_path_factory):
    """The uninterrupted fast run of the 4-item bank (CLI options of these tests)."""
    from bayesrc.collect import collect

    out = tmp_path_factory.mktemp("ref") / "run"
    gemma.forget_prefix()
    collect(CARD, gemma_bank4, out, k=3, model=gemma, seed_rule="shared")
    return out


def _trials(run: Path):
    from bayesrc.collect import read_run_trials

    return read_run_trials(run)[["item_index", "k", "seed", "response", "extracted", "is_correct"]]


def test_second_collector_and_merge_on_a_running_run_are_refused_then_it_completes(
    gemma_bank4, reference4, tmp_path, capfd
):
    """While a collector (stopped after its first part) holds its run: a second collector (resume), a
    ``merge`` reading it as a shard and a ``merge`` writing into it each get one line and exit 2,
    and change nothing; resumed with SIGCONT the collector ends with the uninterrupted trials.
    (The second collector is a real process; the two merges the same command in this process, which holds no lock.)"""
    out = tmp_path / "run"
    first = _stopped_collector(gemma_bank4.path, out, when=lambda o: any((o / "parts").glob("item-*")))
    try:
        before = sorted(p.name for p in (out / "parts").iterdir())
        _one_line(_cli(*_collect_args(gemma_bank4.path, out, "--resume")), f"another collector (pid {first.pid})")
        _one_line(
            cli_in_process("merge", str(out), "--out", str(tmp_path / "merged"), capfd=capfd),
            f"another collector (pid {first.pid})",
        )
        _one_line(
            cli_in_process("merge", str(reference4), "--out", str(out), capfd=capfd),
            "already holds a run",
            f"another collector (pid {first.pid})",
        )
        assert (
            sorted(p.name for p in (out / "parts").iterdir()) == before
            and not (tmp_path / "merged" / "run.json").exists()
        )
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=120) == 0, first.stderr.read()
    assert _trials(out).equals(_trials(reference4))


def test_merge_into_a_run_directory_a_collector_has_just_locked_is_refused(gemma_bank4, reference4, tmp_path):
    """The collector holds the run's lock but has not written run.json yet (it is loading the model):
    a ``merge --out`` there used to swap the folder under it; now it is refused, and the collector
    completes with the uninterrupted trials."""
    out = tmp_path / "run"
    # the lock file exists before it is locked; the collector writes its pid into it once it holds the lock
    first = _stopped_collector(gemma_bank4.path, out, when=_run_locked)
    try:
        if (out / "run.json").exists():
            pytest.skip("the collector wrote run.json before it could be stopped")
        _one_line(_cli("merge", str(reference4), "--out", str(out)), f"another collector (pid {first.pid})")
        assert not (out / "run.json").exists()
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=120) == 0, first.stderr.read()
    assert _trials(out).equals(_trials(reference4))


def test_full_disk_and_read_only_output_one_line_exit_2_then_resume_completes(
    gemma_bank4, reference4, tmp_path, monkeypatch
):
    """A real tmpfs (mounted as root) with 40 KiB left: the collector stops after the parts that fit
    with one line naming the file and exit 2; with space back the resume gives the uninterrupted
    trials. On the tmpfs remounted read-only: one line, exit 2, nothing written."""
    sys.path.insert(0, str(HERE))
    import disk_faults

    if not disk_faults.can_mount(tmp_path):
        pytest.skip("mounting a tmpfs needs root")
    real_cli = disk_faults.cli

    def cli(*args: str) -> subprocess.CompletedProcess:
        """A real collector process on the full or read-only mount (the runs under test: exit status, one line); the
        resume once space is back is the same command run by :func:`bayesrc.cli.main` in this process (no interpreter
        start)."""
        mnt = Path(args[args.index("--out") + 1]).parent
        if (mnt / "filler").exists() or os.statvfs(mnt).f_flag & os.ST_RDONLY:
            return real_cli(*args)
        return cli_in_process(*args)

    monkeypatch.setattr(disk_faults, "cli", cli)
    # disk_faults.disk_faults(tmp_path, [40], writers=False), with the module's uninterrupted run of the same bank and
    # options (reference4) as the reference instead of a further CLI collection
    reference = disk_faults.trials(reference4)
    cases = []
    for free in (40 * 1024, None):
        with disk_faults.tmpfs(tmp_path / "mnt") as mnt:
            cases.append(disk_faults.collect_case(mnt, gemma_bank4.path, reference, free=free))
    full, ro = cases
    assert full["exit"] == 2 and full["parts_before"] >= 1 and "No space left on device" in full["stderr"], full
    assert ro["exit"] == 2 and "Read-only file system" in ro["stderr"], ro
    totals = (
        sum(not c["clean"] for c in cases),
        *(sum(c[key] for c in cases) for key in ("torn", "lost", "duplicated")),
    )
    assert totals == (0, 0, 0, 0), cases
