"""Noise decomposition (bayesrc.classical.noise) against simulation with known truth.

A population of items with known true accuracies in two versions (``bayesrc.data.item_truth``)
gives the true parts of ``Var(D)``: item set ``Var_i(dp_i) / N`` and sampling
``E_i(p1 q1 / K1 + p2 q2 / K2) / N``. Many benchmarks of N items drawn from it, each answered
K times per item, give the empirical ``Var(D)`` and the estimators' means.
"""

from __future__ import annotations

import numpy as np
import pytest

from bayesrc.classical.noise import (
    halving_factor,
    noise_decomposition,
    noise_from_counts,
    noise_sentence,
    within_item_variance,
)
from bayesrc.data import item_counts, item_truth, simulate_pair
from bayesrc.errors import InputError

N, K, REPS = 200, 10, 4000


def population(
    sigma_theta: float, sigma_delta: float, pi_change: float, seed: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """True per-item accuracies (v1, v2) of a large item population."""
    t = item_truth(200_000, sigma_theta=sigma_theta, sigma_delta=sigma_delta, pi_change=pi_change, seed=seed)
    return t["p_v1"].to_numpy(), t["p_v2"].to_numpy()


def true_parts(
    p1: np.ndarray, p2: np.ndarray, k1: float | np.ndarray, k2: float | np.ndarray, n: int
) -> tuple[float, float]:
    """(item-set, sampling) parts of Var(D) for benchmarks of n items from the population (K may vary per item)."""
    items = np.var(p2 - p1) / n
    sampling = np.mean(p1 * (1 - p1) / k1 + p2 * (1 - p2) / k2) / n
    return float(items), float(sampling)


def replicate(p1, p2, k, n=N, reps=REPS, seed=0, k_low=None):
    """Simulated benchmarks: D per replicate and the decomposition of each (K fixed, or uniform on [k_low, k])."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, p1.size, (reps, n))
    k1 = np.full((reps, n), k) if k_low is None else rng.integers(k_low, k + 1, (reps, n))
    k2 = np.full((reps, n), k) if k_low is None else rng.integers(k_low, k + 1, (reps, n))
    y1, y2 = rng.binomial(k1, p1[idx]), rng.binomial(k2, p2[idx])
    d = (y2 / k2 - y1 / k1).mean(axis=1)
    est = [noise_decomposition(y1[r], k1[r], y2[r], k2[r]) for r in range(reps)]
    return d, est


@pytest.fixture(scope="module")
def mixed():
    """A population where sampling is most of the noise at K = 10 (mid-range accuracies, modest changes)."""
    return population(sigma_theta=1.5, sigma_delta=0.8, pi_change=0.4)


def test_parts_match_simulation_with_known_truth(mixed):
    p1, p2 = mixed
    items, sampling = true_parts(p1, p2, K, K, N)
    d, est = replicate(p1, p2, K)
    total = items + sampling
    assert np.var(d, ddof=1) == pytest.approx(total, rel=0.07)  # law of total variance; MC error ~2%
    assert np.mean([e["var_total"] for e in est]) == pytest.approx(total, rel=0.02)
    # p(1-p)/(n-1), not /n: the plug-in would be 10% low at K = 10
    assert np.mean([e["var_sampling"] for e in est]) == pytest.approx(sampling, rel=0.02)
    assert np.mean([e["var_items"] for e in est]) == pytest.approx(items, abs=0.02 * total)
    share = sampling / total
    assert 0.5 < share < 0.9  # the population is what the test means it to be
    assert np.mean([e["share_sampling"] for e in est]) == pytest.approx(share, abs=0.03)


def test_k_and_n_that_halve_the_variance(mixed):
    p1, p2 = mixed
    items, sampling = true_parts(p1, p2, K, K, N)
    f = halving_factor(sampling, items)
    k_half = int(np.ceil(f * K))
    assert k_half > K
    v_base = np.var(replicate(p1, p2, K, reps=3000, seed=1)[0], ddof=1)
    v_k = np.var(replicate(p1, p2, k_half, reps=3000, seed=2)[0], ddof=1)
    v_n = np.var(replicate(p1, p2, K, n=2 * N, reps=3000, seed=3)[0], ddof=1)
    i2, s2 = true_parts(p1, p2, k_half, k_half, N)
    assert (i2 + s2) / (items + sampling) <= 0.5  # ceil: at most half
    assert v_k / v_base == pytest.approx(0.5, abs=0.06)
    assert v_n / v_base == pytest.approx(0.5, abs=0.06)
    # one benchmark's estimate of K_half is near the truth's
    est = replicate(p1, p2, K, reps=200, seed=4)[1]
    assert np.median([e["k_half"] for e in est if e["k_half"] is not None]) == pytest.approx(k_half, rel=0.2)
    assert all(e["n_half"] == 2 * N for e in est)


def test_item_set_dominated_no_k_halves_it():
    p1, p2 = population(sigma_theta=1.5, sigma_delta=3.0, pi_change=0.8)
    items, sampling = true_parts(p1, p2, K, K, N)
    assert items > sampling and halving_factor(sampling, items) is None
    d10 = np.var(replicate(p1, p2, K, reps=3000, seed=5)[0], ddof=1)
    d_many = np.var(replicate(p1, p2, 1000, reps=3000, seed=6)[0], ddof=1)
    assert d_many / d10 > 0.5  # even K = 1000 leaves more than half
    assert d_many == pytest.approx(items, rel=0.1)  # ... the item-set part
    est = replicate(p1, p2, K, reps=300, seed=7)[1]
    assert np.mean([e["k_half"] is None for e in est]) > 0.9
    none = next(e for e in est if e["k_half"] is None)
    assert noise_sentence(none).endswith("no K can at this N (item-set noise is half of it or more).")


def test_varying_k_and_missing_answers_stay_unbiased(mixed):
    p1, p2 = mixed
    rng = np.random.default_rng(9)
    reps = 3000
    idx = rng.integers(0, p1.size, (reps, N))
    k1, k2 = rng.integers(3, 11, (reps, N)), rng.integers(3, 11, (reps, N))
    y1, y2 = rng.binomial(k1, p1[idx]), rng.binomial(k2, p2[idx])
    items = np.var(p2 - p1) / N
    sampling = (
        np.mean(p1 * (1 - p1) * np.mean(1 / np.arange(3, 11)) + p2 * (1 - p2) * np.mean(1 / np.arange(3, 11))) / N
    )
    est = [noise_decomposition(y1[r], k1[r], y2[r], k2[r]) for r in range(reps)]
    assert np.mean([e["var_sampling"] for e in est]) == pytest.approx(sampling, rel=0.02)
    assert np.var((y2 / k2 - y1 / k1).mean(1), ddof=1) == pytest.approx(items + sampling, rel=0.08)


def test_counts_path_and_bad_input():
    sim = simulate_pair(300, 10, seed=3, missing_rate=0.1)
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    nd = noise_from_counts(counts)
    a, b = counts.isel(version=0), counts.isel(version=1)
    raw = noise_decomposition(a["n_correct"], a["n_valid"], b["n_correct"], b["n_valid"])
    assert nd["versions"] == [str(v) for v in counts["version"].values] and {k: nd[k] for k in raw} == raw
    assert nd["n_items"] + nd["n_dropped"] == 300
    p = a["n_correct"].values / a["n_valid"].values
    ok = (a["n_valid"].values >= 2) & (b["n_valid"].values >= 2)
    assert nd["mean_diff"] == pytest.approx(float(np.mean(b["n_correct"].values[ok] / b["n_valid"].values[ok] - p[ok])))
    assert np.isnan(within_item_variance([1], [1])[0])
    with pytest.raises(InputError, match="unequal length"):
        noise_decomposition([1, 2], [10, 10], [1], [10])
    with pytest.raises(InputError, match="needs 2"):
        noise_decomposition([1, 2], [1, 10], [1, 2], [10, 10])


def test_power_cli_reports_the_split_and_single_shot_has_none(tmp_path, capsys):
    import json

    import bayesrc
    from bayesrc.cli import main
    from bayesrc.data import save_trials

    truth = item_truth(400, sigma_theta=1.5, sigma_delta=0.8, pi_change=0.4, seed=3)
    sim = simulate_pair(truth=truth, k=10, models=("old", "new"), seed=4)
    a, b = tmp_path / "old.parquet", tmp_path / "new.parquet"
    save_trials(sim.trials_v1, a)
    save_trials(sim.trials_v2, b)
    assert main(["power", str(a), str(b), "--out", str(tmp_path / "p")]) == 0
    assert "noise, " in capsys.readouterr().out
    doc = json.loads((tmp_path / "p" / "power.json").read_text())
    (row,) = doc["noise"]
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    pair = doc["pairs"][0]
    expect = noise_from_counts(counts, (pair["name_b"], pair["name_a"]))
    assert row["var_total"] == pytest.approx(expect["var_total"]) and row["mean_diff"] == pytest.approx(
        expect["mean_diff"]
    )
    # ... and near the truth of these 400 items' population (one benchmark: loose)
    items, sampling = true_parts(truth["p_v1"].to_numpy(), truth["p_v2"].to_numpy(), 10, 10, 400)
    assert row["var_sampling"] == pytest.approx(sampling, rel=0.15)
    assert "## Noise: more samples (K) or more items (N)?" in (tmp_path / "p" / "power.md").read_text()
    table = bayesrc.load(tmp_path / "p").noise_table()
    assert table.iloc[0]["N to halve"] == 800
    # single-shot scores: the within-item variance is not estimable, no split is claimed
    one = [t[t["k"] == 0] for t in (sim.trials_v1, sim.trials_v2)]
    save_trials(one[0], a)
    save_trials(one[1], b)
    assert main(["power", str(a), str(b), "--out", str(tmp_path / "g")]) == 0
    assert "noise" not in json.loads((tmp_path / "g" / "power.json").read_text())
    assert "Noise" not in (tmp_path / "g" / "power.md").read_text()


def test_report_noise_block_matches_counts():
    from bayesrc.classical import reliable_change
    from bayesrc.classical.noise import noise_from_items
    from bayesrc.report.classical_sections import noise_block

    sim = simulate_pair(300, 10, seed=8, missing_rate=0.05)
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    items = reliable_change(counts, n_splits=20, n_permutations=20).items
    nd, direct = noise_from_items(items), noise_from_counts(counts)
    assert {k: nd[k] for k in ("n_items", "n_half", "k_half")} == {
        k: direct[k] for k in ("n_items", "n_half", "k_half")
    }
    assert nd["var_total"] == pytest.approx(direct["var_total"]) and nd["var_sampling"] == pytest.approx(
        direct["var_sampling"]
    )
    assert noise_block(items).text == f"**Noise.** {noise_sentence(direct)}"
    assert noise_block(items.drop(columns=["n_v1"])) is None
