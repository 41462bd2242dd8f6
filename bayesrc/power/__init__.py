"""Resolution diagnostics for paired comparisons (SPEC section 5, paper 002).

Before anyone reads a version comparison: is the benchmark large enough to resolve it?
Closed forms (:mod:`bayesrc.power.analytic`), the resolution report of two or more
models' per-item scores (:mod:`bayesrc.power.report`), simulated calibration of N*
(:mod:`bayesrc.power.calibration`) and the K-sample planner (:mod:`bayesrc.power.planner`).
"""

from bayesrc.classical.secondary import McNemarResult, mcnemar
from bayesrc.power.analytic import (
    ANYTIME_METHODS,
    MULTIPLICITY_METHODS,
    ParameterError,
    adjusted_alpha,
    anytime_boundary,
    anytime_inflation,
    anytime_required_n,
    cluster_icc,
    clustered_required_n,
    cohens_h,
    design_effect,
    joint_probabilities,
    mde,
    multiplicity_inflation,
    paired_variance,
    required_n,
    resolution_ratio,
    rho_bounds,
    shortcut_constant,
    shortcut_n,
    shortcut_ratio,
    z_sum,
)
from bayesrc.power.calibration import calibration_grid, empirical_power, paired_bernoulli_counts
from bayesrc.power.report import (
    PairResolution,
    leaderboard_noise,
    leaderboard_report,
    multiplicity_verdicts,
    resolution_report,
)
from bayesrc.power.result import VERDICT_PARADIGMS, PowerReport
from bayesrc.power.scores import scores_from_counts

__all__ = [
    "PowerReport",
    "ANYTIME_METHODS",
    "MULTIPLICITY_METHODS",
    "VERDICT_PARADIGMS",
    "McNemarResult",
    "PairResolution",
    "ParameterError",
    "adjusted_alpha",
    "anytime_boundary",
    "anytime_inflation",
    "anytime_required_n",
    "calibration_grid",
    "cluster_icc",
    "clustered_required_n",
    "cohens_h",
    "design_effect",
    "empirical_power",
    "joint_probabilities",
    "leaderboard_noise",
    "leaderboard_report",
    "mcnemar",
    "mde",
    "multiplicity_inflation",
    "multiplicity_verdicts",
    "paired_bernoulli_counts",
    "paired_variance",
    "required_n",
    "resolution_ratio",
    "resolution_report",
    "rho_bounds",
    "scores_from_counts",
    "shortcut_constant",
    "shortcut_n",
    "shortcut_ratio",
    "z_sum",
]
