"""Workflow checks on every fit (issue 31): the posterior predictive check (its statistics and
p-values by hand, its calibration on no-change data and on data drawn from the change model itself),
PSIS-LOO per item and model comparison.

Fits use the default sampler settings and gate (``SamplerConfig()``); they are shared through
module fixtures. The larger calibration run, and the misfit the check finds on the real
Q4_K_M -> Q3_K_M pair (``--scenarios q3_v0 q3_default``): ``benchmarks/ppc_calibration.py``. That
real-pair check left the suite when the default fit with the letter covariate diverged on the pair
and escalated past the suite's 30-min test limit (issue 28); since the stratum shifts are interaction
contrasts a fit passes first time in ~1.5 min, but two of them (with and without the covariate)
would still add ~3 min to a suite already over its 8-min goal, so the check stays in the benchmark.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from bayesrc.bayes import ModelInputs, checks, compare, fit, model_inputs, ppc
from bayesrc.bayes.ppc import (
    STATS,
    check_strata,
    minp_adjust,
    posterior_predictive_check,
    predictive_pvalues,
    replicate_pvalues,
    stratum_statistics,
)
from bayesrc.data import item_counts, save_trials, simulate_pair

N_ITEMS = 60  # per calibration replicate: two domains of 30


def _inputs(y, n, dom, grp=None, groups=("all",)):
    return ModelInputs(
        y=y,
        n=n,
        dom=dom,
        items=np.arange(len(y)).astype(str),
        versions=("a", "b"),
        domains=tuple(f"d{i}" for i in range(dom.max() + 1)),
        group=grp,
        groups=groups,
        covariate=None if grp is None else "letter",
    )


# ---------------------------------------------------------------- the statistics and p-values by hand


def test_stratum_statistics_match_a_pandas_reference():
    rng = np.random.default_rng(0)
    n = rng.integers(8, 12, (50, 2))
    n[3, 1] = 0  # no valid response in version 2: left out of every stratum
    y = rng.binomial(n, rng.beta(0.7, 0.7, (50, 1)))
    d = _inputs(y, n, rng.integers(0, 2, 50), rng.integers(0, 3, 50), ("A", "B", "C"))
    member, names = check_strata(d, min_items=5)
    got = stratum_statistics(y, n, member)
    df = pd.DataFrame({"a1": y[:, 0] / n[:, 0], "a2": np.where(n[:, 1] > 0, y[:, 1] / np.maximum(n[:, 1], 1), np.nan)})
    df["floor"] = ((y[:, 0] == 0).astype(int) + (y[:, 1] == 0)) / 2
    df["ceiling"] = ((y[:, 0] == n[:, 0]).astype(int) + (y[:, 1] == n[:, 1])) / 2
    for j, name in enumerate(names):
        g = df[member[:, j] & (n > 0).all(1)]
        ch = g["a2"] - g["a1"]
        ref = [
            g["a1"].mean(),
            g["a2"].mean(),
            g["a1"].std(ddof=0),
            g["a2"].std(ddof=0),
            ch.mean(),
            ch.std(ddof=0),
            g["floor"].mean(),
            g["ceiling"].mean(),
            g["a1"].corr(g["a2"]),
        ]
        np.testing.assert_allclose(got[j], ref, rtol=1e-9, atol=1e-12, err_msg=name)
    # replicates along a leading axis give the same per replicate
    stack = np.stack([y, y[::-1]])
    np.testing.assert_allclose(stratum_statistics(stack, n, member)[0], got)
    assert names[-1] == "all" and "*:A" in names and all(member.sum(0) >= 5)


def test_pvalues_mid_p_and_minp_adjustment():
    rep = np.arange(100.0)[:, None] * np.ones((1, 3))
    p = predictive_pvalues(np.array([49.5, 0.0, 200.0]), rep)
    assert p[0] == pytest.approx(1.0) and p[1] == pytest.approx(0.01) and p[2] == 0.0
    assert np.isnan(predictive_pvalues(np.array([np.nan]), rep[:, :1]))[0]
    # each replicate's own p-values are (near) uniform: a replicate is not special among replicates
    rng = np.random.default_rng(1)
    reps = rng.normal(size=(2000, 4))
    pr = replicate_pvalues(reps)
    assert abs(np.mean(pr < 0.1) - 0.1) < 0.01
    # min-p: beyond every replicate -> 0; p = 0.5 -> P(min of three uniforms <= 0.5)
    adj = minp_adjust(np.array([0.0, 0.5, np.nan, 0.3]), pr)
    assert adj[0] == 0.0 and abs(adj[1] - (1 - 0.5**3)) < 0.03 and np.isnan(adj[2])  # three independent tests


def test_ppc_with_the_true_accuracies_is_calibrated_and_a_wrong_model_warns():
    """No MCMC: replicates from the true p pass at about the nominal rate; replicates from p
    that ignore a letter effect (what a model without the covariate would give) warn."""
    rng = np.random.default_rng(2)
    warned = []
    for _ in range(40):
        grp = rng.integers(0, 3, 120)
        p = np.clip(rng.beta(2, 2, (120, 1)) + np.array([0.2, 0.0, -0.2])[grp, None] * [[0, 1]], 0.01, 0.99)
        n = np.full((120, 2), 10)
        d = _inputs(rng.binomial(n, p), n, np.zeros(120, int), grp, ("A", "B", "C"))
        warned.append(
            bool(
                posterior_predictive_check(np.broadcast_to(p, (1, 400, 120, 2)), d, seed=int(rng.integers(1e6)))[
                    "flagged"
                ]
            )
        )
    assert np.mean(warned) <= 0.10
    wrong = p.copy()
    # every item moves by the mean change: the letter's change is lost
    wrong[:, 1] = p[:, 0] + (p[:, 1] - p[:, 0]).mean()
    out = posterior_predictive_check(np.broadcast_to(wrong, (1, 400, 120, 2)), d, seed=0)
    assert out["flagged"] and {r["stat"] for r in out["flagged"]} & {"mean_v2", "mean_change"}
    assert out["n_tests"] == len(out["strata"]) * len(STATS) - sum(r["p"] is None for r in out["table"])

    # Replicated a slice of draws at a time (bounded memory at 12,000 items): the same check as all at once.
    whole = posterior_predictive_check(np.broadcast_to(wrong, (1, 400, 120, 2)), d, seed=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ppc, "PPC_SLICE_ENTRIES", 120 * 4 * 7)  # 7 draws (of 4 datasets each) per slice
        assert posterior_predictive_check(np.broadcast_to(wrong, (1, 400, 120, 2)), d, seed=0) == whole


# ---------------------------------------------------------------- prior predictive check


def _direct_prior_simulation(model: str, n_draws: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Independent code: accuracies (draw, 2) of one new item in a one-domain design, sampled with
    numpy from the priors as docs/methods/bayesian.md states them (the grid's half-step jitter of
    the change model's spreads, 0.1 logits, included)."""
    from scipy.special import expit

    if model == "betabinom":
        mu, kappa = expit(rng.normal(0, 1.5, (n_draws, 2))), np.exp(rng.normal(1.0, 1.5, (n_draws, 2)))
        p = rng.beta(mu * kappa, (1 - mu) * kappa)
        return p, np.ones(n_draws)
    jitter = lambda sd: np.sqrt(sd**2 + 0.1**2)  # noqa: E731
    mu, sigma, shift = rng.normal(0, 2.0, n_draws), np.abs(rng.normal(0, 5.0, n_draws)), rng.normal(0, 1.0, n_draws)
    sigma_delta, pi = 0.6 / rng.gamma(2.0, 1.0, n_draws), rng.beta(4.0, 1.0, n_draws)
    theta = mu + jitter(sigma) * rng.standard_normal(n_draws)
    delta = shift + jitter(sigma_delta) * rng.standard_normal(n_draws)
    changed = rng.random(n_draws) < pi
    return np.stack([expit(theta), expit(theta + changed * delta)], -1), pi


