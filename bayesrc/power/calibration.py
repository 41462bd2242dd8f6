"""Simulated paired Bernoulli benchmarks: does N* deliver the power it promises?

Paper 002 calibrates N* on synthetic paired data (p in {0.5, 0.7, 0.9} x rho in
{0, 0.4, 0.8}). Each simulated benchmark is one multinomial draw of the four cells
(both right, only A, only B, both wrong), so thousands of benchmarks of any size
cost one vectorised call; McNemar needs only the discordant counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from bayesrc.classical.secondary import mcnemar
from bayesrc.errors import ParameterError
from bayesrc.power.analytic import joint_probabilities, required_n


def paired_bernoulli_counts(
    n: int,
    p_a: float,
    p_b: float,
    rho: float,
    n_trials: int,
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """Cell counts ``(n11, n10, n01, n00)`` of ``n_trials`` simulated benchmarks of ``n`` paired items.

    Items are independent; within an item the two scores have margins ``p_a``,
    ``p_b`` and phi correlation ``rho``. Shape ``(n_trials, 4)``; ``n10`` and ``n01``
    are McNemar's ``b`` and ``c``.

    Examples
    --------
    >>> cells = paired_bernoulli_counts(1000, 0.6, 0.5, 0.3, n_trials=2, seed=0)
    >>> cells.shape, bool((cells.sum(axis=1) == 1000).all())
    ((2, 4), True)
    """
    if int(n) < 1 or int(n_trials) < 1:
        raise ParameterError("n and n_trials must be positive", field="n")
    probs = np.asarray(joint_probabilities(p_a, p_b, rho), dtype=float)
    probs = probs / probs.sum()
    rng = np.random.default_rng(seed)
    return rng.multinomial(int(n), probs, size=int(n_trials))


def empirical_power(
    n: int,
    p_a: float,
    p_b: float,
    rho: float,
    *,
    n_trials: int = 2000,
    alpha: float = 0.05,
    exact: bool = True,
    seed: int | np.random.Generator = 0,
) -> float:
    """Share of simulated benchmarks in which McNemar's test rejects at level ``alpha``.

    Examples
    --------
    >>> from bayesrc.power import required_n
    >>> n = int(required_n(0.62, 0.58, 0.5)) + 1
    >>> 0.7 < empirical_power(n, 0.62, 0.58, 0.5, n_trials=1000, seed=1) < 0.9  # N* delivers ~80%
    True
    """
    cells = paired_bernoulli_counts(n, p_a, p_b, rho, n_trials, seed)
    res = mcnemar(cells[:, 1], cells[:, 2], exact=exact)
    return float(np.mean(np.asarray(res.p_value) < alpha))


def calibration_grid(
    p: ArrayLike = (0.5, 0.7, 0.9),
    rho: ArrayLike = (0.0, 0.4, 0.8),
    delta: float = 0.03,
    *,
    n_trials: int = 2000,
    alpha: float = 0.05,
    power: float = 0.8,
    seed: int = 0,
) -> pd.DataFrame:
    """Empirical McNemar power at ``N = ceil(N*)`` over a grid of mean accuracy ``p`` x ``rho``.

    ``p_A = p + delta/2``, ``p_B = p - delta/2``. Columns: p, rho, p_a, p_b, n_star,
    n, power_exact, power_asymptotic, mc_se (binomial Monte Carlo standard error).

    Examples
    --------
    >>> grid = calibration_grid((0.5,), (0.0,), delta=0.05, n_trials=500, seed=0)
    >>> grid.columns.tolist()[:3]  # doctest: +SKIP
    """
    seeds = np.random.SeedSequence(seed).spawn(len(np.atleast_1d(p)) * len(np.atleast_1d(rho)))
    rows = []
    for i, (pp, rr) in enumerate((a, b) for a in np.atleast_1d(p) for b in np.atleast_1d(rho)):
        pa, pb = pp + delta / 2, pp - delta / 2
        n_star = float(required_n(pa, pb, rr, alpha, power))
        n = int(np.ceil(n_star))
        cells = paired_bernoulli_counts(n, pa, pb, rr, n_trials, np.random.default_rng(seeds[i]))
        res = mcnemar(cells[:, 1], cells[:, 2])
        pw_ex = float(np.mean(np.asarray(res.p_exact) < alpha))
        pw_as = float(np.mean(np.asarray(res.p_asymptotic) < alpha))
        rows.append(
            dict(
                p=float(pp),
                rho=float(rr),
                p_a=pa,
                p_b=pb,
                n_star=n_star,
                n=n,
                power_exact=pw_ex,
                power_asymptotic=pw_as,
                mc_se=float(np.sqrt(power * (1 - power) / n_trials)),
            )
        )
    return pd.DataFrame(rows)
