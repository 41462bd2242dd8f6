"""A gated, summarised joint fit of a family of versions (issue 32): :func:`fit_joint` -> :class:`JointFit`.

Per version (``versions`` table): the posterior of its mean accuracy over the item set (mean and
90% interval), ``P(best)`` (the share of draws in which its mean accuracy is the highest), its rank
(1 = best; posterior mean and ``1 - q`` interval) and its **rank band** (:func:`rank_bands`). Per
item and version (``items`` table): posterior mean accuracy, ``dp`` against the reference with its
90% interval, ``P(changed)`` and ``P(this version is best on this item)``.

Any two versions can be compared from the same draws (:func:`version_pairs`, :func:`item_changes`,
:func:`version_changes`): a quantisation ladder or a series of checkpoints reads as the chain of
consecutive changes (``between="consecutive"``), each with its per-item intervals and the change
in mean accuracy.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes.change import prior_settings
from bayesrc.bayes.diagnostics import GatedResult
from bayesrc.bayes.gating import sample_gated
from bayesrc.bayes.inputs import ModelInputs, model_inputs
from bayesrc.bayes.joint import joint_gated, joint_numpyro, joint_pymc, with_family_item_draws
from bayesrc.bayes.joint_figures import change_heatmap, rank_band_figure
from bayesrc.bayes.samplers import SamplerConfig
from bayesrc.config import GateConfig, release_memory, releases_jax_caches
from bayesrc.errors import InputError
from bayesrc.results import register

RANK_Q = 0.1  # rank bands: versions whose (1 - q) rank intervals overlap
INTERVAL = 0.9  # accuracy and dp intervals
VERSION_COLUMNS = (
    "version",
    "mean_accuracy",
    "acc_lo90",
    "acc_hi90",
    "p_best",
    "rank_mean",
    "rank_lo",
    "rank_hi",
    "band",
)
ITEM_COLUMNS = ("item_id", "domain", "version", "p_mean", "dp_mean", "dp_lo90", "dp_hi90", "p_changed", "p_best")
ITEM_CHANGE_COLUMNS = ("item_id", "domain", "from", "to", "dp_mean", "dp_lo90", "dp_hi90", "p_up", "p_down")
VERSION_CHANGE_COLUMNS = ("from", "to", "dacc_mean", "dacc_lo90", "dacc_hi90", "p_up", "items_up", "items_down")


def interval90(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The equal-tailed :data:`INTERVAL` (90%) interval over the first axis (the draws): ``(lo, hi)``.

    Examples
    --------
    >>> lo, hi = interval90(np.arange(101.0))
    >>> round(float(lo), 6), round(float(hi), 6)
    (5.0, 95.0)
    """
    lo, hi = np.quantile(draws, [(1 - INTERVAL) / 2, (1 + INTERVAL) / 2], axis=0)
    return lo, hi


def draw_ranks(values: np.ndarray) -> np.ndarray:
    """Each version's rank per draw, 1 = highest (``values``: draw x version; ties by version order).

    Examples
    --------
    >>> draw_ranks(np.array([[0.5, 0.7, 0.6], [0.9, 0.1, 0.2]])).tolist()
    [[3, 1, 2], [1, 3, 2]]
    """
    return np.argsort(np.argsort(-values, axis=1, kind="stable"), axis=1) + 1


