"""Classical reliable change on graded scores (issue 59, SPEC section 11): the Jacobson-Truax RCI on per-item mean
scores (:mod:`bayesrc.classical.graded`), tested on simulated judge ratings with known per-item truth (no-change pairs
included), against the RCI computed by hand from the trials in the scale's own units, and end to end through
``bayesrc rci``.
"""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

import bayesrc
from bayesrc.classical import reliable_change
from bayesrc.classical.calibration import no_change_test
from bayesrc.classical.graded import paired_tests, permute_within_items, score_no_change_test
from bayesrc.cli import main
from bayesrc.data import item_scores, save_trials, simulate_graded_pair


@pytest.fixture(scope="module")
def changed_pair():
    sim = simulate_graded_pair(300, 10, pi_change=0.5, seed=11)
    return sim, reliable_change(item_scores(sim.trials_v1, sim.trials_v2), n_null=100)


def test_graded_rci_is_jacobson_truax_on_the_items_mean_scores(changed_pair):
    """Independent code: per item the mean of its 1-5 ratings in each version from the trials (pandas), the SD over
    the analysable items in the scale's units, SEM = SD sqrt(1 - r_xx) with the run's reliabilities, and RCI =
    change in mean score / S_diff: the run's RCI (computed on the unit scale) and its classes."""
    sim, res = changed_pair
    means = [t.groupby("item_id")["score"].mean() for t in (sim.trials_v1, sim.trials_v2)]
    items = res.items.set_index("item_id")
    keep = ~items["excluded"]
    m1, m2 = (m.reindex(items.index) for m in means)
    r = [res.payload["reliability"][v]["r_xx"] for v in ("v1", "v2")]
    s_diff = np.hypot(m1[keep].std(ddof=1) * np.sqrt(1 - r[0]), m2[keep].std(ddof=1) * np.sqrt(1 - r[1]))
    np.testing.assert_allclose(items["rci"][keep], ((m2 - m1) / s_diff)[keep], rtol=1e-10)
    np.testing.assert_allclose(items["score_v1"], m1, rtol=1e-12)
    np.testing.assert_allclose(items["delta_score"], m2 - m1, atol=1e-12)
    assert res.payload["graded"]["kind"] == "ordinal" and (res.payload["graded"]["low"], res.payload["graded"]["high"])
    floor = (np.minimum(m1, m2) == 5) | (np.maximum(m1, m2) == 1)
    assert (items.loc[floor, "reason"] == "floor_ceiling").all()


