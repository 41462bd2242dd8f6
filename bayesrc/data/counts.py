"""Item counts: the spine every analysis reads (SPEC section 1).

``item_counts(trials_v1, trials_v2, ...)`` returns an :class:`xarray.Dataset`:

================  =====================  =============================================
variable          dims                   meaning
================  =====================  =============================================
``n_trials``      item, version          trials administered
``n_valid``       item, version          valid (non-missing) responses ``n``
``n_correct``     item, version          correct responses ``y``
``p``             item, version          ``y / n`` (NaN where ``n = 0``)
``correct``       item, version, k       1.0 / 0.0, NaN where missing or not run
================  =====================  =============================================

coords: ``item`` (= item_id, str), ``version`` (labels), ``k``, ``domain`` (on item) and,
when the trials carry it, ``correct_answer`` (on item: the correct option's letter, an item
covariate of the change model).
K may differ between items and versions; nothing here assumes K = 10.

Graded trials (a ``score`` per sample, SPEC section 11) have their twin, :func:`item_scores`: per item and
version ``n_trials``, ``n_valid``, ``score_mean`` and ``score_sd``, the samples' ``score`` (item, version, k)
and, for ordinal scores, ``level_counts`` (item, version, level); ``attrs["score_kind"]`` says which kind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.data.trials import MAX_SCORE_LEVELS, SCORE_COLUMN, is_graded, load_trials, score_kind
from bayesrc.errors import InputError
from bayesrc.io import read_hdf5, temp_file_beside


def _version_label(trials: pd.DataFrame, fallback: str) -> str:
    models = trials["model"].dropna().unique() if "model" in trials else []
    return str(models[0]) if len(models) == 1 else fallback


def _distinct_version_labels(trials: Sequence[pd.DataFrame], versions: Sequence[str] | None) -> list[str]:
    """``versions`` as text, else each frame's ``model`` (``v1, v2, ...`` if those are ambiguous);
    they must be distinct."""
    n_ver = len(trials)
    if versions is None:
        versions = [_version_label(t, f"v{i + 1}") for i, t in enumerate(trials)]
        if len(set(versions)) < n_ver:
            versions = [f"v{i + 1}" for i in range(n_ver)]
    versions = [str(v) for v in versions]
    if len(set(versions)) != n_ver:
        raise ValueError(f"version labels must be distinct, got {versions}")
    return versions


def _item_domains(trials: Sequence[pd.DataFrame], sources: Sequence[str]) -> dict[str, str]:
    """Each item's domain, items in first-seen order; an item must have one domain across every file."""
    item_domain: dict[str, str] = {}
    for src, t in zip(sources, trials):
        per_item = t.groupby("item_id", sort=False)["domain"].agg(["first", "nunique"])
        multi = per_item[per_item["nunique"] > 1]
        if len(multi):
            raise InputError("more than one domain for one item", path=src, item=multi.index[0], field="domain")
        for item, dom in per_item["first"].items():
            prev = item_domain.get(item)
            if prev is None:
                item_domain[item] = dom
            elif prev != dom:
                raise InputError(
                    f"domain {dom!r} here but {prev!r} in another version", path=src, item=item, field="domain"
                )
    return item_domain


def _matched_items(
    trials: Sequence[pd.DataFrame],
    order: list[str],
    versions: list[str],
    sources: Sequence[str],
    on_unmatched: str,
) -> tuple[list[str], dict[str, list[str]]]:
    """``(items present in every version, in first-seen order; per version, the items it lacks)``.

    A lacking version is an error unless ``on_unmatched == "drop"``; no common item always is.
    """
    present = [set(t["item_id"].unique()) for t in trials]
    common = set.intersection(*present)
    unmatched = {v: sorted(set(order) - p) for v, p in zip(versions, present) if set(order) - p}
    if unmatched and on_unmatched == "raise":
        v = next(iter(unmatched))
        src = sources[versions.index(v)]
        n_miss = len(unmatched[v])
        raise InputError(
            f"present in another version but not in this file ({n_miss} such item{'s' if n_miss > 1 else ''}); "
            "pass --allow-unmatched to analyse matched items only",
            path=src,
            item=unmatched[v][0],
            field="item_id",
        )
    items = [i for i in order if i in common]
    if not items:
        raise InputError("no item is present in every version", path=sources[0], field="item_id")
    return items, unmatched