def rank_bands(mean: np.ndarray, rank_lo: np.ndarray, rank_hi: np.ndarray) -> np.ndarray:
    """Tie groups of versions: band 1 the best, from each version's posterior mean and rank interval.

    Definition: order the versions by posterior mean accuracy, best first; a band ends between
    positions ``k`` and ``k + 1`` when no version up to ``k`` has a rank interval that overlaps the
    interval of any version after ``k`` (every interval up to ``k`` ends above rank ``max rank_hi``,
    every later one starts below it: ``max(rank_hi[:k+1]) < min(rank_lo[k+1:])``). So overlapping
    intervals are chained: versions that overlap a common neighbour share its band, and two versions
    in different bands have rank intervals that do not overlap.

    Examples
    --------
    >>> rank_bands(np.array([0.6, 0.5, 0.58, 0.3]), np.array([1, 2, 1, 4]), np.array([2, 3, 3, 4])).tolist()
    [1, 1, 1, 2]
    >>> rank_bands(np.array([0.7, 0.5, 0.3]), np.array([1, 2, 3]), np.array([1, 2, 3])).tolist()
    [1, 2, 3]
    """
    order = np.argsort(-np.asarray(mean), kind="stable")
    reach = np.maximum.accumulate(np.asarray(rank_hi)[order])  # the worst rank any version up to here can take
    # the best rank any version from here on can take
    rest = np.minimum.accumulate(np.asarray(rank_lo)[order][::-1])[::-1]
    breaks = np.concatenate([[0], (reach[:-1] < rest[1:]).astype(int)])
    band = np.empty(len(order), int)
    band[order] = np.cumsum(breaks) + 1
    return band


def version_table(p: np.ndarray, versions, q: float = RANK_Q) -> pd.DataFrame:
    """The per-version table from item accuracy draws ``p`` (draw, item, version).

    Columns: ``mean_accuracy`` (posterior mean of the mean over items) and its 90% interval, ``p_best``,
    ``rank_mean``, ``rank_lo`` / ``rank_hi`` (the equal-tailed ``1 - q`` interval of the rank, on
    observed ranks) and ``band`` (:func:`rank_bands`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=(400, 50, 1)) * np.array([0.2, 0.9, 0.5])  # version 2 clearly best
    >>> t = version_table(p, ["a", "b", "c"])
    >>> t["band"].tolist(), t["p_best"].tolist()
    ([3, 1, 2], [0.0, 1.0, 0.0])
    """
    acc = p.mean(1)  # (draw, version)
    ranks = draw_ranks(acc)
    lo, hi = interval90(acc)
    r_lo, r_hi = np.quantile(ranks, [q / 2, 1 - q / 2], axis=0, method="inverted_cdf").astype(int)
    p_best = np.bincount(acc.argmax(1), minlength=acc.shape[1]) / acc.shape[0]
    mean = acc.mean(0)
    out = {
        "version": list(map(str, versions)),
        "mean_accuracy": mean,
        "acc_lo90": lo,
        "acc_hi90": hi,
        "p_best": p_best,
        "rank_mean": ranks.mean(0),
        "rank_lo": r_lo,
        "rank_hi": r_hi,
        "band": rank_bands(mean, r_lo, r_hi),
    }
    return pd.DataFrame(out, columns=list(VERSION_COLUMNS))


def item_best_share(p: np.ndarray) -> np.ndarray:
    """P(version v is the best on item i): per draw, 1 / (number of versions at the maximum) for each
    version at it (an unchanged item has the same accuracy in several versions: they share the
    draw), averaged over the draws. ``p``: (draw, item, version); returns (item, version).

    Examples
    --------
    >>> item_best_share(np.array([[[0.5, 0.5, 0.2]], [[0.1, 0.3, 0.2]]])).tolist()
    [[0.25, 0.75, 0.0]]
    """
    top = p == p.max(-1, keepdims=True)
    return (top / top.sum(-1, keepdims=True)).mean(0)