def test_graded_rci_flags_real_changes_with_their_true_sign(changed_pair):
    """Half the items move their whole rating distribution (known truth): the real changes RCI flags have the true
    change's sign, it finds a share of them, its false flags among unchanged items stay near the nominal rate (the
    paper's S_diff runs somewhat over it, as on right/wrong data: SPEC 2.1) and the pair's no-change checks reject."""
    sim, res = changed_pair
    items = res.items.merge(sim.truth[["item_id", "delta_mean", "changed"]], on="item_id")
    analysable, flagged = ~items["excluded"], items["class"].isin(["improved", "deteriorated"])
    real = items[flagged & items["changed"]]
    assert (np.sign(real["delta_score"]) == np.sign(real["delta_mean"])).mean() >= 0.95
    assert len(real) >= 0.25 * (analysable & items["changed"]).sum()
    assert (flagged & ~items["changed"]).sum() <= 0.10 * (analysable & ~items["changed"]).sum()
    assert res.payload["no_change_test"]["p_value"] < 0.01
    assert res.payload["null_samples"]["observed_flagged"] > res.payload["null_samples"]["flagged_p975"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_on_graded_pairs_with_no_change_the_null_predicts_the_rcis_own_false_flags(seed):
    """Known truth, nothing changed: the flags are all false, and the sample-level null built from the pair's own
    ratings predicts how many (within its 95% range); the no-change test and the paired tests do not reject at 1%;
    the per-item S_diff (``binomial``: the largest variance a score with that mean can have) flags at most the nominal
    5%."""
    sim = simulate_graded_pair(300, 10, pi_change=0.0, seed=seed)
    scores = item_scores(sim.trials_v1, sim.trials_v2)
    res = reliable_change(scores, n_null=100, seed=seed)
    null = res.payload["null_samples"]
    assert null["flagged_p025"] <= null["observed_flagged"] <= null["flagged_p975"]
    assert res.payload["no_change_test"]["p_value"] > 0.01
    per_item = reliable_change(scores, s_diff="binomial", n_null=0, seed=seed)
    assert per_item.counts["analysable"]["churn"] <= 0.05


def test_the_score_permutation_tests_moments_are_exact_and_reduce_to_the_hypergeometric():
    """The no-change test's null moments of an item's version-1 sum (its pooled ratings re-dealt) equal those of every
    arrangement enumerated; on 0 / 1 scores the graded test's statistics are the right/wrong test's (hypergeometric),
    and a re-deal keeps each item's ratings."""
    x = np.array([1.0, 3.0, 3.0, 4.0, 5.0, 2.0])
    sums = np.array([x[list(c)].sum() for c in combinations(range(6), 3)])
    out = score_no_change_test(x[None, :3], x[None, 3:], n_permutations=9)
    dev2 = (x[:3].sum() - sums.mean()) ** 2
    assert out["statistic_items"] == pytest.approx(dev2 / sums.var())
    rng = np.random.default_rng(0)
    b1, b2 = (rng.random((50, 10)) < rng.random((50, 1))).astype(float), (rng.random((50, 10)) < 0.5).astype(float)
    graded = score_no_change_test(b1, b2, n_permutations=99)
    binary = no_change_test(np.stack([b1.sum(1), b2.sum(1)], 1), np.full((50, 2), 10), n_permutations=99)
    for key in ("statistic_items", "statistic_strata", "n_items"):
        assert graded[key] == pytest.approx(binary[key])
    v = np.where(rng.random((20, 8)) < 0.2, np.nan, rng.integers(1, 6, (20, 8)).astype(float))
    dealt = permute_within_items(v, ~np.isnan(v), 3, rng)
    assert (np.isnan(dealt) == np.isnan(v)).all()
    assert (np.sort(np.nan_to_num(dealt, nan=0), -1) == np.sort(np.nan_to_num(v, nan=0), -1)).all()


def test_the_paired_tests_hold_their_level_on_pairs_with_no_change():
    """Over 100 simulated no-change pairs (known truth), Wilcoxon's signed-rank test and the sign test of the items'
    mean-score changes reject at 5% in at most 9% of them (5% plus two binomial standard errors)."""
    p_values = []
    for seed in range(100):
        scores = item_scores(*_trials(simulate_graded_pair(100, 10, pi_change=0.0, seed=seed)))
        tests = paired_tests(scores["score_mean"].values[:, 1] - scores["score_mean"].values[:, 0])
        p_values.append((tests["wilcoxon"]["p_value"], tests["sign"]["p_value"]))
    assert (np.array(p_values) < 0.05).mean(0).max() <= 0.09


def _trials(sim):
    return sim.trials_v1, sim.trials_v2


def test_paired_tests_count_the_items_that_moved():
    out = paired_tests(np.array([0.5, 0.2, -0.1, 0.0, np.nan, 0.3]))
    assert (out["sign"]["up"], out["sign"]["down"], out["wilcoxon"]["n"]) == (3, 1, 4)
    assert out["sign"]["p_value"] == pytest.approx(0.625)


def test_bayesrc_rci_runs_on_graded_trials_files_end_to_end(tmp_path, capsys):
    """Two judge-rating files in, the classical analysis out: the headline says the scale, ``rci.json`` loads back
    equal to the Python API's result on the same files."""
    sim = simulate_graded_pair(120, 10, seed=5)
    a, b = tmp_path / "v1.parquet", tmp_path / "v2.parquet"
    save_trials(sim.trials_v1, a)
    save_trials(sim.trials_v2, b)
    assert (
        main(["rci", "--pair", "judge", str(a), str(b), "--out", str(tmp_path / "out"), "--null-replicates", "20"]) == 0
    )
    printed = capsys.readouterr().out
    assert "ordinal 1-5" in printed and "Traceback" not in printed
    run = bayesrc.load(tmp_path / "out")
    direct = reliable_change(
        item_scores(sim.trials_v1, sim.trials_v2, sources=[str(a), str(b)]), name="judge", n_null=20
    )
    assert run["judge"].payload["graded"] == direct.payload["graded"]
    pd.testing.assert_series_equal(run["judge"].items["rci"], direct.items["rci"])


def test_bayesrc_rci_family_runs_on_graded_trials_files(tmp_path, capsys):
    """Three judge-rating versions: every pair's RCI on mean scores on one scale (the levels of all versions), the
    multiplicity stated; ``pairwise_rci.json`` says each pair was graded."""
    first, second = simulate_graded_pair(60, 10, seed=6), simulate_graded_pair(60, 10, seed=7, models=("x", "v3"))
    paths = [tmp_path / f"v{i}.parquet" for i in (1, 2, 3)]
    for trials, path in zip((first.trials_v1, first.trials_v2, second.trials_v2), paths):
        save_trials(trials, path)
    out = tmp_path / "family"
    assert main(["rci", "--family", *map(str, paths), "--out", str(out), "--null-replicates", "10"]) == 0
    assert "3 versions, 3 pairs" in capsys.readouterr().out
    saved = json.loads((out / "pairwise_rci.json").read_text())
    graded = [block["graded"] for block in saved["pairs"].values()]
    assert len(graded) == 3 and all(g["kind"] == "ordinal" and (g["low"], g["high"]) == (1.0, 5.0) for g in graded)
