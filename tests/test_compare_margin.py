"""``bayesrc compare``: resolution first, the gate with its default margin (pass / fail / inconclusive, exit 0 / 1 / 4).

Three change-model fits with the defaults a user gets (sampler, convergence gate, escalation, the
default margin of 0.02: no ``--rope``) on simulated pairs with known truth: no change on 2,000 items
(pass), a true mean drop of 0.01 on 100 items (inconclusive: the posterior of the mean is too wide
for the margin, and the summary says what would decide it) and a clear deterioration (fail). The
decision rules and the planning figures are checked on posterior draws whose answer is known,
without a fit.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import bayesrc
from bayesrc.classical import rci_detection_probability
from bayesrc.cli import main
from bayesrc.compare import CompareResult
from bayesrc.compare.result import markdown_summary
from bayesrc.compare.rules import (
    margin_evidence,
    p_within_margin,
    require_resolution,
    resolution,
    three_way,
    what_would_decide,
)
from bayesrc.data import item_truth, save_trials, simulate_pair

DEFAULTS = ["--seed", "1"]  # as test_compare_gate.py: the sampler, gate and margin a user gets
DOWN = {d: -2.0 for d in ("physics", "law", "psychology", "economics")}


def drop_truth(n_items: int, drop: float, seed: int, n_changed: int = 10) -> pd.DataFrame:
    """Item truth whose mean change is exactly ``-drop``: ``n_changed`` mid-range items each lose
    ``n_items * drop / n_changed``."""
    t = item_truth(n_items, pi_change=0.0, seed=seed)
    idx = np.argsort(np.abs(t["p_v1"].to_numpy() - 0.5), kind="stable")[:n_changed]
    p2 = t["p_v1"].to_numpy().copy()
    p2[idx] -= n_items * drop / n_changed
    t["p_v2"], t["delta_p"] = p2, p2 - t["p_v1"]
    t.loc[idx, "changed"] = True
    return t


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """name -> (v1 file, v2 file, truth): no change (N = 2,000), a 0.01 drop (N = 100), a clear deterioration
    (N = 60)."""
    root = tmp_path_factory.mktemp("margin")
    sims = {
        "same": simulate_pair(2000, 10, models=("base", "cand"), seed=21, pi_change=0.0),
        "small_drop": simulate_pair(100, 10, models=("base", "cand"), seed=2, truth=drop_truth(100, 0.01, seed=2)),
        "worse": simulate_pair(
            60, 10, models=("base", "cand"), seed=21, pi_change=0.4, domain_shift=DOWN, sigma_delta=1.0
        ),
    }
    out = {}
    for name, sim in sims.items():
        a, b = root / f"{name}-v1.parquet", root / f"{name}-v2.parquet"
        save_trials(sim.trials_v1, a)
        save_trials(sim.trials_v2, b)
        out[name] = (a, b, sim.truth)
    return out


def run_gate(pairs, name: str, out, *extra: str) -> tuple[int, dict, str]:
    a, b, _ = pairs[name]
    rc = main(["compare", str(a), str(b), "--out", str(out), *extra, *DEFAULTS])
    return rc, json.loads((out / "compare.json").read_text()), (out / "summary.md").read_text()


# ------------------------------------------------------------------ end to end (three fits)


@pytest.mark.slow
def test_no_change_on_2000_items_passes(pairs, tmp_path, capsys):
    _, _, truth = pairs["same"]
    assert (truth["delta_p"] == 0).all()
    rc, res, md = run_gate(pairs, "same", tmp_path)
    assert rc == 0, capsys.readouterr()
    assert res["status"] == "ok" and res["decision"] == "pass" and res["exit_code"] == 0
    m = res["margin"]
    assert m["label"] == "no material deterioration" and m["aggregate"]["p_within"] >= 0.9 and m["items"] == []
    assert m["aggregate"]["p_abs_within"] >= 0.9  # two-sided too: no material change either way
    assert "no material deterioration" in md and "(exit 0" in md and "P(mean dp >= -0.02)" in md
    # Noise decomposition against the truth: no item changes, so the item-set part is ~0 and sampling is all of it.
    nd = res["noise"]
    p1, p2 = truth["p_v1"].to_numpy(), truth["p_v2"].to_numpy()
    sampling = np.mean(p1 * (1 - p1) / 10 + p2 * (1 - p2) / 10) / 2000
    assert nd["var_sampling"] == pytest.approx(sampling, rel=0.1)
    assert nd["var_total"] == pytest.approx(sampling, rel=0.2) and abs(nd["var_items"]) < 0.2 * sampling
    assert nd["share_sampling"] > 0.8 and nd["n_half"] == 4000 and 18 <= nd["k_half"] <= 30
    assert "Noise: Of the variance" in md
    # Resolution: 2,000 items at K = 10 resolve the default margin; every interval names the items it covers.
    r = res["resolution"]
    assert r["n_items"] == 2000 and r["margin"] == 0.02 and r["resolves_margin"] is True
    assert r["aggregate_mde"] == pytest.approx((1.2816 + 0.8416) * nd["se"], rel=1e-3) and r["aggregate_mde"] < 0.02
    assert 0.2 < r["item_mde"] < 1 and m.get("would_decide") is None
    assert (
        "Resolution: With 80% power this comparison detects a mean change of" in md and "within what it resolves" in md
    )
    assert (
        "over all 2000 items (change model)" in md
        and f"over the {res['classical']['n_analysable']} analysable items" in md
    )
    loaded = bayesrc.load(tmp_path)
    assert isinstance(loaded, CompareResult) and loaded.decision == "pass" and loaded.exit_code == 0
    loaded.save(tmp_path / "copy")
    assert bayesrc.load(tmp_path / "copy") == loaded
    # The same fit read without a margin is the plain gate's pass (exit 0): nothing flagged, RCI beside it.
    # (One 2,000-item fit for both gates: test_compare_gate.py fits only its small pairs.)
    assert res["found"] is False and res["bayes"]["n_deteriorated"] == 0
    plain = CompareResult({**loaded.payload, "margin": None, "decision": None, "exit_code": None}, loaded.tables)
    assert plain.decision == "pass" and plain.exit_code == 0
    plain_md = markdown_summary(plain)
    assert "no deteriorated items** (exit 0)" in plain_md and "Classical RCI" in plain_md and "ceil(0.6·K)" in plain_md


@pytest.mark.slow
def test_mean_drop_of_001_on_100_items_is_inconclusive(pairs, tmp_path, capsys):
    _, _, truth = pairs["small_drop"]
    assert truth["delta_p"].mean() == pytest.approx(-0.01) and len(truth) == 100
    rc, res, md = run_gate(pairs, "small_drop", tmp_path)
    out = capsys.readouterr().out
    assert rc == 4, out
    assert res["status"] == "ok" and res["decision"] == "inconclusive" and res["exit_code"] == 4
    agg = res["margin"]["aggregate"]
    assert 0.1 < agg["p_within"] < 0.9 and 0.1 < agg["p_abs_within"] < 0.9  # neither side decided, one- or two-sided
    assert "**inconclusive** (exit 4" in md and "neither >= 0.90" in md
    assert "decision: inconclusive (exit 4)" in out
    # The noise decomposition says what would narrow it: at K = 10 and N = 100 sampling dominates.
    nd = res["noise"]
    assert nd["n_items"] == 100 and nd["n_half"] == 200
    # Resolution first: the margin is below what 100 items resolve, and the summary names what would decide it.
    r, w = res["resolution"], res["margin"]["would_decide"]
    assert r["resolves_margin"] is False and r["aggregate_mde"] > 0.02
    assert w["n_items"] > 200 and w["k"] > 20 and w["cheaper"] in ("items", "samples")
    assert w["extra_samples_n"] == (w["n_items"] - 100) * 10 and w["extra_samples_k"] == 100 * (w["k"] - 10)
    assert f"~{w['n_items']} items at K = 10" in md and f"K = {w['k']} samples per item on these 100 items" in md
    assert "is below what it resolves" in md
    assert bayesrc.load(tmp_path).exit_code == 4


@pytest.mark.slow
def test_clear_deterioration_fails(pairs, tmp_path, capsys):
    _, _, truth = pairs["worse"]
    assert truth["delta_p"].mean() < -0.05
    rc, res, md = run_gate(pairs, "worse", tmp_path)
    assert rc == 1, capsys.readouterr()
    m = res["margin"]
    assert res["decision"] == "fail" and m["label"] == "material deterioration"
    assert m["aggregate"]["p_below"] >= 0.9 and m["aggregate"]["p_within"] <= 0.1
    worst = m["items"][0]
    assert worst["bayes_class"] == "deteriorated" and worst["p_within"] <= 0.1
    assert truth.set_index("item_id").loc[worst["item_id"], "delta_p"] < -0.02  # the worst flagged item really dropped
    assert "**material deterioration** (exit 1" in md and worst["item_id"] in md


# ------------------------------------------------------------------ the rules on draws with a known answer


def test_p_within_margin_and_three_way():
    x = np.array([[-0.03], [-0.01], [0.0], [0.05]])
    assert p_within_margin(x, 0.02, "two")[0] == 0.5 and p_within_margin(x, 0.02, "lower")[0] == 0.75
    assert three_way([0.9, 0.95], 0.1) == "pass" and three_way([0.89, 0.95], 0.1) == "inconclusive"
    assert three_way([0.9, 0.1], 0.1) == "fail" and three_way([0.11], 0.1) == "inconclusive"
    with pytest.raises(ValueError, match="side"):
        p_within_margin(x, 0.02, "upper")


def draws(means: np.ndarray, sd: float, n_draws: int = 4000, seed: int = 0) -> np.ndarray:
    """Posterior draws of each item's dp: Normal(mean_i, sd), independent (so M ~ Normal(mean, sd / sqrt(n)))."""
    return np.random.default_rng(seed).normal(means, sd, size=(n_draws, len(means)))


