"""The K-sample datasets the truth scores are computed on: replicates drawn from exact runs, each replicate the same
whatever else is drawn (:func:`family_replicates`, :func:`replicate_datasets`), and the runs' version labels."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrc.data import item_counts
from bayesrc.data.exact import exact_truth, sample_from_exact


def run_labels(runs) -> list[str]:
    """The version labels of exact runs: their own, or each with its position (`` (v1)``, ...) when two are alike.

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> run_labels([R(label="q4"), R(label="q4")]), run_labels([R(label="q4"), R(label="q3")])
    (['q4 (v1)', 'q4 (v2)'], ['q4', 'q3'])
    """
    labels = [r.label for r in runs]
    return labels if len(set(labels)) == len(labels) else [f"{label} (v{i + 1})" for i, label in enumerate(labels)]


def family_replicates(runs, *, k: int, seed: int, replicates, labels):
    """K-sample datasets of a family of exact runs: ``(r, counts, p_exact, sampler_seed)`` for each
    replicate number ``r`` in ``replicates`` (0-based; replicate ``r`` is the same whatever else is drawn).

    Replicate ``r`` samples version ``v`` (of V) with word ``V r + v`` of ``SeedSequence(seed)``;
    ``p_exact`` (item, version) holds the exact accuracies among valid answers in the counts' item order.

    Examples
    --------
    >>> from bayesrc import datasets
    >>> from bayesrc.data.exact import load_exact
    >>> runs = [load_exact(datasets.path(f"exact_gemma/{v}")) for v in ("q4", "q3", "q4-prompt2")]
    >>> r, counts, p, _ = next(family_replicates(runs, k=10, seed=0, replicates=[0], labels=["q4", "q3", "p2"]))
    >>> dict(counts.sizes), p.shape
    ({'item': 300, 'version': 3, 'k': 10}, (300, 3))
    """
    exact = [exact_truth(runs[0], run).set_index("item_id") for run in runs[1:]]  # refuses item sets that differ
    p = pd.concat([exact[0]["p_v1"]] + [e["p_v2"] for e in exact], axis=1)
    n_v, replicates = len(runs), list(replicates)
    seeds = np.random.SeedSequence(seed).generate_state(n_v * (max(replicates) + 1))
    for r in replicates:
        trials = [sample_from_exact(run, k, int(seeds[n_v * r + v]), model=labels[v]) for v, run in enumerate(runs)]
        counts = item_counts(*trials, versions=list(labels))
        yield r, counts, p.loc[list(counts["item"].values)].to_numpy(float), int(seeds[n_v * r]) % 2**31


def replicate_datasets(ex1, ex2, *, k: int, seed: int, replicates, labels: tuple[str, str] = ("v1", "v2")):
    """The K-sample datasets :func:`~bayesrc.truth.truth` scores: ``(r, counts, dp_exact, sampler_seed)`` for each
    replicate number ``r`` in ``replicates`` (:func:`family_replicates` of the two runs;
    ``dp_exact`` is the exact Delta p in the counts' item order).

    Examples
    --------
    >>> from bayesrc import datasets
    >>> from bayesrc.data.exact import load_exact
    >>> ex = load_exact(datasets.path("exact_gemma/q4"))                                 # doctest: +SKIP
    >>> r, counts, dp, _ = next(replicate_datasets(ex, ex, k=10, seed=0, replicates=[0]))  # doctest: +SKIP
    """
    for r, counts, p, sampler_seed in family_replicates(
        [ex1, ex2], k=k, seed=seed, replicates=replicates, labels=labels
    ):
        yield r, counts, p[:, 1] - p[:, 0], sampler_seed