@pytest.mark.parametrize("model", ["change", "betabinom"])
def test_prior_predictive_matches_a_direct_simulation_of_the_priors(model):
    """The prior predictive (the model's own NumPyro priors, then new items as the posterior
    predictive draws them) against numpy draws from the stated priors: the share of items moving by
    more than 0.05 / 0.10, the quantiles of accuracy and change, and of pi, within Monte Carlo error
    (items of one draw share its hyperparameters: ~1,000 independent draws, SE of a share <= 0.016;
    measured differences <= 0.004 in the shares, <= 0.02 in the quantiles)."""
    from bayesrc.bayes.prior_predictive import prior_predictive

    y = np.array([[3, 4]] * 200)
    ours = prior_predictive(_inputs(y, np.full_like(y, 10), np.zeros(200, int)), model, seed=2)
    p, pi = _direct_prior_simulation(model, 200_000, np.random.default_rng(9))
    dp = p[:, 1] - p[:, 0]
    assert ours["n_draws"] == 1000 and ours["model"] == model
    for cut in (0.05, 0.10):
        assert ours["share_abs_dp_above"][f"{cut:g}"] == pytest.approx(float((np.abs(dp) > cut).mean()), abs=0.03)
    q = ours["quantiles"]
    assert ours["p_v1"] == pytest.approx(np.quantile(p[:, 0], q).tolist(), abs=0.04)
    assert ours["dp"] == pytest.approx(np.quantile(dp, q).tolist(), abs=0.04)
    assert ours["share_extreme"] == pytest.approx(float(((p < 0.02) | (p > 0.98)).mean()), abs=0.03)
    if model == "change":
        assert ours["pi"] == pytest.approx(np.quantile(pi, q).tolist(), abs=0.03)
    assert (
        sum(ours["hist_p"]["prior_v1"]) == 1000 * 200
        and sum(ours["hist_p"]["observed_v1"]) == 200
        and max(ours["hist_p"]["observed_v1"]) == 200
    )  # every y/n is 0.3


