"""Exact runs as data (reader, K-sample draws) and ``bayesrc truth`` scored against known Delta p."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesrc
from bayesrc.data import (
    exact_truth,
    item_counts,
    letter_shift_truth,
    load_exact,
    normalise_trials,
    sample_from_exact,
    write_exact_run,
)
from bayesrc.errors import InputError


def dist_from_truth(truth: pd.DataFrame, col: str, letters: str = "ABC", p_missing: float = 0.0) -> pd.DataFrame:
    """Answer distributions with P(correct letter) = truth[col] (among valid answers), the rest
    spread evenly over the other letters, and ``p_missing`` on "no valid answer"."""
    rows = []
    for r in truth.itertuples(index=False):
        p = getattr(r, col)
        others = [x for x in letters if x != r.correct_answer]
        rows.append((r.item_id, r.domain, r.correct_answer, (1 - p_missing) * p, True))
        rows += [(r.item_id, r.domain, x, (1 - p_missing) * (1 - p) / len(others), False) for x in others]
        if p_missing:
            rows.append((r.item_id, r.domain, None, p_missing, pd.NA))
    return pd.DataFrame(rows, columns=["item_id", "domain", "answer", "prob", "is_correct"])


@pytest.fixture(scope="module")
def exact_pair(tmp_path_factory):
    """Two exact runs of a letter-shaped version change (60 items, known Delta p)."""
    root = tmp_path_factory.mktemp("exact")
    truth = letter_shift_truth(60, seed=3)
    a = write_exact_run(root / "v1", dist_from_truth(truth, "p_v1", p_missing=0.02), label="sim-q4")
    b = write_exact_run(root / "v2", dist_from_truth(truth, "p_v2"), label="sim-q3")
    return a, b, truth


def test_load_exact_gives_known_p_and_the_correct_letter(exact_pair):
    a, b, truth = exact_pair
    run = load_exact(a)
    assert run.label == "sim-q4" and run.n_items == 60
    np.testing.assert_allclose(run.items["p"], truth["p_v1"], atol=1e-12)  # accuracy among valid answers
    np.testing.assert_allclose(run.items["p_correct"], 0.98 * truth["p_v1"], atol=1e-12)
    assert list(run.items["correct_answer"]) == list(truth["correct_answer"])
    t = exact_truth(a, b)
    np.testing.assert_allclose(t["delta_p"], truth["delta_p"], atol=1e-12)


def test_sample_from_exact_is_reproducible_order_free_and_matches_the_distribution(exact_pair):
    a, _, truth = exact_pair
    t1 = sample_from_exact(a, 10, seed=5)
    assert t1.equals(sample_from_exact(a, 10, seed=5)) and not t1.equals(sample_from_exact(a, 10, seed=6))
    # An item's draws do not depend on which other items the run holds.
    run = load_exact(a)
    sub = type(run)(run.path, run.label, run.items.iloc[::-1].iloc[:7].reset_index(drop=True), run.dist, run.record)
    s = sample_from_exact(sub, 10, seed=5).set_index(["item_id", "k"]).sort_index()
    full = t1.set_index(["item_id", "k"]).loc[s.index]
    assert s["extracted"].equals(full["extracted"])
    # The canonical trials layout, with the letters and missing answers of the distribution.
    canon = normalise_trials(t1)
    assert len(canon) == 600 and set(canon["extracted"].dropna()) <= set("ABC")
    ok = canon[~canon["is_missing"]]
    assert (ok["is_correct"] == (ok["extracted"] == ok["correct_answer"])).all()
    # Frequencies: 4,000 draws per item against P(correct) and P(missing), pooled chi-square.
    big = sample_from_exact(a, 4000, seed=1)
    g = big.groupby("item_id", sort=False)
    p = run.items.set_index("item_id").loc[list(g.groups), "p_correct"].to_numpy()
    n_corr = g["is_correct"].sum().to_numpy(float)
    chi2 = np.sum((n_corr - 4000 * p) ** 2 / (4000 * p * (1 - p)))
    assert stats.chi2.sf(chi2, len(p)) > 1e-3
    assert abs(big["is_missing"].mean() - 0.02) < 0.003
    counts = item_counts(t1, sample_from_exact(exact_pair[1], 10, seed=7))
    assert list(counts["correct_answer"].values) == list(truth["correct_answer"])


def test_exact_reader_bad_input_is_one_clear_error(tmp_path, exact_pair):
    bad = tmp_path / "bad"
    bad.mkdir()
    items = pd.read_parquet(exact_pair[0] / "items_exact.parquet")
    items.loc[3, "p_missing"] = 1.7
    items.to_parquet(bad / "items_exact.parquet")
    pd.read_parquet(exact_pair[0] / "dist.parquet").to_parquet(bad / "dist.parquet")
    with pytest.raises(InputError, match=r"items_exact.parquet:4: field 'p_missing'"):
        load_exact(bad)
    trials_run = tmp_path / "sampled"
    trials_run.mkdir()
    sample_from_exact(exact_pair[0], 2, 0).to_parquet(trials_run / "trials.parquet")
    with pytest.raises(InputError, match="trials.*exact run is needed"):
        load_exact(trials_run)
    unfinished = tmp_path / "unfinished"  # a collected exact run stopped before its last two files
    unfinished.mkdir()
    (unfinished / "run.json").write_text('{"status": "running", "pins": {"runtime.engine": "exact"}}')
    with pytest.raises(InputError, match="not complete: resume it"):
        load_exact(unfinished)
    with pytest.raises(InputError, match="sum to"):
        write_exact_run(
            tmp_path / "x",
            pd.DataFrame({"item_id": ["a"], "domain": ["d"], "answer": ["A"], "prob": [0.5], "is_correct": [True]}),
            label="x",
        )


def test_score_classes_by_hand():
    from bayesrc.truth import score_classes

    cls = ["improved", "improved", "deteriorated", "no_change", "deteriorated", "excluded"]
    dp = np.array([0.20, 0.02, 0.10, 0.5, -0.3, -0.4])
    s = score_classes(cls, dp, delta_min=0.05)
    assert (s["flagged"], s["false_sign"], s["false_material"]) == (4, 1, 2)
    assert s["fdp_sign"] == 0.25 and s["fdp_material"] == 0.5
    assert score_classes(["no_change"], [0.1])["fdp_sign"] == 0.0


@pytest.mark.slow
def test_cli_truth_writes_scores_and_a_report_section(tmp_path, exact_pair):
    from bayesrc.cli import main
    from bayesrc.report import build_report
    from bayesrc.truth import TruthResult

    a, b, truth = exact_pair
    out = tmp_path / "truth"
    args = [
        "truth",
        str(a),
        str(b),
        "--k",
        "10",
        "--replicates",
        "2",
        "--seed",
        "1",
        "--methods",
        "change,betabinom",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    tj = json.loads((out / "truth.json").read_text())
    for key in ("k", "replicates", "delta_min", "n_items"):
        assert key in tj
    assert (tj["k"], tj["replicates"], tj["n_items"]) == (10, 2, 60)
    assert {"flagged_mean", "fdp_sign", "fdp_material"} <= set(tj["rci"])
    assert {
        "selected_mean",
        "fdp_sign",
        "fdp_material",
        "coverage90",
        "rci_fdp_estimate_mean",
        "rci_fdp_estimate_material_mean",
    } <= set(tj["model"])
    assert {"rci", "rci_conservative", "rci_all_items", "rci_sd_all", "change", "betabinom"} == set(tj["methods"])
    rep = pd.read_parquet(out / "truth_replicates.parquet")
    assert len(rep) == 2 * 6 and set(rep["replicate"]) == {0, 1}
    # Scores recomputed from the replicate table agree with truth.json.
    assert tj["rci"]["fdp_sign"] == pytest.approx(rep.loc[rep["method"] == "rci", "fdp_sign"].mean())
    # The material estimate is set beside RCI's realised material FDP of the same replicates.
    by = {m: g.set_index("replicate") for m, g in rep.groupby("method")}
    scored = by["change"].index[by["change"]["rci_fdp_estimate"].notna()]
    assert tj["model"]["rci_fdp_realised_material_mean"] == pytest.approx(by["rci"].loc[scored, "fdp_material"].mean())
    # A material false discovery includes a sign one (up to Monte Carlo error: P(improve) is Rao-Blackwellised).
    assert tj["model"]["rci_fdp_estimate_material_mean"] >= tj["model"]["rci_fdp_estimate_mean"] - 0.02
    assert 0 <= tj["model"]["coverage90"] <= 1
    # Whether each change-model fit warned that its estimate moves with the priors; the beta-binomial has no such check.
    warned = by["change"].loc[scored, "rci_fdp_prior_sensitive"]
    assert set(warned) <= {0.0, 1.0} and tj["model"]["rci_fdp_prior_sensitive_share"] == pytest.approx(
        by["change"]["rci_fdp_prior_sensitive"].mean()
    )
    assert by["betabinom"]["rci_fdp_prior_sensitive"].isna().all()
    # Each model's 90% interval of RCI's FDP, and whether it held RCI's realised FDP of that replicate.
    for m in ("change", "betabinom"):
        g = by[m].loc[scored]
        assert (g["rci_fdp_lo90"] <= g["rci_fdp_estimate"] + 0.02).all() and (
            g["rci_fdp_estimate"] - 0.02 <= g["rci_fdp_hi90"]
        ).all()
        held = (
            (g["rci_fdp_lo90"] <= by["rci"].loc[scored, "fdp_sign"])
            & (by["rci"].loc[scored, "fdp_sign"] <= g["rci_fdp_hi90"])
        ).astype(float)
        assert g["rci_fdp_covered90"].tolist() == held.tolist()
        assert tj["methods"][m]["rci_fdp_interval_coverage"] == pytest.approx(held.mean())
        # where the no-change test did not reject, the interval runs to 1 (every flag false if nothing changed)
        assert (g.loc[g["no_change_p"] >= 0.10, "rci_fdp_hi90"] == 1.0).all()
        assert tj["methods"][m]["no_change_rejected_share"] == pytest.approx((by[m]["no_change_p"] < 0.10).mean())
    assert (by["change"]["no_change_p"] == by["betabinom"]["no_change_p"]).all()  # a function of the data alone
    # PSIS-LOO of each collapsed fit is recorded beside its truth scores (choosing models on both).
    bayes = rep[rep["kind"] == "bayes"]
    assert np.isfinite(bayes["elpd_loo"]).all() and (bayes["elpd_loo_se"] > 0).all()
    assert tj["methods"]["change"]["elpd_loo_mean"] == pytest.approx(
        bayes.loc[bayes["method"] == "change", "elpd_loo"].mean()
    )
    res = TruthResult.load(out)
    assert res.to_dict() == tj and TruthResult.from_dict(res.to_dict()).summary().shape[0] == 6
    html = build_report(out)["run"].read_text()
    assert "Real-model truth" in html and "data:image/png;base64" in html
    # Bad input: a trials run where an exact run is needed; a bad --delta-min. One line, exit 2, nothing written.
    assert main(["truth", str(a), str(tmp_path), "--out", str(tmp_path / "t2")]) == 2
    assert main(["truth", str(a), str(b), "--delta-min", "1.5", "--out", str(tmp_path / "t3")]) == 2
    assert not (tmp_path / "t2").exists() and not (tmp_path / "t3").exists()


def test_family_truth_scores_every_version_against_the_reference_and_reports_it(tmp_path, exact_pair):
    """Three exact runs, the third identical to the reference: the family's exact accuracies are the runs',
    every RCI flag on the unchanged version is a false discovery, the scores are the replicate table's
    means, and the result round-trips and has its report section. Bad input is one line, exit 2."""
    from bayesrc.classical import reliable_change
    from bayesrc.cli import main
    from bayesrc.report import build_report
    from bayesrc.truth import FamilyTruth, family_truth, score_classes
    from bayesrc.truth.replicates import family_replicates

    a, b, truth = exact_pair
    same = write_exact_run(tmp_path / "v3", dist_from_truth(truth, "p_v1", p_missing=0.02), label="sim-same")
    res = family_truth([a, b, same], k=10, replicates=2, seed=1, methods=())
    assert res.versions == ["sim-q4", "sim-q3", "sim-same"] and res.n_items == 60 and res.bands is None
    np.testing.assert_allclose(
        res.items.set_index("item_id").loc[truth["item_id"], ["sim-q4", "sim-q3"]].to_numpy(),
        truth[["p_v1", "p_v2"]].to_numpy(),
        atol=1e-12,
    )
    assert res.exact["median_abs_dp"]["sim-same"] == 0 and res.exact["mean_accuracy"]["sim-q3"] == pytest.approx(
        truth["p_v2"].mean()
    )
    rep = res.per_replicate
    assert len(rep) == 2 * 3 and set(rep["method"]) == {"rci"}
    unchanged = rep[rep["version"] == "sim-same"]
    assert (unchanged["false_sign"] == unchanged["flagged"]).all()
    # the step sim-q3 -> sim-same undoes the change: RCI on that pair, scored against p_same - p_q3
    step = rep[rep["version"] == "sim-q3 -> sim-same"].set_index("replicate")
    by_hand = [
        score_classes(
            reliable_change(c, "sim-q3", "sim-same", n_splits=200, n_permutations=200, seed=r)
            .to_frame()
            .set_index("item_id")
            .reindex(c["item"].values)["class"]
            .to_numpy(dtype=object),
            p[:, 2] - p[:, 1],
        )
        for r, c, p, _ in family_replicates(
            [load_exact(x) for x in (a, b, same)], k=10, seed=1, replicates=range(2), labels=res.versions
        )
    ]
    assert [step.loc[r, "flagged"] for r in (0, 1)] == [h["flagged"] for h in by_hand] and min(
        h["flagged"] for h in by_hand
    ) > 0
    assert [step.loc[r, "false_sign"] for r in (0, 1)] == [h["false_sign"] for h in by_hand]
    changed = rep[rep["version"] == "sim-q3"]
    assert (
        res.scores["rci"]["sim-q3"]["fdp_sign"] == pytest.approx(changed["fdp_sign"].mean())
        and changed["flagged"].min() > 0
    )
    res.save(tmp_path / "ft")
    back = bayesrc.load(tmp_path / "ft")
    assert (
        type(back) is FamilyTruth
        and back == res
        and back.summary().equals(res.summary())
        and "<table" in back._repr_html_()
    )
    html = build_report(tmp_path / "ft")["run"].read_text()
    assert "Real-model truth of a family of versions" in html and "sim-same" in html and "sim-q3 -&gt; sim-same" in html
    assert 'id="fig-family_truth"><img alt="Per version or step and method' in html and "data:image/png" in html
    # A family has no --fdr (its joint model selects nothing), a pair's methods are not a family's, one run is not a
    # comparison.
    for bad in (["--fdr", "0.1"], ["--methods", "change"]):
        assert main(["truth", str(a), str(b), str(same), *bad, "--no-progress", "--out", str(tmp_path / "t")]) == 2
    assert main(["truth", str(a), "--out", str(tmp_path / "t")]) == 2
    assert not (tmp_path / "t").exists()


BUNDLED_WITH_CARDS = [
    ("q4", "gemma-3-270m-q4_k_m.toml"),
    ("q4-prompt2", "gemma-3-270m-q4_k_m-prompt2.toml"),
    ("family/q4", "gemma-3-270m-q4_k_m.toml"),
    ("family/q4-prompt2", "gemma-3-270m-q4_k_m-prompt2.toml"),
    ("family/q4-prompt3", "gemma-3-270m-q4_k_m-prompt3.toml"),
]
FAMILY = ("q4", "q3", "q2", "q4-prompt2", "q4-prompt3")


@pytest.mark.parametrize("version, card", BUNDLED_WITH_CARDS)
def test_bundled_exact_gemma_runs_match_the_repository_cards_and_bank(version, card):
    """The bundled real-model truth (bayesrc/datasets/exact_gemma) was computed from the cards and
    bank in this repository: its pins equal the hashes of today's card prompt and bank file, so
    `bayesrc truth` on it scores the versions a user would collect."""
    from pathlib import Path

    from bayesrc.collect.card import load_card, sha256_file, sha256_text
    from bayesrc.datasets import path

    pins = json.loads((path(f"exact_gemma/{version}") / "run.json").read_text())["pins"]
    c = load_card(Path(__file__).parents[1] / "models" / card)
    assert pins["prompt.system_sha256"] == sha256_text(c.system)
    assert pins["prompt.template_sha256"] == sha256_text(c.template)
    assert pins["items.bank_sha256"] == sha256_file(path("exact_gemma/demo300.jsonl"))
    assert pins["model.label"] == c.label


def test_bundled_exact_gemma_family_is_evaluated_alike():
    """The five-version family (bayesrc/datasets/exact_gemma/family) compares like with like: each run
    differs from the reference's only in the model (weights, label, seed salt) or, for the prompt
    variants, the prompt; the llama.cpp build and the prompt's evaluation blocks are one. The three
    runs of issue 12 beside it were evaluated otherwise (whole prompt, another build), which moves an
    item's exact accuracy by up to ~0.07: they are not members."""
    from bayesrc.data import compare_runs
    from bayesrc.datasets import path

    ref = path("exact_gemma/family/q4")
    for v in FAMILY[1:]:
        comp = compare_runs(ref, path(f"exact_gemma/family/{v}"), allow=("prompt",) if "prompt" in v else ())
        assert comp.comparable, comp.summary()
        assert set(comp.differences["field"]) <= {
            "model.file_name",
            "model.file_sha256",
            "model.label",
            "model.seed_salt",
            "prompt.system_sha256",
            "prompt.shared_sha256",
        }
    assert not compare_runs(ref, path("exact_gemma/q4")).comparable
    runs = [load_exact(path(f"exact_gemma/family/{v}")) for v in FAMILY]
    assert (
        all(r.items["item_id"].tolist() == runs[0].items["item_id"].tolist() for r in runs)
        and len(runs[0].items) == 300
    )


def test_bundled_exact_gemma_pair_is_a_real_letter_shaped_change():
    """The real Q4_K_M -> Q3_K_M truth: every item's distribution sums to 1 - p_unresolved, and the
    change follows the correct letter (A-keyed items rise, B-keyed fall) - the structure the
    change model's covariate is for."""
    from bayesrc.datasets import path

    q4, q3 = load_exact(path("exact_gemma/q4")), load_exact(path("exact_gemma/q3"))
    t = exact_truth(q4, q3)
    assert len(t) == 300
    for run in ("q4", "q3"):
        dist = pd.read_parquet(path(f"exact_gemma/{run}") / "dist.parquet")
        items = pd.read_parquet(path(f"exact_gemma/{run}") / "items_exact.parquet").set_index("item_id")
        total = dist.groupby("item_id")["prob"].sum()
        np.testing.assert_allclose(total, 1 - items.loc[total.index, "p_unresolved"], atol=1e-9)
    by = t.groupby("correct_answer")["delta_p"].mean()
    assert by["A"] > 0.1 and by["B"] < -0.1, by
