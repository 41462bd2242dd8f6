"""Pairwise RCI of a family of versions with the multiplicity stated (issue 32, the classical side):
the family-wise z against simulated no-change families (with the user's default settings), recovery
of known changes in the right pairs, each pair equal to `reliable_change` of that pair alone, the
result's round trip, the CLI and the report.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesrc
from bayesrc.classical import PairwiseRCI, family_wise_z, pairwise_rci, reliable_change
from bayesrc.classical.pairwise import pair_name
from bayesrc.classical.rci import DETERIORATED, IMPROVED
from bayesrc.data import item_counts, save_trials, simulate_family
from bayesrc.errors import InputError

ALPHA = 0.05
# settings for tests whose claim does not depend on the null's or the split halves' precision
QUICK = {"n_null": 20, "null_splits": 10, "n_splits": 50, "n_permutations": 50, "n_splits_by_k": 20}


def _flag_total_se(res: PairwiseRCI) -> float:
    """SE of the family's total flag count: items are independent, so Var(total) = sum over items of
    Var(flags of the item, over its pairs), estimated by N times the items' sample variance (the pairs
    of one item share versions, so their flags are not independent; this keeps that)."""
    per_item = res.item_flags()["n_pairs_flagged"].to_numpy(float)
    return float(np.sqrt(per_item.size * per_item.var(ddof=1)))


def _share_flagged(res: PairwiseRCI) -> float:
    """Share of the items analysable in some pair that are flagged in some pair."""
    flags = res.item_flags()
    tested = flags["n_pairs_tested"] > 0
    return float((flags.loc[tested, "n_pairs_flagged"] > 0).mean())


@pytest.fixture(scope="module")
def no_change():
    """Four versions identical in truth (400 items, K = 10), analysed with the defaults a user gets: per pair
    at z = 1.96, and family-wise at alpha = 0.05."""
    fam = simulate_family(400, 10, versions=4, pi_change=0.0, seed=1)
    return fam, pairwise_rci(fam.counts), pairwise_rci(fam.counts, family_alpha=ALPHA)


def test_family_wise_z_keeps_items_flagged_in_some_pair_at_alpha_on_a_no_change_family(no_change):
    """No version changed anything. Family-wise (Bonferroni over P = 6 pairs, z = 2.638): the share of
    items flagged in some pair is at most alpha, within 3 binomial SEs (sqrt(alpha (1 - alpha) / N); the
    items are independent). Per pair at 1.96: each item gets 6 chances, so the share is far above alpha
    (below the union bound 6 x 5%), and the total flags are about P times the family-wise ones. Both
    totals match what the pairs' no-change nulls expect, within 3 SEs of the total."""
    fam, per_pair, family = no_change
    p = 6
    assert per_pair.n_pairs == family.n_pairs == p and per_pair.n_tests == family.n_tests
    assert per_pair.z == 1.96 and family.z == pytest.approx(2.638, abs=1e-3)
    assert 2 * stats.norm.sf(family.z) == pytest.approx(ALPHA / p)
    n_tested = family.multiplicity["items_tested"]
    se = np.sqrt(ALPHA * (1 - ALPHA) / n_tested)
    share_family, share_per_pair = _share_flagged(family), _share_flagged(per_pair)
    assert share_family <= ALPHA + 3 * se, (share_family, se)
    assert 2 * ALPHA < share_per_pair <= p * ALPHA + 3 * np.sqrt(p * ALPHA * (1 - p * ALPHA) / n_tested), share_per_pair
    for res in (per_pair, family):
        m = res.multiplicity
        assert m["observed_flags"] == int(res.pairs_table["flagged"].sum())
        assert m["expected_no_change"] == pytest.approx(res.pairs_table["expected_no_change"].sum())
        assert abs(m["observed_flags"] - m["expected_no_change"]) <= 3 * _flag_total_se(res), (
            m["observed_flags"],
            m["expected_no_change"],
        )
        # the binomial S_diff's nulls expect about the nominal number: no miscalibration warning
        assert res.payload["warnings"] == []
    assert per_pair.multiplicity["expected_nominal"] == pytest.approx(
        p * family.multiplicity["expected_nominal"], rel=1e-3
    )  # 5% at 1.96 vs 5% / 6
    ratio = per_pair.multiplicity["observed_flags"] / family.multiplicity["observed_flags"]
    assert p / 2 <= ratio <= 2 * p, ratio
    print(
        f"\nno-change family, {n_tested} items, {family.n_tests} item x pair tests: items flagged in some pair "
        f"{share_per_pair:.3f} per pair (z = 1.96) vs {share_family:.3f} family-wise (z = {family.z:.3f}); flags "
        f"{per_pair.multiplicity['observed_flags']} (null {per_pair.multiplicity['expected_no_change']:.1f}) vs "
        f"{family.multiplicity['observed_flags']} (null {family.multiplicity['expected_no_change']:.1f})"
    )


