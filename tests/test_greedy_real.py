"""The reference study's real greedy single-shot files (bundled in bayesrc/datasets/greedy)."""

from __future__ import annotations

from conftest import data_path

from bayesrc.classical import greedy_flips
from bayesrc.data import load_counts


def _raw_greedy(path) -> dict:
    """item_id -> is_correct straight from the JSONL (no bayesrc code): the independent reference."""
    import json

    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {str(r["item_id"]): r["is_correct"] for r in rows}


def test_real_greedy_matched_and_flips():
    g1 = data_path("greedy", "llama3-8b_greedy.jsonl")
    g2 = data_path("greedy", "llama3.1-8b_greedy.jsonl")
    ds = load_counts([g1, g2], on_unmatched="drop", greedy=True)
    assert list(ds["version"].values) == ["llama3-8b", "llama3.1-8b"]
    flips = greedy_flips(ds).set_index("item_id")
    # Reference: the files read line by line; an item counts when both versions scored it.
    a, b = _raw_greedy(g1), _raw_greedy(g2)
    both = sorted(i for i in a.keys() & b.keys() if a[i] is not None and b[i] is not None)
    assert sorted(map(str, flips.index)) == both
    flipped = {i for i in both if a[i] != b[i]}
    assert set(map(str, flips.index[flips["change"] != "no_change"])) == flipped
    assert flips["g_v1"].mean() == sum(a[i] for i in both) / len(both) and flips["g_v2"].mean() == sum(
        b[i] for i in both
    ) / len(both)
    # The reference figures SPEC section 2.1 states for these files: 1,997 matched items, 329 flips.
    assert (len(both), len(flipped)) == (1997, 329)