@pytest.mark.parametrize(
    ("mean", "fail_on", "expected"),
    [
        (0.0, "deteriorated", "pass"),  # M ~ N(0, 0.005): inside 0.02 either way
        (-0.05, "deteriorated", "fail"),
        (-0.02, "deteriorated", "inconclusive"),  # half the mass each side of -0.02
        (0.05, "deteriorated", "pass"),  # a material improvement is no deterioration ...
        (0.05, "changed", "fail"),  # ... but is a material change
        (0.05, "aggregate", "pass"),  # non-inferior
        (-0.05, "aggregate", "fail"),  # inferior
    ],
)
def test_aggregate_decisions_with_known_posterior(mean, fail_on, expected):
    dp = draws(np.full(100, mean), sd=0.05)  # sd of M = 0.005
    ev = margin_evidence(
        dp, np.array(["no_change"] * 100), np.arange(100).astype(str), fail_on=fail_on, margin=0.02, q=0.1
    )
    assert ev["decision"] == expected, ev


def test_flagged_items_decide_beside_the_mean():
    means = np.zeros(100)
    means[:3] = [-0.4, -0.3, 0.35]
    dp = draws(means, sd=0.01)
    cls = np.array(["deteriorated", "deteriorated", "improved"] + ["no_change"] * 97, dtype=object)
    ids = np.array([f"q{i}" for i in range(100)])
    det = margin_evidence(dp, cls, ids, fail_on="deteriorated", margin=0.02, q=0.1)
    # the improvement is not weighed
    assert det["decision"] == "fail" and [it["item_id"] for it in det["items"]] == ["q0", "q1"]
    assert det["aggregate"]["p_within"] == 1.0  # the mean (-0.0035) alone would pass
    assert margin_evidence(dp, cls, ids, fail_on="aggregate", margin=0.02, q=0.1)["decision"] == "pass"
    small = margin_evidence(
        draws(np.r_[-0.021, np.zeros(99)], sd=0.01), cls, ids, fail_on="deteriorated", margin=0.02, q=0.1
    )
    # flagged, change on the margin
    assert small["decision"] == "inconclusive" and "the least within: q0" in small["reasons"][1]
    up = margin_evidence(
        dp,
        np.where(np.arange(100) == 2, "improved", "no_change").astype(object),
        ids,
        fail_on="deteriorated",
        margin=0.02,
        q=0.1,
    )
    assert up["decision"] == "pass" and up["reasons"][1] == "no item flagged deteriorated"