def test_summary_states_the_z_and_what_the_multiplicity_means(no_change):
    _, per_pair, family = no_change
    fam_rows = family.summary().query("pair == 'family'").set_index("metric")["value"]
    assert fam_rows["z rule"] == "family-wise (Bonferroni), alpha 0.05 over 6 pairs" and fam_rows["z"] == round(
        family.z, 4
    )
    assert fam_rows["pairs"] == 6 and fam_rows["item x pair tests"] == family.n_tests
    assert (
        "2(1 - Phi(z)) = 0.05 / 6 = 0.83% per test" in fam_rows["multiplicity"]
        and "at most 5%" in fam_rows["multiplicity"]
    )
    sentence = per_pair.multiplicity_sentence()
    assert "not adjusted for the 6 pairs" in sentence and "up to 30%" in sentence
    assert (
        f"{per_pair.multiplicity['expected_no_change']:.1f} flags (the sum of the pairs' sample-level no-change nulls"
        in sentence
    )
    pair_rows = per_pair.summary().query("metric == 'expected with no change'")
    assert list(pair_rows["pair"]) == per_pair.names and len(pair_rows) == 6


def test_the_reference_s_diff_is_warned_about_where_it_breaks_the_family_wise_bound():
    """The paper's S_diff over-flags most in the tail Bonferroni's z reaches (many floor / ceiling items):
    the pairs' nulls expect over twice the nominal flags, and the result says the bound does not hold."""
    fam = simulate_family(300, 10, versions=4, pi_change=0.0, seed=2)
    res = pairwise_rci(
        fam.counts,
        family_alpha=ALPHA,
        s_diff="reference",
        n_null=50,
        null_splits=20,
        n_splits=100,
        n_permutations=50,
        n_splits_by_k=20,
    )
    m = res.multiplicity
    assert m["expected_no_change"] > 2 * m["expected_nominal"]
    assert len(res.payload["warnings"]) == 1 and "the family-wise bound does not hold" in res.payload["warnings"][0]


def test_known_changes_are_flagged_in_the_pairs_where_they_happened():
    """Three versions, 30% of items changed in each of the later two (large changes, K = 20). Per (item,
    pair), the truth is the true accuracy difference of the two versions: tests with no true change are
    flagged at about the per-test rate (within 3 binomial SEs), large true changes (|dp| >= 0.5) mostly,
    and each flag of a real change has its direction."""
    fam = simulate_family(300, 20, versions=3, pi_change=0.3, sigma_delta=2.0, seed=4)
    res = pairwise_rci(fam.counts, family_alpha=ALPHA, **QUICK)
    position = {v: i for i, v in enumerate(fam.versions)}
    row = {item: i for i, item in enumerate(fam.counts["item"].values)}
    items = res.items[~res.items["excluded"]]
    true_dp = np.array(
        [
            fam.p[row[i], position[b]] - fam.p[row[i], position[a]]
            for i, a, b in zip(items["item_id"], items["v1"], items["v2"])
        ]
    )
    flagged = items["class"].isin([IMPROVED, DETERIORATED]).to_numpy()
    rate = res.multiplicity["per_test_rate"]
    unchanged = true_dp == 0
    assert unchanged.sum() > 300 and flagged[unchanged].mean() <= rate + 3 * np.sqrt(
        rate * (1 - rate) / unchanged.sum()
    )
    large = np.abs(true_dp) >= 0.5
    assert large.sum() >= 30 and flagged[large].mean() >= 0.8
    real = flagged & ~unchanged
    direction = np.where(items["class"].to_numpy()[real] == IMPROVED, 1, -1)
    assert np.mean(direction == np.sign(true_dp[real])) >= 0.95
    # The pairs not involving a version's changes stay quiet on its changed items: an item changed in
    # model-v3 only is flagged in model-v1 -> model-v3 and model-v2 -> model-v3, not in model-v1 -> model-v2.
    only_v3 = fam.truth.loc[~fam.truth["changed_model-v2"] & fam.truth["changed_model-v3"], "item_id"]
    flags = (
        res.items.assign(flagged=res.items["class"].isin([IMPROVED, DETERIORATED]))
        .pivot(index="item_id", columns="pair", values="flagged")
        .loc[only_v3]
    )
    quiet = max(1, flags["model-v1 -> model-v2"].sum())
    assert flags["model-v1 -> model-v3"].sum() > 5 * quiet and flags["model-v2 -> model-v3"].sum() > 5 * quiet


