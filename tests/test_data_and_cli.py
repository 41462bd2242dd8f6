"""Data loading, the `bayesrc rci` command and its handling of bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesrc.cli import main
from bayesrc.data import item_counts, load_trials, save_trials, simulate_pair
from bayesrc.errors import InputError


@pytest.fixture(scope="module")
def small_pair():
    return simulate_pair(120, 10, models=("m-a", "m-b"), seed=4)


def write_jsonl(path: Path, frame: pd.DataFrame) -> Path:
    with path.open("w") as fh:
        for rec in frame.to_dict(orient="records"):
            rec = {k: (None if v is pd.NA or (isinstance(v, float) and np.isnan(v)) else v) for k, v in rec.items()}
            fh.write(json.dumps(rec, default=lambda o: o.item() if hasattr(o, "item") else str(o)) + "\n")
    return path


def reference_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """The reference study's field names (item_index, raw_response, extracted_answer)."""
    out = frame.rename(columns={"response": "raw_response", "extracted": "extracted_answer"}).drop(columns=["item_id"])
    return out


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- loading


def test_formats_round_trip_to_the_same_counts(tmp_path, small_pair):
    t = small_pair.trials_v1
    jsonl = write_jsonl(tmp_path / "a.jsonl", t)
    csv = tmp_path / "a.csv"
    t.to_csv(csv, index=False)
    pq = tmp_path / "a.parquet"
    save_trials(t, pq)
    loaded = [load_trials(p) for p in (jsonl, csv, pq)]
    ref = item_counts(loaded[0])
    for other in loaded[1:]:
        ds = item_counts(other)
        np.testing.assert_array_equal(ds["n_correct"].values, ref["n_correct"].values)
        np.testing.assert_array_equal(ds["n_valid"].values, ref["n_valid"].values)
        assert list(ds["domain"].values) == list(ref["domain"].values)


def test_a_collection_run_directory_reads_as_its_trials_everywhere_trials_are_read(tmp_path, small_pair, capsys):
    """``bayesrc rci`` (as fit, compare and report do, through ``load_trials``) takes a collection run's
    folder for its trials.parquet; a folder without one is one line naming it, exit 2."""
    from bayesrc.data import trials_file

    for name, t in (("v1", small_pair.trials_v1), ("v2", small_pair.trials_v2)):
        (tmp_path / name).mkdir()
        save_trials(t, tmp_path / name / "trials.parquet")
    assert load_trials(tmp_path / "v1").equals(load_trials(tmp_path / "v1" / "trials.parquet"))
    assert (
        run_cli(
            ["rci", "--pair", "A", str(tmp_path / "v1"), str(tmp_path / "v2"), "--out", str(tmp_path / "out")], capsys
        )[0]
        == 0
    )
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(
        ["rci", "--pair", "A", str(tmp_path / "v1"), str(tmp_path / "empty"), "--out", str(tmp_path / "out2")], capsys
    )
    assert code == 2 and err.strip().count("\n") == 0 and "empty: run directory has no trials.parquet" in err
    with pytest.raises(InputError, match="file not found"):
        trials_file(tmp_path / "nowhere")


def test_reference_study_field_names(tmp_path, small_pair):
    path = write_jsonl(tmp_path / "ref.jsonl", reference_layout(small_pair.trials_v1))
    t = load_trials(path)
    assert t["item_id"].iloc[0] == "0"  # item_index becomes the key when item_id is absent
    assert t["response"].notna().all() and t["extracted"].notna().any()


def test_counts_dataset_layout(small_pair):
    ds = item_counts(small_pair.trials_v1, small_pair.trials_v2)
    assert dict(ds.sizes) == {"item": 120, "version": 2, "k": 10}
    assert list(ds["version"].values) == ["m-a", "m-b"]
    assert ds["domain"].dims == ("item",)
    p = ds["n_correct"] / ds["n_valid"]
    np.testing.assert_allclose(ds["p"].values, p.values)
    # p is the per-item mean of the correctness matrix
    np.testing.assert_allclose(ds["p"].values, np.nanmean(ds["correct"].values, axis=2))


