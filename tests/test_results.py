"""Typed results (bayesrc.results): exact round trips per class, bayesrc.load of what the
CLI writes, the counts NetCDF, and a notebook-style session on the Python API."""

from __future__ import annotations

import html
import json

import numpy as np
import pandas as pd
import pytest

import bayesrc
from bayesrc.classical import RCIRun
from bayesrc.power import PowerReport
from bayesrc.sensitivity import SensitivityTable
from bayesrc.switch import SwitchResult


@pytest.fixture(scope="module")
def small_pair():
    from bayesrc.data import item_counts, simulate_pair

    sim = simulate_pair(300, 10, models=("v1", "v2"), seed=5)
    return sim, item_counts(sim.trials_v1, sim.trials_v2)


@pytest.fixture(scope="module")
def rci_run(small_pair):
    from bayesrc.classical import analyse_pairs

    _, counts = small_pair
    return analyse_pairs({"p": counts}, n_splits=100, n_permutations=100)


@pytest.fixture(scope="module")
def bayes_fit(small_pair, rci_run):
    from bayesrc.bayes import SamplerConfig, fit

    _, counts = small_pair
    return fit(counts, versions=("v1", "v2"), model="betabinom", config=SamplerConfig(seed=2), rci=rci_run["p"])


def _roundtrip(res, tmp_path):
    again = type(res).from_dict(json.loads(json.dumps(res.to_dict())), posterior=getattr(res, "posterior", None))
    assert again == res
    res.save(tmp_path / "r")
    loaded = bayesrc.load(tmp_path / "r")
    assert type(loaded) is type(res) and loaded == res
    assert loaded.to_dict() == res.to_dict()
    assert repr(loaded).startswith(f"<{type(res).__name__}") and len(repr(loaded)) < 300
    assert "<table" in loaded._repr_html_()
    return loaded


def test_rci_run_roundtrip_and_typed_accessors(rci_run, small_pair, tmp_path):
    sim, counts = small_pair
    loaded = _roundtrip(rci_run, tmp_path)
    pair = loaded["p"]
    assert pair.versions == ("v1", "v2") and pair.z == 1.96
    c = pair.counts["analysable"]
    assert (
        pair.n_flagged
        == c["improved"] + c["deteriorated"]
        == int(pair.items["class"].isin(["improved", "deteriorated"]).sum())
    )
    s = loaded.summary()
    assert list(s.columns) == ["pair", "metric", "value"] and s.set_index("metric").loc[
        "S_diff", "value"
    ] == pytest.approx(pair.s_diff)
    assert pair.plot_rci().axes  # a Figure with axes


def test_reliable_change_returns_the_pair_load_gives_back(small_pair, tmp_path):
    """One class for a pair in memory and on disk: reliable_change's PairResult equals its saved and
    reloaded copy, every accessor and table included."""
    from bayesrc.classical import PairResult, RCIRun, reliable_change

    _, counts = small_pair
    pair = reliable_change(counts, n_splits=50, n_permutations=50, n_null=10, name="p")
    RCIRun.from_pairs({"p": pair}).save(tmp_path / "r")
    loaded = bayesrc.load(tmp_path / "r")["p"]
    assert isinstance(pair, PairResult) and loaded == pair
    for name in (
        "versions",
        "params",
        "s_diff",
        "s_diff_all",
        "min_detectable",
        "sem",
        "r_xx",
        "reliability",
        "aggregate",
        "effect_sizes",
        "k_for_r80",
        "null_samples",
        "warnings",
    ):
        assert getattr(loaded, name) == getattr(pair, name), name
    for name in (
        "to_frame",
        "summary",
        "classification_table",
        "reliability_table",
        "difficulty_table",
        "stratified_table",
        "reliability_vs_k_table",
    ):
        assert getattr(loaded, name)().equals(getattr(pair, name)()), name


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # Spearman-Brown of the undefined r
def test_undefined_reliability_reads_as_nan_in_memory_and_from_disk(tmp_path):
    """rci.json stores an undefined S_diff as null; the float accessors give NaN, before and after saving."""
    from bayesrc.classical import RCIRun, reliable_change
    from bayesrc.data import item_counts, simulate_pair

    sim = simulate_pair(40, 4, seed=9)
    # every item at 0.5 in v1: no split-half reliability
    flat = sim.trials_v1.assign(is_correct=sim.trials_v1["k"] % 2 == 0)
    pair = reliable_change(item_counts(flat, sim.trials_v2), n_splits=50, n_permutations=20, n_null=0, name="flat")
    RCIRun.from_pairs({"flat": pair}).save(tmp_path / "r")
    for p in (pair, bayesrc.load(tmp_path / "r")["flat"]):
        assert p.payload["s_diff"] is None and p.payload["sem"]["v1"] is None
        assert np.isnan(p.s_diff) and np.isnan(p.min_detectable) and np.isnan(p.sem["v1"]) and np.isnan(p.r_xx["v1"])
    # The report says what is undefined instead of raising on it (no domain test either: chi2 null).
    from bayesrc.report import build_report

    assert pair.payload["domain"]["chi2"] is None
    text = build_report(tmp_path / "r", fmt="md")["flat"].read_text()
    assert "χ² = n/a, p = n/a" in text


