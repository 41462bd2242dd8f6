"""Side-by-side timings for bayesrc.power (ratios measured in one run; no thresholds).

    .venv/bin/python benchmarks/power.py

1. Calibration simulation: one multinomial draw of the four paired cells per simulated
   benchmark (what ``calibration_grid`` does) against drawing every item's pair of
   Bernoulli scores (the naive way), same N, same number of benchmarks.
2. MDE: the vectorised bisection of ``mde`` over a grid against a scipy ``brentq``
   loop, one root per grid point (and the largest disagreement).
3. McNemar: vectorised exact p-values against ``scipy.stats.binomtest`` per pair.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import optimize, stats

from bayesrc.power import joint_probabilities, mcnemar, mde, paired_bernoulli_counts, required_n


def timed(fn, repeat=3):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def naive_counts(n, pa, pb, rho, trials, seed):
    rng = np.random.default_rng(seed)
    probs = np.asarray(joint_probabilities(pa, pb, rho))
    cum = np.cumsum(probs)
    out = np.zeros((trials, 4), dtype=int)
    for t in range(trials):
        cell = np.searchsorted(cum, rng.random(n) * cum[-1])
        out[t] = np.bincount(cell, minlength=4)
    return out


def main() -> None:
    pa, pb, rho = 0.715, 0.685, 0.4
    n = int(np.ceil(required_n(pa, pb, rho)))
    trials = 500
    t_vec, c_vec = timed(lambda: paired_bernoulli_counts(n, pa, pb, rho, trials, seed=1))
    t_naive, c_naive = timed(lambda: naive_counts(n, pa, pb, rho, trials, seed=1), repeat=1)
    pw = lambda c: np.mean(np.asarray(mcnemar(c[:, 1], c[:, 2]).p_exact) < 0.05)  # noqa: E731
    print(
        f"calibration, N = {n}, {trials} benchmarks: multinomial {t_vec * 1e3:.2f} ms, "
        f"per-item {t_naive * 1e3:.0f} ms, ratio {t_naive / t_vec:.0f}x (power {pw(c_vec):.3f} vs {pw(c_naive):.3f})"
    )

    ns = np.repeat([100, 300, 1000, 3000, 12032], 40)
    ps = np.tile(np.linspace(0.2, 0.9, 40), 5)
    rh = 0.5
    t_bis, m_bis = timed(lambda: mde(ns, ps, rh))

    def brent():
        out = []
        for n_i, p_i in zip(ns, ps):
            f = lambda d: float(required_n(p_i + d / 2, p_i - d / 2, rh)) - n_i  # noqa: E731
            hi = 2 * min(p_i, 1 - p_i) * (1 - 1e-9)
            lo_feas = hi
            # stay inside the Frechet-feasible range for rho = 0.5
            while True:
                try:
                    f(lo_feas)
                    break
                except ValueError:
                    lo_feas *= 0.99
            out.append(optimize.brentq(f, 1e-9, lo_feas) if f(lo_feas) < 0 else np.nan)
        return np.array(out)

    t_br, m_br = timed(brent, repeat=1)
    ok = np.isfinite(m_br) & np.isfinite(m_bis)
    print(
        f"mde over {ns.size} points: vectorised bisection {t_bis * 1e3:.1f} ms, brentq loop {t_br * 1e3:.0f} ms, "
        f"ratio {t_br / t_bis:.1f}x, max |diff| {np.max(np.abs(m_br[ok] - m_bis[ok])):.2e}"
    )

    rng = np.random.default_rng(0)
    b = rng.integers(0, 400, 2000)
    c = rng.integers(0, 400, 2000)
    t_mc, res = timed(lambda: mcnemar(b, c))
    t_sp, p_sp = timed(lambda: np.array([stats.binomtest(int(x), int(x + y)).pvalue for x, y in zip(b, c)]), repeat=1)
    print(
        f"exact McNemar on {b.size} pairs: vectorised {t_mc * 1e3:.1f} ms, binomtest loop {t_sp * 1e3:.0f} ms, "
        f"ratio {t_sp / t_mc:.0f}x, max |diff| {np.max(np.abs(res.p_exact - p_sp)):.1e}"
    )


if __name__ == "__main__":
    main()
