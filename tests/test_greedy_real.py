"""The reference study's real greedy single-shot files (bundled in bayesrc/datasets/greedy)."""

from __future__ import annotations

from conftest import data_path

from bayesrc.classical import greedy_flips
from bayesrc.data import load_counts


def test_real_greedy_matched_and_flips():
    g1 = data_path("greedy", "llama3-8b_greedy.jsonl")
    g2 = data_path("greedy", "llama3.1-8b_greedy.jsonl")
    ds = load_counts([g1, g2], on_unmatched="drop", greedy=True)
    assert list(ds["version"].values) == ["llama3-8b", "llama3.1-8b"]
    flips = greedy_flips(ds)
    assert len(flips) == 1997
    assert int((flips["change"] != "no_change").sum()) == 329
    # Accuracies as published in the paper's greedy baselines are plausible (30-45 %).
    assert 0.3 < flips["g_v1"].mean() < 0.45 and 0.3 < flips["g_v2"].mean() < 0.45