def test_each_pair_equals_reliable_change_of_that_pair_alone(tmp_path):
    """Each pair, in memory and loaded back, is exactly `reliable_change` on counts built from that pair's
    two trials frames alone (not the family's counts), at the family's z; the per-pair table holds its numbers."""
    fam = simulate_family(120, 10, versions=4, shifts=[0.5, 0.0, -0.5], seed=6)
    res = pairwise_rci(fam.counts, family_alpha=0.1, **QUICK)
    assert (
        res.names == [pair_name(a, b) for i, a in enumerate(fam.versions) for b in fam.versions[i + 1 :]]
        and len(res) == 6
    )
    res.save(tmp_path / "fam")
    loaded = bayesrc.load(tmp_path / "fam")
    trials = dict(zip(fam.versions, fam.trials))
    for row in res.pairs_table.itertuples(index=False):
        alone = reliable_change(
            item_counts(trials[row.v1], trials[row.v2]),
            name=row.pair,
            z=family_wise_z(0.1, 6),
            s_diff="binomial",
            **QUICK,
        )
        assert res[row.pair] == alone and loaded[row.pair] == alone and res.pair(row.v1, row.v2) == alone
        assert (row.improved, row.deteriorated, row.flagged, row.n_analysable) == (
            alone.analysable["improved"],
            alone.analysable["deteriorated"],
            alone.n_flagged,
            alone.analysable["n"],
        )
        assert row.expected_no_change == alone.null_samples["flagged_mean"]