def test_prior_predictive_sees_the_prior_on_the_share_changed():
    """Known answer: with pi ~ Beta(1, 1000) almost no item changes, so the versions' accuracies agree."""
    from bayesrc.bayes.prior_predictive import prior_predictive

    y = np.array([[3, 4]] * 50)
    pp = prior_predictive(_inputs(y, np.full_like(y, 10), np.zeros(50, int)), prior={"pi_a": 1.0, "pi_b": 1000.0})
    assert pp["share_abs_dp_above"]["0.05"] < 0.01 and pp["pi"][-1] < 0.005


# ---------------------------------------------------------------- calibration with real fits (default sampler and gate)


def _sim_counts(seed: int, n_items: int = N_ITEMS, **truth):
    s = simulate_pair(
        n_items,
        10,
        seed=seed,
        domains=("x", "y"),
        domain_mean={"x": -0.3, "y": 0.5},
        domain_shift={"x": -0.2, "y": 0.2},
        sigma_theta=1.2,
        **truth,
    )
    return item_counts(s.trials_v1, s.trials_v2), s


@pytest.fixture(scope="module")
def calibration_fits():
    """Change-model fits (NumPyro) on two no-change datasets and two drawn from the change model
    itself (``item_truth`` is its generative process: no letter covariate, so none is fitted; the
    check still stratifies by the simulated letters), plus beta-binomial fits (NumPyro and PyMC)
    on a larger one drawn the same way; default sampler settings. One model structure: one compiled sampler."""
    out = {}
    for seed in (101, 102):
        out[("no_change", seed)] = fit(_sim_counts(seed, pi_change=0.0, sigma_delta=0.6)[0], covariate=None)
    for seed in (201, 202):
        out[("model", seed)] = fit(_sim_counts(seed, pi_change=0.7, sigma_delta=0.8)[0], covariate=None)
    # 240 items: on 60 the beta-binomial's missed correlation sat at a tail probability of ~0.001,
    # short of the family-wise level over ~100 tests (adjusted p ~0.08)
    counts = _sim_counts(201, n_items=4 * N_ITEMS, pi_change=0.7, sigma_delta=0.8)[0]
    out["betabinom"] = fit(counts, model="betabinom")
    out["betabinom_pymc"] = fit(counts, model="betabinom", backend="pymc")
    # the items of ("model", 201), for compare
    out["betabinom_model_201"] = fit(_sim_counts(201, pi_change=0.7, sigma_delta=0.8)[0], model="betabinom")
    return out


def test_ppc_does_not_warn_on_no_change_or_model_data(calibration_fits):
    for key, res in calibration_fits.items():
        assert res.diagnostics.passed, key
        if str(key).startswith("betabinom"):
            continue
        ppc = res.ppc
        assert ppc["n_tests"] >= 2 * len(STATS) and ppc["n_draws"] == 2000, key
        assert ppc["covariate"] == "correct_answer" and any(":" in s and not s.endswith(":*") for s in ppc["strata"]), (
            key
        )
        assert ppc["flagged"] == [] and not any(w.startswith("posterior predictive check") for w in res.warnings), (
            key,
            ppc["flagged"][:2],
        )
        assert 0 < ppc["p_adjusted_min"] <= 1


