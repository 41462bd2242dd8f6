"""Hand-computed small cases and known-truth checks of the classical formulas."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from bayesrc.classical import (
    classify_rci,
    difficulty_bins,
    domain_contingency,
    empirical_null,
    exclusion_reasons,
    icc_1_1,
    k_for_reliability,
    reliability_vs_k,
    reliable_change,
    spearman_brown,
    split_half_reliability,
    standard_error_of_difference,
    standard_error_of_measurement,
)
from bayesrc.data import item_counts, trials_from_accuracy


def test_split_half_k2_by_hand():
    # K = 2: every split puts one sample in each half, so r_half = corr(col0, col1) = 2/3.
    x = np.array([[1, 1], [1, 0], [0, 0], [0, 0], [1, 1]], float)
    rel = split_half_reliability(x, n_splits=50, seed=0)
    assert rel.r_xx == pytest.approx(2 * (2 / 3) / (1 + 2 / 3))  # 0.8
    assert rel.ci == pytest.approx((0.8, 0.8))


def test_split_half_odd_k_halves_differ_by_one():
    # Item rows constant across samples -> perfect reliability for any split sizes.
    x = np.repeat(np.array([[1], [0], [1], [0], [1]], float), 3, axis=1)
    rel = split_half_reliability(x, n_splits=20, seed=1)
    assert rel.r_xx == pytest.approx(1.0) and rel.k == 3


def test_icc_by_hand():
    x = np.array([[1, 1], [0, 0], [1, 0]], float)
    # MSB = 2 * (0.25 + 0.25 + 0) / 2 = 0.5; MSW = 0.5 / 3; ICC = (1/3) / (2/3)
    assert icc_1_1(x) == pytest.approx(0.5)


def _icc_oneway_by_groups(groups: list[list[float]]) -> float:
    """ICC(1,1) from the one-way ANOVA table written out group by group (Shrout & Fleiss 1979;
    unbalanced n0 of Snedecor & Cochran), independent of bayesrc's array code."""
    a = len(groups)
    big_n = sum(len(g) for g in groups)
    grand = sum(sum(g) for g in groups) / big_n
    ssb = sum(len(g) * (sum(g) / len(g) - grand) ** 2 for g in groups)
    ssw = sum((x - sum(g) / len(g)) ** 2 for g in groups for x in g)
    msb, msw = ssb / (a - 1), ssw / (big_n - a)
    n0 = (big_n - sum(len(g) ** 2 for g in groups) / big_n) / (a - 1)
    return (msb - msw) / (msb + (n0 - 1) * msw)


def test_icc_balanced_and_unbalanced_match_the_anova_table():
    rng = np.random.default_rng(0)
    x = (rng.random((50, 6)) < rng.random((50, 1))).astype(float)
    assert icc_1_1(x) == pytest.approx(_icc_oneway_by_groups([list(r) for r in x]), rel=1e-12)
    x_nan = x.copy()
    x_nan[:5, 5] = np.nan  # unbalanced: five items with 5 of 6 samples
    x_nan[7, :4] = np.nan
    groups = [[v for v in r if not np.isnan(v)] for r in x_nan]
    assert icc_1_1(x_nan) == pytest.approx(_icc_oneway_by_groups(groups), rel=1e-12)
    assert icc_1_1(x_nan) != pytest.approx(icc_1_1(x), rel=1e-6)  # the missing cells do change it


def test_sem_sdiff_rci_by_hand():
    sem = standard_error_of_measurement(np.array([0.0, 0.5, 1.0]), 0.84)
    assert sem == pytest.approx(0.5 * 0.4)  # SD (ddof=1) = 0.5
    assert standard_error_of_difference(0.3, 0.4) == pytest.approx(0.5)
    rci = np.array([2.0, -2.0, 1.0, 2.6])
    assert list(classify_rci(rci, 1.96)) == ["improved", "deteriorated", "no_change", "improved"]
    assert list(classify_rci(rci, 2.58)) == ["no_change", "no_change", "no_change", "improved"]


def test_exclusion_rules():
    reasons = exclusion_reasons(
        np.array([5, 10, 10, 10, 6]),
        np.array([10, 10, 10, 10, 6]),
        np.array([0.0, 1.0, 0.0, 0.0, 0.5]),
        np.array([0.0, 1.0, 0.0, 0.1, 0.5]),
        min_valid=6,
    )
    assert list(reasons) == ["low_valid", "floor_ceiling", "floor_ceiling", "", ""]


def test_spearman_brown_and_k_needed():
    assert spearman_brown(0.5) == pytest.approx(2 / 3)
    assert spearman_brown(0.5, 3.0) == pytest.approx(0.75)
    # The paper: r = .973 at K = 10 -> K = 2 suffices for .80 and K = 3 for .90.
    assert k_for_reliability(0.973, 10, 0.8) == 2
    assert k_for_reliability(0.973, 10, 0.9) == 3
    # Round-trip: the returned K reaches the target and K - 1 does not.
    for r, t in [(0.6, 0.8), (0.75, 0.9), (0.9, 0.95)]:
        k = k_for_reliability(r, 10, t)
        assert spearman_brown(r, k / 10) >= t - 1e-12 > spearman_brown(r, (k - 1) / 10)
    assert k_for_reliability(1.0, 10, 0.9) is None