def _sample_grid(
    trials: Sequence[pd.DataFrame], items: list[str], n_k: int, column: str = "is_correct"
) -> tuple[np.ndarray, np.ndarray]:
    """``(values, administered)`` over (item, version, k): each sample's ``column`` (``is_correct`` as 1.0 /
    0.0), NaN where missing or not run, and whether the sample was run.

    Trials of items outside ``items`` (unmatched ones) are left out.
    """
    item_index = pd.Index(items)
    values = np.full((len(items), len(trials), n_k), np.nan)
    administered = np.zeros((len(items), len(trials), n_k), dtype=bool)
    for v, t in enumerate(trials):
        rows = item_index.get_indexer(t["item_id"])
        keep = rows >= 0
        r, k = rows[keep], t["k"].to_numpy()[keep]
        administered[r, v, k] = True
        values[r, v, k] = t[column].to_numpy(dtype="float64", na_value=np.nan)[keep]
    return values, administered


def _count_variables(correct: np.ndarray, administered: np.ndarray) -> dict[str, tuple]:
    """The dataset's variables: per (item, version) trials, valid and correct responses and ``p = y / n``,
    plus ``correct``."""
    n_trials = administered.sum(axis=2)
    n_valid = (~np.isnan(correct)).sum(axis=2)
    n_correct = np.nansum(correct, axis=2).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n_valid > 0, n_correct / np.maximum(n_valid, 1), np.nan)
    return {
        "n_trials": (("item", "version"), n_trials.astype(np.int64)),
        "n_valid": (("item", "version"), n_valid.astype(np.int64)),
        "n_correct": (("item", "version"), n_correct),
        "p": (("item", "version"), p),
        "correct": (("item", "version", "k"), correct),
    }


def _item_coords(trials: Sequence[pd.DataFrame], items: list[str], item_domain: dict[str, str]) -> dict[str, tuple]:
    """Coords on the item dim: ``domain`` and, when the trials carry it, ``correct_answer``."""
    coords = {"domain": ("item", np.array([item_domain[i] for i in items], dtype=object))}
    key = _correct_answers(trials, items)
    if key is not None:
        # The correct option's letter: an item covariate the change model can use (delta by letter).
        coords["correct_answer"] = ("item", key)
    return coords


def item_counts(
    *trials: pd.DataFrame,
    versions: Sequence[str] | None = None,
    sources: Sequence[str | Path] | None = None,
    on_unmatched: str = "raise",
) -> xr.Dataset:
    """Build item counts from one trials frame per version.

    Parameters
    ----------
    *trials : canonical trials (see :func:`bayesrc.data.load_trials`), one per version.
    versions : version labels (default: each frame's ``model``; ``v1, v2, ...`` if ambiguous).
    sources : file names, used only in error messages.
    on_unmatched : ``"raise"`` (an item missing from a version is an error) or
        ``"drop"`` (keep items present in every version; the dropped ones are listed in
        ``attrs["unmatched"]``).

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(50, 10, seed=1)
    >>> ds = item_counts(sim.trials_v1, sim.trials_v2)
    >>> dict(ds.sizes)
    {'item': 50, 'version': 2, 'k': 10}
    """
    sources = _source_names(trials, sources)
    for t, src in zip(trials, sources):
        if is_graded(t):
            raise InputError(
                "graded trials (a 'score' per sample, no 'is_correct'): the right/wrong analyses need "
                "'is_correct'; bayesrc.data.item_scores summarises graded ones",
                path=src,
                field="is_correct",
            )
    ds, (correct, administered) = _item_spine(trials, versions, sources, on_unmatched, "is_correct")
    ds = ds.assign(_count_variables(correct, administered))
    if len(trials) == 2:
        ds.attrs["shared_seeds"] = shared_seeds(trials[0], trials[1])
    return ds


def _source_names(trials: Sequence[pd.DataFrame], sources: Sequence[str | Path] | None) -> list[str]:
    """What error messages call each version's trials: its file, else ``<version i>``."""
    return [str(s) for s in sources] if sources is not None else [f"<version {i + 1}>" for i in range(len(trials))]