def test_ppc_finds_that_the_betabinomial_does_not_pair_the_versions(calibration_fits):
    """On paired data the beta-binomial (versions independent given the hyperparameters) misses the
    between-version correlation, in both backends; the warning says so."""
    for key in ("betabinom", "betabinom_pymc"):
        res = calibration_fits[key]
        stats = {r["stat"] for r in res.ppc["flagged"]}
        assert ("all", "corr") in {(r["stratum"], r["stat"]) for r in res.ppc["flagged"]} and stats <= {
            "corr",
            "sd_change",
        }, (key, stats)
        [warn] = [w for w in res.warnings if w.startswith("posterior predictive check")]
        assert "treats an item's two versions as independent" in warn
        assert res.loo["loo_pit_ks_p"] < 0.05  # LOO-PIT of the change: the new-item predictive is too wide


def test_fit_carries_the_checks_in_its_payload_items_and_files(calibration_fits, tmp_path):
    import bayesrc

    res = calibration_fits[("model", 201)]
    lo = res.loo
    assert (
        np.isfinite(lo["elpd"])
        and lo["se"] > 0
        and lo["n_items"] == N_ITEMS
        and lo["pareto_k_max"] < 0.7
        and lo["high_k_items"] == []
    )
    items = res.items
    assert {"elpd_loo", "pareto_k", "loo_pit"} <= set(items) and np.isclose(items["elpd_loo"].sum(), lo["elpd"])
    pit = items["loo_pit"].to_numpy(float)
    assert np.all((pit >= 0) & (pit <= 1)) and lo["loo_pit_ks_p"] > 0.001
    assert "posterior predictive check" in set(res.summary()["metric"])
    res.save(tmp_path / "f")
    fj = json.loads((tmp_path / "f" / "fit.json").read_text())
    assert fj["ppc"]["stats"] == list(STATS) and len(fj["ppc"]["table"]) == len(fj["ppc"]["strata"]) * len(STATS)
    back = bayesrc.load(tmp_path / "f")
    assert back.ppc == res.ppc and compare({"a": back, "b": res}).table["elpd_diff"].abs().max() < 1e-9
    fig = res.plot_ppc()
    assert len(fig.axes) >= len(STATS)
    # the prior predictive check of the fit's own design: in the payload, the summary and a figure
    pp = back.prior_predictive
    assert (
        pp == res.prior_predictive
        and pp["model"] == "change"
        and pp["n_draws"] == 1000
        and 0 < pp["share_abs_dp_above"]["0.05"] < 1
    )
    assert sum(
        pp["hist_p"]["observed_v1"]
    ) == N_ITEMS and "prior predictive: share of items with |dp| > 0.05 / > 0.10" in set(res.summary()["metric"])
    assert len(res.plot_prior_predictive().axes) == 2


@pytest.mark.parametrize("key", [("model", 201), "betabinom_model_201"])
def test_loo_checks_in_item_blocks_equal_psis_loo_over_all_items(calibration_fits, key):
    """Blocks of 7 items give arviz_stats.loo's per-item values and totals over all items; LOO-PIT
    differs only by its Monte Carlo draws (new items, ties)."""
    import arviz_stats as azs
    import xarray as xr

    from bayesrc.bayes.change_likelihood import unit_loglik
    from bayesrc.bayes.diagnostics import mean_relative_ess

    res = calibration_fits[key]
    data = model_inputs(_sim_counts(201, pi_change=0.7, sigma_delta=0.8)[0], covariate=None)
    post = res.posterior["posterior"].to_dataset()
    dt = res.posterior.copy()
    ll, item_unit = unit_loglik(post, data)
    dt["log_likelihood"] = xr.Dataset({"y": (("chain", "draw", "item"), ll[..., item_unit])})  # one column per item
    whole = azs.loo(dt, var_name="y", reff=mean_relative_ess(post))  # over all items at once
    payload, per_item = checks.loo_checks(res.posterior, data, data.items, block=7)
    np.testing.assert_allclose(per_item["elpd_loo"], np.asarray(whole.elpd_i), rtol=1e-12)
    np.testing.assert_allclose(per_item["pareto_k"], np.asarray(whole.pareto_k), rtol=1e-12)
    assert payload["elpd"] == pytest.approx(whole.elpd, rel=1e-12) and payload["se"] == pytest.approx(
        whole.se, rel=1e-12
    )
    assert payload["p_loo"] == pytest.approx(whole.p, rel=1e-9) and payload["n_draws"] == whole.n_samples
    one_block = checks.loo_checks(res.posterior, data, data.items, block=data.n_items)[1]["loo_pit"]
    assert np.corrcoef(per_item["loo_pit"], one_block)[0, 1] > 0.9


