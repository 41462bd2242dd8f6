"""Episode runner on the bundled Gemma-3-270M base model (small: a handful of episodes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bayesrc.switch import episodes_from_frame, switch_effects
from bayesrc.switch.runner import RunnerModel, _Backend, make_episodes, run_switch_matrix, score_reply

CARD = Path(__file__).resolve().parents[1] / "models" / "gemma-3-270m-q4_k_m.toml"


def test_kv_recall_scoring_is_exact():
    ep = make_episodes(1, n_turns=3, seed=4)[0]
    other = next(v for _, v in ep.facts if v != ep.target)
    assert score_reply(ep, f"The {ep.query} is {ep.target}.") == 1.0
    assert score_reply(ep, ep.target.upper()) == 1.0
    assert score_reply(ep, f"{ep.target} or {other}") == 0.0
    assert score_reply(ep, "I do not know.") == 0.0


@pytest.mark.slow
def test_runner_caches_prefixes_and_feeds_the_analysis(tmp_path):
    pytest.importorskip("llama_cpp")
    models = [
        RunnerModel("gemma-plain", CARD, "plain", max_tokens=6),
        RunnerModel("gemma-sentence", CARD, "sentence", max_tokens=6),
    ]
    backend = _Backend()
    try:
        df = run_switch_matrix(models, n_episodes=2, n_turns=2, cache_dir=tmp_path / "cache", backend=backend)
        # 2 prefix models × 2 episodes × 1 prefix turn + 4 cells × 2 episodes final turns.
        assert backend.calls == 4 + 8
        cached = sorted(p.relative_to(tmp_path / "cache") for p in (tmp_path / "cache").rglob("*.json"))
        assert [str(p) for p in cached] == [
            f"kv-recall/{m}/kv000{i}.json" for m in ("gemma-plain", "gemma-sentence") for i in range(2)
        ]
        again = run_switch_matrix(models, n_episodes=2, n_turns=2, cache_dir=tmp_path / "cache", backend=backend)
        assert backend.calls == 12 + 8  # prefixes reused: only the final turns run again
    finally:
        backend.close()
    assert df["score"].isin([0.0, 1.0]).all()
    assert (
        df[["prefix_model", "suffix_model", "response"]].to_numpy()
        == again[["prefix_model", "suffix_model", "response"]].to_numpy()
    ).all()
    data = episodes_from_frame(df[["benchmark", "episode", "prefix_model", "suffix_model", "score"]])
    eff = switch_effects(data, n_boot=200)
    assert eff["delta"].shape == (2, 2)
