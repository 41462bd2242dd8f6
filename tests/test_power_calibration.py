"""N* delivers its power: McNemar on simulated paired Bernoulli benchmarks of size N = ceil(N*)."""

from __future__ import annotations

import numpy as np
import pytest

from bayesrc.power import calibration_grid, empirical_power, paired_bernoulli_counts, required_n


def test_simulated_cells_have_the_requested_margins_and_correlation():
    cells = paired_bernoulli_counts(200_000, 0.72, 0.68, 0.4, n_trials=1, seed=1)[0] / 200_000
    p11, p10, p01, p00 = cells
    pa, pb = p11 + p10, p11 + p01
    phi = (p11 * p00 - p10 * p01) / np.sqrt(pa * (1 - pa) * pb * (1 - pb))
    assert pa == pytest.approx(0.72, abs=0.005) and pb == pytest.approx(0.68, abs=0.005)
    assert phi == pytest.approx(0.4, abs=0.01)


def test_mcnemar_power_at_n_star_is_080_across_p_and_rho():
    """p in {0.5, 0.7, 0.9} x rho in {0, 0.4, 0.8}, delta = 1 pp, 5,000 benchmarks per cell.

    delta = 1 pp keeps every cell feasible (rho = 0.8 at p = 0.9) and leaves >= ~100
    expected discordant pairs at N*, so the normal approximation behind N* holds; the
    exact conditional test is slightly conservative (discreteness), never by more than 3 pp.
    """
    grid = calibration_grid((0.5, 0.7, 0.9), (0.0, 0.4, 0.8), delta=0.01, n_trials=5000, seed=2026)
    assert len(grid) == 9
    assert np.allclose(grid["n"], np.ceil(required_n(grid["p_a"], grid["p_b"], grid["rho"])))
    assert grid["power_asymptotic"].between(0.77, 0.83).all(), grid
    assert grid["power_exact"].between(0.77, 0.83).all(), grid
    assert grid["power_asymptotic"].mean() == pytest.approx(0.80, abs=0.01)
    assert (grid["power_exact"] <= grid["power_asymptotic"]).all()  # exact test is the conservative one


def test_half_of_n_star_leaves_the_test_underpowered():
    pa, pb, rho = 0.715, 0.685, 0.4
    n_star = float(required_n(pa, pb, rho))
    low = empirical_power(int(n_star / 2), pa, pb, rho, n_trials=2000, seed=5)
    full = empirical_power(int(np.ceil(n_star)), pa, pb, rho, n_trials=2000, seed=6)
    # the Cohen's h x (1 - rho) shortcut recommends ~N*/2: power ~ Phi(2.80/sqrt(2) - 1.96) ~ 0.51
    assert low == pytest.approx(0.51, abs=0.05)
    assert full > low + 0.2