def test_result_round_trip_and_old_payloads(tmp_path):
    dp = draws(np.full(50, -0.01), sd=0.1)
    ev = margin_evidence(
        dp, np.array(["no_change"] * 50), np.arange(50).astype(str), fail_on="deteriorated", margin=0.02, q=0.1
    )
    assert ev["decision"] == "inconclusive"
    items = pd.DataFrame(
        {"item_id": ["a"], "domain": ["law"], "bayes_class": ["no_change"], "p_improve": [0.1], "p_deteriorate": [0.1]}
    )
    bayes = {
        "n_improved": 0,
        "n_deteriorated": 0,
        "expected_false": 0.0,
        "aggregate": {"mean": -0.01, "lo90": -0.03, "hi90": 0.01, "p_below_0": 0.8},
        "diagnostics": {},
    }
    classical = {
        "improved": 0,
        "deteriorated": 0,
        "n_analysable": 1,
        "n_items": 50,
        "z": 1.96,
        "min_valid_rule": "6",
        "aggregate": {"mean_delta": -0.01, "ci95": [-0.03, 0.01]},
    }
    noise = {
        "se": 0.01,
        "share_sampling": 0.7,
        "share_items": 0.3,
        "n_items": 50,
        "k": 10.0,
        "n_half": 100,
        "k_half": 29,
        "k_factor_half": 2.9,
        "var_sampling": 7e-5,
        "var_items": 3e-5,
    }
    ev["would_decide"] = what_would_decide(ev["aggregate"]["mean"], ev["aggregate"]["sd"], 0.02, ev["side"], 0.1, noise)
    reso = resolution(noise, 0.2, 1.96, 0.1, 0.02)
    res = CompareResult.from_decision(
        ("v1", "v2"), "deteriorated", 0.1, False, "ok", bayes, classical, items, margin=ev, noise=noise, resolution=reso
    )
    assert res.exit_code == 4 and res.decision == "inconclusive"
    s = res.summary().set_index("metric")["value"]
    assert s["decision"] == "inconclusive" and s["exit code"] == 4 and s["K to halve it"] == 29
    assert (
        s["would decide: N at this K"] == ev["would_decide"]["n_items"]
        and s["detectable mean change (80% power)"] == reso["aggregate_mde"]
    )
    # every interval names the items it covers
    assert s["mean dp, 90% CrI (posterior; all 1 items)"] == "-0.010 (-0.030 to +0.010)"
    assert s["mean dp, 95% CI (classical; the 1 analysable items)"] == "-0.010 (-0.030 to +0.010)"
    res.save(tmp_path / "r")
    back = bayesrc.load(tmp_path / "r")
    assert back == res and back.exit_code == 4 and back.margin == res.margin
    assert "❔ **inconclusive** (exit 4; margin 0.02)" in (tmp_path / "r" / "summary.md").read_text()
    assert "Resolution: With 80% power" in (tmp_path / "r" / "summary.md").read_text()
    old = CompareResult(
        {k: v for k, v in res.payload.items() if k not in ("decision", "margin", "noise", "resolution")},
        {"items": items},
    )
    assert old.decision == "pass" and old.exit_code == 0 and old.margin is None  # compare.json from before the margin
    assert (
        "Noise:" not in markdown_summary(old)
        and "Why:" not in markdown_summary(old)
        and "Resolution:" not in markdown_summary(old)
    )
    failed = CompareResult.from_decision(
        ("v1", "v2"), "deteriorated", 0.1, False, "failed", bayes, classical, items, margin=ev
    )
    assert failed.exit_code == 3 and failed.decision == "undecided" and failed.payload["decision"] == "undecided"
    assert failed.summary().set_index("metric")["value"]["decision"].startswith("undecided")


