"""Classical reliable change (Jacobson-Truax RCI adapted to items; SPEC section 2)."""

from bayesrc.classical.across_pairs import analyse_pairs, cross_pair, greedy_comparison, greedy_flips
from bayesrc.classical.calibration import (
    binomial_s_diff,
    classify_counts,
    no_change_test,
    nominal_rate,
    rci_detectable_change,
    rci_detection_probability,
    sample_level_null,
)
from bayesrc.classical.graded import paired_tests, score_no_change_test, unit_scores
from bayesrc.classical.no_change_checks import pair_no_change_test
from bayesrc.classical.noise import noise_decomposition, noise_from_counts
from bayesrc.classical.pair_statistics import flip_metrics
from bayesrc.classical.pairwise import PairwiseRCI, family_wise_z, pairwise_rci
from bayesrc.classical.pipeline import reliable_change
from bayesrc.classical.rci import (
    CLASSES,
    RCISettings,
    classify_rci,
    exclusion_reasons,
    min_valid_for,
    min_valid_rule,
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
from bayesrc.classical.result import PairResult, RCIRun
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
    "PairResult",
    "PairwiseRCI",
    "family_wise_z",
    "pairwise_rci",
    "RCIRun",
    "CLASSES",
    "RCISettings",
    "analyse_pairs",
    "binomial_s_diff",
    "rci_detectable_change",
    "rci_detection_probability",
    "classify_counts",
    "flip_metrics",
    "icc_1_k",
    "mcnemar",
    "no_change_test",
    "noise_decomposition",
    "noise_from_counts",
    "nominal_rate",
    "pair_no_change_test",
    "paired_tests",
    "score_no_change_test",
    "unit_scores",
    "sample_level_null",
    "classify_rci",
    "cross_pair",
    "difficulty_bins",
    "domain_contingency",
    "effect_sizes",
    "empirical_null",
    "exclusion_reasons",
    "greedy_agreement",
    "min_valid_for",
    "min_valid_rule",
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
