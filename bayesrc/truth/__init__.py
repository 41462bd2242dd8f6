"""Real-model truth: score the analyses against exact answer distributions (SPEC section 7)."""

from bayesrc.truth.family import FAMILY_METHODS, FamilyTruth, family_truth
from bayesrc.truth.score import DEFAULT_METHODS, MODEL_SPECS, TruthResult, score_classes, score_replicate, truth

__all__ = [
    "DEFAULT_METHODS",
    "FAMILY_METHODS",
    "MODEL_SPECS",
    "FamilyTruth",
    "TruthResult",
    "family_truth",
    "score_classes",
    "score_replicate",
    "truth",
]
