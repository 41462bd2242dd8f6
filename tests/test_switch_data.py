"""Switch-matrix inputs: loaders, validation, and bad input through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import data_path

from bayesrc.cli import main
from bayesrc.errors import InputError
from bayesrc.switch import load_switch, save_episodes, simulate_switch, switch_effects

CELLS = ("switch_matrix_cells.csv",)


def test_published_cells_load():
    d = load_switch(data_path(*CELLS))
    assert d.kind == "cells"
    assert d.benchmarks == ["coqa", "multi_if"]
    assert all(len(m) == 9 for m in d.models.values())
    assert len(d.frame) == 162
    # SE from the published 95% interval, by hand for the first row (0.636, 0.738).
    assert d.frame["se"].iloc[0] == pytest.approx((0.738 - 0.636) / (2 * 1.959963984540054))


def test_cell_effects_are_mean_differences_against_the_diagonal():
    d = load_switch(data_path(*CELLS)).select("coqa")
    eff = switch_effects(d)
    f = d.frame.set_index(["prefix", "suffix"])["mean"]
    # Paper Table 1: gemini-3-flash -> gpt-5-nano = 0.731 - 0.689 = +0.042.
    a, b = "gemini-3-flash-preview", "gpt-5-nano-2025-08-07"
    assert float(eff["delta"].sel(prefix=a, suffix=b)) == pytest.approx(f[(a, b)] - f[(b, b)])
    assert float(eff["delta"].sel(prefix=a, suffix=b)) == pytest.approx(0.042, abs=1e-9)
    assert eff["delta"].dims == ("prefix", "suffix")
    assert np.all(np.diag(eff["delta"].to_numpy()) == 0)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_episode_round_trip(tmp_path, suffix):
    sim = simulate_switch(3, 12, seed=3)
    path = tmp_path / f"ep{suffix}"
    save_episodes(sim.data.frame, path)
    back = load_switch(path)
    assert back.kind == "episodes"
    assert back.models == sim.data.models
    np.testing.assert_allclose(back.frame["score"].to_numpy(), sim.data.frame["score"].to_numpy())


def _cells_csv(tmp_path, rows, name="cells.csv"):
    cols = ["benchmark", "metric", "prefix_model", "suffix_model", "mean", "ci_low", "ci_high", "n_episodes"]
    p = tmp_path / name
    pd.DataFrame(rows, columns=cols).to_csv(p, index=False)
    return p


def _good_rows():
    return [
        ["b", "f1", "m1", "m1", 0.5, 0.4, 0.6, 50],
        ["b", "f1", "m1", "m2", 0.6, 0.5, 0.7, 50],
        ["b", "f1", "m2", "m1", 0.55, 0.45, 0.65, 50],
        ["b", "f1", "m2", "m2", 0.7, 0.6, 0.8, 50],
    ]


def _episodes_csv(tmp_path, score_override=None):
    sim = simulate_switch(2, 4, seed=1)
    df = sim.data.frame.rename(columns={"prefix": "prefix_model", "suffix": "suffix_model"})[
        ["episode", "prefix_model", "suffix_model", "score"]
    ]
    df = df.astype({"score": object})
    if score_override is not None:
        df.loc[5, "score"] = score_override
    p = tmp_path / "episodes.csv"
    df.to_csv(p, index=False)
    return p


def _bad_inputs(tmp_path):
    rows = _good_rows()
    yield "missing diagonal", _cells_csv(tmp_path, rows[:3], "nodiag.csv"), "suffix_model", "diagonal"
    yield "duplicate cell", _cells_csv(tmp_path, rows + [rows[1]], "dup.csv"), "suffix_model", "duplicate"
    bad = [r.copy() for r in rows]
    bad[2][4] = "high"
    yield "non-numeric mean", _cells_csv(tmp_path, bad, "nonnum.csv"), "mean", "finite number"
    yield "single model", _cells_csv(tmp_path, rows[:1], "single.csv"), "prefix_model", "at least two models"
    yield "non-numeric score", _episodes_csv(tmp_path, "n/a"), "score", "finite number"


@pytest.mark.parametrize(
    "case", ["missing diagonal", "duplicate cell", "non-numeric mean", "single model", "non-numeric score"]
)
def test_bad_input_cli_exit_2_one_line_no_output(tmp_path, capsys, case):
    cases = {c[0]: c[1:] for c in _bad_inputs(tmp_path)}
    path, field, words = cases[case]
    out = tmp_path / "out"
    rc = main(["switch", str(path), "--bayes", "none", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("bayesrc: error: ") and path.name in err
    assert f"field '{field}'" in err and words in err
    assert not (out / "switch.json").exists()


def test_bad_input_names_the_line(tmp_path):
    rows = _good_rows()
    p = _cells_csv(tmp_path, rows + [rows[1]])
    with pytest.raises(InputError) as ei:
        load_switch(p)
    assert ei.value.line == 6  # header + 4 rows, the repeated row is line 6


def test_episode_without_its_own_baseline(tmp_path):
    sim = simulate_switch(2, 3, seed=0)
    df = sim.data.frame
    df = df[~((df["episode"] == "ep0001") & (df["prefix"] == "model-1") & (df["suffix"] == "model-1"))]
    p = tmp_path / "e.jsonl"
    save_episodes(df, p)
    with pytest.raises(InputError, match="no no-switch score"):
        load_switch(p)


def test_cli_ls_only_on_published_cells(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["switch", str(data_path(*CELLS)), "--benchmark", "coqa", "--bayes", "none", "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "switch.json").read_text())
    coqa = res["benchmarks"]["coqa"]
    assert set(coqa) >= {"mu", "alpha", "beta", "r2", "cv_r2", "cells", "effects"}
    assert set(coqa["cells"][0]) >= {"prefix", "suffix", "observed", "pred", "resid"}
    assert len(coqa["cells"]) == 72
    assert (out / "effects_coqa.png").stat().st_size > 1000
    assert (out / "residuals_coqa.png").stat().st_size > 1000


def test_cli_episode_file_with_both_bayesian_backends(tmp_path, capsys):
    sim = simulate_switch(3, 20, seed=5)
    path = tmp_path / "episodes.jsonl"
    save_episodes(sim.data.frame, path)
    out = tmp_path / "out"
    args = [
        "switch",
        str(path),
        "--bootstrap",
        "200",
        "--draws",
        "100",
        "--tune",
        "100",
        "--chains",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    rc = main(args + ["--allow-unconverged"])
    assert rc == 0
    res = json.loads((out / "switch.json").read_text())["benchmarks"]["sim"]
    assert res["interval"].startswith("paired BCa")
    for backend in ("numpyro", "pymc"):
        b = res["bayes"][backend]
        assert b["likelihood"] == "episodes"
        assert set(b["alpha"]) == set(sim.models) and set(b["diagnostics"]) == {
            "max_rhat",
            "min_ess_bulk",
            "min_ess_tail",
            "divergences",
            "passed",
            "thresholds",
            "worst",
        }
        assert b["passed"] is False  # one chain of 100 draws cannot pass the gate (no R-hat, ESS < 400)
    # the typed result names each failed fit and the diagnostic that failed it (the CLI's exit-3 message)
    import bayesrc

    assert bayesrc.load(out).failed_fit_reasons() == {
        f"sim/{b}": res["bayes"][b]["diagnostics"]["worst"] for b in ("numpyro", "pymc")
    }
    assert {e["stars"] for e in res["effects"]} <= {"", "*", "**", "***"}


def test_two_models_get_effects_but_no_factor_model(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["switch", str(_cells_csv(tmp_path, _good_rows())), "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "switch.json").read_text())["benchmarks"]["b"]
    assert res["alpha"] is None and "at least 3 models" in res["note"] and res["bayes"] == {}
    assert [round(e["delta"], 6) for e in res["effects"]] == [round(0.6 - 0.7, 6), round(0.55 - 0.5, 6)]