def test_result_round_trips_through_load_and_refuses_a_broken_file(tmp_path):
    fam = simulate_family(80, 10, versions=3, seed=2)
    res = pairwise_rci(fam.counts, versions=["model-v3", "model-v1", "model-v2"], **QUICK)
    assert res.names == ["model-v3 -> model-v1", "model-v3 -> model-v2", "model-v1 -> model-v2"]
    res.save(tmp_path / "r")
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [
        "pairwise_rci.json",
        "pairwise_rci_items.parquet",
        "pairwise_rci_pairs.parquet",
    ]
    for path in (tmp_path / "r", tmp_path / "r" / "pairwise_rci.json"):
        loaded = bayesrc.load(path)
        assert type(loaded) is PairwiseRCI and loaded == res
    assert loaded.payload["format"] == 1 and loaded.to_dict() == res.to_dict()
    pd.testing.assert_frame_equal(loaded.summary(), res.summary())
    assert PairwiseRCI.from_dict(res.to_dict()) == res
    bad = json.loads((tmp_path / "r" / "pairwise_rci.json").read_text())
    bad["pairs"] = []
    (tmp_path / "r" / "pairwise_rci.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match="pairs"):
        bayesrc.load(tmp_path / "r")


def test_api_refuses_a_z_and_a_family_alpha_together_and_unknown_versions():
    fam = simulate_family(20, 10, versions=3, seed=1)
    with pytest.raises(ValueError, match="not both"):
        pairwise_rci(fam.counts, z=2.0, family_alpha=0.05)
    with pytest.raises(ValueError, match="model-v9"):
        pairwise_rci(fam.counts, versions=["model-v1", "model-v9"])
    with pytest.raises(ValueError, match="two or more"):
        pairwise_rci(fam.counts, versions=["model-v1"])
    with pytest.raises(ValueError, match="alpha"):
        pairwise_rci(fam.counts, family_alpha=1.5)


@pytest.fixture(scope="module")
def family_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("family")
    fam = simulate_family(100, 10, versions=3, shifts=[0.8, -0.8], seed=3)
    paths = []
    for label, trials in zip(fam.versions, fam.trials):
        paths.append(str(folder / f"{label}.parquet"))
        save_trials(trials, paths[-1])
    return paths


QUICK_CLI = ["--null-replicates", "20", "--splits", "50", "--permutations", "50"]


def test_cli_family_writes_the_result_and_its_report(family_files, tmp_path, capsys):
    from bayesrc.cli import main

    out = tmp_path / "out"
    assert main(["rci", "--family", *family_files, "--family-alpha", "0.05", *QUICK_CLI, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "pairwise_rci.json",
        "pairwise_rci_items.parquet",
        "pairwise_rci_pairs.parquet",
    ]
    res = bayesrc.load(out)
    # names from the trials' model field
    assert type(res) is PairwiseRCI and res.versions == ["model-v1", "model-v2", "model-v3"]
    assert res.z == pytest.approx(family_wise_z(0.05, 3)) and res.multiplicity["s_diff_method"] == "binomial"
    printed = capsys.readouterr().out
    assert res.multiplicity_sentence() in printed and f"wrote {out / 'pairwise_rci.json'}" in printed
    assert main(["report", str(out), "--format", "md"]) == 0
    md = (out / "report_run.md").read_text()
    assert "## Pairwise reliable change in a family of versions" in md and res.multiplicity_sentence() in md
    assert (
        "| pair | analysable | improved | deteriorated | flagged | expected, no-change null | null 97.5% "
        "| expected, nominal rate |" in md
    )
    assert all(f"| {name} |" in md for name in res.names)


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--family-alpha", "0.05", "--z", "2"], "--family-alpha"),
        (["--family-alpha", "1.5"], "--family-alpha"),
        (["--null-replicates", "-1"], "--null-replicates"),
    ],
)
def test_cli_family_refuses_bad_options_in_one_line_writing_nothing(family_files, tmp_path, capsys, argv, field):
    from bayesrc.cli import main

    assert main(["rci", "--family", *family_files, *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bayesrc: error:") and field in err[0]
    assert not (tmp_path / "out").exists()


def test_cli_family_refuses_a_bad_trials_file_two_files_a_repeated_file_and_a_pair_with_a_family_alpha(
    family_files, tmp_path, capsys
):
    from bayesrc.cli import main

    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not a parquet file")
    cases = [
        ([*family_files[:2], str(broken)], str(broken)),
        (family_files[:2], "three or more"),
        ([*family_files, family_files[0]], "given twice"),
    ]
    for files, says in cases:
        assert main(["rci", "--family", *files, *QUICK_CLI, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bayesrc: error:") and says in err[0], err
        assert not (tmp_path / "out").exists()
    assert (
        main(["rci", "--pair", "a", *family_files[:2], "--family-alpha", "0.05", "--out", str(tmp_path / "out")]) == 2
    )
    assert "--family-alpha" in capsys.readouterr().err and not (tmp_path / "out").exists()


def _joint_stand_in(versions: list[str], items: list[str]):
    """A JointFit built from random accuracy draws (no sampler): what the report reads of one (tables, gate, bands)."""
    from bayesrc.bayes.diagnostics import Diagnostics
    from bayesrc.bayes.joint_fit import JointFit, item_table, version_table
    from bayesrc.config import GateConfig

    rng = np.random.default_rng(0)
    p = rng.beta(2, 2, size=(200, len(items), 1)) * np.linspace(0.6, 1.0, len(versions))
    tables = {
        "versions": version_table(p, versions),
        "items": item_table(p, np.full((200, len(items), len(versions) - 1), 0.5), items, ["d"] * len(items), versions),
    }
    diag = Diagnostics(1.002, 800.0, 650.0, 0, True, GateConfig().thresholds, "")
    payload = {
        "status": "ok",
        "model": "joint",
        "backend": "numpyro",
        "diagnostics": diag.to_dict(),
        "params": {"versions": versions, "n_items": len(items), "q": 0.1},
        "warnings": [],
    }
    return JointFit(payload, tables)


def test_report_puts_the_pairwise_table_in_the_family_section_beside_a_joint_fit(tmp_path):
    """With a joint fit in the same run directory the pairwise table and sentence sit in "A family of
    versions" (no section of their own); without it, in their own section (test_cli_family_... above)."""
    from bayesrc.report import build_report, load_run, report_sections

    fam = simulate_family(60, 10, versions=3, seed=5)
    res = pairwise_rci(fam.counts, **QUICK)
    res.save(tmp_path / "run")
    # beside it: staged_output keeps the folder's other files
    _joint_stand_in(fam.versions, list(fam.counts["item"].values)).save(tmp_path / "run")
    run = load_run(tmp_path / "run")
    assert run.pairwise == res and run.joint is not None
    sections = report_sections(run, None)
    assert [s.key for s in sections] == ["joint"]
    text = " ".join(b.text for b in sections[0].blocks if hasattr(b, "text"))
    assert res.multiplicity_sentence() in text
    html = build_report(tmp_path / "run", fmt="html")["run"].read_text()
    assert "A family of versions" in html and "Pairwise reliable change in a family of versions" not in html
    assert "expected, no-change null" in html and all(name.replace(">", "&gt;") in html for name in res.names)
