"""The vectorised pipeline against an independent plain implementation (tests/reference_rci.py)
on data simulated in the reference study's layout: 2,000 items, 4 domains, K = 10, two pairs."""

from __future__ import annotations

import numpy as np
import pytest
import reference_rci as ref

from bayesrc.classical import analyse_pairs, reliable_change
from bayesrc.data import item_counts


@pytest.fixture(
    scope="module", params=[("a", "analysable"), ("a", "all"), ("b", "analysable")], ids=lambda p: "-".join(p)
)
def both(request, sim_pair, sim_pair_b):
    which, basis = request.param
    sim = sim_pair if which == "a" else sim_pair_b
    ours = reliable_change(item_counts(sim.trials_v1, sim.trials_v2), sd_basis=basis, seed=3)
    theirs = ref.full_analysis(sim.trials_v1, sim.trials_v2, sd_basis=basis)
    return ours, theirs


def test_threshold_is_not_on_a_knife_edge(both):
    # Class counts can only be compared exactly if 1.96 * S_diff is not within
    # the reliability tolerance of a possible delta (multiples of 1/K).
    ours, _ = both
    thr = 1.96 * ours.s_diff
    assert abs(thr * 10 - round(thr * 10)) > 0.02


def test_exclusions_exact(both):
    ours, theirs = both
    assert ours.exclusions["n_before"] == theirs["n_before"] == 2000
    assert ours.exclusions["n_after"] == theirs["n_after"]
    assert ours.exclusions["low_valid"] == theirs["low_valid"]
    assert ours.exclusions["floor_ceiling"] == theirs["floor_ceiling"]
    assert 500 < ours.exclusions["floor_ceiling"] < 1500  # realistic: many floor/ceiling items


def test_reliability_and_icc(both):
    ours, theirs = both
    assert ours.r_xx["v1"] == pytest.approx(theirs["r_xx_v1"], abs=0.003)
    assert ours.r_xx["v2"] == pytest.approx(theirs["r_xx_v2"], abs=0.003)
    assert ours.reliability["v1"]["icc"] == pytest.approx(theirs["icc_v1"], abs=1e-10)
    assert ours.reliability["v2"]["icc"] == pytest.approx(theirs["icc_v2"], abs=1e-10)


def test_sem_and_s_diff(both):
    ours, theirs = both
    assert ours.sem["v1"] == pytest.approx(theirs["sem_v1"], abs=0.002)
    assert ours.sem["v2"] == pytest.approx(theirs["sem_v2"], abs=0.002)
    assert ours.s_diff == pytest.approx(theirs["s_diff"], abs=0.002)
    assert ours.s_diff_all == pytest.approx(theirs["s_diff_all"], abs=0.002)


def test_class_counts_exact(both):
    ours, theirs = both
    for c in ("improved", "no_change", "deteriorated"):
        assert ours.counts["analysable"][c] == theirs["counts"].get(c, 0)
        assert ours.counts["all"][c] == theirs["counts_all"].get(c, 0)


def test_domain_chi2(both):
    ours, theirs = both
    assert ours.domain["chi2"] == pytest.approx(theirs["chi2"], abs=0.1)
    assert ours.domain["cramers_v"] == pytest.approx(theirs["cramers_v"], abs=0.002)


def test_two_pairs_cross_pair(sim_pair, sim_pair_b):
    pairs = {
        "llama": item_counts(sim_pair.trials_v1, sim_pair.trials_v2),
        "qwen": item_counts(sim_pair_b.trials_v1, sim_pair_b.trials_v2),
    }
    res = analyse_pairs(pairs, seed=1)
    a, b = res.pairs["llama"], res.pairs["qwen"]
    # independent two-proportion z
    x1 = a.counts["analysable"]["improved"] + a.counts["analysable"]["deteriorated"]
    x2 = b.counts["analysable"]["improved"] + b.counts["analysable"]["deteriorated"]
    n1, n2 = a.counts["analysable"]["n"], b.counts["analysable"]["n"]
    pool = (x1 + x2) / (n1 + n2)
    z = (x1 / n1 - x2 / n2) / np.sqrt(pool * (1 - pool) * (1 / n1 + 1 / n2))
    assert res.cross_pair["z"] == pytest.approx(z, rel=1e-12)
    shared = set(a.items.loc[~a.items.excluded, "item_id"]) & set(b.items.loc[~b.items.excluded, "item_id"])
    assert res.cross_pair["n_shared"] == len(shared)
    ra = a.items.set_index("item_id").loc[sorted(shared), "rci"]
    rb = b.items.set_index("item_id").loc[sorted(shared), "rci"]
    assert res.cross_pair["pearson_r"] == pytest.approx(np.corrcoef(ra, rb)[0, 1], abs=1e-12)