# ---------------------------------------------------------------- the rci command


@pytest.fixture(scope="module")
def rci_run(tmp_path_factory, small_pair):
    d = tmp_path_factory.mktemp("rci")
    a = write_jsonl(d / "v1.jsonl", small_pair.trials_v1)
    b = write_jsonl(d / "v2.jsonl", small_pair.trials_v2)
    other = simulate_pair(120, 10, models=("m-c", "m-d"), seed=5)
    c = write_jsonl(d / "v3.jsonl", other.trials_v1)
    e = write_jsonl(d / "v4.jsonl", other.trials_v2)
    g1 = write_jsonl(d / "g1.jsonl", small_pair.trials_v1[small_pair.trials_v1.k == 0].drop(columns=["k"]))
    g2 = write_jsonl(d / "g2.jsonl", small_pair.trials_v2[small_pair.trials_v2.k == 0].drop(columns=["k"]))
    out = d / "out"
    code = main(
        [
            "rci",
            "--pair",
            "A",
            str(a),
            str(b),
            "--pair",
            "B",
            str(c),
            str(e),
            "--greedy",
            "A",
            str(g1),
            str(g2),
            "--splits",
            "200",
            "--permutations",
            "200",
            "--seed",
            "1",
            "--out",
            str(out),
        ]
    )
    return code, out


def test_show_prints_a_saved_results_whole_summary_and_refuses_what_is_none(rci_run, tmp_path, capsys):
    _, out = rci_run
    code, text, _ = run_cli(["show", str(out)], capsys)  # the folder: its one result, rci.json
    assert code == 0 and "S_diff method" in text and text.count("r_xx v1") == 2  # both pairs, every row
    code, text, err = run_cli(["show", str(tmp_path / "nothing")], capsys)
    assert (
        code == 2
        and text == ""
        and err.strip().splitlines() == [f"bayesrc: error: {tmp_path / 'nothing'}: no such file or folder"]
    )


def test_show_into_a_pipe_its_reader_closed_ends_quietly(rci_run):
    """``bayesrc show PATH | head``: the reader goes first; no error line, the exit status of SIGPIPE."""
    _, out = rci_run
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line is written
    with os.fdopen(write_end, "wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "bayesrc", "show", str(out)], stdout=stdout, stderr=subprocess.PIPE, text=True
        )
    assert (done.returncode, done.stderr) == (141, "")


def test_rci_json_has_every_documented_key(rci_run):
    code, out = rci_run
    assert code == 0
    doc = json.loads((out / "rci.json").read_text())
    pair = doc["pairs"]["A"]
    for v in ("v1", "v2"):
        assert set(pair["reliability"][v]) >= {"r_xx", "ci", "icc"}
        assert len(pair["reliability"][v]["ci"]) == 2
    assert set(pair["exclusions"]) >= {"n_before", "n_after", "low_valid", "floor_ceiling"}
    assert set(pair["sem"]) == {"v1", "v2"}
    for key in ("s_diff", "min_detectable", "reliability_vs_k", "k_for_r80", "k_for_r90", "sd_basis"):
        assert key in pair
    for basis in ("analysable", "all", "conservative"):
        assert set(pair["counts"][basis]) >= {"improved", "no_change", "deteriorated"}
    assert set(pair["direction_asymmetry"]) >= {
        "improved_p95",
        "deteriorated_p95",
        "improved_mean",
        "deteriorated_mean",
    }
    assert set(pair["null_samples"]) >= {
        "replicates",
        "flagged_mean",
        "flagged_p025",
        "flagged_p50",
        "flagged_p975",
        "rate",
    }
    assert isinstance(pair["warnings"], list) and all(isinstance(w, str) for w in pair["warnings"])
    assert set(pair["flips"]) >= {"negative_flip_rate", "positive_flip_rate"}
    assert set(pair["domain"]) >= {"chi2", "p", "cramers_v"}
    assert set(doc["cross_pair"]) >= {"z", "p", "pearson_r", "n_shared", "test", "p_test", "mcnemar"}
    assert set(doc["greedy"]["A"]) >= {
        "matched",
        "greedy_flips",
        "rci_changed_missed_by_greedy",
        "greedy_flips_no_rci_change",
    }
    assert doc["greedy"]["A"]["matched"] == 120
    assert pair["sd_basis"] == "analysable"


