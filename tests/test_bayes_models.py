"""Real MCMC on simulated data with known truth: agreement between samplers and backends,
simulation-based validation of the change model, the convergence gate and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import assert_one_log_density

from bayesrc.bayes import (
    ITEM_COLUMNS,
    SamplerConfig,
    betabinom_numpyro,
    cell_stats,
    fit,
    item_block,
    model_inputs,
    realised_fdp,
)
from bayesrc.data import item_counts, save_trials, simulate_pair


def _counts(n_items, seed, **kw):
    s = simulate_pair(n_items, 10, seed=seed, **kw)
    return s, item_counts(s.trials_v1, s.trials_v2)


def _mean_mcse(dt, var):
    import arviz_stats as azs

    ds = dt["posterior"].to_dataset()[[var]]
    return ds[var].mean(("chain", "draw")).values, azs.mcse(ds)[var].values


@pytest.fixture(scope="module")
def bb_pair():
    return _counts(200, 21)


def _grid_hyper_means(d) -> dict[str, np.ndarray]:
    """Independent reference: posterior means of logit_mu and log_kappa per (domain, version)
    by quadrature on a 2-D grid (prior x exact beta-binomial likelihood; the cells are independent)."""
    from scipy.special import betaln, expit
    from scipy.stats import norm

    from bayesrc.bayes.betabinom import PRIOR

    u = np.linspace(-6, 6, 241)[:, None]  # logit mu
    v = np.linspace(-4, 8, 241)[None, :]  # log kappa
    mu, kappa = expit(u), np.exp(v)
    a, b = mu * kappa, (1 - mu) * kappa
    logprior = norm.logpdf(u, 0, PRIOR["logit_mu_sd"]) + norm.logpdf(v, PRIOR["log_kappa_mean"], PRIOR["log_kappa_sd"])
    out = {"logit_mu": np.zeros((d.n_domains, 2)), "log_kappa": np.zeros((d.n_domains, 2))}
    for j in range(d.n_domains):
        for ver in range(2):
            sel = d.dom == j
            ll = sum(betaln(a + y, b + n - y) - betaln(a, b) for y, n in zip(d.y[sel, ver], d.n[sel, ver]))
            lp = logprior + ll
            w = np.exp(lp - lp.max())
            w /= w.sum()
            out["logit_mu"][j, ver] = (w * u).sum()
            out["log_kappa"][j, ver] = (w * v).sum()
    return out


def test_collapsed_and_full_betabinomial_agree(bb_pair):
    _, counts = bb_pair
    d = model_inputs(counts)
    cfg = SamplerConfig(chains=2, draws=500, tune=500, seed=1)
    col = betabinom_numpyro(d, collapsed=True, config=cfg)
    full = betabinom_numpyro(d, collapsed=False, config=SamplerConfig(chains=2, draws=1500, tune=1000, seed=1))
    ref = _grid_hyper_means(d)
    for var in ("logit_mu", "log_kappa"):
        for name, dt in (("collapsed", col), ("full", full)):
            m, e = _mean_mcse(dt, var)
            z = np.abs(m - ref[var]) / e
            # Each sampler's posterior means against the quadrature reference, within Monte Carlo error.
            assert np.all(z < 4.5), (name, var, z.max())
    p1, ep1 = _mean_mcse(col, "p")
    p2, ep2 = _mean_mcse(full, "p")
    z = np.abs(p1 - p2) / np.hypot(ep1, ep2)
    assert np.mean(z < 3) > 0.97 and np.max(np.abs(p1 - p2)) < 0.05
    # Same named dims from both samplers.
    assert col.posterior["p"].dims == full.posterior["p"].dims == ("chain", "draw", "item", "version")


def test_pymc_and_numpyro_agree_within_mcse(bb_pair):
    pytest.importorskip("nutpie")
    from bayesrc.bayes import betabinom_pymc

    _, counts = bb_pair
    d = model_inputs(counts)
    cfg = SamplerConfig(chains=2, draws=500, tune=500, seed=2)
    a = betabinom_numpyro(d, collapsed=True, config=cfg)
    b = betabinom_pymc(d, collapsed=True, config=cfg)
    for var in ("logit_mu", "log_kappa", "mu"):
        m1, e1 = _mean_mcse(a, var)
        m2, e2 = _mean_mcse(b, var)
        z = np.abs(m1 - m2) / np.hypot(e1, e2)
        assert np.all(z < 4.5), (var, z.max())
    assert a.posterior["mu"].dims == b.posterior["mu"].dims == ("chain", "draw", "domain", "version")


def test_gate_reports_failure_for_a_bad_configuration(bb_pair):
    _, counts = bb_pair
    bad = SamplerConfig(chains=1, draws=20, tune=5, seed=0)
    res = fit(counts, model="betabinom", collapsed=False, config=bad)
    assert res.diagnostics.passed is False and res.status == "failed"
    assert res.to_dict()["status"] == "failed" and res.to_dict()["diagnostics"]["passed"] is False
    from bayesrc.bayes import check
    from bayesrc.errors import ConvergenceError

    with pytest.raises(ConvergenceError):
        check(res)
    assert check(res, allow_unconverged=True) is res


@pytest.mark.slow
def test_change_model_simulation_validation():
    """Coverage of dp, realised FDP of the FDR selection (mean over datasets), RCI's FDP estimated vs realised
    (pooled)."""
    covered, n_items, fdp, rci_est, rci_false, rci_flagged, held = 0, 0, [], [], 0, 0, []
    for seed in (101, 102, 103):  # several datasets: the FDP goal is an average
        sim, counts = _counts(300, seed)
        # the defaults a user gets (gate, sampler, escalation)
        res = fit(counts, model="change", config=SamplerConfig(seed=seed))
        assert res.diagnostics.passed, res.diagnostics
        it = res.items
        truth = sim.truth.set_index("item_id").loc[it["item_id"], "delta_p"].to_numpy()
        covered += np.sum((truth >= it["dp_lo90"] - 1e-12) & (truth <= it["dp_hi90"] + 1e-12))
        n_items += len(it)
        fdp.append(realised_fdp(it["bayes_class"], truth))
        flagged = it["rci_class"].isin(["improved", "deteriorated"]).to_numpy()
        rci_flagged += flagged.sum()
        rci_false += realised_fdp(it["rci_class"], truth) * flagged.sum()
        rci_est.append(res.crosscheck["rci_estimated_fdp"] * flagged.sum())
        assert res.crosscheck["rci_n_flagged"] == flagged.sum()
        lo, hi = res.crosscheck["rci_estimated_fdp_interval90"]
        assert lo <= res.crosscheck["rci_estimated_fdp"] <= hi
        held.append(lo <= realised_fdp(it["rci_class"], truth) <= hi)
    coverage = covered / n_items
    assert 0.87 <= coverage <= 0.93, coverage
    assert np.mean(fdp) <= 0.12, fdp
    est, real = sum(rci_est) / rci_flagged, rci_false / rci_flagged
    assert abs(est - real) <= 0.05, (est, real)
    assert real > 0.15  # RCI's "reliable changes" include many false ones in such data
    # the 90% interval of RCI's FDP holds this classification's realised FDP (a calibrated one
    # misses 2 of 3 datasets with probability 0.03)
    assert sum(held) >= 2, held


@pytest.fixture(scope="module")
def change_pair():
    return _counts(200, 41)


@pytest.fixture(scope="module")
def change_collapsed_fit(change_pair):
    from bayesrc.bayes import change_collapsed_numpyro

    return change_collapsed_numpyro(
        model_inputs(change_pair[1]), config=SamplerConfig(chains=2, draws=1000, tune=500, seed=4)
    )


def _agree(a, b, var, z_max=4.5, sd_share=0.25):
    """Posterior means of ``var`` from two fits agree within ``z_max`` combined MCSE or ``sd_share`` posterior SD."""
    m1, e1 = _mean_mcse(a, var)
    m2, e2 = _mean_mcse(b, var)
    sd = a.posterior[var].std(("chain", "draw")).values
    assert np.all(np.abs(m1 - m2) <= np.maximum(z_max * np.hypot(e1, e2), sd_share * sd)), (var, m1, m2, e1, e2, sd)


@pytest.mark.slow
def test_collapsed_and_full_change_model_agree(change_pair, change_collapsed_fit):
    """Two samplers of one posterior: NUTS on the hyperparameters (items integrated out) vs NUTS
    over every theta_i (delta_i integrated out): same hyperparameter means, same item probabilities."""
    from bayesrc.bayes import change_numpyro, gate, gated_vars

    d = model_inputs(change_pair[1])
    full = change_numpyro(d, config=SamplerConfig(chains=2, draws=1000, tune=1000, seed=5))
    assert gate(full, gated_vars("change")).max_rhat < 1.05
    col = change_collapsed_fit
    for var in ("mu_theta", "sigma_theta", "shift", "sigma_delta", "pi"):
        _agree(col, full, var)
    # P(changed) and P(changed and delta > 0) per item (both Rao-Blackwellised). Not E[p_up]: the full
    # model averages P(up | changed, theta) over theta's marginal posterior, the collapsed one over
    # theta | changed, so that average differs by design; their product with r does not.
    col_draws, full_draws = item_block(col.posterior), item_block(full.posterior)
    r_a, r_b = (f["r"].values for f in (col_draws, full_draws))
    up_a, up_b = (f["r"].values * f["p_up"].values for f in (col_draws, full_draws))
    for a, b in ((r_a, r_b), (up_a, up_b)):
        a, b = a.mean((0, 1)), b.mean((0, 1))
        assert np.max(np.abs(a - b)) < 0.06 and np.mean(np.abs(a - b)) < 0.015, np.max(np.abs(a - b))
    dp_a, dp_b = col_draws["dp"].mean(("chain", "draw")).values, full_draws["dp"].mean(("chain", "draw")).values
    assert np.max(np.abs(dp_a - dp_b)) < 0.03
    assert col_draws["dp"].dims == full_draws["dp"].dims == ("chain", "draw", "item")


@pytest.mark.parametrize("form", ["domains", "slope", "covariate"])
def test_change_model_twins_have_one_log_density(form, change_pair, letter_pair):
    """The collapsed change model's NumPyro and PyMC twins are one density (``assert_one_log_density``):
    per domain, with the slope, and with the letter covariate (its level, shift and stratum effects).
    Whether nutpie samples the PyMC twin as NumPyro samples its own is the covariate fit's test below."""
    from bayesrc.bayes.change_collapsed import collapsed_model_numpyro, collapsed_model_pymc

    data = model_inputs(
        (letter_pair if form == "covariate" else change_pair)[1], **({} if form == "covariate" else {"covariate": None})
    )
    assert (data.n_groups > 1) == (form == "covariate")
    kw = {"slope": form == "slope"}
    assert_one_log_density(*collapsed_model_numpyro(data, **kw), collapsed_model_pymc(data, **kw))


