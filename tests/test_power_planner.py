"""K-sample planner: RCI detection of a known per-item change, cached simulation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bayesrc.power.planner import plan_k_n, rci_detection_probability


def test_rci_detection_probability_matches_brute_force():
    rng = np.random.default_rng(0)
    p1 = np.array([0.1, 0.3, 0.5, 0.55])
    p2 = p1 + 0.3
    k, s_diff = 10, 0.085
    y1 = rng.binomial(k, p1, size=(200_000, 4))
    y2 = rng.binomial(k, p2, size=(200_000, 4))
    brute = ((y2 - y1) / k / s_diff > 1.96).mean(axis=0)
    assert np.allclose(rci_detection_probability(p1, p2, k, s_diff), brute, atol=0.005)
    # Per-item binomial S_diff (SPEC 2.1), p~ = (y + 0.5) / (K + 1).
    a, b = (y1 + 0.5) / (k + 1), (y2 + 0.5) / (k + 1)
    brute_b = ((y2 - y1) / k / np.sqrt(a * (1 - a) / k + b * (1 - b) / k) > 1.96).mean(axis=0)
    assert np.allclose(rci_detection_probability(p1, p2, k, None), brute_b, atol=0.005)


def test_planner_known_truth_and_cache(tmp_path):
    cache = tmp_path / "cache"
    plan = plan_k_n(0.35, k_grid=(4, 24), n_grid=(600,), replicates=1, seed=3, cache_dir=cache)
    f = plan.to_frame().set_index("k")
    # More samples per item: a lower threshold (MDC) and many more changed items found.
    assert f.loc[24, "mdc"] < f.loc[4, "mdc"]
    assert f.loc[24, "sensitivity"] > f.loc[4, "sensitivity"] + 0.3
    # The simulated RCI sensitivity agrees with the exact binomial probability (given S_diff),
    # within 4 binomial SDs of a share over the n_changed items of each cell (a Poisson-binomial
    # share has at most this SD).
    c = plan.cells
    sd = np.sqrt(c["sensitivity_expected"] * (1 - c["sensitivity_expected"]) / c["n_changed"])
    assert (np.abs(c["sensitivity"] - c["sensitivity_expected"]) <= 4 * sd + 1e-9).all(), (
        c["sensitivity"] - c["sensitivity_expected"]
    ) / sd
    assert (f["false_positive_rate"] < 0.15).all()
    rec = plan.recommend()
    assert rec["method"] == "rci" and rec["k_per_item"] == 24 and rec["k"] == 24 and rec["n_items"] == 600

    files = sorted(cache.glob("cell-*.json"))
    assert len(files) == 2
    stamps = [p.stat().st_mtime_ns for p in files]
    again = plan_k_n(0.35, k_grid=(4, 24), n_grid=(600,), replicates=1, seed=3, cache_dir=cache)
    assert again.cells.equals(plan.cells)
    assert [p.stat().st_mtime_ns for p in files] == stamps  # read from the cache, not recomputed
    # A damaged entry is recomputed, to the same (deterministic) result.
    files[0].write_text("{not json")
    third = plan_k_n(0.35, k_grid=(4, 24), n_grid=(600,), replicates=1, seed=3, cache_dir=cache)
    assert third.cells.equals(plan.cells)
    json.loads(files[0].read_text())
    # Another delta is another key.
    plan_k_n(0.2, k_grid=(4,), n_grid=(600,), replicates=1, seed=3, cache_dir=cache)
    assert len(list(cache.glob("cell-*.json"))) == 3


@pytest.mark.parametrize(
    "kwargs", [dict(delta_p=0.0), dict(delta_p=1.2), dict(delta_p=0.3, k_grid=(1,)), dict(delta_p=0.3, pi_change=0)]
)
def test_planner_bad_parameters(tmp_path, kwargs):
    with pytest.raises(ValueError):
        plan_k_n(cache_dir=tmp_path, **kwargs)


def test_planner_constrains_false_positives_among_analysable_items(tmp_path):
    """The paper's S_diff finds the changed items but flags many unchanged analysable ones: no recommendation."""
    ref = plan_k_n(
        0.35, k_grid=(10,), n_grid=(600,), replicates=1, seed=3, cache_dir=tmp_path, s_diff="reference", power=0.7
    )
    f = ref.to_frame().iloc[0]
    print(
        f"reference S_diff at K = 10: sensitivity {f['sensitivity']:.2f}, "
        f"false-positive rate (analysable) {f['false_positive_rate']:.3f}"
    )
    assert f["sensitivity"] >= 0.7 and f["false_positive_rate"] > 0.10
    assert f["false_positive_rate_all_items"] < f["false_positive_rate"]  # excluded items hid part of it
    rec = ref.recommend()
    assert rec["k"] is None and rec["k_per_item"] is None