def item_table(p: np.ndarray, r: np.ndarray, items, domains, versions) -> pd.DataFrame:
    """The per-item, per-version table (long: one row per item and version, versions in order)
    from draws ``p`` (draw, item, version) and ``r = P(changed | theta, data)`` (draw, item, change).

    ``dp`` is against the reference (0 there, with ``p_changed`` NaN).

    Examples
    --------
    >>> p = np.random.default_rng(1).uniform(size=(100, 2, 3))
    >>> t = item_table(p, np.full((100, 2, 2), 0.5), ["i1", "i2"], ["d", "d"], ["a", "b", "c"])
    >>> len(t), float(t.loc[0, "dp_mean"]), float(t.loc[1, "p_changed"])
    (6, 0.0, 0.5)
    """
    n_items, n_ver = p.shape[1:]
    dp = p - p[..., :1]
    lo, hi = interval90(dp)
    p_changed = np.concatenate([np.full((n_items, 1), np.nan), r.mean(0)], axis=1)
    cols = {
        "item_id": np.repeat(np.asarray(items).astype(str), n_ver),
        "domain": np.repeat(np.asarray(domains).astype(str), n_ver),
        "version": np.tile(np.asarray(versions).astype(str), n_items),
        "p_mean": p.mean(0).ravel(),
        "dp_mean": dp.mean(0).ravel(),
        "dp_lo90": lo.ravel(),
        "dp_hi90": hi.ravel(),
        "p_changed": p_changed.ravel(),
        "p_best": item_best_share(p).ravel(),
    }
    return pd.DataFrame(cols, columns=list(ITEM_COLUMNS))


def version_pairs(versions, between="consecutive") -> list[tuple[str, str]]:
    """The ordered pairs ``(from, to)`` of versions to compare: ``"consecutive"`` (each version
    against the one before it: a ladder or a series of checkpoints), ``"reference"`` (each against
    the first), or explicit pairs of version labels.

    Examples
    --------
    >>> version_pairs(["q4", "q3", "q2"])
    [('q4', 'q3'), ('q3', 'q2')]
    >>> version_pairs(["q4", "q3", "q2"], "reference")
    [('q4', 'q3'), ('q4', 'q2')]
    """
    versions = [str(v) for v in versions]
    if between == "consecutive":
        return list(zip(versions[:-1], versions[1:]))
    if between == "reference":
        return [(versions[0], v) for v in versions[1:]]
    if isinstance(between, str):
        raise ValueError(f"between: expected 'consecutive', 'reference' or pairs of versions, got {between!r}")
    pairs = [(str(a), str(b)) for a, b in between]
    unknown = sorted({v for pair in pairs for v in pair} - set(versions))
    if unknown:
        raise ValueError(f"between: no version {', '.join(unknown)} in this fit (its versions: {', '.join(versions)})")
    return pairs


def _pair_draws(p: np.ndarray, versions, pairs) -> np.ndarray:
    """``p_to - p_from`` per draw, item and pair: (draw, item, pair)."""
    col = {v: j for j, v in enumerate(map(str, versions))}
    return np.stack([p[..., col[b]] - p[..., col[a]] for a, b in pairs], -1)


def item_changes(p: np.ndarray, items, domains, versions, pairs) -> pd.DataFrame:
    """Per item and pair ``(from, to)``: the posterior of ``dp = p_to - p_from`` from accuracy draws
    ``p`` (draw, item, version): mean, 90% interval and ``P(dp > 0)``, ``P(dp < 0)`` (an item unchanged
    in both versions has ``dp = 0`` exactly in many draws, so the two need not sum to 1).

    Examples
    --------
    >>> p = np.array([[[0.5, 0.7, 0.7]], [[0.5, 0.5, 0.9]]])  # 2 draws, 1 item, 3 versions
    >>> t = item_changes(p, ["i1"], ["d"], ["a", "b", "c"], [("a", "b"), ("b", "c")])
    >>> t[["from", "to", "dp_mean", "p_up", "p_down"]].round(2).values.tolist()
    [['a', 'b', 0.1, 0.5, 0.0], ['b', 'c', 0.2, 0.5, 0.0]]
    """
    dp = _pair_draws(p, versions, pairs)
    lo, hi = interval90(dp)
    n_items, n_pairs = dp.shape[1:]
    cols = {
        "item_id": np.repeat(np.asarray(items).astype(str), n_pairs),
        "domain": np.repeat(np.asarray(domains).astype(str), n_pairs),
        "from": np.tile([a for a, _ in pairs], n_items),
        "to": np.tile([b for _, b in pairs], n_items),
        "dp_mean": dp.mean(0).ravel(),
        "dp_lo90": lo.ravel(),
        "dp_hi90": hi.ravel(),
        "p_up": (dp > 0).mean(0).ravel(),
        "p_down": (dp < 0).mean(0).ravel(),
    }
    return pd.DataFrame(cols, columns=list(ITEM_CHANGE_COLUMNS))