@pytest.mark.slow
def test_cli_fit_writes_outputs_and_exits_3_on_failed_gate(tmp_path):
    from bayesrc.cli import main

    sim = simulate_pair(200, 10, seed=5)
    save_trials(sim.trials_v1, tmp_path / "v1.parquet")
    save_trials(sim.trials_v2, tmp_path / "v2.parquet")
    args = [str(tmp_path / "v1.parquet"), str(tmp_path / "v2.parquet"), "--model", "betabinom", "--collapsed"]
    ok = tmp_path / "ok"
    assert main(["fit", *args, "--chains", "4", "--draws", "500", "--tune", "500", "--out", str(ok)]) == 0
    items = pd.read_parquet(ok / "items.parquet")
    assert tuple(items.columns) == ITEM_COLUMNS and len(items) == 200
    assert set(items["bayes_class"]) <= {"improved", "no_change", "deteriorated"}
    fj = json.loads((ok / "fit.json").read_text())
    assert fj["status"] == "ok" and fj["diagnostics"]["passed"] is True
    for key in ("max_rhat", "min_ess_bulk", "min_ess_tail", "divergences", "passed"):
        assert key in fj["diagnostics"]
    for key in ("fdr", "n_improved", "n_deteriorated", "expected_false"):
        assert key in fj["selection"]
    for key in ("table", "kappa", "rci_estimated_fdp", "rci_estimated_fdp_material"):
        assert key in fj["crosscheck"]
    assert fj["params"]["delta_min"] == 0.05
    assert set(fj["domain_shift"]) == set(sim.truth["domain"]) and {"runtime_s", "backend", "model"} <= set(fj)
    import xarray as xr

    post = xr.open_datatree(ok / "posterior.nc")
    assert post.attrs["status"] == "ok" and post["posterior"]["p"].dims[-2:] == ("item", "version")

    bad = tmp_path / "bad"
    fail = [*args[:-1], "--chains", "1", "--draws", "20", "--tune", "5", "--out", str(bad)]
    assert main(["fit", *fail]) == 3
    assert json.loads((bad / "fit.json").read_text())["status"] == "failed"
    assert pd.read_parquet(bad / "items.parquet").attrs["status"] == "failed"
    assert main(["fit", *fail, "--allow-unconverged"]) == 0
    assert (
        main(["fit", *args, "--delta-min", "0", "--out", str(tmp_path / "dm")]) == 2 and not (tmp_path / "dm").exists()
    )
    with pytest.raises(SystemExit) as exc:  # --collapsed and --full exclude each other
        main(["fit", *args[:2], "--model", "change", "--collapsed", "--full", "--out", str(bad)])
    assert exc.value.code == 2


