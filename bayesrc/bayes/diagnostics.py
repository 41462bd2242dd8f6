"""The convergence gate (SPEC section 3): R-hat, bulk / tail ESS and divergences.

A fit passes when every gated quantity has rank-normalised split R-hat <= ``max_rhat``,
bulk and tail ESS >= ``min_ess`` and the sampler reported at most ``max_divergences``
divergent transitions (after warm-up). Anything non-finite fails the gate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Diagnostics:
    """The convergence gate's verdict (:func:`gate`): worst R-hat, bulk and tail ESS, divergences.

    ``passed`` iff max R-hat <= ``thresholds["max_rhat"]``, both ESS >= ``thresholds["min_ess"]``
    and divergences <= ``thresholds["max_divergences"]`` (Vehtari et al. 2021's rank-normalised
    R-hat and ESS, via arviz_stats); ``worst`` names the variable that decided it.

    Examples
    --------
    >>> d = Diagnostics(1.004, 812.0, 655.0, 0, True, {"max_rhat": 1.01, "min_ess": 400.0, "max_divergences": 0}, "sigma_delta")
    >>> d.passed, d.to_dict()["min_ess_tail"]
    (True, 655.0)
    """

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    passed: bool
    thresholds: dict
    worst: str

    def to_dict(self) -> dict:
        return asdict(self)


def _extreme(ds, worst: str) -> tuple[float, str]:
    """Largest (``worst="max"``, R-hat) or smallest (``"min"``, ESS) value over all variables.

    Non-finite values (a constant chain, NaN draws) count as the worst possible value.
    """
    bad = np.inf if worst == "max" else 0.0
    best, where = None, ""
    for name, da in ds.data_vars.items():
        vals = np.asarray(da.values, dtype=float).ravel()
        if vals.size == 0:
            continue
        vals = np.where(np.isfinite(vals), vals, bad)
        v = float(vals.max() if worst == "max" else vals.min())
        if best is None or (v > best if worst == "max" else v < best):
            best, where = v, str(name)
    return (float("nan") if best is None else best), where


def gate(
    dt,
    var_names: list[str],
    *,
    max_rhat: float = 1.01,
    min_ess: float = 400.0,
    max_divergences: int = 0,
) -> Diagnostics:
    """Check the posterior of ``var_names`` against the gate's thresholds.

    Examples
    --------
    >>> from bayesrc.bayes import fit
    >>> res = fit(counts, model="betabinom")  # doctest: +SKIP
    >>> gate(res.posterior, ["logit_mu", "log_kappa"], min_ess=400).passed  # doctest: +SKIP
    True
    """
    import arviz_stats as azs

    post = dt["posterior"].to_dataset()[[v for v in var_names if v in dt["posterior"]]]
    rhat = azs.rhat(post)
    ess_bulk = azs.ess(post, method="bulk")
    ess_tail = azs.ess(post, method="tail")
    # A constant draw (e.g. a parameter pinned by the data) has undefined R-hat; treat as failed.
    max_r, where_r = _extreme(rhat, "max")
    min_b, where_b = _extreme(ess_bulk, "min")
    min_t, where_t = _extreme(ess_tail, "min")
    div = int(np.asarray(dt["sample_stats"]["diverging"].values).sum())
    checks = {"rhat": max_r <= max_rhat, "ess_bulk": min_b >= min_ess, "ess_tail": min_t >= min_ess, "divergences": div <= max_divergences}
    failed = [f"{k} ({where})" for (k, ok), where in zip(checks.items(), (where_r, where_b, where_t, "")) if not ok]
    return Diagnostics(
        max_rhat=max_r,
        min_ess_bulk=min_b,
        min_ess_tail=min_t,
        divergences=div,
        passed=all(checks.values()),
        thresholds={"max_rhat": max_rhat, "min_ess": min_ess, "max_divergences": max_divergences},
        worst=", ".join(failed),
    )
