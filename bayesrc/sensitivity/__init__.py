"""Sensitivity analyses: how the reliable-change conclusions move with the analysis choices
(threshold, exclusion rules, K, priors, FDR level), and their typed result.

Examples
--------
>>> from bayesrc.sensitivity import SensitivityTable
>>> SensitivityTable.main_file
'sensitivity.json'
"""

from bayesrc.sensitivity.analyses import ANALYSES, run_sensitivity_analyses
from bayesrc.sensitivity.bayesian import FDR_GRID, PRIOR_GRID, THRESHOLD_GRID, fdr_sensitivity, prior_sensitivity
from bayesrc.sensitivity.classical import (
    MIN_VALID_GRID,
    Z_GRID,
    exclusion_sensitivity,
    k_subsample_sensitivity,
    threshold_sensitivity,
)
from bayesrc.sensitivity.figure import sensitivity_figure
from bayesrc.sensitivity.result import SensitivityTable, write_sensitivity

__all__ = [
    "ANALYSES",
    "FDR_GRID",
    "MIN_VALID_GRID",
    "PRIOR_GRID",
    "THRESHOLD_GRID",
    "Z_GRID",
    "SensitivityTable",
    "exclusion_sensitivity",
    "fdr_sensitivity",
    "k_subsample_sensitivity",
    "prior_sensitivity",
    "run_sensitivity_analyses",
    "sensitivity_figure",
    "threshold_sensitivity",
    "write_sensitivity",
]