def test_beta_binomial_loo_units_are_its_items_distinct_counts():
    """PSIS-LOO's units of the beta-binomial: one per distinct (domain, counts), each item's column scipy's
    beta-binomial log pmf (independent code) summed over its versions, binomial coefficients left out as in every
    model's log-likelihood."""
    import xarray as xr
    from scipy.special import comb
    from scipy.stats import betabinom

    from bayesrc.bayes.change_likelihood import unit_loglik

    counts = _sim_counts(5, n_items=60)[0]
    data = model_inputs(counts, covariate=None)
    rng = np.random.default_rng(0)
    shape = (2, 3, data.n_domains, 2)
    post = xr.Dataset(
        {
            "mu": (("chain", "draw", "domain", "version"), rng.uniform(0.2, 0.8, shape)),
            "kappa": (("chain", "draw", "domain", "version"), rng.uniform(1.0, 20.0, shape)),
        }
    )
    ll, item_unit = unit_loglik(post, data)
    distinct = {(d, *y, *n) for d, y, n in zip(data.dom, data.y.tolist(), data.n.tolist())}
    assert ll.shape == (2, 3, len(distinct)) < (2, 3, data.n_items) and item_unit.shape == (data.n_items,)
    mu, kappa = post["mu"].values[:, :, data.dom], post["kappa"].values[:, :, data.dom]  # (chain, draw, item, version)
    expected = (betabinom.logpmf(data.y, data.n, mu * kappa, (1 - mu) * kappa) - np.log(comb(data.n, data.y))).sum(-1)
    np.testing.assert_allclose(ll[..., item_unit], expected, rtol=1e-10)


def test_pit_ecdf_band_holds_uniform_pit_at_its_level_and_rejects_a_misfit():
    rng = np.random.default_rng(7)
    outside = [checks.pit_ecdf_band(rng.uniform(size=100), seed=i)["outside"].any() for i in range(60)]
    assert sum(outside) <= 8  # 95% simultaneous band: ~3 of 60 expected (P(> 8) < 0.01)
    too_wide = [checks.pit_ecdf_band(rng.beta(1.6, 1.6, size=300), seed=i)["outside"].any() for i in range(10)]
    assert sum(too_wide) >= 9  # PIT piled in the middle: predictions too wide
    band = checks.pit_ecdf_band(np.r_[rng.uniform(size=50), np.nan])
    assert len(band) == 49 and np.all(band["lower"] <= 0) and np.all(band["upper"] >= 0)


def test_loo_pit_figure_stays_in_its_band_for_the_generating_model_only(calibration_fits):
    own, misfit = calibration_fits[("model", 201)], calibration_fits["betabinom_model_201"]
    assert not own.loo_pit_band()["outside"].any()
    # the beta-binomial's new-item change is too wide (its KS p < 0.05 above)
    assert misfit.loo_pit_band()["outside"].any()
    assert len(own.plot_loo_pit().axes) == 1


def test_compare_ranks_the_change_model_first_on_its_own_data(calibration_fits, tmp_path):
    import bayesrc

    mc = compare({"change": calibration_fits[("model", 201)], "betabinom": calibration_fits["betabinom_model_201"]})
    table = mc.table
    assert list(table.index) == ["change", "betabinom"] and mc.best == "change" and mc.separated("betabinom")
    assert "change predicts left-out items best" in mc.sentence() and "clearly worse" in mc.sentence()
    mc.save(tmp_path / "cmp")
    assert (
        bayesrc.load(tmp_path / "cmp" / "loo_compare.json") == mc
        and mc.payload["fits"]["betabinom"]["model"] == "betabinom"
    )
    assert len(mc.plot().axes) == 1
    row = table.loc["betabinom"]
    assert row["elpd_diff"] < 0 and row["dse"] > 0 and -row["elpd_diff"] > 2 * row["dse"]
    assert {"rank", "elpd", "se", "weight", "n_high_k"} <= set(table)
    with pytest.raises(ValueError, match="same items"):
        res = calibration_fits[("model", 201)]
        shuffled = type(res)(
            res.payload,
            {**res.tables, "items": res.items.assign(item_id=res.items["item_id"].to_numpy()[::-1])},
            res.posterior,
        )
        compare({"a": res, "b": shuffled})