def version_changes(p: np.ndarray, versions, pairs) -> pd.DataFrame:
    """Per pair ``(from, to)``: the posterior of the change in mean accuracy over the items (mean, 90%
    interval, ``P(up)``) and the items whose 90% interval of ``dp`` lies above 0 (``items_up``) or
    below it (``items_down``), from accuracy draws ``p`` (draw, item, version).

    Examples
    --------
    >>> p = np.random.default_rng(0).uniform(0.4, 0.5, size=(400, 30, 2)) + [0.0, 0.3]
    >>> changes = version_changes(p, ["a", "b"], [("a", "b")])
    >>> changes[["dacc_mean", "p_up", "items_up", "items_down"]].round(1).values.tolist()
    [[0.3, 1.0, 30.0, 0.0]]
    """
    dp = _pair_draws(p, versions, pairs)
    dacc = dp.mean(1)  # (draw, pair)
    lo, hi = interval90(dp)
    acc_lo, acc_hi = interval90(dacc)
    cols = {
        "from": [a for a, _ in pairs],
        "to": [b for _, b in pairs],
        "dacc_mean": dacc.mean(0),
        "dacc_lo90": acc_lo,
        "dacc_hi90": acc_hi,
        "p_up": (dacc > 0).mean(0),
        "items_up": (lo > 0).sum(0),
        "items_down": (hi < 0).sum(0),
    }
    return pd.DataFrame(cols, columns=list(VERSION_CHANGE_COLUMNS))


