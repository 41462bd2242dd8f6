"""Classical reliable change (Jacobson-Truax RCI adapted to items; SPEC section 2)."""

from bayesrc.classical.calibration import binomial_s_diff, classify_counts, nominal_rate, sample_level_null
from bayesrc.classical.pipeline import (
    PairRCI,
    RCIAnalysis,
    analyse_pairs,
    cross_pair,
    flip_metrics,
    greedy_comparison,
    greedy_flips,
    reliable_change,
)
from bayesrc.classical.rci import (
    CLASSES,
    classify_rci,
    exclusion_reasons,
    reliable_change_index,
    standard_error_of_difference,
    standard_error_of_measurement,
)
from bayesrc.classical.reliability import (
    icc_1_1,
    icc_1_k,
    k_for_reliability,
    reliability_vs_k,
    spearman_brown,
    split_half_reliability,
)
from bayesrc.classical.secondary import (
    difficulty_bins,
    domain_contingency,
    effect_sizes,
    empirical_null,
    greedy_agreement,
    mcnemar,
    stratified_s_diff,
    two_proportion_z,
)

__all__ = [
    "CLASSES",
    "PairRCI",
    "RCIAnalysis",
    "analyse_pairs",
    "binomial_s_diff",
    "classify_counts",
    "flip_metrics",
    "icc_1_k",
    "mcnemar",
    "nominal_rate",
    "sample_level_null",
    "classify_rci",
    "cross_pair",
    "difficulty_bins",
    "domain_contingency",
    "effect_sizes",
    "empirical_null",
    "exclusion_reasons",
    "greedy_agreement",
    "greedy_comparison",
    "greedy_flips",
    "icc_1_1",
    "k_for_reliability",
    "reliability_vs_k",
    "reliable_change",
    "reliable_change_index",
    "spearman_brown",
    "split_half_reliability",
    "standard_error_of_difference",
    "standard_error_of_measurement",
    "stratified_s_diff",
    "two_proportion_z",
]