def test_domain_chi2_by_hand():
    dom = np.array(["a"] * 60 + ["b"] * 60, dtype=object)
    cls = np.array(
        ["improved"] * 10
        + ["no_change"] * 20
        + ["deteriorated"] * 30
        + ["improved"] * 20
        + ["no_change"] * 20
        + ["deteriorated"] * 20,
        dtype=object,
    )
    obs = np.array([[10, 20, 30], [20, 20, 20]], float)
    exp = obs.sum(1, keepdims=True) * obs.sum(0, keepdims=True) / obs.sum()
    chi2 = ((obs - exp) ** 2 / exp).sum()
    out = domain_contingency(dom, cls)
    assert out["chi2"] == pytest.approx(chi2)
    assert out["cramers_v"] == pytest.approx(np.sqrt(chi2 / (120 * 1)))
    assert out["per_domain"]["a"]["ratio"] == pytest.approx(10 / 30)
    assert out["dof"] == 2


def test_domain_chi2_drops_empty_class():
    dom = np.array(["a", "a", "b", "b"], dtype=object)
    cls = np.array(["improved", "no_change", "no_change", "no_change"], dtype=object)
    out = domain_contingency(dom, cls)  # no 'deteriorated' column: still a valid 2x2 test
    assert np.isfinite(out["chi2"]) and out["dof"] == 1


def test_difficulty_bins_edges():
    p = np.array([0.0, 0.1, 0.2, 0.3, 0.8, 1.0, 0.6])
    cls = np.array(["improved"] * 4 + ["deteriorated", "deteriorated", "no_change"], dtype=object)
    bins = difficulty_bins(p, cls)
    assert bins["n"].tolist() == [2, 2, 0, 1, 2]
    assert bins["improved"].tolist() == [2, 2, 0, 0, 0]
    assert bins["deteriorated"].tolist() == [0, 0, 0, 0, 2]


def test_null_has_no_changes_when_versions_equal():
    p = np.linspace(0, 1, 11).repeat(20)
    out = empirical_null(p, p, 0.9, 0.9, n_permutations=50, seed=0)
    assert out["improved_p95"] == 0 and out["deteriorated_p95"] == 0


def test_null_is_symmetric_and_calibrated_on_pure_noise():
    # Same true accuracies in both versions: observed counts are null-like.
    rng = np.random.default_rng(5)
    p_true = rng.beta(0.5, 0.5, 3000)
    p1 = rng.binomial(10, p_true) / 10
    p2 = rng.binomial(10, p_true) / 10
    out = empirical_null(p1, p2, 0.9, 0.9, n_permutations=400, seed=1)
    assert out["improved_mean"] == pytest.approx(out["deteriorated_mean"], rel=0.1)


def test_reliability_matches_known_truth():
    # For Bernoulli samples with item accuracies p_i, the split-half reliability of the
    # K-sample mean is Var(p) / (Var(p) + E[p(1 - p)] / K) (classical test theory).
    rng = np.random.default_rng(2)
    p = expit(rng.normal(0, 1.5, 4000))
    k = 10
    x = (rng.random((p.size, k)) < p[:, None]).astype(float)
    truth = p.var() / (p.var() + np.mean(p * (1 - p)) / k)
    assert split_half_reliability(x, n_splits=300, seed=0).r_xx == pytest.approx(truth, abs=0.01)
    by_k = reliability_vs_k(x, n_splits=100, seed=0)
    for kk, rel in by_k.items():
        assert rel.r_xx == pytest.approx(p.var() / (p.var() + np.mean(p * (1 - p)) / kk), abs=0.02)


def test_pipeline_reproducible_and_seed_sensitive(sim_pair):
    ds = item_counts(sim_pair.trials_v1, sim_pair.trials_v2)
    a = reliable_change(ds, seed=7, n_splits=200, n_permutations=200)
    b = reliable_change(ds, seed=7, n_splits=200, n_permutations=200)
    c = reliable_change(ds, seed=8, n_splits=200, n_permutations=200)
    assert a == b  # payload and item table
    assert a.reliability["v1"] != c.reliability["v1"]  # other random split halves: other r_xx, interval, spread


def test_variable_k_and_missing_responses():
    rng = np.random.default_rng(3)
    n = 300
    p1 = rng.random(n)
    ids = [f"i{i}" for i in range(n)]
    ks = np.where(np.arange(n) % 3 == 0, 7, 10)  # K differs between items
    t1 = trials_from_accuracy(ids, ["d"] * n, p1, model="a", k=ks, missing_rate=0.1, seed=1)
    t2 = trials_from_accuracy(ids, ["d"] * n, np.clip(p1 + 0.2, 0, 1), model="b", k=10, missing_rate=0.1, seed=2)
    ds = item_counts(t1, t2)
    assert set(np.unique(ds["n_trials"].sel(version="a"))) == {7, 10}
    res = reliable_change(ds, n_splits=100, n_permutations=100)
    assert res.exclusions["low_valid"] > 0  # some K = 7 items lose more than one answer
    items = res.to_frame()
    assert (items.loc[items.reason == "low_valid", "class"] == "excluded").all()
    assert np.isfinite(res.s_diff) and 0 < res.r_xx["v1"] < 1
