"""Every field of every JSON, JSONL, TOML and ``.eval`` reader given a value of another type, one
at a time and in each kind of record (tests/fuzzing.py: retyped): one InputError naming the file,
never a traceback, nothing written; and the faults this fuzzing found, kept as plain cases."""

from __future__ import annotations

import functools
import json
import shutil

import pytest
from fuzzing import READERS, RETYPED, Workspace, retyped, try_each, try_input

import bayesrc
from bayesrc.errors import InputError


@pytest.fixture(scope="module")
def eval_retyped(tmp_path_factory) -> tuple[Workspace, list[tuple[str, bytes]]]:
    """The Inspect ``.eval`` seed and its retyped inputs (each a rewritten zip: ~2 s to build), for the two tests that
    read them (each input is tried on a fresh copy of the seed's folder, which stays as it is)."""
    ws = Workspace.make(READERS["Inspect .eval"], tmp_path_factory.mktemp("eval"))
    return ws, retyped(ws.target, ws.seed_bytes)


@pytest.mark.parametrize("name", [n for n in RETYPED if not READERS[n].slow_seed])
def test_retyped_field_is_one_named_input_error(name, tmp_path, request):
    """A number for an object, an object for a list, a string or a number (benchmarks/faults.py adds
    the results whose seed needs a fit)."""
    if name == "Inspect .eval":
        ws, inputs = request.getfixturevalue("eval_retyped")
    else:
        ws = Workspace.make(READERS[name], tmp_path)
        inputs = retyped(ws.target, ws.seed_bytes)
    assert inputs and try_input(ws, ws.seed_bytes, run=RETYPED[name]) == ("ok", "")
    _, faults = try_each(ws, inputs, functools.partial(try_input, run=RETYPED[name]))
    assert not faults, f"{name}: {len(faults)} of {len(inputs)} faults; the first: {faults[0][0]}: {faults[0][1]}"


def test_eval_log_retyping_reaches_the_header_and_a_sample(eval_retyped):
    """The .eval inputs retype fields of header.json and of a samples/ member (the zip is rewritten whole)."""
    members = {label.split(":")[0] for label, _ in eval_retyped[1]}
    assert "header.json" in members and any(m.startswith("samples/") for m in members)


def test_sensitivity_result_with_analyses_not_tables_is_one_line(tmp_path):
    """Found by retyping: sensitivity.json's 'analyses' as a number, or an analysis as an object, was a traceback."""
    ws = Workspace.make(READERS["result sensitivity.json"], tmp_path)
    for analyses in (1.5, {"threshold": {"x": 1}}, {"threshold": [1, 2]}):
        folder = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        shutil.copytree(ws.folder / "res", folder)
        (folder / "sensitivity.json").write_text(json.dumps({"analyses": analyses}))
        with pytest.raises(
            InputError, match=r"sensitivity\.json: field 'analyses': expected an object of lists of row objects"
        ):
            bayesrc.load(folder)


def test_damaged_posterior_is_one_line_and_nothing_on_stderr(tmp_path, capfd):
    """Found by fuzzing posterior.nc: h5py's KeyError for a damaged HDF5 block was a traceback, and
    h5netcdf's half-opened file printed another ("Exception ignored ...") when collected."""
    import xarray as xr

    from bayesrc.results import read_posterior

    good = tmp_path / "posterior.nc"
    xr.DataTree.from_dict({"posterior": xr.Dataset({"p": ("draw", [0.1, 0.2, 0.3])})}).to_netcdf(
        good, engine="h5netcdf"
    )
    assert float(read_posterior(good)["posterior"]["p"].sum()) == pytest.approx(0.6)
    data = good.read_bytes()
    at = data.index(b"OHDR") + 8  # a byte of the first object header, whose checksum then fails (h5py: KeyError)
    (tmp_path / "damaged.nc").write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
    (tmp_path / "truncated.nc").write_bytes(data[: len(data) // 2])
    for name, error in (("damaged.nc", "KeyError"), ("truncated.nc", "OSError")):
        with pytest.raises(InputError, match=rf"{name}: unreadable posterior \({error}: "):
            read_posterior(tmp_path / name)
    assert "Exception ignored" not in capfd.readouterr().err
