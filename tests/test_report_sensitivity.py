"""Sensitivity analyses on a simulated pair with known truth: conclusions move in the expected direction."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayesrc.classical import reliable_change
from bayesrc.cli import main
from bayesrc.data import item_counts, save_trials, simulate_pair
from bayesrc.report.sensitivity import (
    classify,
    exclusion_sensitivity,
    first_k,
    k_subsample_sensitivity,
    threshold_sensitivity,
)


@pytest.fixture(scope="module")
def sim():
    # 15% missing answers so that exclusion rule (a) has something to exclude
    return simulate_pair(800, 10, seed=21, missing_rate=0.15)


@pytest.fixture(scope="module")
def counts(sim):
    return item_counts(sim.trials_v1, sim.trials_v2)


@pytest.fixture(scope="module")
def pair(counts):
    return reliable_change(counts, n_permutations=20, seed=0)


def test_defaults_reproduce_the_classical_pipeline(counts, pair):
    """classify() at the defaults gives bayesrc rci's classes, for both SD bases."""
    r1, r2 = pair.reliability["v1"].r_xx, pair.reliability["v2"].r_xx
    cls = classify(pair.items, r1, r2)
    assert (cls["class"].to_numpy() == pair.items["class"].to_numpy()).all()
    assert np.isclose(cls.attrs["s_diff"], pair.s_diff)
    other = reliable_change(counts, n_permutations=20, seed=0, sd_basis="all")
    cls_all = classify(pair.items, r1, r2, sd_basis="all")
    assert (cls_all["class"].to_numpy() == other.items["class"].to_numpy()).all()


def test_stricter_threshold_fewer_changes_and_fewer_false_discoveries(counts, sim, pair):
    t = threshold_sensitivity(counts, zs=(1.645, 1.96, 2.58, 3.0), truth=sim.truth, pair=pair)
    for _, g in t.groupby("sd_basis"):
        g = g.sort_values("z")
        assert (np.diff(g["detections"]) <= 0).all() and g["detections"].iloc[-1] < g["detections"].iloc[0]
        assert g["realized_fdp"].iloc[-1] < g["realized_fdp"].iloc[0]
        assert g["share_changed_detected"].iloc[-1] < g["share_changed_detected"].iloc[0]
    row = t[(t["z"] == 1.96) & (t["sd_basis"] == "analysable")].iloc[0]
    assert row["improved"] == pair.counts["analysable"]["improved"] and row["deteriorated"] == pair.counts["analysable"]["deteriorated"]
    # independent check of the realized FDP at the default: flagged items that did not change in the flagged direction
    items = pair.items.merge(sim.truth[["item_id", "delta_p", "changed"]], on="item_id")
    flagged = items["class"].isin(["improved", "deteriorated"])
    right = items["changed"] & (np.sign(items["delta_p"]) == np.where(items["class"] == "improved", 1, -1))
    assert np.isclose(row["realized_fdp"], (flagged & ~right).sum() / flagged.sum())


def test_exclusion_rules(counts, sim, pair):
    e = exclusion_sensitivity(counts, min_valid_grid=(2, 6, 9), truth=sim.truth, pair=pair)
    on = e[e["floor_ceiling_excluded"]].set_index("min_valid")
    off = e[~e["floor_ceiling_excluded"]].set_index("min_valid")
    # a stricter rule (a) analyses fewer items; keeping floor/ceiling items analyses more
    assert on.loc[2, "n_analysable"] > on.loc[6, "n_analysable"] > on.loc[9, "n_analysable"]
    assert (off["n_analysable"] > on["n_analysable"]).all()
    # floor/ceiling items (Δp = 0) never change, but they widen the SD basis: larger S_diff, fewer detections
    assert (off["s_diff"] > on["s_diff"]).all() and (off["detections"] <= on["detections"]).all()
    assert on.loc[6, "detections"] == pair.counts["analysable"]["improved"] + pair.counts["analysable"]["deteriorated"]


def test_first_k_counts(counts):
    ds = first_k(counts, 4)
    c = counts["correct"].values[:, :, :4]
    assert (ds["n_valid"].values == (~np.isnan(c)).sum(axis=2)).all()
    assert (ds["n_correct"].values == np.nansum(c, axis=2)).all()


def test_fewer_samples_fewer_detections(counts, sim):
    k = k_subsample_sensitivity(counts, ks=(3, 5, 10), truth=sim.truth, seed=1).set_index("k")
    assert k.loc[3, "detections"] < k.loc[10, "detections"]
    assert k.loc[3, "true_detections"] < k.loc[5, "true_detections"] < k.loc[10, "true_detections"]
    assert k.loc[3, "s_diff"] > k.loc[10, "s_diff"]  # less reliable accuracies -> wider band
    assert k.loc[3, "r_xx_v1"] < k.loc[10, "r_xx_v1"]
    assert list(k["min_valid"]) == [2, 3, 6]
    # reproducible with a seed
    again = k_subsample_sensitivity(counts, ks=(3,), truth=sim.truth, seed=1).set_index("k")
    pd.testing.assert_series_equal(again.loc[3], k.loc[3])


def test_cli_sensitivity_writes_tables_figures_and_report_section(sim, tmp_path, capsys):
    v1, v2, truth = tmp_path / "v1.parquet", tmp_path / "v2.parquet", tmp_path / "truth.parquet"
    small = sim.truth.iloc[:300]
    keep = set(small["item_id"])
    save_trials(sim.trials_v1[sim.trials_v1["item_id"].isin(keep)], v1)
    save_trials(sim.trials_v2[sim.trials_v2["item_id"].isin(keep)], v2)
    small.to_parquet(truth)
    out = tmp_path / "run"
    assert main(["sensitivity", "threshold", str(v1), str(v2), "--truth", str(truth), "--z-grid", "1.96", "2.58", "--out", str(out)]) == 0
    table = pd.read_csv(out / "sensitivity_threshold.csv")
    assert len(table) == 4 and {"realized_fdp", "detections", "z", "sd_basis"} <= set(table.columns)
    assert (out / "sensitivity_threshold.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((out / "sensitivity.json").read_text())
    assert "prior" in summary["not_done"] and "fdr" in summary["not_done"]
    assert main(["report", str(out)]) == 0
    html = (out / "report_run.html").read_text()
    assert "Sensitivity analyses" in html and "RCI threshold and SD basis" in html
    # bad truth table: exit 2, names the file and the missing column
    pd.DataFrame({"item_id": ["q1"]}).to_parquet(tmp_path / "bad.parquet")
    capsys.readouterr()
    assert main(["sensitivity", "k", str(v1), str(v2), "--truth", str(tmp_path / "bad.parquet"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "bad.parquet" in err and "'changed'" in err
