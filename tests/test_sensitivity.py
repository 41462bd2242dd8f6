"""Sensitivity analyses on a simulated pair with known truth: conclusions move in the expected direction."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayesrc.classical import reliable_change
from bayesrc.classical.rci import RCISettings
from bayesrc.cli import main
from bayesrc.data import item_counts, save_trials, simulate_pair
from bayesrc.sensitivity.classical import (
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
    r1, r2 = pair.r_xx["v1"], pair.r_xx["v2"]
    cls = classify(pair.items, r1, r2)
    assert (cls["class"].to_numpy() == pair.items["class"].to_numpy()).all()
    assert np.isclose(cls.attrs["s_diff"], pair.s_diff)
    other = reliable_change(counts, n_permutations=20, seed=0, sd_basis="all")
    cls_all = classify(pair.items, r1, r2, RCISettings(sd_basis="all"))
    assert (cls_all["class"].to_numpy() == other.items["class"].to_numpy()).all()


def test_stricter_threshold_fewer_changes_and_fewer_false_discoveries(counts, sim, pair):
    t = threshold_sensitivity(counts, zs=(1.645, 1.96, 2.58, 3.0), truth=sim.truth, pair=pair, null_replicates=40)
    assert set(t["s_diff_method"]) == {"reference", "binomial"} and {
        "null_flagged_mean",
        "null_rate",
        "nominal_rate",
    } <= set(t.columns)
    for _, g in t.groupby("method"):
        g = g.sort_values("z")
        assert (np.diff(g["detections"]) <= 0).all() and g["detections"].iloc[-1] < g["detections"].iloc[0]
        assert g["realized_fdp"].iloc[-1] < g["realized_fdp"].iloc[0]
        assert g["share_changed_detected"].iloc[-1] < g["share_changed_detected"].iloc[0]
    row = t[
        (t["z"] == 1.96) & (t["sd_basis"] == "analysable") & (t["method"] == "reference (r_xx: all, SD: analysable)")
    ].iloc[0]
    assert (
        row["improved"] == pair.counts["analysable"]["improved"]
        and row["deteriorated"] == pair.counts["analysable"]["deteriorated"]
    )
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
    assert (
        main(
            [
                "sensitivity",
                "threshold",
                str(v1),
                str(v2),
                "--truth",
                str(truth),
                "--z-grid",
                "1.96",
                "2.58",
                "--s-diff",
                "reference",
                "--reliability-basis",
                "all",
                "--null-replicates",
                "20",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out / "sensitivity_threshold.csv")
    assert len(table) == 4 and {"realized_fdp", "detections", "z", "sd_basis", "null_flagged_mean", "null_rate"} <= set(
        table.columns
    )
    assert (out / "sensitivity_threshold.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((out / "sensitivity.json").read_text())
    assert set(summary["analyses"]) == {"threshold"} and len(summary["analyses"]["threshold"]) == 4
    assert main(["report", str(out)]) == 0
    html = (out / "report_run.html").read_text()
    assert "Sensitivity analyses" in html and "RCI threshold and SD basis" in html
    # every table printed, its columns wrapped into blocks at 120 characters (then the paths written)
    printed = capsys.readouterr().out.split("== threshold\n")[1].split("\nwrote ")[0]
    assert "realized_fdp" in printed and max(map(len, printed.splitlines())) <= 120
    # bad truth table: exit 2, names the file and the missing column
    pd.DataFrame({"item_id": ["q1"]}).to_parquet(tmp_path / "bad.parquet")
    assert (
        main(
            [
                "sensitivity",
                "k",
                str(v1),
                str(v2),
                "--truth",
                str(tmp_path / "bad.parquet"),
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "bad.parquet" in err and "'changed'" in err


# ------------------------------------------------------------------ Bayesian sensitivity (real MCMC)


@pytest.fixture(scope="module")
def bayes_sim():
    return simulate_pair(300, 10, seed=31)


@pytest.fixture(scope="module")
def bayes_config():
    from bayesrc.bayes import SamplerConfig

    return SamplerConfig(seed=3)  # the defaults a user gets


@pytest.fixture(scope="module")
def bayes_adapted_fit(bayes_sim, bayes_config):
    """The default fit and its sampler adaptation (what ``bayesrc sensitivity`` starts the prior grid's refits from)."""
    from bayesrc.bayes import SelectionConfig, fit, shared_adaptation

    counts = item_counts(bayes_sim.trials_v1, bayes_sim.trials_v2)
    with shared_adaptation() as adaptation:
        res = fit(counts, model="change", config=bayes_config, selection=SelectionConfig(fdr=0.10))
    return res, adaptation


@pytest.fixture(scope="module")
def bayes_fit(bayes_adapted_fit):
    return bayes_adapted_fit[0]


@pytest.mark.slow
def test_fdr_level_sensitivity_from_one_fit(bayes_sim, bayes_fit):
    from bayesrc.sensitivity import fdr_sensitivity

    res = bayes_fit
    assert res.diagnostics.passed
    counts = item_counts(bayes_sim.trials_v1, bayes_sim.trials_v2)
    t = fdr_sensitivity(
        counts, qs=(0.01, 0.05, 0.10, 0.20), thresholds=(0.9, 0.975, 0.99), result=res, truth=bayes_sim.truth
    )
    q = t[t["rule"] == "fdr"].sort_values("level")
    th = t[t["rule"] == "threshold"].sort_values("level")
    # a stricter level selects fewer items, with fewer realized false discoveries
    assert (np.diff(q["detections"]) >= 0).all() and q["detections"].iloc[0] < q["detections"].iloc[-1]
    assert (np.diff(th["detections"]) <= 0).all() and th["detections"].iloc[-1] < th["detections"].iloc[0]
    assert q["realized_fdp"].iloc[0] <= q["realized_fdp"].iloc[-1]
    assert (q["expected_fdp"] <= q["level"] + 1e-12).all()  # the rule's own guarantee
    assert (q["realized_fdp"] <= q["level"] + 0.1).all()
    # the q = 0.10 row is the fit's own selection
    row = q[np.isclose(q["level"], 0.10)].iloc[0]
    assert row["improved"] == res.selection["n_improved"] and row["deteriorated"] == res.selection["n_deteriorated"]
    assert np.allclose(t["error_level"], np.where(t["rule"] == "fdr", t["level"], 1 - t["level"]))


@pytest.mark.slow
def test_prior_grid_moves_the_share_changed_in_the_prior_direction(
    bayes_sim, bayes_config, bayes_adapted_fit, tmp_path
):
    """The default fit reused, moved to a near prior by importance weights (they pass their gate)
    and refitted under a far one (they do not), each refit from the fit's sampler adaptation; the reweighted row
    agrees with a refit, and a refit through a mapper (as on Ray) is the same as here."""
    from bayesrc.sensitivity import prior_sensitivity, write_sensitivity

    bayes_fit, adaptation = bayes_adapted_fit
    assert adaptation  # the default fit adapted well: its refits start from it
    counts = item_counts(bayes_sim.trials_v1, bayes_sim.trials_v2)
    grid = {"sceptical": {"pi_a": 1.0, "pi_b": 9.0}, "default": {}, "eager": {"pi_a": 6.0, "pi_b": 1.0}}
    common = {"result": bayes_fit, "adaptation": adaptation, "config": bayes_config, "truth": bayes_sim.truth}
    t = prior_sensitivity(counts, grid=grid, **common).set_index("prior")
    assert t.loc["default", "pi_mean"] == float(bayes_fit.posterior["posterior"]["pi"].mean())  # the reused fit
    assert t["method"].to_dict() == {"sceptical": "fit", "default": "fit", "eager": "reweighted"}
    assert t["gate_passed"].all() and t.loc["eager", "pareto_k"] <= 0.7 and t.loc["eager", "ess"] >= 400
    assert t.loc["sceptical", "pi_mean"] < t.loc["default", "pi_mean"] < t.loc["eager", "pi_mean"]
    assert t.loc["sceptical", "detections"] <= t.loc["eager", "detections"]
    assert t.loc["default", "pi_a"] == 4.0 and t.loc["eager", "pi_a"] == 6.0
    # the data dominate: the default prior's conclusions are within a few items of the others'
    assert (t["detections"] - t.loc["default", "detections"]).abs().max() <= 0.25 * max(
        t.loc["default", "detections"], 4
    )
    refits = prior_sensitivity(counts, grid={"eager": grid["eager"]}, reweight=False, **common)
    in_process_mapper = lambda fn, tasks: [fn(*task) for task in tasks]  # noqa: E731  (ray_map's contract)
    mapped = prior_sensitivity(
        counts, grid={"eager": grid["eager"]}, reweight=False, mapper=in_process_mapper, **common
    )
    pd.testing.assert_frame_equal(refits, mapped)
    refit = refits.iloc[0]
    assert refit["method"] == "fit" and refit["gate_passed"]
    # pi's posterior SD is ~0.06 here: each Monte Carlo error is ~0.003 at ESS >= 400
    assert abs(t.loc["eager", "pi_mean"] - refit["pi_mean"]) <= 0.015
    assert abs(t.loc["eager", "detections"] - refit["detections"]) <= 2
    assert abs(t.loc["eager", "rci_estimated_fdp"] - refit["rci_estimated_fdp"]) <= 0.03
    written = write_sensitivity({"prior": t.reset_index()}, tmp_path)
    assert (tmp_path / "sensitivity_prior.png").read_bytes()[:4] == b"\x89PNG" and len(written) == 3


@pytest.mark.slow
def test_cli_sensitivity_fdr_and_report(tmp_path):
    sim = simulate_pair(120, 10, seed=32)
    v1, v2, truth = tmp_path / "v1.parquet", tmp_path / "v2.parquet", tmp_path / "truth.parquet"
    save_trials(sim.trials_v1, v1)
    save_trials(sim.trials_v2, v2)
    sim.truth.to_parquet(truth)
    out = tmp_path / "run"
    args = [
        "sensitivity",
        "fdr",
        str(v1),
        str(v2),
        "--truth",
        str(truth),
        "--chains",
        "2",
        "--tune",
        "300",
        "--draws",
        "400",
        "--seed",
        "3",
    ]
    assert main([*args, "--q-grid", "0.05", "0.1", "--out", str(out)]) == 0
    table = pd.read_csv(out / "sensitivity_fdr.csv")
    assert len(table) == 2 + 4 and {"rule", "level", "error_level", "expected_fdp", "realized_fdp"} <= set(
        table.columns
    )
    assert main(["report", str(out)]) == 0
    assert "Bayesian FDR level and posterior threshold" in (out / "report_run.html").read_text()
    assert main([*args, "--q-grid", "1.5", "--out", str(tmp_path / "bad")]) == 2
    assert not (tmp_path / "bad").exists()