def test_unknown_keys_flow_through_load_and_save(rci_run, tmp_path):
    d = rci_run.to_dict()
    d["pairs"]["p"]["null_samples"] = {"improved": [1, 2, 3]}  # a key another analysis version adds
    d["new_block"] = {"warnings": ["w"]}
    res = RCIRun.from_dict(d)
    res.save(tmp_path / "r")
    back = bayesrc.load(tmp_path / "r" / "rci.json")
    assert back.payload["new_block"] == {"warnings": ["w"]} and back["p"].payload["null_samples"]["improved"] == [
        1,
        2,
        3,
    ]
    assert back == res


def test_nan_is_stored_as_null_and_still_round_trips(tmp_path):
    res = PowerReport({"pairs": [{"pair": "a vs b", "delta": float("nan"), "n": np.int64(3)}], "unresolved": []})
    assert res.payload["pairs"][0]["delta"] is None and res.payload["pairs"][0]["n"] == 3
    _roundtrip(res, tmp_path)


def test_bayes_fit_roundtrip_with_posterior_and_forest_plot(bayes_fit, tmp_path):
    res = bayes_fit
    assert res.diagnostics.thresholds["min_ess"] == 400.0  # the default gate
    loaded = _roundtrip(res, tmp_path)
    assert loaded.posterior is not None and loaded.items.equals(res.items)
    for name in ("items", "discordant"):  # the Parquet files still carry the status (issue 3)
        assert pd.read_parquet(tmp_path / "r" / f"{name}.parquet").attrs["status"] == res.status
    gt = loaded.gate_table().set_index("diagnostic")
    assert gt.loc["min bulk ESS", "requirement"] == "≥ 400" and gt.loc["max R-hat", "requirement"] == "≤ 1.01"
    assert res.status == "ok" and gt.loc["gate", "value"] == "passed"
    # per-item intervals, ESS and MCSE come from arviz_stats: check them against an independent computation
    dp = res.item_draws()["dp"].values.reshape(-1, len(res.items))
    lo, hi = np.quantile(dp, [0.05, 0.95], axis=0)
    assert np.allclose(res.items["dp_lo90"], lo, atol=1e-3) and np.allclose(res.items["dp_hi90"], hi, atol=1e-3)
    sd = dp.std(0, ddof=1)
    ok = res.items["dp_ess_bulk"] > 50
    assert np.allclose(res.items["dp_mcse"][ok], sd[ok] / np.sqrt(res.items["dp_ess_bulk"][ok]), rtol=0.35)
    pc = loaded.plot_forest(n=10)
    assert pc.get_viz("figure") is not None


def test_a_fit_runs_in_float64_and_leaves_the_callers_jax_precision(bayes_fit):
    import jax
    import jax.numpy as jnp

    assert bayes_fit.posterior["posterior"]["logit_mu"].dtype == np.float64  # x64 inside the fit ...
    assert not jax.config.jax_enable_x64 and jnp.zeros(1).dtype == jnp.float32  # ... scoped to it


def test_fit_uses_the_given_classical_result(bayes_fit, rci_run):
    pair = rci_run["p"]
    assert bayes_fit.crosscheck["rci_n_flagged"] == pair.n_flagged
    assert bayes_fit.params["rci_params"]["n_splits"] == 100  # the user's settings, not the fit's defaults
    merged = bayes_fit.items.merge(pair.items[["item_id", "class"]], on="item_id")
    assert (merged["rci_class"] == merged["class"]).all()