@pytest.mark.slow
def test_fit_is_its_steps_called_one_by_one():
    """A pair's ``fit`` is ``sample_posterior``, ``select_items``, ``crosscheck_rci`` and ``workflow_checks`` in
    turn: called one by one on the same objects, with the classical result a user already has, they give
    the fit's posterior, item tables and records, number for number."""
    import xarray as xr

    from bayesrc.bayes import (
        GateConfig,
        SelectionConfig,
        crosscheck_rci,
        sample_posterior,
        select_items,
        workflow_checks,
    )
    from bayesrc.classical import reliable_change

    _, counts = _counts(40, 3)
    cfg = SamplerConfig(chains=2, draws=100, tune=100, seed=1, progress=False)
    rci = reliable_change(counts, n_splits=50, n_permutations=50, n_null=0)
    once, sel = GateConfig(escalate=False), SelectionConfig(fdr=0.2, rope=0.05)
    res = fit(counts, config=cfg, gate=once, selection=sel, rci=rci)
    data = model_inputs(counts)
    dt, diag, attempts, last = sample_posterior(data, config=cfg, gate=once)
    items, selection = select_items(dt, data, sel)
    items, cc, discordant, warnings = crosscheck_rci(dt, data, counts, items, rci, sel)
    items, ppc, loo, prior_pred, more = workflow_checks(dt, data, counts, items, seed=last.seed)
    xr.testing.assert_equal(dt["posterior"].to_dataset(), res.posterior["posterior"].to_dataset())
    pd.testing.assert_frame_equal(items[list(res.items.columns)], res.items, check_exact=True)
    pd.testing.assert_frame_equal(discordant, res.discordant, check_exact=True)
    steps = {"diagnostics": diag.to_dict(), "selection": selection, "crosscheck": cc, "ppc": ppc, "loo": loo}
    steps |= {"prior_predictive": prior_pred, "warnings": warnings + more}
    assert json.dumps(steps, sort_keys=True) == json.dumps({k: res.payload[k] for k in steps}, sort_keys=True)
    assert [a["seed"] for a in attempts] == [a["seed"] for a in res.payload["attempts"]] and "p_rope" in res.items


