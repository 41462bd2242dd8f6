"""Calibration of the reliable-change classification on data with no change (SPEC 2.1).

No-change data: p_v2 = p_v1 for every item (``pi_change = 0``), K = 10, many items at
floor / ceiling (the generator's wide difficulty spread), independent Bernoulli samples.
"""

from __future__ import annotations

import numpy as np
import pytest

from bayesrc.classical import (
    binomial_s_diff,
    cross_pair,
    flip_metrics,
    icc_1_1,
    icc_1_k,
    mcnemar,
    nominal_rate,
    reliable_change,
    standard_error_of_measurement,
)
from bayesrc.data import item_counts, simulate_pair

N_DATASETS, N_ITEMS = 30, 400
FAST = dict(n_splits=200, n_permutations=50, n_splits_by_k=10, n_null=200)


@pytest.fixture(scope="module")
def no_change():
    out = []
    for s in range(N_DATASETS):
        sim = simulate_pair(N_ITEMS, 10, pi_change=0.0, seed=500 + s)
        assert np.allclose(sim.truth["p_v1"], sim.truth["p_v2"])
        counts = item_counts(sim.trials_v1, sim.trials_v2)
        out.append({m: reliable_change(counts, s_diff=m, seed=s, **FAST) for m in ("reference", "binomial")})
    return out


def _flagged(res) -> int:
    return res.counts["analysable"]["improved"] + res.counts["analysable"]["deteriorated"]


@pytest.mark.parametrize("method", ["reference", "binomial"])
def test_sample_level_null_covers_the_observed_count(no_change, method):
    inside = [
        r[method].null_samples["flagged_p025"] <= _flagged(r[method]) <= r[method].null_samples["flagged_p975"]
        for r in no_change
    ]
    print(
        f"{method}: observed flagged count inside the null's 95% interval in {np.mean(inside):.0%} "
        f"of {len(inside)} no-change datasets"
    )
    assert np.mean(inside) >= 0.9


def test_reference_recipe_is_miscalibrated_and_says_so(no_change):
    rates = np.array([r["reference"].null_samples["rate"] for r in no_change])
    observed = np.array([_flagged(r["reference"]) / r["reference"].counts["analysable"]["n"] for r in no_change])
    print(
        f"reference: null rate {rates.mean():.3f}, observed flag rate {observed.mean():.3f} "
        f"(nominal {nominal_rate(1.96):.3f})"
    )
    assert rates.mean() > 2 * nominal_rate(1.96) and observed.mean() > 2 * nominal_rate(1.96)
    assert rates.mean() == pytest.approx(observed.mean(), rel=0.15)  # the null predicts what the recipe does
    for r in no_change:
        assert any("nominal" in w and "--s-diff binomial" in w for w in r["reference"].warnings)
        d = r["reference"].payload
        assert d["null_samples"]["replicates"] == FAST["n_null"]
        # The direction-asymmetry test counts over the items of the observed counts.
        assert d["direction_asymmetry"]["n_items"] == d["counts"]["analysable"]["n"]


def test_binomial_flags_at_most_seven_percent_of_unchanged_items(no_change):
    flagged = sum(_flagged(r["binomial"]) for r in no_change)
    n = sum(r["binomial"].counts["analysable"]["n"] for r in no_change)
    print(f"binomial: {flagged} of {n} unchanged analysable items flagged ({flagged / n:.3f})")
    assert flagged / n <= 0.07
    assert not any("nominal" in w for r in no_change for w in r["binomial"].warnings)


def test_rci_runs_say_when_nothing_changed_is_not_rejected(no_change):
    """Every RCI run carries the no-change permutation test (rci.json and the summary); on 30
    datasets of identical versions it rejects at 0.10 in at most 8 (expected 3; P(> 8) < 0.002),
    its p-value depends on the data only (the same under both S_diff methods), and where it does
    not reject a run with flags says they may all be chance."""
    p = np.array([r["reference"].no_change_test["p_value"] for r in no_change])
    assert np.sum(p < 0.10) <= 8, p
    for r in no_change:
        assert r["binomial"].no_change_test == r["reference"].no_change_test
        for res in r.values():
            said = any("do not reject that nothing changed" in w for w in res.warnings)
            assert said == (res.no_change_test["p_value"] >= 0.10 and _flagged(res) > 0)
    table = no_change[0]["reference"].summary().set_index("metric")["value"]
    assert table["no-change test p (within-item permutation)"] == p[0]


