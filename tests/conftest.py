"""Shared fixtures. Real reference data is read from ../shared (never copied)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(Path(__file__).parent))


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data not present: {path}")
    return path


@pytest.fixture(scope="session")
def sim_pair():
    from bayesrc.data import simulate_pair

    return simulate_pair(2000, 10, models=("llama-sim-3", "llama-sim-3.1"), seed=11)


@pytest.fixture(scope="session")
def sim_pair_b(sim_pair):
    """A second pair on the same items (as the paper's Qwen pair)."""
    from bayesrc.data import simulate_pair

    return simulate_pair(2000, 10, models=("qwen-sim-2.5", "qwen-sim-3"), seed=12, pi_change=0.7, sigma_delta=4.0)