def test_change_model_reports_p_rope_and_expected_flips(change_pair, change_collapsed_fit, monkeypatch):
    """SPEC 3: the change model gives P(|dp| > ROPE) per item whenever a ROPE is given; SPEC 2.1: expected real
    flips."""
    from bayesrc.bayes import summaries
    from bayesrc.bayes.summaries import expected_flips, item_summary

    d = model_inputs(change_pair[1])
    draws = item_block(change_collapsed_fit.posterior)
    dp = draws["dp"].values.reshape(-1, d.n_items)
    no_rope = item_summary(change_collapsed_fit, d)
    assert "p_rope" not in no_rope
    items = item_summary(change_collapsed_fit, d, rope=0.1)
    np.testing.assert_allclose(items["p_rope"], (np.abs(dp) > 0.1).mean(0))
    # an unchanged item has dp = 0 exactly (p_changed is Rao-Blackwellised)
    assert (items["p_rope"] <= items["p_changed"] + 0.05).all()
    # Material change (SPEC 7's delta_min) in each direction, from the same draws.
    np.testing.assert_allclose(items["p_improve_material"], (dp >= 0.05).mean(0))
    np.testing.assert_allclose(items["p_deteriorate_material"], (dp <= -0.05).mean(0))
    strict = item_summary(change_collapsed_fit, d, delta_min=0.2)
    assert (strict["p_improve_material"] <= items["p_improve_material"]).all() and (
        strict["p_improve_material"] < items["p_improve_material"]
    ).any()
    # Summarised a block of items at a time (bounded memory at 12,000 items): the same table as in one block.
    monkeypatch.setattr(summaries, "ITEM_BLOCK", 7)
    pd.testing.assert_frame_equal(item_summary(change_collapsed_fit, d, rope=0.1), items)
    stored = change_collapsed_fit.posterior
    assert {stored[k].dtype for k in ("theta", "delta", "r_cell", "p_up_cell")} | {
        draws[k].dtype for k in ("r", "p_up", "p", "dp")
    } == {np.dtype(np.float32)}
    assert stored["r_cell"].sizes["cell"] == cell_stats(d).n_cells and not {"p", "dp", "r", "p_up"} & set(
        stored.data_vars
    )  # p, dp formed where read
    p = draws["p"].values.reshape(-1, d.n_items, 2)
    flips = expected_flips(change_collapsed_fit, d)
    assert flips["expected_negative_flips"]["mean"] == pytest.approx(
        ((p[:, :, 0] > 0.5) & (p[:, :, 1] <= 0.5)).sum(1).mean()
    )
    assert (
        flips["expected_negative_flips"]["lo90"]
        <= flips["expected_negative_flips"]["mean"]
        <= flips["expected_negative_flips"]["hi90"]
    )