def test_a_ranking_without_entries_or_a_difference_is_one_named_line_and_a_repeated_name_is_reported(
    calibration_fits, tmp_path
):
    from bayesrc.bayes.model_comparison import ModelComparison
    from bayesrc.errors import InputError

    payload = compare(
        {"change": calibration_fits[("model", 201)], "betabinom": calibration_fits["betabinom_model_201"]}
    ).to_dict()
    ranking = payload["ranking"]

    def load(edit: dict) -> ModelComparison:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "loo_compare.json").write_text(
            json.dumps({k: v for k, v in (payload | edit).items() if v is not None})
        )
        return ModelComparison.load(folder)

    for edit, field in [
        ({"ranking": None}, "'ranking'"),
        ({"ranking": []}, "'ranking'"),
        ({"ranking": [{k: v for k, v in ranking[0].items() if k != "dse"}]}, "'ranking[0].dse'"),
    ]:
        with pytest.raises(InputError, match=re.escape(f"loo_compare.json: field {field}")):
            load(edit)
    # a hand-edited file: the report still reads it
    twins = load({"ranking": [r | {"model": "change"} for r in ranking]})
    assert (
        twins.models == ["change", "change"]
        and "change: ELPD" in twins.sentence()
        and twins.separated("change") is False
    )


# ---------------------------------------------------------------- the CLI


def test_cli_fit_compare_writes_each_fit_and_the_ranking(tmp_path):
    import bayesrc
    from bayesrc.bayes.handlers import compare_models
    from bayesrc.cli import main
    from bayesrc.errors import InputError
    from bayesrc.report import load_run, report_sections

    assert compare_models("change,betabinom") == ["change", "betabinom"]
    for bad in ("change", "change,change", "change,nope"):
        with pytest.raises(InputError):
            compare_models(bad)
    _, sim = _sim_counts(202, pi_change=0.7, sigma_delta=0.8)
    save_trials(sim.trials_v1, tmp_path / "v1.parquet")
    save_trials(sim.trials_v2, tmp_path / "v2.parquet")
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "fit",
                str(tmp_path / "v1.parquet"),
                str(tmp_path / "v2.parquet"),
                "--compare",
                "betabinom,change",
                "--covariate",
                "none",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    mc = bayesrc.load(out / "loo_compare.json")
    assert (
        mc.models == ["change", "betabinom"]
        and (out / "change" / "fit.json").is_file()
        and (out / "betabinom" / "items.parquet").is_file()
    )
    run = load_run(out)  # the report: one comparison per model, the ranking and each fit's LOO-PIT
    assert list(run.comparisons) == ["change", "betabinom"] and run.comparisons["betabinom"].bayes.model == "betabinom"
    sections = {s.key: s for s in report_sections(run, run.comparisons["change"])}
    assert {"model_comparison", "checks"} <= set(sections)
    assert any(getattr(b, "name", "") == "loo_pit" for b in sections["checks"].blocks)
    assert [b.png[:4] for b in sections["model_comparison"].blocks if hasattr(b, "png")] == [b"\x89PNG"]
    assert (
        main(
            [
                "fit",
                str(tmp_path / "v1.parquet"),
                str(tmp_path / "v2.parquet"),
                "--compare",
                "change",
                "--out",
                str(tmp_path / "bad"),
            ]
        )
        == 2
    )


def _sbc_script():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("sbc", Path(__file__).parents[1] / "benchmarks" / "sbc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sbc_rank_statistic_equals_simuks_on_the_same_fits():
    """benchmarks/sbc.py's rank statistic against simuk's, on simuk's own simulations of the NumPyro twin."""
    sbc = _sbc_script()
    run = sbc.simuk_sbc(sbc.design(20, 10), "betabinom", 3, seed=3, warmup=300)
    theirs = run.simulations["prior_sbc"]
    seen = set()
    for i, post in enumerate(run.posteriors):
        truth = sbc.one_draw({k: v[i] for k, v in run.ref_params.items()})
        ours = sbc.ranks(truth, post, sbc.HYPER["betabinom"])
        for name in sbc.HYPER["betabinom"]:
            want = theirs[name].values[0, i]
            assert [ours[f"{name}[{a}][{b}]"] for a, b in np.ndindex(want.shape)] == want.ravel().tolist()
        seen |= set(ours.values())
    assert len(seen) > 5  # the ranks spread over 0-99: not a comparison of constants