def _item_spine(
    trials: Sequence[pd.DataFrame],
    versions: Sequence[str] | None,
    sources: list[str],
    on_unmatched: str,
    column: str,
) -> tuple[xr.Dataset, tuple[np.ndarray, np.ndarray]]:
    """What :func:`item_counts` and :func:`item_scores` share: the coords of the items present in every version
    (``item``, ``version``, ``k``, ``domain``, ``correct_answer``), the unmatched items and sources as attrs, and
    the samples' ``column`` over (item, version, k) with whether each was run."""
    if not trials:
        raise ValueError("at least one trials frame is needed")
    if on_unmatched not in ("raise", "drop"):
        raise ValueError("on_unmatched must be 'raise' or 'drop'")
    versions = _distinct_version_labels(trials, versions)
    item_domain = _item_domains(trials, sources)
    items, unmatched = _matched_items(trials, list(item_domain), versions, sources, on_unmatched)
    n_k = int(max(t["k"].max() for t in trials)) + 1
    ds = xr.Dataset(
        coords={
            "item": np.array(items, dtype=object),
            "version": np.array(versions, dtype=object),
            "k": np.arange(n_k),
            **_item_coords(trials, items, item_domain),
        },
        attrs={"unmatched": {v: list(map(str, ids)) for v, ids in unmatched.items()}, "sources": list(sources)},
    )
    return ds, _sample_grid(trials, items, n_k, column)


def item_scores(
    *trials: pd.DataFrame,
    versions: Sequence[str] | None = None,
    sources: Sequence[str | Path] | None = None,
    on_unmatched: str = "raise",
) -> xr.Dataset:
    """Graded item summaries from one trials frame per version, whose samples carry a ``score``: the twin of
    :func:`item_counts` (the same coords and item matching).

    Variables (item, version): ``n_trials``, ``n_valid`` (samples with a score), ``score_mean`` and ``score_sd``
    (the sample SD; NaN under 2 scores); ``score`` (item, version, k), NaN where missing or not run; for ordinal
    scores ``level_counts`` (item, version, level), ``level`` running over the whole numbers from the lowest
    score to the highest of all versions. ``attrs["score_kind"]``: ``"ordinal"`` or ``"continuous"`` for all
    versions together (a version whose scores are all 0 or 1 fits either; it takes the others' kind).

    Examples
    --------
    >>> import pandas as pd
    >>> from bayesrc.data import normalise_trials
    >>> t = pd.DataFrame({"item_id": ["a", "a", "b", "b"], "k": [0, 1, 0, 1], "score": [4.0, 5.0, 2.0, 2.0]})
    >>> ds = item_scores(normalise_trials(t.assign(model="v1")), normalise_trials(t.assign(model="v2", score=3.0)))
    >>> ds.attrs["score_kind"], ds["score_mean"].values.tolist(), ds["level"].values.tolist()
    ('ordinal', [[4.5, 3.0], [2.0, 3.0]], [2, 3, 4, 5])
    """
    sources = _source_names(trials, sources)
    for t, src in zip(trials, sources):
        if SCORE_COLUMN not in t:
            raise InputError("missing (graded trials carry a score per sample)", path=src, field=SCORE_COLUMN)
    kind = _pooled_score_kind([t.loc[~t["is_missing"], SCORE_COLUMN] for t in trials], sources)
    ds, (scores, administered) = _item_spine(trials, versions, sources, on_unmatched, SCORE_COLUMN)
    n_valid = (~np.isnan(scores)).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n_valid > 0, np.nansum(scores, axis=2) / np.maximum(n_valid, 1), np.nan)
        sd = np.sqrt(np.nansum((scores - mean[..., None]) ** 2, axis=2) / (n_valid - 1))
    ds = ds.assign(
        n_trials=(("item", "version"), administered.sum(axis=2).astype(np.int64)),
        n_valid=(("item", "version"), n_valid.astype(np.int64)),
        score_mean=(("item", "version"), mean),
        score_sd=(("item", "version"), np.where(n_valid > 1, sd, np.nan)),
        score=(("item", "version", "k"), scores),
    )
    if kind == "ordinal":
        levels = np.arange(np.nanmin(scores), np.nanmax(scores) + 1).astype(np.int64)
        counts = (scores[..., None] == levels).sum(axis=2).astype(np.int64)
        ds = ds.assign_coords(level=levels).assign(level_counts=(("item", "version", "level"), counts))
    ds.attrs["score_kind"] = kind
    return ds


