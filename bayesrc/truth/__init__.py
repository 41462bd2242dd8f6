"""Real-model truth: score the analyses against exact answer distributions (SPEC section 7)."""

from bayesrc.truth.score import DEFAULT_METHODS, MODEL_SPECS, TruthResult, score_classes, score_replicate, truth

__all__ = ["DEFAULT_METHODS", "MODEL_SPECS", "TruthResult", "score_classes", "score_replicate", "truth"]
