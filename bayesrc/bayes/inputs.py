"""The Bayesian models' input arrays: :class:`ModelInputs` and :func:`model_inputs` live in
:mod:`bayesrc.data.inputs` (the data layer: the classical no-change test reads them too) and
are re-exported here, where the models import them.
"""

from bayesrc.data.inputs import AUTO, AUTO_MAX_STRATA, DEFAULT_COVARIATE, ModelInputs, interaction_basis, model_inputs

__all__ = ["AUTO", "AUTO_MAX_STRATA", "DEFAULT_COVARIATE", "ModelInputs", "interaction_basis", "model_inputs"]