def _pooled_score_kind(scores: Sequence[pd.Series], sources: Sequence[str]) -> str:
    """The one kind of every version's scores (each version's own kind already checked by
    :func:`~bayesrc.data.trials.score_kind`); a mix, or ordinal levels that span more than
    :data:`~bayesrc.data.trials.MAX_SCORE_LEVELS` together, is an :class:`InputError` naming the version's file."""
    scored = [(s.dropna(), src) for s, src in zip(scores, sources) if s.notna().any()]  # a version all missing: any
    kinds = [score_kind(s, path=src) for s, src in scored]
    lows, highs, sources = [s.min() for s, _ in scored], [s.max() for s, _ in scored], [src for _, src in scored]
    if set(kinds) == {"ordinal"} and max(highs) - min(lows) < MAX_SCORE_LEVELS:
        return "ordinal"
    if all(lo >= 0 and hi <= 1 for lo, hi in zip(lows, highs)):
        return "continuous"
    if set(kinds) == {"ordinal"}:
        raise InputError(
            f"outside the levels: {min(lows):g}-{max(highs):g} across the versions, more than {MAX_SCORE_LEVELS}",
            path=sources[int(np.argmax(highs))],
            field=SCORE_COLUMN,
        )
    other = next(i for i, k in enumerate(kinds) if k != kinds[0])
    raise InputError(
        f"{kinds[other]} scores here but {kinds[0]} in {sources[0]}: one kind of score per comparison",
        path=sources[other],
        field=SCORE_COLUMN,
    )


def shared_seeds(trials_a: pd.DataFrame, trials_b: pd.DataFrame) -> dict:
    """How many (item, k) samples carry the same seed in two versions' trials (SPEC 2.1).

    Shared seeds couple the versions' draws (llama.cpp draws one uniform over
    candidates sorted by probability), so analyses that treat the versions as
    independent are off. Returns ``{"n_compared", "n_shared", "share"}`` over the
    (item, k) present with a seed in both (share NaN when none can be compared).
    """
    cols = ["item_id", "k", "seed"]
    if "seed" not in trials_a or "seed" not in trials_b:
        return {"n_compared": 0, "n_shared": 0, "share": float("nan")}
    a = trials_a[cols].dropna(subset=["seed"])
    b = trials_b[cols].dropna(subset=["seed"])
    m = a.merge(b, on=["item_id", "k"], suffixes=("_a", "_b"))
    n = len(m)
    same = int((m["seed_a"].to_numpy() == m["seed_b"].to_numpy()).sum()) if n else 0
    return {"n_compared": int(n), "n_shared": same, "share": same / n if n else float("nan")}


def _correct_answers(trials: Sequence[pd.DataFrame], items: list[str]) -> np.ndarray | None:
    """Each item's correct answer (first non-null ``correct_answer`` over the versions), or None
    when no trial carries one. Items without one get ``""``."""
    found: dict[str, str] = {}
    for t in trials:
        if "correct_answer" not in t:
            continue
        ca = t[["item_id", "correct_answer"]].dropna()
        for item, val in ca.drop_duplicates("item_id").itertuples(index=False):
            found.setdefault(str(item), str(val).strip())
    if not found:
        return None
    return np.array([found.get(i, "") for i in items], dtype=object)


def modal_k(ds: xr.Dataset) -> int:
    """The most common number of trials per item (K of the design).

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(50, 10, seed=1)
    >>> ds = item_counts(sim.trials_v1, sim.trials_v2)
    >>> modal_k(ds)
    10
    """
    n = ds["n_trials"].values.ravel()
    n = n[n > 0]
    if n.size == 0:
        return 0
    vals, cnt = np.unique(n, return_counts=True)
    return int(vals[np.argmax(cnt)])