def test_switch_result_roundtrip(tmp_path):
    from bayesrc.switch import analyse_switch, simulate_switch

    sim = simulate_switch(3, 20, seed=5)
    res = analyse_switch(sim.data, n_boot=200, backends=())
    assert isinstance(res, SwitchResult) and res.benchmarks == ["sim"]
    _roundtrip(res, tmp_path)
    assert len(res.effects()) == 3 * 2 and res.plot_effects().axes  # off-diagonal cells


def test_analyse_switch_returns_the_result_load_gives_back(tmp_path):
    """One class for a switch analysis in memory and on disk: analyse_switch's SwitchResult equals its
    saved and reloaded copy, every accessor included, and its matrices are the analysis's own."""
    from bayesrc.datasets import SWITCH_CELLS, path
    from bayesrc.switch import analyse_switch, fit_additive, load_switch, switch_effects

    data = load_switch(path(SWITCH_CELLS))  # two benchmarks of 9 models: correlation defined
    res = analyse_switch(data, n_boot=100, backends=())
    res.save(tmp_path / "r")
    loaded = bayesrc.load(tmp_path / "r")
    assert isinstance(res, SwitchResult) and loaded == res
    for name in ("benchmarks", "settings", "correlation", "failed_fits"):
        assert getattr(loaded, name) == getattr(res, name), name
    assert set(res.correlation) == {"alpha", "beta", "n_models"} and -1 <= res.correlation["alpha"] <= 1
    assert loaded.summary().equals(res.summary()) and res.summary()["models"].tolist() == [9, 9]
    for b in res.benchmarks:
        assert loaded.models(b) == res.models(b) == data.models[b]
        for name in (
            "effects",
            "cells",
            "factors",
            "factor_table",
            "intervals",
            "cell_means",
            "effects_matrix",
            "residual_matrix",
        ):
            assert getattr(loaded, name)(b).equals(getattr(res, name)(b)), name
        eff = switch_effects(data.select(b), n_boot=100)
        off = ~np.eye(len(data.models[b]), dtype=bool)
        assert np.array_equal(res.effects_matrix(b).to_numpy(float)[off], eff["delta"].to_numpy()[off], equal_nan=True)
        ls = fit_additive(eff["delta"], se=eff["se"], base_cov=eff["base_cov"])
        pd.testing.assert_frame_equal(res.intervals(b), ls.intervals())


def test_sensitivity_table_roundtrip(small_pair, tmp_path):
    from bayesrc.sensitivity import run_sensitivity_analyses

    _, counts = small_pair
    tables = run_sensitivity_analyses(counts, ("threshold",), seed=0)
    res = SensitivityTable.from_tables(tables)
    loaded = _roundtrip(res, tmp_path)
    assert (tmp_path / "r" / "sensitivity_threshold.csv").is_file()
    assert loaded["threshold"]["improved"].tolist() == tables["threshold"]["improved"].tolist()


def test_counts_netcdf_roundtrip(small_pair, tmp_path):
    from bayesrc.data import open_counts, save_counts

    _, counts = small_pair
    counts = counts.assign_attrs(unmatched={"v2": ["x1"]})
    back = open_counts(save_counts(counts, tmp_path / "counts.nc"))
    assert back.identical(counts)
    assert back.attrs["unmatched"] == {"v2": ["x1"]}


def test_load_refuses_what_is_not_a_result(tmp_path):
    (tmp_path / "notes.json").write_text("{}")
    with pytest.raises(bayesrc.InputError, match="not a bayesrc result file"):
        bayesrc.load(tmp_path / "notes.json")
    with pytest.raises(bayesrc.InputError, match="no result files"):
        bayesrc.load(tmp_path)


