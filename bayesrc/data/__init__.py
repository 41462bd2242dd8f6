"""Data spine: trials -> item counts (graded trials -> item scores); a collected run directory
(:class:`CollectedRun`); a run's provenance (its pins, whether two runs are comparable)."""

from bayesrc.data.counts import (
    counts_frame,
    input_notes,
    item_counts,
    item_scores,
    load_counts,
    load_items,
    modal_k,
    open_counts,
    save_counts,
)
from bayesrc.data.exact import ExactRun, exact_truth, load_exact, sample_from_exact, write_exact_run
from bayesrc.data.provenance import PinComparison, check_comparable, compare_runs, load_comparable_counts
from bayesrc.data.run import CollectedRun
from bayesrc.data.simulate import (
    SimulatedFamily,
    SimulatedGradedPair,
    SimulatedPair,
    item_truth,
    letter_shift_truth,
    simulate_family,
    simulate_graded_pair,
    simulate_pair,
    trials_from_accuracy,
)
from bayesrc.data.trials import (
    TRIAL_COLUMNS,
    is_graded,
    load_trials,
    normalise_trials,
    save_trials,
    score_kind,
    trials_file,
)

__all__ = [
    "CollectedRun",
    "PinComparison",
    "check_comparable",
    "compare_runs",
    "load_comparable_counts",
    "TRIAL_COLUMNS",
    "ExactRun",
    "exact_truth",
    "letter_shift_truth",
    "load_exact",
    "sample_from_exact",
    "write_exact_run",
    "SimulatedFamily",
    "SimulatedGradedPair",
    "SimulatedPair",
    "counts_frame",
    "input_notes",
    "item_counts",
    "item_scores",
    "is_graded",
    "load_counts",
    "load_items",
    "item_truth",
    "load_trials",
    "modal_k",
    "open_counts",
    "save_counts",
    "normalise_trials",
    "save_trials",
    "score_kind",
    "simulate_family",
    "simulate_graded_pair",
    "simulate_pair",
    "trials_file",
    "trials_from_accuracy",
]
