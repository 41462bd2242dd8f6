"""The joint change model of a family of versions (issue 32): its likelihood against the pair
model's and against direct integration, known-truth recovery (per-item change coverage, rank bands,
P(best)) with the default sampler and gate, the PyMC twin, the result's round trip and the CLI.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from helpers import assert_one_log_density

from bayesrc.bayes.change_grid import cell_stats, likelihood_tables, strata_hyper
from bayesrc.bayes.change_likelihood import _ops, cell_loglik
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.joint import family_cells, family_loglik, family_tables
from bayesrc.bayes.joint_fit import ITEM_CHANGE_COLUMNS, JointFit, rank_bands
from bayesrc.data import save_trials, simulate_family
from bayesrc.errors import InputError

# The main family: a clearly better, an unchanged-on-average and a clearly worse version against the reference.
MAIN = {
    "n_items": 300,
    "k": 10,
    "versions": 4,
    "shifts": [1.0, 0.0, -1.0],
    "pi_change": 0.5,
    "sigma_delta": 1.5,
    "seed": 2,
}


@pytest.fixture(scope="module")
def family():
    return simulate_family(**MAIN)


@pytest.fixture(scope="module")
def joint(family):
    """The NumPyro fit with the default sampler settings and gate, through :func:`bayesrc.bayes.fit`."""
    from bayesrc.bayes import fit

    return fit(family.counts)


def _inputs(y, n, dom, n_domains, group=None, n_groups=1):
    return ModelInputs(
        y=np.asarray(y),
        n=np.asarray(n),
        dom=np.asarray(dom),
        items=np.arange(len(y)).astype(str),
        versions=tuple(f"v{i}" for i in range(np.shape(y)[1])),
        domains=tuple(f"d{i}" for i in range(n_domains)),
        group=None if group is None else np.asarray(group),
        groups=tuple("ABCDEFGHIJ"[:n_groups]),
    )


@pytest.mark.parametrize("n_groups", [1, 3])
def test_joint_likelihood_of_two_versions_is_the_pair_models(n_groups):
    """With V = 2 the joint likelihood is the pair model's cell likelihood (same grid, kernel and
    prior weights, contracted in another order), per item to 1e-8: floor, ceiling, unequal K and an
    item without valid version-1 responses included; with an item covariate of 3 levels too (the
    hyperparameters expanded to (domain, level) strata by the one ``strata_hyper``)."""
    rng = np.random.default_rng(0)
    n = rng.choice([7, 10, 12], size=(80, 2))
    n[3, 0] = 0
    y = np.minimum(rng.integers(0, 13, size=(80, 2)), n)
    y[:4] = [[0, 0], [10, 10], [0, 10], [0, 5]]
    n[:3] = 10
    data = _inputs(y, n, rng.integers(0, 3, 80), 3, rng.integers(0, n_groups, 80) if n_groups > 1 else None, n_groups)
    pair, cells = cell_stats(data), family_cells(data)
    assert cells.n_strata == pair.n_strata
    mu, sd, shift = np.array([0.3, -0.5, 1.0]), np.array([1.2, 0.8, 2.0]), np.array([0.4, -0.7, 0.1])
    alpha, gamma = np.array([0.3, -0.1, -0.2])[:n_groups], np.array([-0.4, 0.1, 0.3])[:n_groups]
    eta = rng.normal(0.0, 0.3, pair.n_strata) if n_groups > 1 else 0.0
    for tau, pi in ((0.6, 0.7), (0.15, 0.95), (3.0, 0.2)):
        spread = tau * np.array([1.0, 0.5, 2.0])[:n_groups] if n_groups > 1 else np.array(tau)
        strata = strata_hyper(pair, mu, sd, shift, alpha, gamma, eta, spread)
        ll_pair = cell_loglik(_ops("numpy"), *strata, 0.0, pi, likelihood_tables(pair))[: pair.n_cells][pair.item_cell]
        per_change = strata_hyper(
            cells,
            mu,
            sd,
            shift[None],
            alpha,
            gamma if n_groups == 1 else gamma[None],
            np.asarray(eta)[None],
            spread[None],
        )
        ll_joint = family_loglik(_ops("numpy"), *per_change, np.array([pi]), family_tables(cells))[: cells.n_cells][
            cells.item_cell
        ]
        np.testing.assert_allclose(ll_joint, ll_pair, rtol=0, atol=1e-8)


def _family_reference(mu, sd, shifts, taus, pis, n, y, half=10.0):
    """One item's joint likelihood by brute force (scipy's Simpson rule on 6,001 theta x 1,601 change
    nodes spanning +-12 SD of each normal): theta ~ Normal(mu, sd), each other version's changed
    accuracy ``expit(x)``, x ~ Normal(theta + shift_v, tau_v), with the model's spreads on its grid
    (half a 0.2 step added: grid_spread) and the binomials held at +-10 logits beyond (what the
    grid's end nodes stand for)."""
    from scipy.integrate import simpson
    from scipy.special import comb, expit
    from scipy.stats import norm

    def binom(yy, nn, x):
        p = expit(np.clip(x, -half, half))
        return comb(nn, yy) * p**yy * (1.0 - p) ** (nn - yy)

    sd_g, tau_g = np.hypot(sd, 0.1), np.hypot(taus, 0.1)
    theta, z = np.linspace(mu - 12 * sd_g, mu + 12 * sd_g, 6001), np.linspace(-12, 12, 1601)
    integrand = norm.pdf(theta, mu, sd_g) * binom(y[0], n[0], theta)
    for v in range(len(shifts)):
        changed = simpson(
            norm.pdf(z) * binom(y[v + 1], n[v + 1], (theta + shifts[v])[:, None] + tau_g[v] * z), x=z, axis=1
        )
        integrand = integrand * ((1 - pis[v]) * binom(y[v + 1], n[v + 1], theta) + pis[v] * changed)
    return simpson(integrand, x=theta)


@pytest.mark.parametrize("y", [[3, 7, 1], [10, 0, 8], [0, 0, 2]])
def test_joint_likelihood_of_three_versions_matches_direct_integration(y):
    """One item, V = 3: the grid integral against a brute-force Simpson integration of the model's integral, to 1e-5."""
    from scipy.special import comb

    n = [10, 10, 8]
    mu, sd, shifts, taus, pis = 0.4, 1.3, np.array([0.8, -0.5]), np.array([0.5, 1.5]), np.array([0.7, 0.4])
    cells = family_cells(_inputs([y], [n], [0], 1))
    ll = family_loglik(
        _ops("numpy"), np.array([mu]), np.array([sd]), shifts[:, None], taus[:, None], pis, family_tables(cells)
    )[0]
    ll += sum(np.log(comb(nn, yy)) for nn, yy in zip(n, y))  # the model leaves the constants out
    np.testing.assert_allclose(np.exp(ll), _family_reference(mu, sd, shifts, taus, pis, n, y), rtol=1e-5)


def test_rank_bands_chain_overlapping_intervals_and_separate_the_rest():
    """On random intervals: bands are contiguous in the order of the means, versions in different bands
    have disjoint rank intervals, and each band boundary is a place where no interval crosses."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        v = rng.integers(2, 7)
        mean = rng.normal(size=v)
        lo = rng.integers(1, v + 1, v)
        hi = np.minimum(lo + rng.integers(0, 3, v), v)
        band = rank_bands(mean, lo, hi)
        order = np.argsort(-mean)
        assert band[order[0]] == 1 and np.all(np.diff(band[order]) >= 0) and np.all(np.diff(band[order]) <= 1)
        for a in range(v):
            for b in range(v):
                if band[a] < band[b]:
                    assert hi[a] < lo[b]
        for k in range(1, v):  # a boundary after position k-1 exactly where no interval crosses
            crossing = hi[order[:k]].max() >= lo[order[k:]].min()
            assert (band[order[k]] == band[order[k - 1]]) == crossing


def test_fit_of_three_or_more_versions_is_the_joint_model_and_passes_the_default_gate(joint, family):
    assert isinstance(joint, JointFit) and joint.status == "ok" and joint.diagnostics.passed
    assert joint.versions == family.versions
    post = joint.posterior["posterior"]
    assert post["p"].dims == ("chain", "draw", "item", "version") and post["shift"].dims == (
        "chain",
        "draw",
        "change",
        "domain",
    )
    assert list(post["change"].values) == family.versions[1:]
    summary = joint.summary().set_index("metric")["value"]
    assert summary["status"] == "ok" and all(f"version {v}" in summary.index for v in family.versions)
    steps = joint.version_changes()
    for a, b, up in zip(family.versions, family.versions[1:], steps["items_up"]):
        assert (
            summary[f"step {a} -> {b}"].startswith("accuracy change ")
            and f"items up {up}," in summary[f"step {a} -> {b}"]
        )


def test_per_item_change_intervals_cover_the_true_change(joint, family):
    """90% intervals of dp_iv = p_iv - p_i1 against the truth over 300 items x 3 versions: within
    0.9 +- 0.045, 4.5 binomial SEs of a coverage over 900 independent intervals (sqrt(0.09 / 900) = 0.01;
    the items share hyperparameters, so their misses are not quite independent)."""
    items = joint.items[joint.items["version"] != family.versions[0]]
    truth = (
        pd.DataFrame(family.p - family.p[:, :1], columns=family.versions)
        .assign(item_id=family.truth["item_id"])
        .melt("item_id", var_name="version", value_name="true_dp")
    )
    merged = items.merge(truth, on=["item_id", "version"], validate="one_to_one")
    assert len(merged) == 900
    covered = ((merged["true_dp"] >= merged["dp_lo90"]) & (merged["true_dp"] <= merged["dp_hi90"])).mean()
    assert abs(covered - 0.9) <= 0.045, covered


def test_consecutive_change_intervals_cover_the_true_change(joint, family):
    """The chain of consecutive changes (v1 -> v2 -> v3 -> v4, a ladder) from the same draws: the 90%
    intervals of p_iv - p_i,v-1 cover the truth over 300 items x 3 steps as the reference changes do
    (0.9 +- 0.045); each step's posterior change in mean accuracy holds the true one; and
    ``between="reference"`` gives the items table's dp exactly."""
    steps = joint.item_changes()
    assert list(steps.columns) == list(ITEM_CHANGE_COLUMNS) and len(steps) == 900
    col = {v: j for j, v in enumerate(family.versions)}
    row = pd.Series(np.arange(len(family.truth)), index=family.truth["item_id"])[steps["item_id"]].to_numpy()
    true_dp = family.p[row, steps["to"].map(col)] - family.p[row, steps["from"].map(col)]
    covered = ((true_dp >= steps["dp_lo90"]) & (true_dp <= steps["dp_hi90"])).mean()
    assert abs(covered - 0.9) <= 0.045, covered
    acc = joint.version_changes()
    assert list(zip(acc["from"], acc["to"])) == list(zip(family.versions, family.versions[1:]))
    # the steps share versions (an overestimated v2 moves v1 -> v2 up and v2 -> v3 down), so not "every
    # 90% interval holds": each step's true change within 3 posterior SDs (from its 90% interval's width)
    true_dacc = np.diff(family.p, axis=1).mean(0)
    sd = (acc["dacc_hi90"] - acc["dacc_lo90"]) / 3.29
    assert (np.abs(acc["dacc_mean"] - true_dacc) <= 3 * sd).all(), (acc, true_dacc)
    ref = joint.item_changes("reference").merge(
        joint.items, left_on=["item_id", "to"], right_on=["item_id", "version"], validate="one_to_one"
    )
    assert (
        len(ref) == 900
        and (ref["dp_mean_x"] == ref["dp_mean_y"]).all()
        and (ref["dp_lo90_x"] == ref["dp_lo90_y"]).all()
    )
    with pytest.raises(ValueError, match="no version nope"):
        joint.item_changes([(family.versions[0], "nope")])


def test_rank_bands_and_p_best_follow_the_true_order(joint, family):
    """Bands respect the true order of mean accuracy (a version in a better band is truly better), the
    true best (its changed items 1 logit up on average) has the highest P(best), and the clearly separated
    versions (best and worst) sit in bands of their own."""
    table = joint.versions_table.set_index("version")
    true = family.mean_accuracy
    for a in table.index:
        for b in table.index:
            if table.loc[a, "band"] < table.loc[b, "band"]:
                assert true[a] > true[b], (a, b)
    best, worst = true.idxmax(), true.idxmin()
    assert table["p_best"].idxmax() == best and table.loc[best, "p_best"] > 0.9
    assert (table["band"] == table.loc[best, "band"]).sum() == 1 and (
        table["band"] == table.loc[worst, "band"]
    ).sum() == 1
    assert np.isclose(table["p_best"].sum(), 1.0)
    per_item = joint.items.groupby("item_id")["p_best"].sum()
    np.testing.assert_allclose(per_item, 1.0, atol=1e-6)


def test_joint_fit_round_trips_through_save_and_load(joint, tmp_path):
    import bayesrc

    joint.save(tmp_path / "joint")
    back = bayesrc.load(tmp_path / "joint")
    assert isinstance(back, JointFit) and back == joint
    assert back.bands() == joint.bands()
    for versions in ([], ["v1"], None):  # found at 1,000 joint.json inputs: no versions was an IndexError in the report
        doc = json.loads((tmp_path / "joint" / "joint.json").read_text())
        doc["params"]["versions"] = versions
        (tmp_path / "joint" / "joint.json").write_text(json.dumps(doc))
        with pytest.raises(
            InputError,
            match=re.escape("joint.json: field 'params.versions': expected a list of two or more version labels"),
        ):
            bayesrc.load(tmp_path / "joint")


def test_a_joint_fit_whose_files_disagree_on_the_versions_is_one_named_line(joint, tmp_path):
    """A joint.json copied in from another fit (other labels, or the same labels in another order) would
    name the posterior's versions wrongly (its ``version`` axis is read by position): loading names the
    file that disagrees, and the CLI says so in one line with exit 2."""
    import bayesrc
    from bayesrc.cli import main

    v = joint.versions
    cases = {"posterior.nc": [v[0], *v[1:][::-1]], "versions.parquet": [*v[:-1], "another"]}
    for culprit, versions in cases.items():
        joint.save(tmp_path / culprit)
        doc = json.loads((tmp_path / culprit / "joint.json").read_text())
        doc["params"]["versions"] = versions
        (tmp_path / culprit / "joint.json").write_text(json.dumps(doc))
        with pytest.raises(InputError, match=re.escape(str(tmp_path / culprit / culprit))):
            bayesrc.load(tmp_path / culprit)
        assert main(["report", str(tmp_path / culprit)]) == 2


@pytest.mark.slow
def test_a_family_with_the_item_covariate_has_its_sites_and_passes_the_default_gate():
    """The default fit of a family whose (domain, letter) strata are few (one domain x 10 letters) has the
    pair model's item covariate: it passes the default gate and the covariate's sites have their dims. The PyMC
    twin is the same density (``test_twins_have_one_log_density[covariate]``, stronger than comparing two fits'
    posteriors within Monte Carlo error) and samples end to end in
    ``test_cli_fits_a_no_change_family_into_one_band_and_exits_3_on_a_failed_gate``."""
    from bayesrc.bayes import fit

    fam = simulate_family(120, 10, versions=3, shifts=[0.8, -0.8], seed=4, domains=["law"])
    res = fit(fam.counts)
    assert res.status == "ok", res.diagnostics
    assert res.payload["params"]["covariate"] == "correct_answer"
    post = res.posterior["posterior"]
    assert post["sigma_delta"].dims[2:] == ("change", "group") and post["stratum_shift"].dims[2:] == (
        "change",
        "stratum",
    )


@pytest.mark.parametrize("domains", [None, ["law", "physics"]], ids=["domains", "covariate"])
def test_twins_have_one_log_density(domains):
    """The NumPyro and PyMC twins of the joint model are one density (``assert_one_log_density``), without
    the item covariate (4 domains) and with it (2 domains x 10 letters: the letter and stratum effects too).
    Stronger than comparing two fits' posteriors, and cheap: nothing is sampled."""
    from bayesrc.bayes.inputs import model_inputs
    from bayesrc.bayes.joint import joint_model_numpyro, joint_model_pymc

    fam = simulate_family(60, 10, versions=3, shifts=[0.8, -0.8], seed=4, **({"domains": domains} if domains else {}))
    data = model_inputs(fam.counts, *fam.versions, covariate="auto")
    assert data.n_groups == (10 if domains else 1)
    assert_one_log_density(*joint_model_numpyro(data), joint_model_pymc(data))


@pytest.mark.slow
def test_a_family_truth_scores_the_joint_fit_by_item_and_version(joint, family):
    """What ``bayesrc truth`` scores a family's joint fit with (``fit_scores``, ``band_scores``) against
    this test's own lookup of each item and version: coverage, the interval flags and their false
    signs, and the bands against the true order."""
    from bayesrc.truth.family import band_scores, fit_scores, step_scores

    ids = family.truth["item_id"].to_numpy()
    dp = {v: family.p[:, j] - family.p[:, 0] for j, v in enumerate(family.versions) if j}
    # any item order
    rows = {r["version"]: r for r in fit_scores("joint", joint, ids[::-1], {v: d[::-1] for v, d in dp.items()})}
    assert list(rows) == family.versions[1:]
    for v in family.versions[1:]:
        it = joint.items[joint.items["version"] == v].set_index("item_id").loc[ids]
        lo, hi = it["dp_lo90"].to_numpy(), it["dp_hi90"].to_numpy()
        assert rows[v]["coverage90"] == pytest.approx(np.mean((dp[v] >= lo) & (dp[v] <= hi)))
        assert rows[v]["flagged"] == np.sum((lo > 0) | (hi < 0))
        assert rows[v]["false_sign"] == np.sum((lo > 0) & (dp[v] <= 0) | (hi < 0) & (dp[v] >= 0))
    # the later consecutive steps (v2 -> v3, v3 -> v4): the joint fit's contrasts against p_b - p_a
    steps = {
        (a, b): family.p[:, j + 2] - family.p[:, j + 1]
        for j, (a, b) in enumerate(zip(family.versions[1:-1], family.versions[2:]))
    }
    step_rows = {r["version"]: r for r in step_scores(joint, ids[::-1], {ab: d[::-1] for ab, d in steps.items()})}
    assert list(step_rows) == [f"{a} -> {b}" for a, b in steps]
    changes = joint.item_changes()
    for (a, b), d in steps.items():
        it = changes[(changes["from"] == a) & (changes["to"] == b)].set_index("item_id").loc[ids]
        lo, hi, row = it["dp_lo90"].to_numpy(), it["dp_hi90"].to_numpy(), step_rows[f"{a} -> {b}"]
        assert row["coverage90"] == pytest.approx(np.mean((d >= lo) & (d <= hi))) and row["flagged"] == np.sum(
            (lo > 0) | (hi < 0)
        )
    bands = band_scores(joint, family.mean_accuracy)
    table = joint.versions_table.set_index("version")
    assert bands["order_respected"] and bands["n_bands"] == table["band"].nunique() >= 2
    assert bands["p_best_of_true_best"] == table.loc[family.mean_accuracy.idxmax(), "p_best"]


def test_cli_fits_a_no_change_family_into_one_band_and_exits_3_on_a_failed_gate(tmp_path):
    """`bayesrc fit V1 V2 V3 --out DIR` on a family whose versions are all the same: exit 0, the result
    loads, and every version sits in one band; a gate that cannot pass exits 3 with the output marked failed
    (there on the PyMC twin, which so samples, draws its items and writes and loads its result end to end)."""
    import json

    import bayesrc
    from bayesrc.cli import main

    fam = simulate_family(100, 10, versions=3, pi_change=0.0, seed=5)
    paths = []
    for label, trials in zip(fam.versions, fam.trials):
        paths.append(str(tmp_path / f"{label}.parquet"))
        save_trials(trials, paths[-1])
    assert main(["fit", *paths, "--no-progress", "--out", str(tmp_path / "ok")]) == 0
    res = bayesrc.load(tmp_path / "ok")
    assert isinstance(res, JointFit) and res.status == "ok"
    assert res.bands() == [list(res.versions_table.sort_values("mean_accuracy", ascending=False)["version"])]
    bad = tmp_path / "bad"
    assert (
        main(
            [
                "fit",
                *paths,
                "--backend",
                "pymc",
                "--chains",
                "1",
                "--draws",
                "20",
                "--tune",
                "5",
                "--no-escalate",
                "--no-progress",
                "--out",
                str(bad),
            ]
        )
        == 3
    )
    assert json.loads((bad / "joint.json").read_text())["status"] == "failed"
    failed = bayesrc.load(bad)
    assert (
        failed.summary().set_index("metric").loc["status", "value"] == "failed"
        and failed.gate_table().iloc[-1]["value"] == "FAILED"
    )
    assert failed.posterior.attrs["backend"] == "pymc"
    assert failed.posterior["posterior"]["p"].shape == (1, 20, 100, 3) and len(failed.items) == 100 * 3


def test_pair_only_settings_are_refused_for_a_family_before_sampling(tmp_path, capsys):
    """The joint model has no item selection or RCI cross-check yet, and the beta-binomial
    compares a pair: asked for them on a family, `fit` and the CLI refuse at once instead of ignoring them."""
    from bayesrc.bayes import SelectionConfig, fit
    from bayesrc.cli import main

    fam = simulate_family(30, 5, versions=3, seed=1)
    selections = ({"fdr": 0.05}, {"rule": "threshold"}, {"delta_min": 0.1}, {"rope": 0.02})
    for kwargs in ({"model": "betabinom"}, *({"selection": SelectionConfig(**s)} for s in selections)):
        with pytest.raises(ValueError, match="pair|no "):
            fit(fam.counts, **kwargs)
    paths = []
    for label, trials in zip(fam.versions, fam.trials):
        paths.append(str(tmp_path / f"{label}.parquet"))
        save_trials(trials, paths[-1])
    assert main(["fit", *paths, "--fdr", "0.05", "--out", str(tmp_path / "out")]) == 2
    assert "--fdr" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_report_of_a_family_shows_its_bands_and_changes(joint, tmp_path):
    """`bayesrc report` on a joint fit's folder: the family's section with the bands in words, the
    rank-band figure, the change heatmap and the versions table."""
    from bayesrc.cli import main

    joint.save(tmp_path / "fam")
    assert main(["report", str(tmp_path / "fam"), "--out", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "report_run.html").read_text()
    assert "A family of versions" in html and html.count("data:image/png") == 2
    assert all("{" + ", ".join(b) + "}" in html for b in joint.bands()) and len(joint.bands()) >= 2
    assert "Versions: mean accuracy, P(best), rank interval and band" in html
    assert "Consecutive versions: change in mean accuracy" in html