def test_notebook_display_shows_the_headline_rows_and_folds_the_rest(small_pair):
    """A result in a notebook (``_repr_html_``) shows its headline rows and every warning, a long text as a numbered
    note below the table, and the whole summary folded below them (the quick start showed ~80 rows at once)."""
    import re

    from bayesrc.classical import analyse_pairs

    _, counts = small_pair
    run = analyse_pairs({"a": counts, "b": counts}, seed=0, n_splits=50, n_permutations=50)
    table = run.summary()
    shown, folded = run._repr_html_().split("<details>")
    shown_metrics = re.findall(r"<td>[ab]</td>\s*<td>([^<]+)</td>", shown)
    assert sorted(set(shown_metrics)) == sorted({*run.headline_metrics, "warning"} & set(table["metric"]))
    assert {"improved", "deteriorated", "items"} <= set(shown_metrics) and len(shown_metrics) < len(table) / 2
    assert f"all {len(table)} rows" in folded and folded.count("<tr>") == len(table)
    cells = re.findall(r"<td>([^<]*)</td>", shown)
    assert max(map(len, cells)) <= 60  # long texts are notes below, each whole
    warnings = table.loc[table["metric"] == "warning", "value"].tolist()
    assert all(html.escape(w) in shown for w in warnings if len(w) > 60)


def test_notebook_session(small_pair, bayes_fit, tmp_path):
    """What a notebook user does: run, summary(), plot, save, bayesrc.load, equal (Python API only)."""
    from bayesrc.classical import reliable_change

    sim, counts = small_pair
    pair = reliable_change(counts, "v1", "v2", n_splits=100, n_permutations=100, name="p")
    table = pair.summary()
    assert {"metric", "value"} <= set(table.columns)
    res = bayes_fit
    s = res.summary().set_index("metric")["value"]
    assert s["status"] in ("ok", "failed") and s["improved"] == res.selection["n_improved"]
    html = res._repr_html_()
    assert "<table" in html and "betabinom" in html and "gate ok" in html
    forest = res.plot_forest(n=15).get_viz("figure")
    assert forest.axes
    res.save(tmp_path / "fit")
    again = bayesrc.load(tmp_path / "fit")
    assert again == res
    assert again.summary().equals(res.summary())
    # against the simulation's truth: posterior mean dp tracks the true change, and the 90% intervals
    # cover the true dp of about 90% of the items (the beta-binomial has no point mass at 0, so
    # unchanged items are covered, not classified)
    truth = sim.truth.set_index("item_id").loc[again.items["item_id"], "delta_p"].to_numpy()
    assert np.corrcoef(again.items["dp_mean"], truth)[0, 1] > 0.6
    cover = np.mean((again.items["dp_lo90"] <= truth) & (truth <= again.items["dp_hi90"]))
    assert 0.85 <= cover <= 0.97


# --- every output kind through bayesrc.load, produced by the code that writes it (issue 29) ------
def test_every_payload_carries_its_format_and_files_without_it_still_load(rci_run, tmp_path):
    from bayesrc.results import FORMAT

    assert rci_run.payload["format"] == FORMAT == 1
    rci_run.save(tmp_path / "r")
    on_disk = json.loads((tmp_path / "r" / "rci.json").read_text())
    assert next(iter(on_disk)) == "format" and on_disk["format"] == 1
    del on_disk["format"]  # a file written before the key existed
    (tmp_path / "r" / "rci.json").write_text(json.dumps(on_disk))
    old = bayesrc.load(tmp_path / "r")
    assert old.payload["format"] == 1 and old == rci_run


def test_power_report_from_leaderboard_roundtrip(tmp_path):
    from bayesrc.power import leaderboard_report

    rng = np.random.default_rng(0)
    res = leaderboard_report({m: (rng.random(400) < p).astype(float) for m, p in (("a", 0.7), ("b", 0.62), ("c", 0.6))})
    assert isinstance(res, PowerReport)
    loaded = _roundtrip(res, tmp_path)
    assert loaded.pairs_table()["pair"].tolist() == ["a vs b", "b vs c"]