@register
class JointFit(GatedResult):
    """A joint fit of a family of versions: the posterior, the ``versions`` and ``items`` tables
    (:mod:`bayesrc.bayes.joint_fit`) and the convergence gate's diagnostics.

    The record is ``joint.json`` (``payload``) plus ``versions.parquet``, ``items.parquet`` and
    ``posterior.nc``; :meth:`save` writes them together, :func:`bayesrc.load` reads them back equal.

    Examples
    --------
    >>> res = bayesrc.bayes.fit(family_counts)             # doctest: +SKIP
    >>> res.summary(); res.versions_table                 # doctest: +SKIP
    >>> bayesrc.load("out/family") == res                 # doctest: +SKIP
    True
    """

    main_file = "joint.json"
    kind = "joint"
    field_kinds = (
        GatedResult.field_kinds
        | {  # what summary(), the figures and the report read (bayesrc.fields.check_fields)
            "params": "object",
            "params.versions!": "versions",
            "params.n_items": "count",
            "params.q": "finite",
            "backend": "text",
            "warnings": "texts",
        }
    )
    table_names = ("versions", "items")
    has_posterior = True

    def required_columns(self, name: str) -> tuple[str, ...]:
        return VERSION_COLUMNS if name == "versions" else ITEM_COLUMNS

    def posterior_attrs(self) -> dict:
        return {"status": self.status, "model": "joint", "backend": self.backend}

    def table_attrs(self, name: str) -> dict:
        return {"status": self.status}

    def check_files_agree(self, folder: Path) -> None:
        """The versions of ``versions.parquet`` and ``items.parquet`` are ``params.versions``, and the
        posterior's ``change`` axis is its versions after the reference, in its order (the ``version``
        axis of ``p`` is read by position)."""
        for name, table in {"versions.parquet": self.versions_table, "items.parquet": self.items}.items():
            if table is not None and set(table["version"]) != set(self.versions):
                raise InputError(
                    f"versions {sorted(set(table['version']))} are not joint.json's {self.versions}",
                    path=folder / name,
                    field="version",
                )
        if self.posterior is not None and "change" in self.posterior["posterior"].coords:
            changes = [str(v) for v in self.posterior["posterior"].coords["change"].values]
            if changes != self.versions[1:]:
                raise InputError(
                    f"change axis {changes} is not joint.json's versions after the reference {self.versions[1:]}",
                    path=folder / "posterior.nc",
                    field="change",
                )

    model = property(lambda self: "joint change")
    backend = property(lambda self: self.payload["backend"])
    versions = property(lambda self: list(self.payload["params"]["versions"]))
    warnings = property(lambda self: list(self.payload.get("warnings") or []))
    versions_table = property(lambda self: self.tables.get("versions"))
    items = property(lambda self: self.tables.get("items"))

    def bands(self) -> list[list[str]]:
        """The rank bands, best first, each its versions in order of posterior mean accuracy."""
        t = self.versions_table.sort_values("mean_accuracy", ascending=False)
        return [list(g["version"]) for _, g in t.groupby("band", sort=True)]

    def summary(self) -> pd.DataFrame:
        """Headline numbers as a two-column table (metric, value): the gate, one row per version, then one per
        step of the chain of consecutive versions (:meth:`version_changes`)."""
        d = self.diagnostics
        rows = [
            ("status", self.status),
            ("model", "joint change"),
            ("backend", self.backend),
            ("reference", self.versions[0]),
            ("runtime_s", round(self.runtime_s, 2)),
            ("max R-hat", d.max_rhat),
            ("min ESS bulk", d.min_ess_bulk),
            ("min ESS tail", d.min_ess_tail),
            ("divergences", d.divergences),
        ]
        for r in self.versions_table.itertuples():
            rows.append(
                (
                    f"version {r.version}",
                    f"accuracy {r.mean_accuracy:.3f} [{r.acc_lo90:.3f}, {r.acc_hi90:.3f}], P(best) {r.p_best:.2f}, "
                    f"rank {r.rank_mean:.2f} [{r.rank_lo}-{r.rank_hi}], band {r.band}",
                )
            )
        if self.posterior is not None:  # the chain of consecutive versions, step by step
            for r in self.version_changes().to_dict("records"):
                rows.append(
                    (
                        f"step {r['from']} -> {r['to']}",
                        f"accuracy change {r['dacc_mean']:+.3f} [{r['dacc_lo90']:+.3f}, {r['dacc_hi90']:+.3f}], "
                        f"P(up) {r['p_up']:.2f}, items up {r['items_up']}, down {r['items_down']}",
                    )
                )
        rows += [("warning", w) for w in self.warnings]
        return pd.DataFrame(rows, columns=["metric", "value"]).astype({"value": str})

    def _accuracy_draws(self) -> np.ndarray:
        """The item accuracy draws ``p`` as (draw, item, version), chains stacked."""
        p = self.posterior["posterior"]["p"].transpose("chain", "draw", "item", "version").to_numpy()
        return p.reshape(-1, *p.shape[2:])

    def item_changes(self, between="consecutive") -> pd.DataFrame:
        """Per item, the posterior change ``dp`` between versions (:func:`version_pairs`' ``between``:
        ``"consecutive"``, ``"reference"`` or pairs of labels), one row per item and pair (:func:`item_changes`).

        Examples
        --------
        >>> res.item_changes().query(  # items that got worse from one version to the next  # doctest: +SKIP
        ...     "dp_hi90 < 0"
        ... )
        """
        first = self.items[self.items["version"] == self.versions[0]]  # one row per item, in the posterior's item order
        return item_changes(
            self._accuracy_draws(),
            first["item_id"],
            first["domain"],
            self.versions,
            version_pairs(self.versions, between),
        )

    def version_changes(self, between="consecutive") -> pd.DataFrame:
        """Per pair of versions (``between`` as in :meth:`item_changes`), the change in mean accuracy with
        its 90% interval and ``P(up)``, and how many items' 90% intervals lie above or below 0
        (:func:`version_changes`).

        Examples
        --------
        >>> res.version_changes()  # Q4 -> Q3, Q3 -> Q2 on a quantisation ladder  # doctest: +SKIP
        """
        return version_changes(self._accuracy_draws(), self.versions, version_pairs(self.versions, between))

    def plot_bands(self, **kwargs):
        """The versions' posterior mean accuracy with 90% intervals, coloured by rank band
        (:func:`~bayesrc.bayes.joint_figures.rank_band_figure`)."""
        return rank_band_figure(self.versions_table, **kwargs)

    def plot_changes(self, n_items: int = 40, **kwargs):
        """Heatmap of the per-item change from the reference (:func:`~bayesrc.bayes.joint_figures.change_heatmap`)."""
        return change_heatmap(self.items, n_items=n_items, **kwargs)

    def write(self, out_dir: str | Path) -> Path:
        """Alias of :meth:`save`."""
        return self.save(out_dir)

    def _headline(self) -> str:
        return f"{len(self.versions)} versions ({self.backend}), gate {self.status}, bands " + " > ".join(
            "{" + ", ".join(b) + "}" for b in self.bands()
        )


