"""Bayesian item models (SPEC section 3): hierarchical beta-binomial and paired change model.

Each model is written twice with the same priors and named dims (``item``, ``version``,
``domain``): ``betabinom_numpyro`` / ``betabinom_pymc`` (full NUTS or collapsed) and
``change_numpyro`` / ``change_pymc`` (full) and ``change_collapsed_numpyro`` /
``change_collapsed_pymc`` (NUTS on the hyperparameters, the default in :func:`fit`); ``joint_numpyro`` /
``joint_pymc`` the joint change model of three or more versions (:mod:`bayesrc.bayes.joint`; :func:`fit` of a
family returns a :class:`JointFit`). :func:`fit` runs one, gates it (R-hat, ESS,
divergences), selects changed items (Bayesian FDR or threshold), cross-checks RCI and runs the
workflow checks (:mod:`bayesrc.bayes.ppc`: posterior predictive check; :mod:`bayesrc.bayes.checks`: PSIS-LOO;
:func:`compare` ranks fits by ELPD):
for a pair, the steps :func:`sample_posterior`, :func:`select_items`, :func:`crosscheck_rci` and
:func:`workflow_checks`, which can also be called one by one. Their settings come grouped:
:class:`SamplerConfig` (NUTS), :class:`GateConfig` (the convergence gate and its escalation) and
:class:`SelectionConfig` (how changed items are selected, what counts as material).
JAX and PyMC are imported only when a model is sampled.
"""

from bayesrc.bayes.betabinom import betabinom_numpyro, betabinom_pymc, conjugate_p, sufficient_stats
from bayesrc.bayes.change import change_numpyro, change_pymc, item_conditionals
from bayesrc.bayes.change_collapsed import change_collapsed_numpyro, change_collapsed_pymc
from bayesrc.bayes.change_grid import cell_stats
from bayesrc.bayes.change_item_draws import item_draws, with_item_draws
from bayesrc.bayes.diagnostics import Diagnostics, gate
from bayesrc.bayes.draws import item_block
from bayesrc.bayes.fit import (
    BACKENDS,
    MODELS,
    crosscheck_rci,
    fit,
    sample,
    sample_posterior,
    select_items,
    workflow_checks,
)
from bayesrc.bayes.fit_result import BayesFit, check, realised_fdp
from bayesrc.bayes.gating import gated_vars
from bayesrc.bayes.inputs import ModelInputs, model_inputs
from bayesrc.bayes.joint import family_item_draws, joint_numpyro, joint_pymc
from bayesrc.bayes.joint_fit import JointFit, fit_joint, rank_bands
from bayesrc.bayes.model_comparison import ModelComparison, compare
from bayesrc.bayes.ppc import posterior_predictive_check
from bayesrc.bayes.samplers import SamplerConfig, configure_host_devices, shared_adaptation
from bayesrc.bayes.summaries import (
    ITEM_COLUMNS,
    agreement_table,
    cohen_kappa,
    crosscheck,
    domain_shift,
    item_summary,
    select,
)
from bayesrc.config import GateConfig, SelectionConfig

__all__ = [
    "BACKENDS",
    "ITEM_COLUMNS",
    "MODELS",
    "BayesFit",
    "Diagnostics",
    "GateConfig",
    "JointFit",
    "ModelComparison",
    "ModelInputs",
    "SamplerConfig",
    "SelectionConfig",
    "agreement_table",
    "betabinom_numpyro",
    "betabinom_pymc",
    "cell_stats",
    "change_collapsed_numpyro",
    "change_collapsed_pymc",
    "change_numpyro",
    "change_pymc",
    "check",
    "cohen_kappa",
    "compare",
    "configure_host_devices",
    "conjugate_p",
    "crosscheck",
    "crosscheck_rci",
    "domain_shift",
    "family_item_draws",
    "fit",
    "fit_joint",
    "gate",
    "gated_vars",
    "item_block",
    "item_conditionals",
    "item_draws",
    "item_summary",
    "joint_numpyro",
    "joint_pymc",
    "model_inputs",
    "posterior_predictive_check",
    "rank_bands",
    "realised_fdp",
    "sample",
    "sample_posterior",
    "select",
    "select_items",
    "shared_adaptation",
    "sufficient_stats",
    "with_item_draws",
    "workflow_checks",
]