def test_bad_margin_exits_2_and_writes_nothing(tmp_path, capsys):
    sim = simulate_pair(20, 5, models=("base", "cand"), seed=1)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    save_trials(sim.trials_v1, a)
    save_trials(sim.trials_v2, b)
    out = tmp_path / "out"
    cases = [
        (["--rope", "1.5"], "field '--rope'"),
        (["--min-delta", "0"], "field '--rope'"),
        (["--margin", "nan"], "field '--rope'"),
        (["--rope", "two"], "field '--rope'"),
        (["--rope", "0.02", "--q", "0.6"], "field '--q'"),
        (["--q", "0.6"], "field '--q'"),  # the default margin needs q < 0.5
    ]
    for argv, msg in cases:
        capsys.readouterr()
        assert main(["compare", str(a), str(b), "--out", str(out), *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("bayesrc: error:") and msg in err and len(err.splitlines()) == 1, err
    assert not out.exists()


# ----------------------------------------------------------- resolution and what would decide, against known truth


def test_aggregate_mde_is_detected_with_its_power():
    """A true mean change equal to the MDE, estimated with the SE the MDE was computed from, is detected
    (one-sided, level q) in 80% of replicates."""
    r = resolution({"se": 0.01, "n_items": 400, "k": 10.0}, 0.2, 1.96, 0.1, 0.02)
    est = np.random.default_rng(3).normal(r["aggregate_mde"], 0.01, 200_000)
    assert np.mean(est / 0.01 > 1.2816) == pytest.approx(0.8, abs=0.005)
    assert (
        r["resolves_margin"] is False
        and resolution({"se": 0.005, "n_items": 400, "k": 10.0}, 0.2, 1.96, 0.1, 0.02)["resolves_margin"] is True
    )


def test_item_mde_is_flagged_with_its_power():
    r = resolution({"se": 0.01, "n_items": 400, "k": 10.0}, 0.2, 1.96, 0.1, 0.02)
    d = r["item_mde"]
    flagged = lambda x: rci_detection_probability(np.array([0.5 - x / 2]), np.array([0.5 + x / 2]), 10, 0.2)[0]  # noqa: E731
    assert flagged(d) >= 0.8 > flagged(d - 1e-6)  # the smallest change flagged with 80% power
    # by brute force: simulated binomial pairs at that change, flagged when the observed change exceeds z S_diff
    rng = np.random.default_rng(0)
    y1, y2 = rng.binomial(10, 0.5 - d / 2, 400_000), rng.binomial(10, 0.5 + d / 2, 400_000)
    assert np.mean((y2 - y1) / 10 > 1.96 * 0.2 + 1e-12) == pytest.approx(flagged(d), abs=0.003)


@pytest.mark.parametrize(("mean", "side"), [(-0.01, "lower"), (-0.035, "lower"), (0.012, "two"), (0.03, "two")])
def test_what_would_decide_decides_with_its_power(mean, side):
    """If the mean is what the posterior says, N' items (or K' samples) give a posterior that decides it with 80% power:
    replicate studies at N' whose estimates scatter with the SD N' gives and whose posteriors have that SD."""
    nd = {"n_items": 100, "k": 10.0, "var_sampling": 1.0e-4, "var_items": 0.05e-4}
    sd = float(np.sqrt(nd["var_sampling"] + nd["var_items"]))  # the posterior SD, taken to scale as the observed SE
    w = what_would_decide(mean, sd, 0.02, side, 0.1, nd)
    for var_new in (
        (nd["var_sampling"] + nd["var_items"]) * 100 / w["n_items"],
        (nd["var_sampling"] * 10 / w["k"] + nd["var_items"]),
    ):
        s_new = np.sqrt(var_new)
        assert s_new <= w["sd_needed"] * (1 + 1e-9)  # N' and K' (rounded up) reach the SD it needs
        est = np.random.default_rng(1).normal(mean, w["sd_needed"], 200_000)
        edge = -0.02 if side == "lower" else np.sign(mean) * 0.02
        decided = np.abs(est - edge) / w["sd_needed"] >= 1.2816
        assert np.mean(decided) == pytest.approx(0.8, abs=0.01)
    assert w["extra_samples_n"] == (w["n_items"] - 100) * 10 and w["extra_samples_k"] == 100 * (w["k"] - 10)
    assert w["cheaper"] == ("samples" if w["extra_samples_k"] <= w["extra_samples_n"] else "items")


def test_what_would_decide_says_when_nothing_practical_would():
    nd = {"n_items": 100, "k": 10.0, "var_sampling": 1e-4, "var_items": 1e-4}
    assert what_would_decide(-0.02, 0.01, 0.02, "lower", 0.1, nd) is None  # the mean on the margin's edge
    w = what_would_decide(-0.005, 0.014, 0.02, "lower", 0.1, nd)
    # item-set noise alone is too wide for any K
    assert w["k"] is None and w["extra_samples_k"] is None and w["cheaper"] == "items"


def test_a_pass_needs_the_margin_resolved():
    """A posterior inside the margin passes only where the comparison could have shown it: the same draws, an
    unresolved margin, are inconclusive, and what would decide it follows the resolution's requirement."""
    dp = draws(np.zeros(100), sd=0.05)  # M ~ N(0, 0.005): inside 0.02
    ev = margin_evidence(
        dp, np.array(["no_change"] * 100), np.arange(100).astype(str), fail_on="deteriorated", margin=0.02, q=0.1
    )
    assert ev["decision"] == "pass"
    nd = {"se": 0.015, "n_items": 100, "k": 10.0, "var_sampling": 2.25e-4, "var_items": 0.0}
    unresolved, resolved = resolution(nd, 0.2, 1.96, 0.1, 0.02), resolution(nd | {"se": 0.009}, 0.2, 1.96, 0.1, 0.02)
    assert require_resolution(ev, resolved) is ev
    out = require_resolution(ev, unresolved)
    assert out["decision"] == "inconclusive" and "cannot show a change within it" in out["reasons"][-1]
    fail = margin_evidence(
        draws(np.full(100, -0.05), sd=0.05),
        np.array(["no_change"] * 100),
        np.arange(100).astype(str),
        fail_on="deteriorated",
        margin=0.02,
        q=0.1,
    )
    assert require_resolution(fail, unresolved)["decision"] == "fail"  # a deterioration shown stays shown
    w = what_would_decide(
        out["aggregate"]["mean"], out["aggregate"]["sd"], 0.02, "lower", 0.1, nd, mde=unresolved["aggregate_mde"]
    )
    assert w["variance_factor"] == pytest.approx((unresolved["aggregate_mde"] / 0.02) ** 2)
    assert (
        resolution(nd | {"se": nd["se"] / np.sqrt(w["variance_factor"])}, 0.2, 1.96, 0.1, 0.02)["resolves_margin"]
        is True
    )