@pytest.fixture(scope="module")
def letter_pair():
    from bayesrc.data import letter_shift_truth

    tr = letter_shift_truth(200, sigma_delta={"A": 1.0, "B": 0.25, "C": 0.25}, seed=12)
    sim = simulate_pair(k=10, truth=tr, seed=12)
    return tr, item_counts(sim.trials_v1, sim.trials_v2)


@pytest.fixture(scope="module")
def letter_fit(letter_pair):
    return fit(letter_pair[1], model="change", config=SamplerConfig(seed=12))


@pytest.mark.slow
def test_change_model_on_letter_shaped_real_like_change(letter_pair, letter_fit):
    """Issue 12: real version changes move nearly every item a little, in the direction of the
    correct option's letter, and the old version's accuracy already depends on that letter.
    Simulated so (letter_shift_truth: 95% of items changed, letter means of the change +0.8 / -0.5 /
    -0.3 logits, SDs 1.0 / 0.25 / 0.25 about them; letter levels 0 / +0.6 / -1.2), the default change model (letter
    covariate) must cover the true dp (90% intervals: 0.84-0.96, about 3 binomial SEs at 200
    items), keep its own FDR and estimate RCI's FDP; its letter effects, and which letter's changes
    spread most, must recover the truth."""
    tr, res = letter_pair[0], letter_fit
    assert res.params["covariate"] == "correct_answer" and res.params["covariate_levels"] == ["A", "B", "C"]
    it = res.items
    truth = tr.set_index("item_id").loc[it["item_id"], "delta_p"].to_numpy()
    coverage = np.mean((truth >= it["dp_lo90"] - 1e-12) & (truth <= it["dp_hi90"] + 1e-12))
    assert 0.84 <= coverage <= 0.96, coverage
    assert realised_fdp(it["bayes_class"], truth) <= 0.15
    gamma = res.posterior["posterior"]["group_shift"].mean(("chain", "draw")).values
    assert gamma[0] > 0.3 and gamma[1] < 0 and gamma[2] < 0.1, gamma  # A up, B and C down (zero-sum)
    alpha = res.posterior["posterior"]["group_level"].mean(("chain", "draw")).values
    assert alpha[2] < alpha[0] < alpha[1], alpha  # C hardest, B easiest
    spread = res.posterior["posterior"]["sigma_delta"]
    assert spread.dims == ("chain", "draw", "group")
    sd = spread.mean(("chain", "draw")).values
    # A's changes spread widest (truth 1.0 vs 0.25; at 67 items per letter and K = 10 the
    # InverseGamma(2, 0.6) prior pulls the three towards each other: seen 0.49 vs 0.28 / 0.32).
    assert sd[0] > 1.3 * max(sd[1], sd[2]), sd
    flagged = it["rci_class"].isin(["improved", "deteriorated"]).to_numpy()
    if flagged.sum() >= 5:
        assert abs(res.crosscheck["rci_estimated_fdp"] - realised_fdp(it["rci_class"], truth)) <= 0.15
        lo, hi = res.crosscheck["rci_estimated_fdp_interval90"]
        assert lo <= res.crosscheck["rci_estimated_fdp"] <= hi and hi - lo > 0
    # The estimate under power-scaled priors (reweighted draws): a prior pulling pi towards 1 leaves
    # fewer flags on the no-change spike, so it can only lower the sign estimate; a warning exactly
    # when an estimate moves by more than 0.05.
    sens = res.crosscheck["prior_sensitivity"]
    assert sens["alphas"] == [0.5, 2.0] and max(sens["pareto_k"]) < 0.7
    assert sens["rci_estimated_fdp"][0] >= sens["rci_estimated_fdp"][1]
    # the letters moved: "nothing changed" is rejected, so the intervals are the posterior's own
    assert (
        res.crosscheck["no_change_test"]["p_value"] < 0.01 and not res.crosscheck["rci_fdp_interval_includes_no_change"]
    )
    assert bool([w for w in res.warnings if w.startswith("RCI's estimated")]) == (
        sens["sensitive"] or sens["sensitive_material"]
    )
    # the model with the letter covariate reproduces the letter-shaped data (issue 31's check)
    assert not any(w.startswith("posterior predictive check") for w in res.warnings), res.ppc["flagged"][:3]


