"""Episode-level switch data with known α, β and interaction (for validation).

Scores follow the episode model of :mod:`bayesrc.switch.bayes`:
s_e(a→b) = m_b + u_e + [a≠b](μ + α_a + β_b + γ_ab) + ε, with u_e the episode effect
shared by every cell of the episode (what makes the paired design pay off).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesrc.switch.data import SwitchData, episodes_from_frame


@dataclass(frozen=True)
class SimulatedSwitch:
    """Switch data drawn from the additive factor model with known truth (SPEC 8):
    Δ_ab = μ + α_a + β_b + interaction, ``delta`` the true (prefix, suffix) matrix.

    Examples
    --------
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> sim.delta.shape, len(sim.alpha)
    ((4, 4), 4)
    """

    data: SwitchData
    models: list[str]
    mu: float
    alpha: np.ndarray
    beta: np.ndarray
    gamma: np.ndarray  # (k, k), zero diagonal
    delta: np.ndarray  # (k, k) true expected effects μ + α_a + β_b + γ_ab, zero diagonal


def _zero_sum(rng: np.random.Generator, k: int, sd: float) -> np.ndarray:
    x = rng.normal(0.0, sd, k)
    return x - x.mean()


def simulate_switch(
    n_models: int = 5,
    n_episodes: int = 100,
    *,
    mu: float = 0.02,
    sd_alpha: float = 0.03,
    sd_beta: float = 0.05,
    tau: float = 0.01,
    sigma_u: float = 0.2,
    sigma: float = 0.1,
    seed: int | None = 0,
    benchmark: str = "sim",
) -> SimulatedSwitch:
    """Simulate a full k × k switch matrix over ``n_episodes`` paired episodes.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> len(sim.data.frame) == 4 * 4 * 30  # prefix x suffix x episodes
    True
    """
    rng = np.random.default_rng(seed)
    k = n_models
    models = [f"model-{i}" for i in range(k)]
    alpha, beta = _zero_sum(rng, k, sd_alpha), _zero_sum(rng, k, sd_beta)
    gamma = rng.normal(0.0, tau, (k, k))
    np.fill_diagonal(gamma, 0.0)
    delta = mu + alpha[:, None] + beta[None, :] + gamma
    np.fill_diagonal(delta, 0.0)
    m = rng.uniform(0.4, 0.7, k)
    u = rng.normal(0.0, sigma_u, n_episodes)
    score = m[None, None, :] + u[:, None, None] + delta[None] + rng.normal(0.0, sigma, (n_episodes, k, k))
    e, a, b = np.meshgrid(np.arange(n_episodes), np.arange(k), np.arange(k), indexing="ij")
    frame = pd.DataFrame(
        {
            "benchmark": benchmark,
            "episode": [f"ep{i:04d}" for i in e.ravel()],
            "prefix_model": np.asarray(models)[a.ravel()],
            "suffix_model": np.asarray(models)[b.ravel()],
            "score": score.ravel(),
        }
    )
    return SimulatedSwitch(episodes_from_frame(frame, name="<simulated>"), models, mu, alpha, beta, gamma, delta)