def counts_frame(ds: xr.Dataset) -> pd.DataFrame:
    """Tidy long table: one row per (item, version) with n_valid, n_correct, p.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(50, 10, seed=1)
    >>> ds = item_counts(sim.trials_v1, sim.trials_v2)
    >>> counts_frame(ds).columns.tolist()[:6]
    ['item', 'version', 'n_trials', 'n_valid', 'n_correct', 'p']
    """
    return ds[["n_trials", "n_valid", "n_correct", "p"]].to_dataframe().reset_index()


def load_counts(
    paths: Sequence[str | Path],
    *,
    versions: Sequence[str] | None = None,
    on_unmatched: str = "raise",
    greedy: bool | None = None,
) -> xr.Dataset:
    """Load one trials file per version and build their item counts.

    Examples
    --------
    >>> from bayesrc.datasets import GREEDY_LLAMA3, path
    >>> ds = load_counts([path(f) for f in GREEDY_LLAMA3], greedy=True, on_unmatched="drop")  # bundled greedy answers
    >>> dict(ds.sizes)["item"], round(float(ds["p"].sel(version=ds["version"][0]).mean()), 3)
    (2000, 0.384)
    """
    trials = [load_trials(p, greedy=greedy) for p in paths]
    versions = _version_labels(trials, paths) if versions is None else versions
    return item_counts(*trials, versions=versions, sources=[str(p) for p in paths], on_unmatched=on_unmatched)


def load_items(
    paths: Sequence[str | Path], *, versions: Sequence[str] | None = None, on_unmatched: str = "raise"
) -> xr.Dataset:
    """Load one trials file per version: their item counts (:func:`item_counts`), or for graded trials (a ``score``
    per sample, no ``is_correct``: :func:`~bayesrc.data.trials.is_graded`) their item scores (:func:`item_scores`).
    What the analyses that take either read (``bayesrc rci``).

    Examples
    --------
    >>> from bayesrc.datasets import GREEDY_LLAMA3, path
    >>> "n_correct" in load_items([path(f) for f in GREEDY_LLAMA3], on_unmatched="drop")
    True
    """
    trials = [load_trials(p) for p in paths]
    versions = _version_labels(trials, paths) if versions is None else versions
    summarise = item_scores if is_graded(trials[0]) else item_counts
    return summarise(*trials, versions=versions, sources=[str(p) for p in paths], on_unmatched=on_unmatched)


def _version_labels(trials: Sequence[pd.DataFrame], paths: Sequence[str | Path]) -> list[str]:
    """Each version's label: its trials' model, else (two alike) its file's stem, else ``v1``, ``v2``, ..."""
    labels = [str(t["model"].iloc[0]) for t in trials]
    versions = labels if len(set(labels)) == len(labels) else [Path(p).stem for p in paths]
    return versions if len(set(versions)) == len(versions) else [f"v{i + 1}" for i in range(len(paths))]


def input_notes(ds: xr.Dataset, min_valid: int | None = None, valid_share: float = 0.6) -> list[str]:
    """One-line notes on inputs that are analysed but deserve a mention.

    Items below rule (a)'s minimum of valid responses (``min_valid``, default
    ``ceil(valid_share * K)`` of the item's K) are excluded, K that
    differs between items is supported, and unmatched items that were dropped.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(50, 10, seed=1)
    >>> ds = item_counts(sim.trials_v1, sim.trials_v2)
    >>> input_notes(ds)
    []
    """
    notes = []
    sources = ds.attrs.get("sources") or [str(v) for v in ds["version"].values]
    for v, src in zip(ds["version"].values, sources):
        n_valid = ds["n_valid"].sel(version=v).values
        k_item = ds["n_trials"].sel(version=v).values
        need = (
            np.full(n_valid.shape, min_valid)
            if min_valid is not None
            else np.ceil(valid_share * k_item - 1e-9).astype(np.int64)
        )
        low = np.flatnonzero(n_valid < need)
        if low.size:
            first = ds["item"].values[low[0]]
            rule = "" if min_valid is not None else f" (ceil({valid_share:g}·K) of the item's K = {k_item[low[0]]})"
            notes.append(
                f"{src}: item {first}: field 'is_missing': fewer than {need[low[0]]} valid responses "
                f"({n_valid[low[0]]}); {low.size} such item(s) excluded by rule (a){rule}"
            )
        n_trials = ds["n_trials"].sel(version=v).values
        ks = np.unique(n_trials[n_trials > 0])
        if ks.size > 1:
            odd = np.flatnonzero(n_trials != modal_k(ds))
            notes.append(
                f"{src}: item {ds['item'].values[odd[0]]}: field 'k': K differs between items "
                f"({', '.join(map(str, ks))} samples); analysed as given"
            )
    for v, ids in (ds.attrs.get("unmatched") or {}).items():
        notes.append(f"version {v}: {len(ids)} item(s) missing (first: {ids[0]}); analysed matched items only")
    return notes + seed_notes(ds)


