"""``family_truth``: the joint model of a family of versions against exact truth, beside its pairs.

V >= 3 exact runs (the first the reference) give every item's true accuracy per version.
:func:`family_truth` draws ``replicates`` K-sample datasets of the whole family from them
(:func:`bayesrc.truth.replicates.family_replicates`) and, on each, scores every non-reference version's
per-item change from the reference, Delta p, three ways:

* ``joint``: the joint change model of the family (``bayesrc.bayes.fit`` on all versions);
* ``pair``: the default pair change model fitted V - 1 times, reference against each version alone;
* ``rci``: the reference RCI classification of each such pair, as alone (no multiplicity correction).

Per method and version: ``coverage90`` (share of items whose 90% interval of Delta p holds the exact
one), ``dp_rmse`` and ``dp_slope`` (posterior mean against exact Delta p), and the items each method
flags, scored as :func:`bayesrc.truth.score_classes` does (sign and material false discoveries): for
the models, items whose 90% interval excludes 0, in the direction of the interval; for RCI, its classes.
The chain of consecutive versions is scored too, each step after the first (``"v2 -> v3"``, ...; the
first is the second version's change from the reference): the joint model's contrast of the two
versions (:meth:`bayesrc.bayes.JointFit.item_changes`) and RCI on that pair.
Per replicate, the joint model's **rank bands** against the exact mean accuracies: whether every
version in a better band is truly better (``order_respected``), the number of bands and the P(best)
of the truly best version.

Example
-------
>>> res = family_truth(["runs/exact_q4", "runs/exact_q3", "runs/exact_q2"], k=10, replicates=5)  # doctest: +SKIP
>>> res.summary()                                                                                # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from bayesrc.bayes import SamplerConfig, SelectionConfig, fit
from bayesrc.bayes.samplers import progress_bar, shared_adaptation
from bayesrc.classical import reliable_change
from bayesrc.classical.pairwise import pair_name
from bayesrc.classical.rci import DETERIORATED, IMPROVED
from bayesrc.data.exact import _as_exact
from bayesrc.errors import InputError
from bayesrc.results import register
from bayesrc.truth.replicates import family_replicates, run_labels
from bayesrc.truth.score import ScoredReplicates, _model_scores, score_classes

FAMILY_METHODS = ("joint", "pair")  # the Bayesian methods; RCI is always scored
SCORE_NUMBERS = (
    "coverage90",
    "dp_rmse",
    "dp_slope",
    "flagged_mean",
    "fdp_sign",
    "fdp_material",
    "gate_pass_share",
    "runtime_mean_s",
)
BAND_NUMBERS = ("order_respected_share", "bands_mean", "p_best_of_true_best_mean")


def interval_classes(items: pd.DataFrame) -> np.ndarray:
    """The direction of each item whose 90% interval of Delta p excludes 0 ("improved" /
    "deteriorated"), "" for the others.

    Examples
    --------
    >>> interval_classes(pd.DataFrame({"dp_lo90": [0.1, -0.3, -0.1], "dp_hi90": [0.4, -0.05, 0.2]})).tolist()
    ['improved', 'deteriorated', '']
    """
    lo, hi = items["dp_lo90"].to_numpy(float), items["dp_hi90"].to_numpy(float)
    return np.where(lo > 0, IMPROVED, np.where(hi < 0, DETERIORATED, "")).astype(object)


def order_respected(bands: pd.Series, true_mean: pd.Series) -> bool:
    """Whether every version in a better band (a smaller number) is truly better than every version in a worse one.

    Examples
    --------
    >>> order_respected(pd.Series({"a": 1, "b": 2, "c": 2}), pd.Series({"a": 0.6, "b": 0.5, "c": 0.55}))
    True
    >>> order_respected(pd.Series({"a": 1, "b": 2}), pd.Series({"a": 0.5, "b": 0.6}))
    False
    """
    return all(true_mean[a] > true_mean[b] for a in bands.index for b in bands.index if bands[a] < bands[b])


def interval_scores(
    method: str, label: str, items: pd.DataFrame, dp: np.ndarray, gate_passed: bool, delta_min: float = 0.05
) -> dict:
    """One score row: a model's 90% intervals of Delta p (``items``, rows in the order of ``dp``) against
    exact Delta p: their flags and false discoveries, coverage, error and slope.

    Examples
    --------
    >>> it = pd.DataFrame({"dp_lo90": [0.1, -0.2], "dp_hi90": [0.3, 0.1], "dp_mean": [0.2, 0.0]})
    >>> row = interval_scores("joint", "v2", it, np.array([0.25, 0.0]), True)
    >>> row["flagged"], row["coverage90"]
    (1, 1.0)
    """
    return {
        "method": method,
        "version": label,
        **score_classes(interval_classes(items), dp, delta_min),
        **_model_scores(items, dp),
        "gate_passed": bool(gate_passed),
    }


def fit_scores(method: str, res, ids, dp: dict[str, np.ndarray], delta_min: float = 0.05) -> list[dict]:
    """One row per non-reference version a fit estimates (a joint fit: every one; a pair fit: its
    second version): coverage, error and interval flags of its items against exact Delta p
    (``dp``: version -> exact Delta p in the order of the item ids ``ids``).

    Examples
    --------
    >>> rows = fit_scores("joint", fit(counts), counts["item"].values, dp)   # doctest: +SKIP
    """
    items = res.items
    groups = {v: g for v, g in items.groupby("version") if v in dp} if "version" in items else {res.versions[1]: items}
    return [
        interval_scores(method, str(v), g.set_index("item_id").reindex(ids), dp[v], res.diagnostics.passed, delta_min)
        for v, g in groups.items()
    ]


def step_scores(joint, ids, dp: dict[tuple[str, str], np.ndarray], delta_min: float = 0.05) -> list[dict]:
    """One row per consecutive step ``(a, b)`` of ``dp`` (exact ``p_b - p_a`` in the order of ``ids``):
    the joint fit's contrast of the two versions (:meth:`~bayesrc.bayes.JointFit.item_changes`) scored as
    :func:`fit_scores` scores a version.

    Examples
    --------
    >>> rows = step_scores(fit(counts), counts["item"].values, {("q3", "q2"): p[:, 2] - p[:, 1]})   # doctest: +SKIP
    """
    changes = joint.item_changes(list(dp)).set_index(["from", "to"])
    return [
        interval_scores(
            "joint",
            pair_name(a, b),
            changes.loc[(a, b)].set_index("item_id").reindex(ids),
            d,
            joint.diagnostics.passed,
            delta_min,
        )
        for (a, b), d in dp.items()
    ]


def band_scores(joint, true_mean: pd.Series) -> dict:
    """A joint fit's rank bands against the versions' true mean accuracies: whether they keep the true
    order (:func:`order_respected`), how many there are, and the P(best) of the truly best version.

    Examples
    --------
    >>> band_scores(fit(counts), pd.Series(p_exact.mean(0), index=versions))   # doctest: +SKIP
    """
    table = joint.versions_table.set_index("version")
    best = true_mean.idxmax()
    return {
        "order_respected": order_respected(table["band"], true_mean),
        "n_bands": int(table["band"].nunique()),
        "p_best_of_true_best": float(table.loc[best, "p_best"]),
    }


def score_family_replicate(
    counts,
    p_exact: np.ndarray,
    *,
    methods=FAMILY_METHODS,
    delta_min: float = 0.05,
    config=None,
    seed: int = 0,
    backend: str = "numpyro",
) -> list[dict]:
    """Score RCI and the joint and pair models on one K-sample dataset of a family: one row per method
    and non-reference version, and for RCI and the joint model one per consecutive step after the first
    (``"a -> b"``, :func:`step_scores`; the joint model's rows also carry its :func:`band_scores`).

    Examples
    --------
    >>> rows = score_family_replicate(counts, p_exact, methods=())   # doctest: +SKIP
    """
    versions = [str(v) for v in counts["version"].values]
    ids = counts["item"].values
    dp = {v: p_exact[:, j] - p_exact[:, 0] for j, v in enumerate(versions) if j}
    # the chain of consecutive versions after its first step (that one is the first version's change)
    steps = {
        (a, b): p_exact[:, j + 2] - p_exact[:, j + 1] for j, (a, b) in enumerate(zip(versions[1:-1], versions[2:]))
    }
    rows = []
    for (a, b), d in [((versions[0], v), x) for v, x in dp.items()] + list(steps.items()):
        t0 = time.perf_counter()
        rci = (
            reliable_change(counts, a, b, n_splits=200, n_permutations=200, seed=seed)
            .to_frame()
            .set_index("item_id")
            .reindex(ids)
        )
        label = b if a == versions[0] else pair_name(a, b)
        rows.append(
            {
                "method": "rci",
                "version": label,
                **score_classes(rci["class"].to_numpy(dtype=object), d, delta_min),
                "runtime_s": time.perf_counter() - t0,
            }
        )
    if "pair" in methods:
        for v in dp:
            selection = SelectionConfig(delta_min=delta_min)
            pair = fit(counts, versions=(versions[0], v), backend=backend, config=config, selection=selection)
            rows += [row | {"runtime_s": pair.runtime_s} for row in fit_scores("pair", pair, ids, dp, delta_min)]
    if "joint" in methods:
        joint = fit(counts, backend=backend, config=config)
        extra = band_scores(joint, pd.Series(p_exact.mean(0), index=versions)) | {"runtime_s": joint.runtime_s}
        rows += [
            row | extra
            for row in fit_scores("joint", joint, ids, dp, delta_min) + step_scores(joint, ids, steps, delta_min)
        ]
    return rows


def _aggregate(rep: pd.DataFrame) -> tuple[dict, dict | None]:
    """Per method and version, means over replicates; the joint model's band scores over replicates."""
    scores: dict[str, dict] = {}
    for (method, version), g in rep.groupby(["method", "version"], sort=False):
        d = {
            "flagged_mean": float(g["flagged"].mean()),
            "fdp_sign": float(g["fdp_sign"].mean()),
            "fdp_material": float(g["fdp_material"].mean()),
            "runtime_mean_s": float(g["runtime_s"].mean()),
        }
        if method != "rci":
            d |= {
                "coverage90": float(g["coverage90"].mean()),
                "dp_rmse": float(g["dp_rmse"].mean()),
                "dp_slope": float(g["dp_slope"].mean()),
                "gate_pass_share": float(g["gate_passed"].mean()),
            }
        scores.setdefault(str(method), {})[str(version)] = d
    joint = rep[rep["method"] == "joint"].drop_duplicates("replicate")
    if joint.empty:
        return scores, None
    bands = {
        "order_respected_share": float(joint["order_respected"].mean()),
        "bands_mean": float(joint["n_bands"].mean()),
        "p_best_of_true_best_mean": float(joint["p_best_of_true_best"].mean()),
    }
    return scores, bands


@register
class FamilyTruth(ScoredReplicates):
    """Exact truth of a family of versions (``family_truth.json`` + ``family_truth_replicates.parquet``
    + ``family_truth_items.parquet``): per method and version the means over replicates, the joint
    model's rank bands against the exact order, the per-replicate table and the items' exact accuracies.

    Examples
    --------
    >>> import bayesrc
    >>> res = bayesrc.load("runs/truth_family")   # doctest: +SKIP
    >>> res.summary()                             # doctest: +SKIP
    """

    main_file = "family_truth.json"
    kind = "family_truth"
    field_kinds = {  # what the summary and the report read (bayesrc.fields.check_fields)
        "{exact,scores}": "object",
        "runs!": "records",
        "runs.[].label": "text",
        "versions!": "versions",
        "exact.{mean_accuracy,median_abs_dp}": "object",
        "exact.{mean_accuracy,median_abs_dp}.*": "number",
        "{k,replicates,n_items}": "integer",
        "delta_min": "number",
        "scores.*": "object",
        "scores.*.*": "object",
        "scores.*.*.{" + ",".join(SCORE_NUMBERS) + "}": "number",
        "bands": "block",
        "bands.{" + ",".join(BAND_NUMBERS) + "}": "number",
    }

    k = property(lambda self: self.payload["k"])
    replicates = property(lambda self: self.payload["replicates"])
    n_items = property(lambda self: self.payload["n_items"])
    delta_min = property(lambda self: self.payload["delta_min"])
    versions = property(lambda self: list(self.payload["versions"]))
    runs = property(lambda self: self.payload["runs"])
    exact = property(lambda self: self.payload["exact"])
    scores = property(lambda self: self.payload["scores"])
    bands = property(lambda self: self.payload.get("bands"))  # None when the joint model was not scored

    def summary(self) -> pd.DataFrame:
        """One row per method and non-reference version: flags and their false discoveries, and for the models
        coverage, error and gate."""
        rows = [
            {"method": m, "version": v, **{c: np.nan if s.get(c) is None else s[c] for c in SCORE_NUMBERS}}
            for m, by_v in self.scores.items()
            for v, s in by_v.items()
        ]
        return pd.DataFrame(rows, columns=["method", "version", *SCORE_NUMBERS])

    def _headline(self) -> str:
        return f"{len(self.versions)} versions, K = {self.k}, {self.replicates} replicate(s), {self.n_items} items"


def family_truth(
    exact_runs,
    *,
    k: int = 10,
    replicates: int = 20,
    seed: int = 0,
    delta_min: float = 0.05,
    methods=FAMILY_METHODS,
    config: SamplerConfig | None = None,
    backend: str = "numpyro",
    progress: bool | None = None,
) -> FamilyTruth:
    """Score the joint model of a family, its pairs and their RCI on ``replicates`` K-sample datasets
    drawn from three or more exact runs (the first the reference).

    Parameters
    ----------
    exact_runs : exact run directories (or :class:`bayesrc.data.exact.ExactRun`), three or more.
    k : samples per item and version in each replicate.
    methods : the Bayesian methods of :data:`FAMILY_METHODS` to score (RCI always is).
    config : the fits' sampler settings (default ``SamplerConfig()``); each replicate's fits get their own seed.
    progress : a progress bar over the replicates (their fits' own bars off).

    Examples
    --------
    >>> res = family_truth(["runs/exact_q4", "runs/exact_q3", "runs/exact_q2"], replicates=5)  # doctest: +SKIP
    >>> res.bands["order_respected_share"]                                                     # doctest: +SKIP
    """
    if len(exact_runs) < 3:
        raise InputError(f"a family needs three or more exact runs, got {len(exact_runs)}", field="EXACT_V")
    if replicates < 1 or k < 1:
        raise InputError("replicates and k must be >= 1", field="--replicates")
    unknown = [m for m in methods if m not in FAMILY_METHODS]
    if unknown:
        raise InputError(
            f"unknown method {unknown[0]!r} for a family; known: {', '.join(FAMILY_METHODS)}", field="--methods"
        )
    runs = [_as_exact(r) for r in exact_runs]
    labels, config, rows, p = run_labels(runs), config or SamplerConfig(), [], None
    # replicates of one family share their fits' shapes: each starts from the last one's adaptation
    with progress_bar(progress, replicates, desc="truth", unit="replicate") as bar, shared_adaptation():
        for r, counts, p, sampler_seed in family_replicates(
            runs, k=k, seed=seed, replicates=range(replicates), labels=labels
        ):
            cfg = replace(config, seed=sampler_seed, progress=False)
            rows += [
                row | {"replicate": r}
                for row in score_family_replicate(
                    counts, p, methods=methods, delta_min=delta_min, config=cfg, seed=r, backend=backend
                )
            ]
            bar.update()
    per_rep = pd.DataFrame(rows)
    per_rep = per_rep[["replicate"] + [c for c in per_rep.columns if c != "replicate"]]
    scores, bands = _aggregate(per_rep)
    items = pd.DataFrame(p, columns=labels).assign(item_id=list(counts["item"].values))[["item_id", *labels]]
    payload = {
        "k": int(k),
        "replicates": int(replicates),
        "seed": int(seed),
        "delta_min": float(delta_min),
        "n_items": len(items),
        "versions": labels,
        "runs": [{"path": str(run.path), "label": label} for run, label in zip(runs, labels)],
        "exact": {
            "mean_accuracy": {v: float(items[v].mean()) for v in labels},
            "median_abs_dp": {v: float((items[v] - items[labels[0]]).abs().median()) for v in labels[1:]},
        },
        "scores": scores,
        "bands": bands,
        "settings": {
            "chains": config.chains,
            "tune": config.tune,
            "draws": config.draws,
            "backend": backend,
            "methods": list(methods),
        },
    }
    return FamilyTruth(payload, {"replicates": per_rep, "items": items})