def sample_joint(
    data: ModelInputs,
    backend: str = "numpyro",
    *,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    items: bool = True,
):
    """The joint model's posterior DataTree with either backend (``items=False``: without the item draws).

    Examples
    --------
    >>> dt = sample_joint(model_inputs(fam.counts, *fam.versions, covariate=None), "pymc")   # doctest: +SKIP
    """
    fn = joint_numpyro if backend == "numpyro" else joint_pymc
    return fn(data, prior=prior, config=config, items=items)


@releases_jax_caches
def fit_joint(
    counts: xr.Dataset,
    *,
    backend: str = "numpyro",
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    q: float = RANK_Q,
    covariate: str | None = "auto",
    gate: GateConfig | None = None,
) -> JointFit:
    """Fit the joint change model of every version in ``counts`` (the first the reference), gate it and
    summarise it (:func:`bayesrc.bayes.fit` calls this for a ``version`` dim of three or more).

    ``gate``: the convergence gate and its escalation (:class:`~bayesrc.bayes.GateConfig`, default its
    defaults), as :func:`bayesrc.bayes.fit`'s. Never raises for a failed gate: ``status`` is "failed" and
    the summary says so.

    Examples
    --------
    >>> from bayesrc.data import simulate_family
    >>> fam = simulate_family(300, 10, versions=4, shifts=[0.6, 0.0, -0.6], seed=2)   # doctest: +SKIP
    >>> res = fit_joint(fam.counts)                                                    # doctest: +SKIP
    >>> res.versions_table[["version", "mean_accuracy", "p_best", "band"]]            # doctest: +SKIP
    """
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    versions = [str(v) for v in counts["version"].values]
    data = model_inputs(counts, *versions, covariate=covariate)
    t0 = time.perf_counter()
    sampler = partial(sample_joint, data, backend, prior=prior, items=False)  # the item draws once, after the gate
    dt, diag, attempts, cfg = sample_gated(
        sampler, joint_gated(data.n_groups), config or SamplerConfig(), gate or GateConfig()
    )
    release_memory()
    dt = with_family_item_draws(dt, data, cfg, prior=prior)
    post = dt["posterior"]
    p = post["p"].values.reshape(-1, data.n_items, data.n_versions)
    r = post["r"].values.reshape(-1, data.n_items, data.n_versions - 1)
    tables = {
        "versions": version_table(p, data.versions, q),
        "items": item_table(p, r, data.items, np.asarray(data.domains)[data.dom], data.versions),
    }
    payload = {
        "status": "ok" if diag.passed else "failed",
        "model": "joint",
        "backend": backend,
        "runtime_s": time.perf_counter() - t0,
        "diagnostics": diag.to_dict(),
        "attempts": attempts,
        "params": {
            "versions": list(data.versions),
            "reference": data.versions[0],
            "q": q,
            "n_items": data.n_items,
            "domains": list(data.domains),
            "prior": prior_settings(prior),
            "covariate": data.covariate,
            "chains": cfg.chains,
            "draws": cfg.draws,
            "tune": cfg.tune,
            "target_accept": cfg.target_accept,
            "seed": cfg.seed,
        },
        "warnings": [],
    }
    return JointFit(payload, tables, dt)
