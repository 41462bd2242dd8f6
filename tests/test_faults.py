"""Faults: SIGKILL at crash points of a result-folder write, two writers on one output.

The crash points are real SIGKILLs of a forked writer (tests/crashpoints.py); the writers
are real processes. benchmarks/faults.py runs the same harness at benchmark sizes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bayesrc import io
from bayesrc.cli import main

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
# one thread: the harness forks
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _crash_points(tmp_path: Path, mode: str, points: int, timed: int) -> dict:
    cmd = [
        sys.executable,
        str(HERE / "crashpoints.py"),
        "--root",
        str(tmp_path / "w"),
        "--mode",
        mode,
        "--points",
        str(points),
        "--timed",
        str(timed),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.parametrize("mode, points", [("exchange", 24), ("rename", 1000)])
def test_killed_writer_leaves_the_old_folder_or_the_new_one(tmp_path, mode, points):
    """SIGKILL before each of >= 24 filesystem events spread over the write (every event for the
    two-rename swap) and at 4 times: never a mix, nothing lost, no leftovers after recovery, and the
    next write succeeds past the dead writer's lock file."""
    summary = _crash_points(tmp_path, mode, points, timed=4)
    assert summary["killed"] >= 24
    assert summary["mixed"] == summary["lost"] == summary["duplicated"] == summary["next_failed"] == 0, summary[
        "outcomes"
    ]
    assert summary["states"].get("old", 0) > 0 and summary["states"].get("new", 0) > 0  # the kills spanned the swap
    if mode == "rename":
        # the kill between the two renames (a timed kill may land there too): the old folder set aside, put back by
        # recovery
        assert summary["states"].get("set aside", 0) >= 1 and summary["tried"] >= summary["events"]


def test_failed_write_changes_nothing_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    io.atomic_write_text(out / "a.txt", "old")
    with pytest.raises(RuntimeError), io.staged_output(out) as stage:
        io.atomic_write_text(stage / "a.txt", "new")
        raise RuntimeError("computation failed half-way")
    assert (out / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_new_folder_keeps_the_old_files_it_does_not_replace_and_its_mode(tmp_path):
    out = tmp_path / "out"
    io.atomic_write_text(out / "rci.json", "{}")
    io.atomic_write_text(out / "fit" / "fit.json", "{}")
    out.chmod(0o750)
    with io.staged_output(out) as stage:
        io.atomic_write_text(stage / "report.html", "<html>")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "fit",
        "fit/fit.json",
        "rci.json",
        "report.html",
    ]
    assert out.stat().st_mode & 0o777 == 0o750


def test_working_directory_inside_the_output_follows_the_new_folder(tmp_path, monkeypatch):
    out = tmp_path / "out"
    io.atomic_write_text(out / "a.txt", "old")
    monkeypatch.chdir(out)
    with io.staged_output(".") as stage:
        io.atomic_write_text(stage / "a.txt", "new")
    assert Path("a.txt").read_text() == "new" and Path.cwd() == out


HOLD = """
import sys, time
from pathlib import Path
from bayesrc import io
with io.staged_output(sys.argv[1]) as stage:
    io.atomic_write_text(stage / "rci.json", "first")
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(out: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out), str(seconds)], stdout=subprocess.PIPE, text=True, env=ENV
    )
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_second_writer_is_refused_with_one_line_then_serialised(tmp_path, small_pair_files):
    """A process is writing ``out``; a second ``bayesrc rci --out out`` (a real process) gets one line
    and exit 2 and writes nothing; once the first is done, the same command succeeds."""
    a, b = small_pair_files
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "bayesrc",
        "rci",
        "--pair",
        "A",
        str(a),
        str(b),
        "--splits",
        "50",
        "--permutations",
        "50",
        "--out",
        str(out),
    ]
    first = _holder(out, 60)
    try:
        second = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=ENV)
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"bayesrc: error: {out.resolve()}: another bayesrc process (pid {first.pid}) is writing this output"
    )
    assert not out.exists()  # the first was killed before its swap; the second wrote nothing
    assert subprocess.run(argv, capture_output=True, text=True, timeout=120, env=ENV).returncode == 0
    assert json.loads((out / "rci.json").read_text())["pairs"]["A"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_cli_holds_the_lock_for_the_whole_command(tmp_path, small_pair_files, capsys):
    """In-process CLI against a writer process: refused before any work, exit 2, one line."""
    a, b = small_pair_files
    out = tmp_path / "out"
    first = _holder(out, 60)
    try:
        start = time.monotonic()
        code = main(["rci", "--pair", "A", str(a), str(b), "--out", str(out)])
        took = time.monotonic() - start
    finally:
        first.kill()
        first.wait()
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "another bayesrc process" in err
    assert took < 5 and not out.exists()


def test_outputs_get_the_umasks_mode_like_any_new_file(tmp_path, small_pair_files):
    """Every file of a real command's output, and the counts and atomic writers', is ``0666 & ~umask``
    (the temporary files they are renamed from were once ``mkstemp``'s 0600: unreadable to the group)."""
    from bayesrc.data import item_counts, save_counts, simulate_pair

    a, b = small_pair_files
    old = os.umask(0o022)
    try:
        assert (
            main(
                [
                    "rci",
                    "--pair",
                    "A",
                    str(a),
                    str(b),
                    "--splits",
                    "50",
                    "--permutations",
                    "50",
                    "--out",
                    str(tmp_path / "out"),
                ]
            )
            == 0
        )
        pair = simulate_pair(5, 3, seed=1)
        save_counts(item_counts(pair.trials_v1, pair.trials_v2), tmp_path / "out" / "counts.nc")
        io.atomic_write_text(tmp_path / "plain.txt", "x")
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()] + [tmp_path / "plain.txt"]
    assert len(files) >= 4 and {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777) for p in files} == {
        p.relative_to(tmp_path).as_posix(): "0o644" for p in files
    }


@pytest.fixture
def small_pair_files(tmp_path):
    from bayesrc.data import simulate_pair

    pair = simulate_pair(30, 10, seed=3)
    a, b = tmp_path / "v1.parquet", tmp_path / "v2.parquet"
    pair.trials_v1.to_parquet(a, index=False)
    pair.trials_v2.to_parquet(b, index=False)
    return a, b


def test_mount_point_output_is_written_in_place(tmp_path):
    """A folder that is a mount point (a container's output volume) cannot be renamed: its entries
    are replaced one by one, the lock file inside it."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("mounting a tmpfs needs root")
    try:
        io.atomic_write_text(mnt / "a.txt", "old")
        io.atomic_write_text(mnt / "keep.txt", "kept")
        with io.staged_output(mnt) as stage:
            io.atomic_write_text(stage / "a.txt", "new")
        assert {p.name: p.read_text() for p in mnt.iterdir()} == {"a.txt": "new", "keep.txt": "kept"}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
