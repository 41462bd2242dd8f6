"""Result writers on a full disk: ``report``, ``power``, ``switch`` and ``import`` (a real CLI process each) over
an output holding an older version, on a real size-limited tmpfs mounted as root
(tests/disk_faults.py; benchmarks/faults.py runs every writer at more sizes, read-only too).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import disk_faults  # noqa: E402  (tests/disk_faults.py: the tmpfs, the filler, the cases)
from helpers import cli_in_process  # noqa: E402

#: (writer, free bytes, half its output free): no room for the lock file's pid, and room for part of the output
#: (report: half its one file; switch: some of its files; import: half its one file, an output that is a file)
CASES = [("power", 0, False), ("report", None, True), ("switch", None, True), ("import", None, True)]
_REAL_CLI = disk_faults.cli  # one real ``bayesrc`` process


def _cli_real_on_a_full_disk(*args: str) -> subprocess.CompletedProcess:
    """``disk_faults.cli``, a real process for each run whose output is on the full disk (the filler file beside it:
    the runs under test, whose exit status and one line a user sees); the runs around them (an input made by a command,
    the older version written before the disk fills, the run once space is back) are the same command run by
    :func:`bayesrc.cli.main` in this process, without an interpreter start (~2 s each)."""
    out = Path(args[args.index("--out") + 1])
    if (out.parent / "filler").exists():
        return _REAL_CLI(*args)
    return cli_in_process(*args)


def test_writers_on_a_full_disk_one_line_naming_the_output_file_old_version_kept_nothing_left_then_written(
    tmp_path, monkeypatch
):
    """Each writer fails with one ``bayesrc: error:`` line naming a file of the output (not of its
    stage), exit 2, the older version byte for byte and nothing beside it (no stage, temporary or
    lock file); with the space back it writes the whole output."""
    if not disk_faults.can_mount(tmp_path):
        pytest.skip("mounting a tmpfs needs root")
    monkeypatch.setattr(disk_faults, "cli", _cli_real_on_a_full_disk)
    inputs = disk_faults.prepare(tmp_path / "inputs", writers=[name for name, _, _ in CASES], collect=False)
    cases = []
    for name, free, half in CASES:
        with disk_faults.tmpfs(tmp_path / "mnt") as mnt:
            cases.append(disk_faults.writer_case(mnt, name, inputs["writers"][name], free=free, half=half))
    for case in cases:
        assert case["exit"] == 2 and case["clean"] and "No space left on device" in case["stderr"], case
        assert case["kept"] and case["back"] and case["leftovers"] == [], case
        assert ".new-" not in case["stderr"] and ".staging-" not in case["stderr"], case
    power, report, switch, imported = cases
    assert power["stderr"].endswith("/mnt/.out.lock: No space left on device"), power
    assert report["stderr"].endswith("/mnt/out/report_A.html: No space left on device"), report
    assert "/mnt/out/" in switch["stderr"], switch
    assert "/mnt/.out.parquet" in imported["stderr"] or "/mnt/out.parquet" in imported["stderr"], imported


def test_a_posterior_without_room_is_refused_before_it_is_written(tmp_path):
    """h5py dies (SIGSEGV) when the disk fills part-way through ``posterior.nc`` (found with ``fit``
    at half its output free): :func:`bayesrc.results.write_posterior` refuses first, writing nothing."""
    import errno

    import numpy as np
    import xarray as xr

    from bayesrc.results import write_posterior

    if not disk_faults.can_mount(tmp_path):
        pytest.skip("mounting a tmpfs needs root")
    draws = np.random.default_rng(0).random((2, 300, 500))  # 2.4 MB
    tree = xr.DataTree.from_dict({"/posterior": xr.Dataset({"p": (("chain", "draw", "item"), draws)})})
    with disk_faults.tmpfs(tmp_path / "mnt") as mnt:
        filler = disk_faults.fill(mnt, 1 << 20)  # 1 MiB left
        with pytest.raises(OSError) as refused:
            write_posterior(tree, mnt / "posterior.nc")
        assert refused.value.errno == errno.ENOSPC and refused.value.filename == str(mnt / "posterior.nc")
        assert not (mnt / "posterior.nc").exists()
        filler.unlink()
        write_posterior(tree, mnt / "posterior.nc")  # with room: the file, whole
        with xr.open_datatree(mnt / "posterior.nc", engine="h5netcdf") as back:
            np.testing.assert_array_equal(back["posterior"]["p"].values, draws)


def test_a_result_table_on_a_full_disk_names_the_outputs_file(tmp_path):
    """pyarrow's write error names no file ("Error writing bytes to file ... [errno 28]"): the
    failing write of a result's table names ``out/items.parquet``, not the folder or its stage."""
    import numpy as np
    import pandas as pd

    from bayesrc.results import Result

    if not disk_faults.can_mount(tmp_path):
        pytest.skip("mounting a tmpfs needs root")
    table = pd.DataFrame({"x": np.random.default_rng(0).random(200_000)})  # ~1.6 MB: does not fit in 64 KiB
    with disk_faults.tmpfs(tmp_path / "mnt") as mnt:
        disk_faults.fill(mnt, 64 * 1024)
        with pytest.raises(OSError) as refused:
            Result({"kind": "test"}, {"items": table}).save(mnt / "out")
        assert refused.value.filename == str(mnt / "out" / "items.parquet"), refused.value
        assert not (mnt / "out").exists() and sorted(p.name for p in mnt.iterdir()) == ["filler"]


def test_a_first_demo_on_a_disk_without_room_for_its_weights_is_one_line_naming_them(tmp_path):
    """``make demo`` re-quantises the demo model to Q3_K_M (~240 MB) before collecting. On a disk
    without room for it, llama.cpp's quantiser reports only "code 1" and named the *source*
    weights (found by a fresh demo at 100 MiB free); now one line naming the weights it writes
    and why, before the quantiser runs, and nothing left beside them."""
    if not disk_faults.can_mount(tmp_path):
        pytest.skip("mounting a tmpfs needs root")
    with disk_faults.tmpfs(tmp_path / "mnt", 8 << 20) as mnt:
        res = disk_faults.cli("demo", "--items", "8", "--k", "3", "--out", str(mnt / "out"))
        assert disk_faults.clean_failure(res), res.stderr
        assert res.stderr.strip().endswith(
            "/out/collect/models/gemma-3-270m-q3_k_m.gguf: No space left on device "
            "for the re-quantised weights (up to 253 MB)"
        ), res.stderr
        assert disk_faults.leftovers(mnt) == [] and not list(mnt.rglob("*.gguf"))
