"""BCa bootstrap: agreement with scipy and with the percentile interval, coverage, pairing."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayesrc.switch import bca_mean, bca_paired_diff, bca_unpaired_diff, simulate_switch, switch_effects
from bayesrc.switch.bootstrap import bootstrap_mean, percentile_interval


def test_bca_matches_scipy_on_skewed_data():
    x = np.random.default_rng(1).exponential(1.0, 60)
    _, lo, hi = bca_mean(x, n_boot=20000, rng=2)
    ref = stats.bootstrap(
        (x,), np.mean, n_resamples=20000, method="BCa", confidence_level=0.95, random_state=3
    ).confidence_interval
    width = ref.high - ref.low
    assert lo[0] == pytest.approx(ref.low, abs=0.03 * width)
    assert hi[0] == pytest.approx(ref.high, abs=0.03 * width)
    # Skewed data: BCa shifts the interval right of the percentile one.
    theta, boot, _ = bootstrap_mean(x, 20000, np.random.default_rng(2))
    plo, phi = percentile_interval(boot)
    assert lo[0] > plo and hi[0] > phi


def test_bca_equals_percentile_on_symmetric_data():
    x = np.random.default_rng(4).normal(0.0, 1.0, 400)
    x = np.concatenate([x, -x])  # exactly symmetric: z0 ~ 0, a = 0
    theta, boot, jack = bootstrap_mean(x, 5000, np.random.default_rng(5))
    _, lo, hi = bca_mean(x, n_boot=5000, rng=5)
    plo, phi = percentile_interval(boot)
    width = phi - plo
    assert abs(lo[0] - plo) < 0.02 * width and abs(hi[0] - phi) < 0.02 * width


def test_bca_coverage_on_simulated_skewed_data():
    # 600 data sets of n = 40 from a lognormal; true mean exp(1/2).
    rng = np.random.default_rng(6)
    x = rng.lognormal(0.0, 0.6, (600, 40))
    truth = np.exp(0.6**2 / 2)
    _, lo, hi = bca_mean(x, n_boot=2000, levels=(0.9,), rng=7)
    cover = np.mean((lo[:, 0] <= truth) & (truth <= hi[:, 0]))
    assert 0.85 <= cover <= 0.94  # nominal 0.90 (BCa is slightly liberal at n = 40)


def test_paired_interval_narrower_than_unpaired_when_episodes_correlate():
    sim = simulate_switch(2, 150, sigma_u=0.3, sigma=0.05, seed=8)
    f = sim.data.frame.set_index(["prefix", "suffix", "episode"])["score"].sort_index()
    x = f.loc[("model-0", "model-1")].to_numpy()
    y = f.loc[("model-1", "model-1")].to_numpy()
    d, plo, phi = bca_paired_diff(x, y, n_boot=4000, rng=9)
    d2, ulo, uhi = bca_unpaired_diff(x, y, n_boot=4000, rng=9)
    assert d == pytest.approx(d2)
    assert (phi - plo)[0] < 0.4 * (uhi - ulo)[0]
    # Independent check of the paired width: normal theory on the differences.
    se = np.std(x - y, ddof=1) / np.sqrt(len(x))
    assert (phi - plo)[0] == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_switch_effects_stars_and_paired_intervals():
    sim = simulate_switch(3, 120, mu=0.05, sd_alpha=0.0, sd_beta=0.0, tau=0.0, sigma_u=0.3, sigma=0.05, seed=10)
    eff = switch_effects(sim.data, n_boot=1000, seed=1)
    off = ~np.eye(3, dtype=bool)
    stars = eff["stars"].to_numpy()[off]
    assert all(s == "**" for s in stars)  # 1,000 resamples cannot place a 99.9% limit: no third star
    many = switch_effects(sim.data, n_boot=10_000, seed=1)
    assert all(s == "***" for s in many["stars"].to_numpy()[off])  # 0.05 / (0.07/sqrt(120)) ~ 8 SE
    lo, hi = eff["ci_low"].to_numpy()[off], eff["ci_high"].to_numpy()[off]
    assert np.all((lo < 0.05) & (0.05 < hi))