def test_binomial_s_diff_by_hand():
    # y = 3 of 10 and 6 of 8: p~ = 3.5/11 and 6.5/9
    a, b = 3.5 / 11, 6.5 / 9
    assert binomial_s_diff(3, 10, 6, 8) == pytest.approx(np.sqrt(a * (1 - a) / 10 + b * (1 - b) / 8))
    assert binomial_s_diff(0, 10, 0, 10) > 0  # smoothing: no zero SE at the floor
    assert np.isnan(binomial_s_diff(1, 0, 1, 10))


def test_nan_reliability_never_gives_sem_zero():
    assert np.isnan(standard_error_of_measurement(np.array([0.1, 0.5, 0.9]), float("nan")))
    # Every item at floor or ceiling: no split-half correlation, so no reference S_diff and no class.
    x = np.zeros((30, 10))
    x[15:] = 1.0
    sim = simulate_pair(30, 10, pi_change=0.0, seed=1)
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    counts["correct"][:] = np.stack([x, x], axis=1)
    counts["n_correct"][:] = np.stack([x.sum(1), x.sum(1)], axis=1)
    counts["p"][:] = counts["n_correct"] / 10
    res = reliable_change(counts, n_splits=50, n_permutations=10, n_null=10)
    assert np.isnan(res.sem["v1"]) and np.isnan(res.s_diff)
    assert res.counts["analysable"]["improved"] + res.counts["analysable"]["deteriorated"] == 0


def test_icc_1_k_by_hand():
    x = np.array([[1, 1, 0, 1], [0, 0, 0, 1], [1, 1, 1, 1], [0, 1, 0, 0]], float)
    k = x.shape[1]
    means = x.mean(1)
    msb = k * ((means - x.mean()) ** 2).sum() / (len(x) - 1)
    msw = ((x - means[:, None]) ** 2).sum() / (len(x) * (k - 1))
    assert icc_1_k(x) == pytest.approx((msb - msw) / msb)
    r1 = icc_1_1(x)
    assert icc_1_k(x) == pytest.approx(k * r1 / (1 + (k - 1) * r1))


def test_flip_metrics_by_hand():
    f = flip_metrics(np.array([0.9, 0.6, 0.2, 0.5, np.nan]), np.array([0.4, 0.7, 0.8, 0.6, 0.1]))
    assert (f["n"], f["negative_flips"], f["positive_flips"]) == (4, 1, 2)
    assert f["negative_flip_rate"] == 0.25


def test_cross_pair_is_paired_on_shared_items(sim_pair, sim_pair_b):
    a = reliable_change(item_counts(sim_pair.trials_v1, sim_pair.trials_v2), name="a", **FAST)
    b = reliable_change(item_counts(sim_pair_b.trials_v1, sim_pair_b.trials_v2), name="b", **FAST)
    out = cross_pair(a, b)
    assert out["test"] == "mcnemar"
    ia = a.items.set_index("item_id")
    ib = b.items.set_index("item_id")
    shared = ia.index[~ia["excluded"]].intersection(ib.index[~ib["excluded"]])
    fa = ia.loc[shared, "class"].isin(["improved", "deteriorated"])
    fb = ib.loc[shared, "class"].isin(["improved", "deteriorated"])
    b, c = int((fa & ~fb).sum()), int((~fa & fb).sum())
    ref = mcnemar(b, c)
    assert out["mcnemar"]["b"] == b and out["p_test"] == pytest.approx(ref.p_exact)
    from scipy import stats

    assert ref.p_exact == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue)


def test_shared_seeds_are_detected_and_warned_about():
    from bayesrc.data import input_notes

    sim = simulate_pair(200, 10, seed=3)
    independent = item_counts(sim.trials_v1, sim.trials_v2)
    assert independent.attrs["shared_seeds"]["n_shared"] == 0 and not any(
        "seed" in n for n in input_notes(independent, 6)
    )
    t2 = sim.trials_v2.copy()
    t2["seed"] = sim.trials_v1["seed"].to_numpy()  # the reference study's rule: the same seeds in both versions
    shared = item_counts(sim.trials_v1, t2)
    assert shared.attrs["shared_seeds"]["share"] == 1.0
    assert any("share their seed" in n for n in input_notes(shared, 6))
    res = reliable_change(shared, n_splits=50, n_permutations=10, n_null=10)
    assert any("share their seed" in w for w in res.warnings)


