"""Rule (a) scales with each item's K: ceil(0.6 K) valid responses (SPEC 2), stated in every output."""

from __future__ import annotations

import json

import numpy as np

from bayesrc.classical import (
    exclusion_reasons,
    min_valid_for,
    min_valid_rule,
    reliable_change,
)
from bayesrc.cli import main
from bayesrc.data import item_counts, save_trials, simulate_pair


def test_threshold_is_ceil_06_k():
    assert min_valid_for(np.array([1, 3, 5, 7, 10, 20])).tolist() == [1, 2, 3, 5, 6, 12]
    # K = 5 with 3 valid passes, with 2 fails; a K = 10 item with 5 valid fails; the fixed rule overrides
    r = exclusion_reasons([3, 2, 5], [5, 5, 10], [0.5, 0.5, 0.4], [0.4, 0.4, 0.5], k_v1=[5, 5, 10], k_v2=[5, 5, 10])
    assert list(r) == ["", "low_valid", "low_valid"]
    assert list(exclusion_reasons([3, 2, 5], [5, 5, 10], [0.5] * 3, [0.4] * 3, min_valid=2)) == ["", "", ""]
    assert min_valid_rule(None, 0.6, [5, 10, 5]) == "ceil(0.6·K) valid responses of the item's K (K = 5: 3, K = 10: 6)"
    assert min_valid_rule(6) == "6 valid responses (fixed)"


def test_k5_items_are_analysable_and_the_rule_is_stated(tmp_path, capsys):
    sim = simulate_pair(60, 5, models=("a", "b"), seed=4, missing_rate=0.05)
    r = reliable_change(item_counts(sim.trials_v1, sim.trials_v2), n_splits=50, n_permutations=20)
    n = r.exclusions["n_before"]
    assert r.exclusions["low_valid"] < n // 10 and r.exclusions["n_after"] > 0
    assert (
        r.exclusions["min_valid_rule"]
        == r.params["min_valid_rule"]
        == "ceil(0.6·K) valid responses of the item's K (K = 5: 3)"
    )
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    save_trials(sim.trials_v1, a)
    save_trials(sim.trials_v2, b)
    assert (
        main(
            [
                "rci",
                "--pair",
                "P",
                str(a),
                str(b),
                "--splits",
                "50",
                "--permutations",
                "20",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    # the CLI prints the headline rows and says where the rest is; `bayesrc show` prints them all
    out = capsys.readouterr().out
    assert (
        "rule (a) minimum valid" not in out and f"rows; all of them: bayesrc show {tmp_path / 'o' / 'rci.json'}" in out
    )
    assert main(["show", str(tmp_path / "o" / "rci.json")]) == 0
    out = capsys.readouterr().out
    assert "rule (a) minimum valid" in out and "K = 5: 3" in out
    assert max(len(line) for line in out.splitlines() if not line.startswith("[")) <= 120  # long texts: notes below
    rec = json.loads((tmp_path / "o" / "rci.json").read_text())["pairs"]["P"]
    assert "K = 5: 3" in rec["exclusions"]["min_valid_rule"] and rec["params"]["min_valid"] is None