def test_leaderboard_report_returns_the_report_load_gives_back(tmp_path):
    """One class for a leaderboard resolution in memory and on disk: leaderboard_report's PowerReport
    (with its noise rows) equals its saved and reloaded copy, the pairs.csv and power.md it renders
    included; an infinite N* (δ = 0) or q (N* = 0), null in power.json, reads back as infinite."""
    from bayesrc.data import item_counts, simulate_pair
    from bayesrc.power import leaderboard_noise, leaderboard_report, scores_from_counts

    sim = simulate_pair(300, 6, seed=4, models=("v1", "v2"))
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    scores, domain, _ = scores_from_counts(counts)
    rep = leaderboard_report(scores, domain.to_numpy())
    rep = rep.with_noise(leaderboard_noise(counts, rep))
    rep.save(tmp_path / "r")
    loaded = bayesrc.load(tmp_path / "r")
    assert isinstance(rep, PowerReport) and loaded == rep and len(rep.noise) == 1
    assert loaded.info == rep.info and loaded.noise == rep.noise and loaded.to_markdown() == rep.to_markdown()
    for name in ("ranking", "to_frame", "summary", "pairs_table", "noise_table"):
        value = getattr(loaded, name)
        assert (value if name == "ranking" else value()).equals(
            getattr(rep, name) if name == "ranking" else getattr(rep, name)()
        ), name
    assert rep.with_noise([]).noise == [] and "noise" not in rep.with_noise([]).payload

    x = np.tile([1.0, 0.0], 50)
    # all vs tie_a: N* finite; tie_a vs tie_b: δ = 0
    edge = leaderboard_report({"tie_a": x, "tie_b": 1 - x, "all": np.ones(100)})
    edge.save(tmp_path / "e")
    for r in (edge, bayesrc.load(tmp_path / "e")):
        (tie,) = [p for p in r.pair_records() if p["delta"] == 0]
        assert tie["n_star"] is None and tie["q"] == 0
        row = r.to_frame().set_index("pair").loc["tie_a vs tie_b"]
        assert np.isinf(row["n_star"]) and np.isinf(row["n_star_anytime"]) and row["q"] == 0
        assert "| ∞ |" in r.to_markdown()
    steep = leaderboard_report({"a": np.ones(100), "b": np.zeros(100)})  # sigma_D = 0: N* = 0, q infinite
    assert steep.payload["pairs"][0]["q"] is None and np.isinf(steep.to_frame()["q"].iloc[0])


def test_plan_roundtrip(tmp_path):
    from bayesrc.power.planner import KNPlan, plan_k_n

    plan = plan_k_n(0.35, k_grid=(4,), n_grid=(200,), replicates=1, seed=3, n_splits=20, cache_dir=tmp_path / "cache")
    assert isinstance(plan, KNPlan) and plan.payload["recommendation"] == plan.recommend()
    loaded = _roundtrip(plan, tmp_path)
    assert loaded.cells.equals(plan.cells) and loaded.to_frame().equals(plan.to_frame())
    assert (tmp_path / "r" / "plan.md").read_text().startswith("# K x N plan")


def test_compare_result_roundtrip(tmp_path):
    from bayesrc.bayes import SamplerConfig
    from bayesrc.compare import CompareResult, compare
    from bayesrc.data import item_counts, simulate_pair

    sim = simulate_pair(40, 10, models=("v1", "v2"), seed=4)
    res = compare(item_counts(sim.trials_v1, sim.trials_v2), config=SamplerConfig(seed=1))  # the defaults a user gets
    assert isinstance(res, CompareResult) and res.fit is not None
    loaded = _roundtrip(res, tmp_path)
    assert loaded.exit_code == res.exit_code and loaded.versions == ("v1", "v2") and loaded.fit is None
    assert loaded.items.equals(res.items) and (tmp_path / "r" / "summary.md").read_text().startswith(
        "### bayesrc compare"
    )


def test_truth_result_roundtrip(tmp_path):
    from bayesrc.data import letter_shift_truth, write_exact_run
    from bayesrc.truth import TruthResult, truth

    t = letter_shift_truth(30, seed=3)
    runs = []
    for v, col in (("v1", "p_v1"), ("v2", "p_v2")):
        rows = [
            (
                r.item_id,
                r.domain,
                x,
                getattr(r, col) if x == r.correct_answer else (1 - getattr(r, col)) / 2,
                x == r.correct_answer,
            )
            for r in t.itertuples()
            for x in "ABC"
        ]
        runs.append(
            write_exact_run(
                tmp_path / v,
                pd.DataFrame(rows, columns=["item_id", "domain", "answer", "prob", "is_correct"]),
                label=f"sim-{v}",
            )
        )
    res = truth(*runs, k=5, replicates=2, seed=1, methods=())
    assert isinstance(res, TruthResult) and res.per_replicate is not None and res.items is not None
    res.save(tmp_path / "r")
    loaded = bayesrc.load(tmp_path / "r" / "truth.json")
    assert (
        type(loaded) is TruthResult
        and loaded == res
        and loaded.to_dict() == json.loads((tmp_path / "r" / "truth.json").read_text())
    )
    assert TruthResult.from_dict(loaded.to_dict(), per_replicate=loaded.per_replicate, items=loaded.items) == res
    assert loaded.summary()["method"].tolist() == list(res.methods) and "<table" in loaded._repr_html_()