def _exact_no_change_p(y: np.ndarray, n: np.ndarray, strata: np.ndarray) -> tuple[float, float, float]:
    """Independent reference for no_change_test: every outcome of a few items enumerated under the
    product of hypergeometric nulls (scipy's pmf, mean and variance); exact p of each statistic and
    of their minimum p-value."""
    import itertools

    from scipy.stats import hypergeom

    laws = [hypergeom(M=int(n_i.sum()), n=int(y_i.sum()), N=int(n_i[0])) for y_i, n_i in zip(y, n)]
    supports = [
        np.arange(max(0, d.kwds["N"] - (d.kwds["M"] - d.kwds["n"])), min(d.kwds["n"], d.kwds["N"]) + 1) for d in laws
    ]
    rows = []
    for y1 in itertools.product(*supports):
        dev = np.array([v - d.mean() for v, d in zip(y1, laws)])
        var = np.array([d.var() for d in laws])
        t_items = float(np.sum(dev**2 / var))
        t_strata = sum(dev[strata == s].sum() ** 2 / var[strata == s].sum() for s in np.unique(strata))
        rows.append((np.prod([d.pmf(v) for v, d in zip(y1, laws)]), t_items, t_strata, tuple(y1) == tuple(y[:, 0])))
    prob, t_i, t_s, obs = (np.array(c) for c in zip(*rows))
    tol = 1e-9
    p_i = np.array([prob[t_i >= v - tol].sum() for v in t_i])
    p_s = np.array([prob[t_s >= v - tol].sum() for v in t_s])
    m = np.minimum(p_i, p_s)
    return tuple(min(1.0, float(p)) for p in (p_i[obs][0], p_s[obs][0], prob[m <= m[obs][0] + tol].sum()))


@pytest.mark.parametrize(
    "y",
    [
        np.array([[2, 6], [5, 8], [3, 4], [6, 3]]),  # items in stratum 0 moved up together
        np.array([[4, 5], [5, 4], [3, 3], [6, 6]]),  # nothing much
    ],
)
def test_no_change_test_matches_exact_enumeration(y):
    """The Monte Carlo permutation p-values of no_change_test against the exact ones from full
    enumeration (4 items, K = 8 and 9, two strata), within 4 Monte Carlo SEs."""
    from bayesrc.classical.calibration import no_change_test

    n = np.array([[8, 8], [8, 9], [9, 8], [8, 8]])
    strata = np.array([0, 0, 1, 1])
    exact = _exact_no_change_p(y, n, strata)
    b = 20_000
    got = no_change_test(y, n, strata, n_permutations=b, seed=3)
    for key, p in zip(("p_items", "p_strata", "p_value"), exact):
        assert abs(got[key] - p) <= 4 * np.sqrt(p * (1 - p) / b) + 1 / b, (key, got[key], p)


def test_no_change_test_is_calibrated_on_identical_versions_and_has_power():
    """Size: on 400 datasets of identical versions (120 items, K = 10, accuracies from Beta(0.7, 0.7),
    a few invalid responses, 4 strata) the test rejects at 0.10 and 0.05 within 3 binomial SEs of
    those rates. Power: one stratum's items moved up by 1 logit (the others unchanged) is
    rejected at 0.05 in at least 19 of 20 datasets (the default 999 permutations)."""
    from scipy.special import expit, logit

    from bayesrc.classical.calibration import no_change_test

    rng = np.random.default_rng(11)
    strata = np.repeat(np.arange(4), 30)

    def dataset(shift):
        p1 = rng.beta(0.7, 0.7, 120)
        p2 = expit(logit(np.clip(p1, 1e-6, 1 - 1e-6)) + shift * (strata == 0))
        n = 10 - rng.binomial(1, 0.1, (120, 2))
        return np.stack([rng.binomial(n[:, 0], p1), rng.binomial(n[:, 1], p2)], 1), n

    p_null = np.array(
        [no_change_test(*dataset(0.0), strata, n_permutations=199, seed=s)["p_value"] for s in range(400)]
    )
    for a in (0.10, 0.05):
        se = np.sqrt(a * (1 - a) / len(p_null))
        assert abs(np.mean(p_null <= a) - a) <= 3 * se, (a, np.mean(p_null <= a))
    p_moved = [no_change_test(*dataset(1.0), strata, seed=s)["p_value"] for s in range(20)]
    assert np.mean(np.array(p_moved) < 0.05) >= 0.95, p_moved