_JSON_ATTR = "bayesrc_json_attrs"  # names of attrs stored as JSON text (NetCDF attrs hold no dicts)


def save_counts(ds: xr.Dataset, path: str | Path) -> Path:
    """Write item counts to NetCDF (h5netcdf), atomically; :func:`open_counts` reads them back equal.

    Dict- or list-valued attributes (``unmatched``, ``sources``) are stored as JSON text.

    Examples
    --------
    >>> import tempfile
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(20, 5, seed=0)
    >>> counts = item_counts(sim.trials_v1, sim.trials_v2)
    >>> nc = save_counts(counts, tempfile.mkdtemp() + "/counts.nc")
    >>> open_counts(nc).identical(counts)
    True
    """
    path = Path(path)
    out = ds.copy()
    encoded = [k for k, v in ds.attrs.items() if isinstance(v, (dict, list, tuple, bool)) or v is None]
    out.attrs = {k: (json.dumps(v) if k in encoded else v) for k, v in ds.attrs.items()}
    out.attrs[_JSON_ATTR] = json.dumps(encoded)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_beside(path)
    os.close(fd)
    try:
        out.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def open_counts(path: str | Path) -> xr.Dataset:
    """Read item counts written by :func:`save_counts` (into memory; the file is closed).

    Examples
    --------
    >>> import tempfile
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(20, 5, seed=0)
    >>> ds = item_counts(sim.trials_v1, sim.trials_v2)
    >>> nc = save_counts(ds, tempfile.mkdtemp() + "/counts.nc")
    >>> open_counts(nc).identical(ds)
    True
    """

    def load(p: Path) -> xr.Dataset:
        with xr.open_dataset(p, engine="h5netcdf") as f:
            return f.load()

    ds = read_hdf5(path, load, what="NetCDF counts")
    encoded = _attr_json(ds.attrs.pop(_JSON_ATTR, "[]"), path, _JSON_ATTR)
    if not isinstance(encoded, list):
        raise InputError(f"expected a list of attribute names, got {encoded!r}"[:160], path=path, field=_JSON_ATTR)
    ds.attrs = {k: (_attr_json(v, path, k) if k in encoded else v) for k, v in ds.attrs.items()}
    for name in ("item", "version", "domain"):
        if name in ds.coords:
            ds.coords[name] = ds[name].astype(object)
    return ds


def _attr_json(text: object, path: str | Path, name: str):
    """An attribute :func:`save_counts` stored as JSON, decoded (one line naming the attribute if it is not JSON)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InputError(f"attribute is not the JSON bayesrc wrote ({exc})", path=path, field=name) from None


def seed_notes(ds: xr.Dataset) -> list[str]:
    """A warning line when most (item, k) samples share their seed across the two versions."""
    seeds = ds.attrs.get("shared_seeds") or {}
    if not (seeds.get("n_shared", 0) > 0 and seeds["share"] >= 0.5):
        return []
    sources = ds.attrs.get("sources") or [str(v) for v in ds["version"].values]
    return [
        f"{sources[0]} and {sources[1]}: field 'seed': "
        f"{seeds['share']:.0%} of the {seeds['n_compared']} (item, k) samples "
        "share their seed across the versions; shared seeds couple the versions' draws, and every analysis here "
        "assumes independent versions (collect with the default version-specific seed rule)"
    ]