@pytest.mark.slow
def test_change_model_with_covariate_pymc_and_numpyro_agree(letter_pair, letter_fit):
    """The letter covariate's effects (easiness and change) and the item probabilities agree
    between the NumPyro and PyMC (nutpie) twins of the default (collapsed) change model."""
    pytest.importorskip("nutpie")
    from bayesrc.bayes import change_collapsed_pymc

    d = model_inputs(letter_pair[1])
    assert d.covariate == "correct_answer"
    b = change_collapsed_pymc(d, config=SamplerConfig(chains=2, draws=600, tune=400, seed=13))
    a = letter_fit.posterior
    for var in ("group_level", "group_shift", "stratum_shift", "sigma_delta", "pi", "mu_theta", "shift"):
        _agree(a, b, var, sd_share=0.0)
    assert b["posterior"]["group_shift"].dims == ("chain", "draw", "group")
    assert a["posterior"]["stratum_shift"].dims == b["posterior"]["stratum_shift"].dims == ("chain", "draw", "stratum")
    dp_a, dp_b = (item_block(f["posterior"])["dp"].mean(("chain", "draw")).values for f in (a, b))
    assert np.max(np.abs(dp_a - dp_b)) < 0.03
    # the workflow checks on the PyMC twin's posterior: the same verdict and ELPD as on NumPyro's (issue 31)
    from bayesrc.bayes.fit import run_checks

    ppc_b, loo_b, _ = run_checks(b, d, letter_pair[1], pd.Series(d.items), seed=0)
    assert ppc_b["n_tests"] == letter_fit.ppc["n_tests"] and bool(ppc_b["flagged"]) == bool(letter_fit.ppc["flagged"])
    assert (
        abs(loo_b["elpd"] - letter_fit.loo["elpd"]) < 0.5 * letter_fit.loo["se"]
        and loo_b["n_items"] == letter_fit.loo["n_items"]
    )


def test_rci_fdp_interval_reaches_one_where_nothing_changed_is_not_rejected(tmp_path):
    """On identical versions every RCI flag is false (realised FDP 1), which a posterior interval
    from a model that lets items change cannot reach; where the no-change permutation test does not
    reject, the fit widens the 90% intervals to 1 and warns, and keeps the posterior's own where it
    does (a changed pair). Both kept in fit.json."""
    from bayesrc import load

    config = SamplerConfig(seed=2)
    for pi_change, seed in ((0.0, 3), (0.5, 3)):
        sim, counts = _counts(200, seed, pi_change=pi_change)
        res = fit(counts, model="betabinom", config=config)
        cc, flagged = res.crosscheck, res.crosscheck["rci_n_flagged"]
        p = cc["no_change_test"]["p_value"]
        assert flagged > 0
        if pi_change == 0.0:
            assert (
                p >= 0.10
                and realised_fdp(
                    res.items["rci_class"],
                    sim.truth.set_index("item_id").loc[res.items["item_id"], "delta_p"].to_numpy(),
                )
                == 1.0
            )
            assert (
                cc["rci_estimated_fdp_interval90"][1] == 1.0 and cc["rci_estimated_fdp_material_interval90"][1] == 1.0
            )
            assert cc["rci_fdp_interval_includes_no_change"] and any(
                "do not reject that nothing changed" in w for w in res.warnings
            )
        else:
            assert (
                p < 0.01
                and not cc["rci_fdp_interval_includes_no_change"]
                and cc["rci_estimated_fdp_interval90"][1] < 0.5
            )
        res.save(tmp_path / f"fit{pi_change}")
        assert load(tmp_path / f"fit{pi_change}").crosscheck["no_change_test"] == cc["no_change_test"]
