"""Closed forms of paper 002 against its analytic results and independent formulas."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import optimize, stats

from bayesrc.errors import InputError
from bayesrc.power import (
    adjusted_alpha,
    anytime_boundary,
    anytime_inflation,
    anytime_required_n,
    cluster_icc,
    clustered_required_n,
    design_effect,
    mcnemar,
    mde,
    multiplicity_inflation,
    paired_variance,
    required_n,
    resolution_ratio,
    shortcut_constant,
    shortcut_ratio,
)

Z = stats.norm.isf(0.025) + stats.norm.ppf(0.8)


# --- paper figures ----------------------------------------------------------------


def test_bonferroni_over_40_comparisons_inflates_n_star_by_2_11():
    infl = multiplicity_inflation(40, "bonferroni")
    independent = ((stats.norm.isf(0.05 / 80) + stats.norm.ppf(0.8)) / Z) ** 2
    assert infl == pytest.approx(independent, rel=1e-12)
    assert infl == pytest.approx(2.11, abs=0.005)
    # Holm and BH coincide with Bonferroni at their first step.
    assert multiplicity_inflation(40, "holm") == pytest.approx(infl)
    assert multiplicity_inflation(40, "bh") == pytest.approx(infl)


def test_design_effect_mmlu_pro_subjects_and_clustered_n_star():
    sizes = np.full(14, 12032 / 14)
    de = design_effect(0.036, sizes)
    assert de == pytest.approx(1 + (12032 / 14 - 1) * 0.036)
    assert de == pytest.approx(31.9, abs=0.05)
    # The paper's 31.5 is the same formula with the unrounded ICC (~0.0355).
    assert design_effect(0.0355, sizes) == pytest.approx(31.5, abs=0.05)
    # N* = 432 becomes ~13,600 items (13,782 with ICC 0.036; paper 13,621 with DE 31.5).
    assert 432 * de == pytest.approx(13600, rel=0.02)
    # clustered_required_n is N* x DE for any margins.
    pa, pb, rho = 0.62, 0.58, 0.5
    assert clustered_required_n(pa, pb, rho, 0.036, sizes) == pytest.approx(required_n(pa, pb, rho) * de)
    # Unequal clusters: the size-weighted mean cluster size is larger.
    uneven = np.array([100, 300, 600])
    assert design_effect(0.1, uneven, mean="size_weighted") > design_effect(0.1, uneven)


def test_hellaswag_boundary_case_exact_vs_asymptotic_mcnemar():
    # Paper 002: delta = +0.46 pp on N = 10,042 -> asymptotic p = 0.049, exact p = 0.054.
    b, c = 296, 250
    assert (b - c) / 10042 == pytest.approx(0.0046, abs=5e-5)
    res = mcnemar(b, c)
    assert res.p_asymptotic == pytest.approx(0.049, abs=0.001)
    assert res.p_exact == pytest.approx(0.054, abs=0.001)
    assert res.p_value == res.p_exact
    assert mcnemar(b, c, exact=False).p_value == res.p_asymptotic


# --- Lemma 1: the Cohen's h x (1 - rho) shortcut ----------------------------------


@pytest.mark.parametrize("p", [0.3, 0.5, 0.7, 0.9])
@pytest.mark.parametrize("rho", [0.0, 0.4, 0.8])
def test_shortcut_ratio_tends_to_one_half(p, rho):
    deltas = np.array([0.02, 0.005, 0.001])
    ratio = shortcut_ratio(p, deltas, rho)
    assert np.all(np.abs(ratio - 0.5) < np.array([0.02, 2e-3, 1e-4]))
    assert abs(ratio[-1] - 0.5) < abs(ratio[0] - 0.5)


@pytest.mark.parametrize("rho", [-0.3, 0.0, 0.3, 0.6, 0.9])
def test_shortcut_second_order_constant_is_one_third_at_half(rho):
    d = np.array([1e-2, 1e-3])
    c_num = (shortcut_ratio(0.5, d, rho) - 0.5) / d**2
    assert c_num[-1] == pytest.approx(1 / 3, abs=1e-4)
    assert shortcut_constant(0.5, rho) == pytest.approx(1 / 3)


@pytest.mark.parametrize("p,rho", [(0.7, 0.0), (0.7, 0.5), (0.9, 0.4), (0.2, 0.8)])
def test_lemma_constant_matches_numerics_away_from_half(p, rho):
    d = 1e-3
    c_num = (shortcut_ratio(p, d, rho) - 0.5) / d**2
    assert c_num == pytest.approx(shortcut_constant(p, rho), rel=1e-3, abs=1e-3)


def test_shortcut_ratio_is_independent_of_alpha_and_power():
    assert shortcut_ratio(0.6, 0.05, 0.3, alpha=0.01, power=0.95) == pytest.approx(shortcut_ratio(0.6, 0.05, 0.3))


# --- N*, MDE, q against independent formulas --------------------------------------


def test_paired_variance_equals_discordance_minus_delta_squared():
    rng = np.random.default_rng(3)
    pa = rng.uniform(0.2, 0.8, 50)
    pb = rng.uniform(0.2, 0.8, 50)
    rho = rng.uniform(0.0, 0.3, 50)
    # independent: from the joint table, Var(D) = p10 + p01 - (p10 - p01)^2
    p11 = pa * pb + rho * np.sqrt(pa * (1 - pa) * pb * (1 - pb))
    p10, p01 = pa - p11, pb - p11
    assert np.allclose(paired_variance(pa, pb, rho), p10 + p01 - (p10 - p01) ** 2)


def test_required_n_formula_vectorised_and_q():
    pa = np.array([0.55, 0.62, 0.80])
    pb = np.array([0.50, 0.60, 0.70])
    rho = np.array([0.0, 0.5, 0.3])
    var = pa * (1 - pa) + pb * (1 - pb) - 2 * rho * np.sqrt(pa * (1 - pa) * pb * (1 - pb))
    expect = (Z * np.sqrt(var) / (pa - pb)) ** 2
    assert np.allclose(required_n(pa, pb, rho), expect)
    assert np.allclose(required_n(pb, pa, rho), expect)  # symmetric in the sign of delta
    assert np.allclose(resolution_ratio(1000, pa, pb, rho), 1000 / expect)
    assert np.allclose(resolution_ratio(1000, pa, pb, rho, inflation=2.0), 500 / expect)
    # a stricter design needs more items
    assert np.all(required_n(pa, pb, rho, alpha=0.01, power=0.9) > expect)


def test_mde_inverts_required_n():
    n = np.array([200, 1000, 12032])
    p = np.array([0.4, 0.7, 0.85])
    rho = np.array([0.0, 0.5, 0.7])
    m = mde(n, p, rho)
    assert np.all(np.diff(mde(np.array([100, 1000, 10000]), 0.5, 0.3)) < 0)  # more items, smaller MDE
    assert np.allclose(required_n(p + m / 2, p - m / 2, rho), n, rtol=1e-6)
    # small-effect approximation K sigma_D(p, p, rho) / sqrt(n)
    approx = Z * np.sqrt(2 * p * (1 - p) * (1 - rho) / n)
    assert m[-1] == pytest.approx(approx[-1], rel=0.02)


def test_delta_zero_gives_infinite_n_star_without_division_by_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (divide by zero) would fail here
        ns = required_n(np.array([0.6, 0.6]), np.array([0.6, 0.5]), 0.3)
        q = resolution_ratio(5000, 0.6, 0.6, 0.3)
        res = mcnemar(0, 0)
    assert np.isinf(ns[0]) and np.isfinite(ns[1])
    assert q == 0.0
    assert res.p_exact == 1.0 and res.p_asymptotic == 1.0 and res.statistic == 0.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: required_n(1.2, 0.5, 0.0),
        lambda: required_n(0.0, 0.5, 0.0),
        lambda: required_n(0.5, -0.1, 0.0),
        lambda: paired_variance(0.5, 1.0, 0.2),
        lambda: mde(100, 1.0, 0.0),
        lambda: required_n(0.6, 0.5, 1.5),
        lambda: required_n(0.55, 0.45, 0.95),  # beyond the Frechet bound (0.818)
        lambda: required_n(0.6, 0.5, 0.0, alpha=1.5),
        lambda: shortcut_ratio(0.5, 0.0, 0.0),
        lambda: multiplicity_inflation(0),
        lambda: multiplicity_inflation(10, "sidak"),
        lambda: mcnemar(-1, 3),
        lambda: mcnemar(2.5, 3),
        lambda: design_effect(0.1, [0, 10]),
    ],
)
def test_bad_parameters_raise_value_error_naming_the_field(call):
    with pytest.raises(ValueError) as err:
        call()
    assert isinstance(err.value, InputError)  # the CLI prints it as one line
    assert "field" in str(err.value)


# --- McNemar against scipy ----------------------------------------------------------


def test_mcnemar_vectorised_matches_scipy():
    b = np.array([0, 3, 10, 40, 188, 7])
    c = np.array([5, 3, 25, 20, 141, 0])
    res = mcnemar(b, c)
    exact = [stats.binomtest(int(x), int(x + y), 0.5).pvalue for x, y in zip(b, c)]
    assert np.allclose(res.p_exact, exact)
    chi = [stats.chi2.sf((x - y) ** 2 / (x + y), 1) for x, y in zip(b, c)]
    assert np.allclose(res.p_asymptotic, chi)
    cc = mcnemar(b, c, correction=True)
    assert np.all(cc.p_asymptotic >= res.p_asymptotic - 1e-15)


# --- multiplicity steps, ICC, anytime-valid -------------------------------------------


def test_holm_and_bh_steps():
    ranks = np.arange(1, 6)
    assert np.allclose(adjusted_alpha(5, "holm", 0.05, ranks), 0.05 / np.array([5, 4, 3, 2, 1]))
    assert np.allclose(adjusted_alpha(5, "bh", 0.05, ranks), 0.05 * ranks / 5)
    assert np.allclose(adjusted_alpha(5, "bonferroni", 0.05, ranks), 0.01)
    infl = multiplicity_inflation(5, "bh", rank=ranks)
    assert np.all(np.diff(infl) < 0) and infl[-1] == pytest.approx(1.0)


def test_cluster_icc_recovers_a_known_icc():
    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(200), 50)
    icc_true = 0.2
    y = rng.normal(0, np.sqrt(icc_true), 200)[g] + rng.normal(0, np.sqrt(1 - icc_true), g.size)
    assert cluster_icc(y, g) == pytest.approx(icc_true, abs=0.04)
    assert cluster_icc(rng.normal(size=1000), np.repeat(np.arange(10), 100)) < 0.02
    assert np.isnan(cluster_icc([0.0, 1.0, 1.0], ["a", "a", "a"]))


def test_normal_mixture_boundary_is_tightest_at_the_horizon():
    # independent: numerically minimise (1 + r)(log(1 + 1/r) + 2 log(1/alpha)) over r = rho/n
    f = lambda r: (1 + r) * (np.log1p(1 / r) + 2 * np.log(20))  # noqa: E731
    r = optimize.minimize_scalar(f, bounds=(1e-4, 10), method="bounded")
    assert anytime_boundary(12032) == pytest.approx(np.sqrt(r.fun), rel=1e-6)
    ns = np.array([100, 1000, 5000, 12032, 30000, 200000])
    u = anytime_boundary(ns, n_opt=12032)
    assert np.argmin(u) == 3
    assert np.all(u > stats.norm.isf(0.025))
    # N* inflation: 1.91 two-sided at alpha; 2.16 if each side gets alpha/2 (paper: ~2.15).
    assert anytime_inflation(12032) == pytest.approx(1.915, abs=0.002)
    split = ((anytime_boundary(12032, alpha=0.025) + stats.norm.ppf(0.8)) / Z) ** 2
    assert split == pytest.approx(2.15, abs=0.02)
    assert anytime_inflation(12032, method="stitched") > anytime_inflation(12032)
    assert anytime_required_n(0.55, 0.5, 0.3) == pytest.approx(required_n(0.55, 0.5, 0.3) * anytime_inflation(10))
    n_st = anytime_required_n(0.55, 0.5, 0.3, method="stitched")
    assert n_st == pytest.approx(required_n(0.55, 0.5, 0.3) * anytime_inflation(n_st, method="stitched"), rel=1e-6)


def test_anytime_boundary_controls_the_crossing_probability():
    """Under H0 a standardised random walk crosses u(n) at any n <= N with probability <= alpha;
    the fixed-n z boundary, looked at after every item, is crossed far more often."""
    rng = np.random.default_rng(7)
    n_max, walks = 1000, 3000
    s = np.cumsum(rng.choice([-1.0, 1.0], size=(walks, n_max)), axis=1)  # paired differences, sigma_D = 1
    n = np.arange(1, n_max + 1)
    z_path = np.abs(s) / np.sqrt(n)
    for method in ("normal_mixture", "stitched"):
        u = anytime_boundary(np.maximum(n, 2), method=method, n_opt=n_max)
        crossed = (z_path[:, 1:] >= u[1:]).any(axis=1).mean()
        assert crossed <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / walks)
    naive = (z_path[:, 1:] >= stats.norm.isf(0.025)).any(axis=1).mean()
    assert naive > 0.2
