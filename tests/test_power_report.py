"""Resolution report: real greedy Llama pair, simulated leaderboards, bad input."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import data_path
from scipy import stats

from bayesrc.data import item_counts, load_counts, simulate_pair
from bayesrc.errors import InputError
from bayesrc.power import (
    VERDICT_PARADIGMS,
    anytime_inflation,
    leaderboard_report,
    mde,
    multiplicity_inflation,
    paired_variance,
    resolution_report,
    scores_from_counts,
)

Z = stats.norm.isf(0.025) + stats.norm.ppf(0.8)


def _read_greedy(path):
    """Independent reader: item_id -> (domain, is_correct) straight from the JSONL."""
    out = {}
    with open(path) as fh:
        for line in fh:
            r = json.loads(line)
            out[str(r["item_id"])] = (r["domain"], r["is_correct"])
    return out


@pytest.fixture(scope="module")
def llama_greedy():
    g1 = data_path("greedy", "llama3-8b_greedy.jsonl")
    g2 = data_path("greedy", "llama3.1-8b_greedy.jsonl")
    return g1, g2


def test_llama_greedy_report_with_domain_clustering(llama_greedy):
    g1, g2 = llama_greedy
    ds = load_counts([g1, g2], greedy=True, on_unmatched="drop")
    scores, domain, info = scores_from_counts(ds)
    assert info["aggregate"] == "single" and info["items_dropped_missing"] == 3
    pr = resolution_report(
        scores["llama3.1-8b"], scores["llama3-8b"], domain.to_numpy(), names=("llama3.1-8b", "llama3-8b")
    )

    # Independent recount from the raw files.
    a, b = _read_greedy(g2), _read_greedy(g1)
    both = [i for i in a if i in b and a[i][1] is not None and b[i][1] is not None]
    xa = np.array([a[i][1] for i in both], float)
    xb = np.array([b[i][1] for i in both], float)
    assert pr.n == len(both) == 1997
    assert pr.b == int(((xa == 1) & (xb == 0)).sum()) and pr.c == int(((xa == 0) & (xb == 1)).sum())
    assert pr.b + pr.c == 329  # SPEC 2: 329 greedy flips
    assert pr.delta == pytest.approx(xa.mean() - xb.mean())
    assert pr.rho == pytest.approx(np.corrcoef(xa, xb)[0, 1])
    # sigma_D^2 = paired_variance at the observed margins and rho; q is the squared Wald statistic / K^2
    assert pr.sigma_d**2 == pytest.approx(paired_variance(pr.p_a, pr.p_b, pr.rho))
    t = np.sqrt(pr.n) * pr.delta / pr.sigma_d
    assert pr.q == pytest.approx(t**2 / Z**2)
    assert pr.n_star == pytest.approx(pr.n / pr.q)
    assert pr.mde == pytest.approx(mde(pr.n, (pr.p_a + pr.p_b) / 2, pr.rho))
    assert pr.p_exact == pytest.approx(stats.binomtest(pr.b, pr.b + pr.c).pvalue)

    # Published-data facts: +2.4 pp, significant by McNemar, yet not resolved (q < 1).
    assert pr.delta == pytest.approx(0.0235, abs=0.0005)
    assert pr.p_exact < 0.05 and pr.p_asymptotic < 0.05
    assert 0.8 < pr.q < 0.9 and 2200 < pr.n_star < 2450
    assert pr.mde > abs(pr.delta)

    # Domain clustering: 4 domains of ~500 items; ICC by an independent one-way ANOVA.
    d = pd.DataFrame({"d": xa - xb, "g": [a[i][0] for i in both]})
    groups = [grp["d"].to_numpy() for _, grp in d.groupby("g")]
    n_i = np.array([len(x) for x in groups])
    msb = sum(len(x) * (x.mean() - d["d"].mean()) ** 2 for x in groups) / (len(groups) - 1)
    msw = sum(((x - x.mean()) ** 2).sum() for x in groups) / (len(d) - len(groups))
    n0 = (len(d) - (n_i**2).sum() / len(d)) / (len(groups) - 1)
    icc = max(0.0, (msb - msw) / (msb + (n0 - 1) * msw))
    assert pr.n_clusters == 4 and pr.icc == pytest.approx(icc)
    assert pr.design_effect == pytest.approx(1 + (len(d) / 4 - 1) * icc)
    v = pr.verdicts
    assert set(v) == set(VERDICT_PARADIGMS)
    assert v["fixed_n"] is False and v["clustered"] is False and v["anytime"] is False
    frame = pr.to_frame()
    assert list(frame["paradigm"]) == list(VERDICT_PARADIGMS)
    assert frame.set_index("paradigm").loc["anytime", "inflation"] == pytest.approx(anytime_inflation(1997))
    s = pr.summary()
    assert len(s) == 1 and s["resolved_fixed_n"].iloc[0] == False  # noqa: E712


def _leaderboard_scores(n=3000, seed=0):
    """Five models on shared items with known accuracies (common item difficulty -> positive rho)."""
    rng = np.random.default_rng(seed)
    easy = rng.normal(size=n)
    acc = {"m1": 0.80, "m2": 0.72, "m3": 0.715, "m4": 0.60, "m5": 0.598}
    out = {}
    for name, p in acc.items():
        thr = stats.norm.ppf(1 - p) * np.sqrt(2)
        out[name] = ((easy + rng.normal(size=n)) > thr).astype(float)
    return pd.DataFrame(out)


def test_leaderboard_adjacent_pairs_and_step_procedures():
    scores = _leaderboard_scores()
    clusters = np.repeat(np.arange(10), 300)
    lb = leaderboard_report(scores, clusters)
    ranked = lb.ranking["model"].tolist()
    assert lb.ranking["accuracy"].is_monotonic_decreasing
    assert ranked == sorted(scores.columns, key=lambda c: -scores[c].mean())
    frame = lb.to_frame()
    assert len(frame) == 4 and (frame["delta"] >= 0).all()
    assert frame["pair"].tolist() == [f"{a} vs {b}" for a, b in zip(ranked[:-1], ranked[1:])]
    # q = T^2 / K^2 for each pair; the large true gaps (8 and 11.5 pp) resolve, tiny ones (0.2-0.5 pp) do not
    for row in frame.itertuples():
        a, b = row.pair.split(" vs ")
        d = scores[a] - scores[b]
        assert row.q == pytest.approx(len(d) * d.mean() ** 2 / d.var(ddof=0) / Z**2)
    big = frame["pair"].isin(["m1 vs m2", "m3 vs m4", "m3 vs m5"])
    assert frame["resolved_fixed_n"].tolist() == big.tolist()
    # stress tests only remove resolved pairs; Holm >= Bonferroni, BH >= Holm
    for col in ("bonferroni", "holm", "bh", "anytime", "clustered"):
        assert not (frame[f"resolved_{col}"] & ~frame["resolved_fixed_n"]).any()
    assert (frame["resolved_holm"] >= frame["resolved_bonferroni"]).all()
    assert (frame["resolved_bh"] >= frame["resolved_holm"]).all()
    summ = lb.summary().set_index("paradigm")
    assert summ.loc["fixed_n", "unresolved"] == 2 and summ.loc["fixed_n", "pairs"] == 4
    assert (summ["unresolved"] >= 2).all()
    # Bonferroni over the 4 adjacent pairs
    q = frame["q"].to_numpy()
    assert frame["resolved_bonferroni"].tolist() == list(q >= multiplicity_inflation(4))
    # Holm by hand: step-down on sorted q
    order = np.argsort(-q)
    ok, holm = True, np.zeros(4, bool)
    for step, i in enumerate(order, start=1):
        ok = ok and q[i] >= multiplicity_inflation(4, "holm", rank=step)
        holm[i] = ok
    assert frame["resolved_holm"].tolist() == holm.tolist()
    md = lb.to_markdown()
    assert f"| {frame['pair'].iloc[0]} |" in md and "Unresolved pairs per paradigm" in md
    json.dumps(lb.to_dict(), default=str)


def test_k_sample_majority_and_mean_scores():
    sim = simulate_pair(400, 10, seed=3)
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    maj, _, info = scores_from_counts(counts)
    assert info["aggregate"] == "majority" and set(np.unique(maj.to_numpy())) <= {0.0, 1.0}
    y = counts["n_correct"].values
    assert np.array_equal(maj.to_numpy(), (y > 5).astype(float))  # K = 10: strict majority, ties -> 0
    mean, _, info = scores_from_counts(counts, aggregate="mean")
    assert not info["binary"] and np.allclose(mean.to_numpy(), y / 10)
    with pytest.raises(InputError, match="binary"):
        resolution_report(mean.iloc[:, 0], mean.iloc[:, 1])
    pr = resolution_report(mean.iloc[:, 0], mean.iloc[:, 1], binary=False)
    assert pr.b is None and pr.p_exact is None
    assert pr.p_paired_t == pytest.approx(stats.ttest_rel(mean.iloc[:, 0], mean.iloc[:, 1]).pvalue)
    assert pr.mde == pytest.approx(Z * pr.sigma_d / np.sqrt(pr.n))


def test_zero_delta_is_reported_not_divided():
    x = np.array([1, 0, 1, 0, 1, 1, 0, 0], float)
    y = np.array([0, 1, 1, 0, 1, 0, 1, 0], float)  # b = c = 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pr = resolution_report(x, y)
    assert pr.delta == 0 and np.isinf(pr.n_star) and pr.q == 0.0
    assert all(v is False or v is None for v in pr.verdicts.values())
    assert any("N* is infinite" in n for n in pr.notes)
    d = json.loads(__import__("bayesrc.io", fromlist=["dumps_json"]).dumps_json(pr.to_dict()))
    assert d["n_star"] is None and d["verdicts"]["fixed_n"] == "unresolved"


@pytest.mark.parametrize(
    "a,b,match",
    [
        ([1, 0, 1], [1, 0], "same items"),
        ([1, 0, 2], [1, 0, 1], "binary"),
        ([1, 0, 0.5], [1, 0, 1], "binary"),
        ([1, np.nan, 1], [1, 0, 1], "missing"),
        ([1], [0], "at least 2"),
        (["x", "y"], [0, 1], "numbers"),
    ],
)
def test_bad_scores_raise_input_error(a, b, match):
    with pytest.raises(InputError, match=match):
        resolution_report(a, b)


def test_bad_parameters_in_report():
    x, y = np.array([1, 0, 1, 1.0]), np.array([0, 0, 1, 0.0])
    with pytest.raises(ValueError, match="between 0 and 1"):
        resolution_report(x, y, alpha=0)
    with pytest.raises(InputError, match="cluster labels"):
        resolution_report(x, y, clusters=["a", "b"])
    with pytest.raises(ValueError, match="adjacent pairs"):
        leaderboard_report({"a": x, "b": y, "c": x}, comparisons=1)


def test_step_procedures_on_the_q_scale():
    from bayesrc.power import multiplicity_verdicts

    infl = lambda method, k: float(multiplicity_inflation(4, method, rank=k))  # noqa: E731
    # Holm rescues rank 2 (level alpha/3), Bonferroni (alpha/4) does not.
    y2 = (infl("holm", 2) + infl("bonferroni", 1)) / 2
    q = np.array([0.5, y2, 10.0, 0.4])  # input order is not rank order
    for method, expect in (("bonferroni", [False, False, True, False]), ("holm", [False, True, True, False])):
        ranks, _, ok = multiplicity_verdicts(q, 4, method)
        assert ok.tolist() == expect
    assert ranks.tolist() == [3, 2, 1, 4]
    # BH step-up: rank 2 fails its own step but rank 3 passes, so ranks 1-3 are resolved.
    x3 = infl("bh", 3) + 1e-3
    x2 = (x3 + infl("bh", 2)) / 2
    assert x3 <= x2 < infl("bh", 2)
    q = np.array([10.0, x2, x3, 0.5])
    assert multiplicity_verdicts(q, 4, "bh")[2].tolist() == [True, True, True, False]
    assert multiplicity_verdicts(q, 4, "holm")[2].tolist() == [True, False, False, False]


def test_leaderboard_mapping_of_unequal_lengths_is_an_input_error():
    with pytest.raises(InputError, match="same items"):
        leaderboard_report({"a": [1, 0, 1], "b": [1, 0]})
