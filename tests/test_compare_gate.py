"""``bayesrc compare``: the CI gate's exit codes on simulated pairs with known truth, with the defaults a user gets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bayesrc.cli import main
from bayesrc.compare.rules import aggregate_change, decide
from bayesrc.data import save_trials, simulate_pair

# the no-change pair a CI gate sees most, at benchmark size (its fit: test_compare_margin.py)
N_ITEMS = {"same": 2000, "worse": 60}
# sampler, gate (R-hat <= 1.01, ESS >= 400, no divergences) and escalation as a user gets them
DEFAULTS = ["--seed", "1"]
DOWN = {d: -2.0 for d in ("physics", "law", "psychology", "economics")}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """A no-change pair (pi_change = 0) and a pair where 40% of items change, mostly for the worse."""
    root = tmp_path_factory.mktemp("cmp")
    out = {}
    for name, kw in {
        "same": {"pi_change": 0.0},
        "worse": {"pi_change": 0.4, "domain_shift": DOWN, "sigma_delta": 1.0},
    }.items():
        sim = simulate_pair(N_ITEMS[name], 10, models=("base", "cand"), seed=21, **kw)
        a, b = root / f"{name}-v1.parquet", root / f"{name}-v2.parquet"
        save_trials(sim.trials_v1, a)
        save_trials(sim.trials_v2, b)
        out[name] = (a, b, sim.truth)
    return out


@pytest.mark.slow
def test_real_deteriorations_exit_1(pairs, tmp_path, capsys):
    """Without a margin (``--rope none``) the FDR selection alone decides; the default margin's gate on
    the same pair is test_compare_margin.py's clear deterioration."""
    a, b, truth = pairs["worse"]
    rc = main(["compare", str(a), str(b), "--out", str(tmp_path), "--rope", "none", *DEFAULTS])
    assert rc == 1, capsys.readouterr()
    res = json.loads((tmp_path / "compare.json").read_text())
    assert res["found"] is True and res["bayes"]["n_deteriorated"] >= 3
    assert res["bayes"]["aggregate"]["p_below_0"] > 0.99  # the mean dropped too
    import pandas as pd

    items = pd.read_parquet(tmp_path / "items.parquet")
    flagged = items[items["bayes_class"] == "deteriorated"]
    true_dp = truth.set_index("item_id").loc[flagged["item_id"], "delta_p"].to_numpy()
    assert np.mean(true_dp < 0) >= 0.8  # flagged deteriorations are real ones (FDR q = 0.10)
    assert list(items["bayes_class"].head(len(flagged))) == ["deteriorated"] * len(flagged)  # listed first
    md = (tmp_path / "summary.md").read_text()
    assert "deteriorated items found" in md and "(exit 1)" in md and flagged["item_id"].iloc[0] in md
    assert (
        res["margin"] is None
        and res["resolution"]["margin"] is None
        and "no margin: the item selection alone decides" in md
    )


def test_decision_rules():
    assert decide("deteriorated", 0.1, 5, 0, 0.0) is False and decide("deteriorated", 0.1, 0, 1, 0.0) is True
    assert decide("changed", 0.1, 1, 0, 0.0) is True and decide("changed", 0.1, 0, 0, 1.0) is False
    assert decide("aggregate", 0.1, 0, 0, 0.95) is True and decide("aggregate", 0.1, 9, 9, 0.85) is False
    rng = np.random.default_rng(0)
    agg = aggregate_change(rng.normal(-0.05, 0.01, size=(2000, 50)))
    assert agg["p_below_0"] == 1.0 and agg["lo90"] < agg["mean"] < agg["hi90"] < 0


def test_bad_input_exits_2_and_writes_nothing(pairs, tmp_path, capsys):
    a, b, _ = pairs["same"]
    out = tmp_path / "out"
    cases = [
        ([str(a), str(tmp_path / "missing.parquet")], "file not found"),
        ([str(a), str(b), "--q", "1.5"], "field '--q'"),
        ([str(a), str(tmp_path)], "no trials.parquet"),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item_id": "q1", "domain": "law", "k": 0, "is_correct": "yes"}\n')
    cases.append(([str(a), str(bad)], "bad.jsonl"))
    for argv, msg in cases:
        capsys.readouterr()
        assert main(["compare", *argv, "--out", str(out), *DEFAULTS]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("bayesrc: error:") and msg in err and len(err.splitlines()) == 1, err
    assert not out.exists()
    with pytest.raises(SystemExit) as e:  # argparse: unknown --fail-on value
        main(["compare", str(a), str(b), "--out", str(out), "--fail-on", "worse"])
    assert e.value.code == 2


@pytest.mark.slow
def test_failed_convergence_gate_exits_3(pairs, tmp_path, capsys):
    a, b, _ = pairs["worse"]
    # 2 chains x 15 draws cannot reach an ESS of 100: the gate fails, exit 3 (cheaper than a full small fit).
    rc = main(
        [
            "compare",
            str(a),
            str(b),
            "--out",
            str(tmp_path),
            "--chains",
            "2",
            "--draws",
            "15",
            "--tune",
            "5",
            "--min-ess",
            "100",
            "--seed",
            "1",
        ]
    )
    assert rc == 3
    assert "convergence gate" in capsys.readouterr().err
    res = json.loads((tmp_path / "compare.json").read_text())
    assert (
        res["status"] == "failed" and res["exit_code"] == 3 and "inconclusive" in (tmp_path / "summary.md").read_text()
    )
