"""The gated sampling loop every fit shares: sample, check the convergence gate, escalate.

:func:`sample_gated` runs a sampler, gates it (:func:`bayesrc.bayes.diagnostics.gate`) and, while
the gate fails, samples again with :func:`escalated_config`'s settings; the pair fit
(:func:`bayesrc.bayes.fit`), the joint fit of a family (:mod:`bayesrc.bayes.joint_fit`) and the
switch model use it. :func:`gated_vars` names what a pair's model is gated on.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import replace

from bayesrc.bayes.diagnostics import Diagnostics, gate
from bayesrc.bayes.samplers import SamplerConfig, own_adaptation
from bayesrc.config import GateConfig

# Each further attempt after a failed gate, by what failed (warm-up and draws as multiples of the first
# attempt's, target acceptance at least this): divergences mean the step size was too large for the
# geometry (longer warm-up, higher acceptance); R-hat or ESS alone, that the chains were too short
# (more draws first, from the same warm-up and step size: half the cost of refitting at 0.95).
ESCALATION = {
    "divergences": ({"tune": 2, "draws": 2, "target_accept": 0.95}, {"tune": 4, "draws": 4, "target_accept": 0.99}),
    "mixing": ({"tune": 1, "draws": 2, "target_accept": 0.0}, {"tune": 2, "draws": 4, "target_accept": 0.95}),
}


def escalated_config(first: SamplerConfig, diag: Diagnostics, attempt: int) -> SamplerConfig:
    """The settings of retry ``attempt`` (1 or 2) after the failed gate ``diag``: the :data:`ESCALATION`
    step for what failed (divergences, else mixing), applied to the first attempt's settings, new seed.

    Examples
    --------
    >>> limits = {"max_rhat": 1.01, "min_ess": 400.0, "max_divergences": 0}
    >>> slow = Diagnostics(1.02, 300.0, 250.0, 0, False, limits, "rhat (pi)")
    >>> c = escalated_config(SamplerConfig(tune=500, draws=500), slow, 1)
    >>> (c.tune, c.draws, c.target_accept, c.seed)
    (500, 1000, 0.85, 1)
    >>> c = escalated_config(SamplerConfig(tune=500, draws=500), replace(slow, divergences=3), 2)
    >>> (c.tune, c.draws, c.target_accept, c.seed)
    (2000, 2000, 0.99, 2)
    """
    kind = "divergences" if diag.divergences > diag.thresholds["max_divergences"] else "mixing"
    e = ESCALATION[kind][attempt - 1]
    return replace(
        first,
        tune=first.tune * e["tune"],
        draws=first.draws * e["draws"],
        target_accept=max(first.target_accept, e["target_accept"]),
        seed=first.seed + attempt,
    )


def sample_gated(sampler, var_names: list[str], first: SamplerConfig, gate_config: GateConfig | None = None):
    """``sampler(config=c)`` with ``first``, then, while the gate ``gate_config`` (default :class:`GateConfig`'s)
    fails and its ``escalate`` is set, with each :func:`escalated_config` (two at most).

    Returns the last posterior, its :class:`Diagnostics`, one record per attempt (settings, gate
    values, wall time) and the last attempt's settings.
    """
    gate_config = gate_config or GateConfig()
    attempts, cfg, diag = [], first, None
    for attempt in range(1 + len(ESCALATION["mixing"]) * gate_config.escalate):
        if diag is not None:
            cfg = escalated_config(first, diag, attempt)
        t0 = time.perf_counter()
        with own_adaptation() if attempt else nullcontext():  # a retry warms up afresh (samplers.shared_adaptation)
            dt = sampler(config=cfg)
        # NumPyro's chains may have gone on (SamplerConfig.max_draws)
        cfg = replace(cfg, draws=int(dt["posterior"].sizes["draw"]))
        diag = gate(dt, var_names, gate_config)
        attempts.append(
            {
                "chains": cfg.chains,
                "draws": cfg.draws,
                "tune": cfg.tune,
                "target_accept": cfg.target_accept,
                "seed": cfg.seed,
                "max_rhat": diag.max_rhat,
                "min_ess_bulk": diag.min_ess_bulk,
                "min_ess_tail": diag.min_ess_tail,
                "divergences": diag.divergences,
                "passed": diag.passed,
                "worst": diag.worst,
                "wall_s": round(time.perf_counter() - t0, 2),
            }
        )
        if diag.passed:
            break
    return dt, diag, attempts, cfg


def gated_vars(model: str, slope: bool = False, collapsed: bool = False, covariate: bool = False) -> list[str]:
    """The sampled quantities the gate checks (plus p for the beta-binomial).

    The collapsed change model samples only the hyperparameters (``theta`` is an exact
    conditional draw, independent given them), so only those are gated. ``covariate``: the
    change model has an item covariate (its ``group_level``, ``group_shift``, ``stratum_shift_sd`` and
    ``stratum_shift_z`` are gated too; ``stratum_shift`` is their product, exactly 0 in a stratum
    with no interaction contrast).

    Examples
    --------
    >>> gated_vars("change", collapsed=True)
    ['mu_theta', 'sigma_theta', 'shift', 'sigma_delta', 'pi']
    """
    if model == "betabinom":
        return ["logit_mu", "log_kappa", "p"]
    extra = (["slope"] if slope else []) + (
        ["group_level", "group_shift", "stratum_shift_sd", "stratum_shift_z"] if covariate else []
    )
    return ["mu_theta", "sigma_theta", "shift", "sigma_delta", "pi"] + ([] if collapsed else ["theta"]) + extra
