"""Switch matrices and the additive prefix/suffix factor model (SPEC section 4, paper 004).

Load episode scores or published cell summaries (:func:`load_switch`), compute cell
means and paired switch effects with BCa intervals (:func:`cell_means`,
:func:`switch_effects`), fit Δ_ab = μ + α_a + β_b + ε_ab by least squares
(:func:`fit_additive`) or Bayesian NUTS in NumPyro / PyMC (:func:`fit_factor_bayes`),
or do everything at once (:func:`analyse_switch`, which returns the :class:`SwitchResult` that
``bayesrc switch`` writes and ``bayesrc.load`` reads back).
"""

from bayesrc.switch.analysis import analyse_switch
from bayesrc.switch.bayes import BayesFactorFit, FactorData, FactorPriors, factor_data, fit_factor_bayes
from bayesrc.switch.bootstrap import bca_mean, bca_paired_diff, bca_unpaired_diff
from bayesrc.switch.data import SwitchData, episodes_from_frame, load_switch, save_episodes
from bayesrc.switch.factor import AdditiveFit, factor_correlation, fit_additive
from bayesrc.switch.matrix import cell_means, effects_frame, episode_array, format_matrix, switch_effects
from bayesrc.switch.result import SwitchResult
from bayesrc.switch.simulate import SimulatedSwitch, simulate_switch

__all__ = [
    "SwitchResult",
    "AdditiveFit",
    "BayesFactorFit",
    "FactorData",
    "FactorPriors",
    "SimulatedSwitch",
    "SwitchData",
    "analyse_switch",
    "bca_mean",
    "bca_paired_diff",
    "bca_unpaired_diff",
    "cell_means",
    "effects_frame",
    "episode_array",
    "episodes_from_frame",
    "factor_correlation",
    "factor_data",
    "fit_additive",
    "fit_factor_bayes",
    "format_matrix",
    "load_switch",
    "save_episodes",
    "simulate_switch",
    "switch_effects",
]