def test_a_run_directory_opens_every_result_in_it(rci_run, tmp_path):
    from bayesrc.power import leaderboard_report

    rci_run.save(tmp_path)
    rng = np.random.default_rng(1)
    leaderboard_report({m: (rng.random(200) < p).astype(float) for m, p in (("a", 0.7), ("b", 0.6))}).save(tmp_path)
    found = bayesrc.load(tmp_path)
    assert set(found) == {"rci.json", "power.json"} and found["rci.json"] == rci_run


def test_exact_run_roundtrip(tmp_path):
    """``bayesrc collect --engine exact``'s run directory (here the bundled one it wrote) and one from
    write_exact_run."""
    from bayesrc.data import CollectedRun, load_exact, write_exact_run
    from bayesrc.datasets import path

    bundled = bayesrc.load(path("exact_gemma/q4"))
    assert (
        isinstance(bundled, CollectedRun)
        and bundled.engine == "exact"
        and sorted(bundled.tables) == ["dist", "items_exact"]
    )
    loaded = _roundtrip(bundled, tmp_path / "bundled")
    # still an exact run
    assert load_exact(tmp_path / "bundled" / "r").items.equals(load_exact(path("exact_gemma/q4")).items)
    dist = pd.DataFrame(
        {
            "item_id": ["q1", "q1"],
            "domain": ["d", "d"],
            "answer": ["A", "B"],
            "prob": [0.7, 0.3],
            "is_correct": [True, False],
        }
    )
    written = bayesrc.load(write_exact_run(tmp_path / "toy", dist, label="toy") / "dist.parquet")
    assert (
        written.label == "toy"
        and written.payload["format"] == "bayesrc-run/1"
        and loaded.payload["format"] == "bayesrc-run/1"
    )
    _roundtrip(written, tmp_path / "toy-copy")


def test_collected_trials_run_roundtrip(gemma, gemma_bank4, tmp_path):
    """``bayesrc collect``'s run directory (two items, K = 2 on the real model) opens with bayesrc.load."""
    from conftest import GEMMA_CARD

    from bayesrc.collect import collect
    from bayesrc.data import CollectedRun, load_trials

    run = collect(GEMMA_CARD, gemma_bank4, tmp_path / "run", k=2, model=gemma, items_range=(0, 2)).run_dir
    loaded = bayesrc.load(run)
    assert isinstance(loaded, CollectedRun) and loaded.status == "complete" and loaded.engine == "fast"
    assert (
        list(loaded.tables) == ["trials"]
        and len(loaded.tables["trials"]) == 4
        and loaded.payload["format"] == "bayesrc-run/1"
    )
    _roundtrip(loaded, tmp_path / "copy")
    assert len(load_trials(tmp_path / "copy" / "r" / "trials.parquet")) == 4  # the copy is still a trials run


@pytest.mark.parametrize(
    ("attrs", "field"),
    [
        ({"bayesrc_json_attrs": '["sources"]', "sources": '["a", "b"'}, "sources"),
        ({"bayesrc_json_attrs": "{"}, "bayesrc_json_attrs"),
    ],
)
def test_counts_netcdf_whose_json_attribute_is_cut_is_one_named_line(attrs, field, tmp_path):
    """Found at 1,000 fuzzed counts files (benchmarks/faults.py, 2 tracebacks): an attribute that
    save_counts stores as JSON, cut short, was a JSONDecodeError; now one line naming the file and attribute."""
    from bayesrc.data import item_counts, open_counts, save_counts, simulate_pair
    from bayesrc.errors import InputError

    sim = simulate_pair(10, 5, seed=0)
    path = save_counts(item_counts(sim.trials_v1, sim.trials_v2), tmp_path / "counts.nc")
    ds = open_counts(path)
    ds.attrs = attrs
    ds.to_netcdf(tmp_path / "bad.nc", engine="h5netcdf")
    with pytest.raises(InputError, match=f"bad.nc: field '{field}': attribute is not the JSON bayesrc wrote"):
        open_counts(tmp_path / "bad.nc")