def test_rci_items_table(rci_run):
    _, out = rci_run
    items = pd.read_parquet(out / "items_A.parquet")
    assert len(items) == 120
    assert {"item_id", "p_v1", "p_v2", "delta", "rci", "class", "excluded", "reason"} <= set(items.columns)
    assert set(items["class"]) <= {"improved", "no_change", "deteriorated", "excluded"}
    assert (items.loc[items.excluded, "class"] == "excluded").all()
    assert not [f for f in out.iterdir() if f.name.startswith(".")]  # no staging leftovers


def test_rci_sd_basis_all(tmp_path, small_pair, capsys):
    a = write_jsonl(tmp_path / "v1.jsonl", small_pair.trials_v1)
    b = write_jsonl(tmp_path / "v2.jsonl", small_pair.trials_v2)
    code, out, _ = run_cli(
        [
            "rci",
            "--pair",
            "A",
            str(a),
            str(b),
            "--sd-basis",
            "all",
            "--splits",
            "100",
            "--permutations",
            "100",
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
    )
    doc = json.loads((tmp_path / "o" / "rci.json").read_text())
    assert code == 0 and doc["pairs"]["A"]["sd_basis"] == "all"
    assert doc["pairs"]["A"]["s_diff"] == pytest.approx(doc["pairs"]["A"]["s_diff_all_items"])
    assert "sd_basis" in out


def test_printed_summary_keeps_its_table_narrow_and_each_warning_whole(tmp_path, capsys):
    """A warning (here: the method flags far more than its nominal rate on this small pair's own no-change null)
    would pad the value column of every row to its ~250 characters; it is printed whole as a note below the table."""
    sim = simulate_pair(30, 5, seed=3)
    a, b = write_jsonl(tmp_path / "v1.jsonl", sim.trials_v1), write_jsonl(tmp_path / "v2.jsonl", sim.trials_v2)
    code, out, _ = run_cli(["rci", "--pair", "p", str(a), str(b), "--out", str(tmp_path / "o")], capsys)
    warnings = json.loads((tmp_path / "o" / "rci.json").read_text())["pairs"]["p"]["warnings"]
    lines = out.splitlines()
    assert lines[-2].startswith("(") and lines[-2].endswith(
        f"rows; all of them: bayesrc show {tmp_path / 'o' / 'rci.json'})"
    )
    table, notes = (
        [line for line in lines[:-2] if not line.startswith("[")],
        [ln for ln in lines if ln.startswith("[")],
    )
    assert code == 0 and warnings and max(map(len, warnings)) > 150
    assert max(map(len, table)) <= 110 and notes == [f"[{i}] {w}" for i, w in enumerate(warnings, 1)]


# ---------------------------------------------------------------- bad input


def _bad_case(tmp_path: Path, small_pair, case: str) -> tuple[list[str], str]:
    """Write the files of one bad-input case; return the rci arguments and the expected text."""
    t1, t2 = small_pair.trials_v1.copy(), small_pair.trials_v2.copy()
    a, b = tmp_path / "v1.jsonl", tmp_path / "v2.jsonl"
    write_jsonl(b, t2)
    expect = ""
    if case == "malformed_line":
        write_jsonl(a, t1)
        lines = a.read_text().splitlines()
        lines[6] = lines[6][:-5]
        a.write_text("\n".join(lines) + "\n")
        expect = "v1.jsonl:7: malformed JSON"
    elif case == "missing_field":
        write_jsonl(a, t1)
        lines = a.read_text().splitlines()
        rec = json.loads(lines[3])
        del rec["is_correct"]
        lines[3] = json.dumps(rec)
        a.write_text("\n".join(lines) + "\n")
        expect = "v1.jsonl:4: field 'is_correct': missing required field"
    elif case == "not_boolean":
        t1["is_correct"] = t1["is_correct"].astype(object)
        t1.loc[9, "is_correct"] = "yes"
        write_jsonl(a, t1)
        expect = "v1.jsonl:10: field 'is_correct': expected true, false or null"
    elif case == "duplicate":
        write_jsonl(a, pd.concat([t1, t1.iloc[[5]]], ignore_index=True))
        expect = f"v1.jsonl:{len(t1) + 1}: field 'k': duplicate trial (item {t1.item_id[5]}, k {t1.k[5]})"
    elif case == "one_version_only":
        write_jsonl(a, t1[t1.item_id != t1.item_id.iloc[-1]])
        expect = (
            f"v1.jsonl: item {t1.item_id.iloc[-1]}: field 'item_id': present in another version but not in this file"
        )
    elif case == "all_missing":
        t1["is_correct"] = pd.array([None] * len(t1), dtype="boolean")
        t1["is_missing"] = True
        write_jsonl(a, t1)
        expect = "v1.jsonl: field 'is_missing': all 1200 responses are missing"
    elif case == "empty":
        a.write_text("")
        expect = "v1.jsonl: file is empty"
    elif case == "missing_file":
        expect = "v1.jsonl: file not found"
    args = [
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
    return args, expect


@pytest.mark.parametrize(
    "case",
    [
        "malformed_line",
        "missing_field",
        "not_boolean",
        "duplicate",
        "one_version_only",
        "all_missing",
        "empty",
        "missing_file",
    ],
)
def test_bad_input_one_line_exit_2_no_output(tmp_path, small_pair, capsys, case):
    args, expect = _bad_case(tmp_path, small_pair, case)
    code, out, err = run_cli(args, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("bayesrc: error: ")
    assert expect in lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["fit", "compare", "sensitivity", "switch", "truth"])
def test_every_command_that_fits_takes_the_same_sampler_sizes(tmp_path, small_pair, capsys, command):
    """--chains/--draws/--tune: SamplerConfig's defaults on every command, and one clear line, exit 2,
    nothing written when out of range (issue 29: the sensitivity and truth commands had their own defaults)."""
    from bayesrc import datasets
    from bayesrc.cli import build_parser
    from bayesrc.config import SamplerConfig

    a = write_jsonl(tmp_path / "v1.jsonl", small_pair.trials_v1)
    b = write_jsonl(tmp_path / "v2.jsonl", small_pair.trials_v2)
    inputs = {
        "sensitivity": ["sensitivity", "prior", str(a), str(b)],
        "switch": ["switch", str(datasets.path("switch_matrix_cells.csv"))],
    }.get(command, [command, str(a), str(b)])
    args = build_parser().parse_args([*inputs, "--out", str(tmp_path / "out")])
    d = SamplerConfig()
    assert (args.chains, args.draws, args.tune) == (d.chains, d.draws, d.tune)
    for bad in (["--chains", "0"], ["--draws", "0"], ["--tune", "-1"]):
        code, _, err = run_cli([*inputs, *bad, "--out", str(tmp_path / "out")], capsys)
        assert code == 2 and err.strip().splitlines() == [
            "bayesrc: error: <input>: field '--chains': chains and draws must be >= 1, tune >= 0"
        ], err
    assert not (tmp_path / "out").exists()


def test_bad_input_leaves_previous_output_untouched(tmp_path, small_pair, capsys):
    a = write_jsonl(tmp_path / "v1.jsonl", small_pair.trials_v1)
    b = write_jsonl(tmp_path / "v2.jsonl", small_pair.trials_v2)
    out = tmp_path / "out"
    assert (
        main(["rci", "--pair", "A", str(a), str(b), "--splits", "50", "--permutations", "50", "--out", str(out)]) == 0
    )
    before = (out / "rci.json").read_bytes()
    a.write_text(a.read_text() + "{not json\n")
    assert main(["rci", "--pair", "A", str(a), str(b), "--out", str(out)]) == 2
    assert (out / "rci.json").read_bytes() == before


def test_unmatched_items_allowed_on_request(tmp_path, small_pair, capsys):
    t1 = small_pair.trials_v1
    a = write_jsonl(tmp_path / "v1.jsonl", t1[~t1.item_id.isin(["q00000", "q00001"])])
    b = write_jsonl(tmp_path / "v2.jsonl", small_pair.trials_v2)
    code, _, err = run_cli(
        [
            "rci",
            "--pair",
            "A",
            str(a),
            str(b),
            "--allow-unmatched",
            "--splits",
            "50",
            "--permutations",
            "50",
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
    )
    assert code == 0
    assert "2 item(s) missing (first: q00000)" in err
    assert json.loads((tmp_path / "o" / "rci.json").read_text())["pairs"]["A"]["exclusions"]["n_before"] == 118


def test_missing_responses_are_excluded_not_fatal(tmp_path, small_pair, capsys):
    # The reference script crashes on missing responses; rule (a) excludes them instead.
    t1 = small_pair.trials_v1.copy()
    first = t1.item_id == t1.item_id.iloc[0]
    kill = first & (t1.k < 5)
    t1.loc[kill, "is_correct"] = pd.NA
    t1.loc[kill, "is_missing"] = True
    t1.loc[kill, "extracted"] = None
    # K differs between items: one item has only 8 samples.
    t1 = t1[~((t1.item_id == t1.item_id.iloc[-1]) & (t1.k >= 8))]
    a = write_jsonl(tmp_path / "v1.jsonl", t1)
    b = write_jsonl(tmp_path / "v2.jsonl", small_pair.trials_v2)
    code, _, err = run_cli(
        ["rci", "--pair", "A", str(a), str(b), "--splits", "50", "--permutations", "50", "--out", str(tmp_path / "o")],
        capsys,
    )
    assert code == 0
    assert f"item {t1.item_id.iloc[0]}: field 'is_missing': fewer than 6 valid responses (5)" in err
    assert "field 'k': K differs between items (8, 10 samples)" in err
    items = pd.read_parquet(tmp_path / "o" / "items_A.parquet").set_index("item_id")
    assert items.loc[t1.item_id.iloc[0], "reason"] == "low_valid"


def test_unwritable_output_is_one_line(tmp_path, small_pair, capsys):
    a = write_jsonl(tmp_path / "v1.jsonl", small_pair.trials_v1)
    b = write_jsonl(tmp_path / "v2.jsonl", small_pair.trials_v2)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run_cli(
        ["rci", "--pair", "A", str(a), str(b), "--splits", "50", "--permutations", "50", "--out", str(blocker / "sub")],
        capsys,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_rci_refuses_runs_with_different_pins(tmp_path, small_pair, capsys):
    # Two run directories whose records differ in the sampling temperature, not only the model.
    pins = {"model.sha256": "aaa", "items.bank_sha256": "bank", "sampling.temperature": 0.7, "runtime.engine": "fast"}
    for name, trials, change in (
        ("a", small_pair.trials_v1, {}),
        ("b", small_pair.trials_v2, {"model.sha256": "bbb", "sampling.temperature": 1.0}),
    ):
        d = tmp_path / name
        d.mkdir()
        save_trials(trials, d / "trials.parquet")
        (d / "run.json").write_text(json.dumps({"pins": {**pins, **change}}))
    args = [
        "rci",
        "--pair",
        "A",
        str(tmp_path / "a" / "trials.parquet"),
        str(tmp_path / "b" / "trials.parquet"),
        "--splits",
        "50",
        "--permutations",
        "50",
        "--out",
        str(tmp_path / "o"),
    ]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "pins differ in sampling.temperature" in err and not (tmp_path / "o").exists()
    assert "model.sha256" not in err.split("pins differ in")[1]  # the model may differ: it is the comparison
    assert run_cli(args + ["--allow-pin", "sampling"], capsys)[0] == 0
    assert run_cli(args + ["--force"], capsys)[0] == 0
    # `fit` refuses the same pair before any sampling.
    fit_args = [
        "fit",
        str(tmp_path / "a" / "trials.parquet"),
        str(tmp_path / "b" / "trials.parquet"),
        "--out",
        str(tmp_path / "f"),
    ]
    code, _, err = run_cli(fit_args, capsys)
    assert code == 2 and "pins differ in sampling.temperature" in err and not (tmp_path / "f").exists()
