"""Exact runs as data: per-item known answer distributions (SPEC section 7).

An exact run directory (``bayesrc collect --engine exact``) holds::

    items_exact.parquet   item_id, domain, p_correct, p_missing, p_unresolved, n_expanded
    dist.parquet          item_id, domain, answer (option letter; null = no valid answer), prob, is_correct
    run.json              pins, as every run

:func:`load_exact` reads one as an :class:`ExactRun`; :func:`exact_truth` gives two runs'
known per-item accuracies and Delta p; :func:`sample_from_exact` draws K-sample trials (the
layout of :mod:`bayesrc.data.trials`) from the distributions, reproducibly.

Which accuracy is "the truth": the analyses see ``p = y / n`` over *valid* answers, whose
expectation is ``p_valid = p_correct / (p_correct + p_wrong)`` with
``p_wrong = 1 - p_correct - p_missing - p_unresolved``. That is the column ``p``; the
unconditional ``p_correct`` is kept beside it (they differ only where answers are missing).
The unresolved mass (prefixes below epsilon, never expanded) is drawn as a missing answer
by :func:`sample_from_exact`: its answer is unknown, so it is never scored.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrc.data.trials import TRIAL_COLUMNS
from bayesrc.errors import InputError
from bayesrc.io import read_parquet, read_run_record, staged_output, write_parquet, write_run_record

ITEM_FIELDS = ("item_id", "domain", "p_correct", "p_missing", "p_unresolved", "n_expanded")
DIST_FIELDS = ("item_id", "domain", "answer", "prob", "is_correct")
MISSING_RESPONSE = "<no valid answer>"
UNRESOLVED_RESPONSE = "<unresolved>"


@dataclass(frozen=True)
class ExactRun:
    """One exact run: per-item known probabilities and the answer distributions.

    ``items``: one row per item with ``item_id, domain, p_correct, p_missing, p_unresolved,
    n_expanded``, plus ``p`` (accuracy among valid answers) and ``correct_answer`` (the
    correct option's letter, from ``dist``; null when no correct answer has mass).
    ``dist``: ``item_id, domain, answer, prob, is_correct``.

    Examples
    --------
    >>> from bayesrc.data import load_exact
    >>> run = load_exact("runs/exact_q4")  # doctest: +SKIP
    >>> run.items[["item_id", "p"]].head()  # doctest: +SKIP
    """

    path: Path
    label: str
    items: pd.DataFrame
    dist: pd.DataFrame
    record: dict

    @classmethod
    def from_tables(cls, path: Path, items: pd.DataFrame, dist: pd.DataFrame, record: dict) -> ExactRun:
        """The run at ``path`` from its validated tables (:func:`load_exact`'s) and its record; labelled by
        its pins' ``model.label``, else the directory's name."""
        label = str((record.get("pins") or {}).get("model.label") or path.name)
        return cls(path=path, label=label, items=items, dist=dist, record=record)

    @property
    def n_items(self) -> int:
        return len(self.items)

    def summary(self) -> pd.DataFrame:
        it = self.items
        rows = [
            ("run", str(self.path)),
            ("label", self.label),
            ("items", self.n_items),
            ("mean p", float(it["p"].mean())),
            ("mean p_missing", float(it["p_missing"].mean())),
            ("max p_unresolved", float(it["p_unresolved"].max())),
            ("answers (rows of dist)", len(self.dist)),
        ]
        return pd.DataFrame(rows, columns=["metric", "value"])


def _read(path: Path, fields: tuple[str, ...]) -> pd.DataFrame:
    if not path.is_file():
        raise InputError("not an exact run (file missing; trials runs hold trials.parquet instead)", path=path)
    df = read_parquet(path)
    for f in fields:
        if f not in df:
            raise InputError("missing required column", path=path, field=f)
    return df


def _as_boolean(col: pd.Series, path: Path) -> pd.Series:
    """A true / false / null column as pandas' nullable boolean; anything else is an InputError."""
    try:
        return col.astype("boolean")
    except (TypeError, ValueError):
        ok = col.map(
            lambda v: (
                v is None or v is pd.NA or isinstance(v, bool | np.bool_) or (isinstance(v, float) and np.isnan(v))
            )
        )
        i = int(np.flatnonzero(~ok.to_numpy(bool))[0]) if not ok.all() else 0
        raise InputError(
            f"expected true, false or null, got {col.iloc[i]!r}", path=path, line=i + 1, field=str(col.name)
        ) from None


def _check_prob(df: pd.DataFrame, col: str, path: Path) -> None:
    v = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
    bad = ~np.isfinite(v) | (v < -1e-12) | (v > 1 + 1e-9)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"expected a probability in [0, 1], got {df[col].iloc[i]!r}", path=path, line=i + 1, field=col)


def _exact_root(run: str | Path) -> Path:
    """The run directory of ``run`` (a directory or one of its files), refusing what is not an exact run."""
    root = Path(run)
    if root.is_file():
        root = root.parent
    if not root.is_dir():
        raise InputError("not a run directory", path=root)
    if (root / "trials.parquet").is_file() and not (root / "items_exact.parquet").is_file():
        raise InputError(
            "is a K-sample trials run, not an exact run: "
            "an exact run is needed (collect one with `bayesrc collect --engine exact`)",
            path=root / "trials.parquet",
        )
    for name in ("items_exact.parquet", "dist.parquet"):
        if not (root / name).is_file() and _collected_exact(root):
            # collect --engine exact writes its per-item parts first and these two files last
            raise InputError(f"exact run has no {name} (not complete: resume it with --resume)", path=root)
    return root


def _collected_exact(root: Path) -> bool:
    """True if ``root/run.json`` pins the exact engine (a malformed record counts as no)."""
    try:
        record = read_run_record(root)
    except InputError:
        return False
    pins = record.get("pins") if isinstance(record, dict) else None
    return isinstance(pins, dict) and pins.get("runtime.engine") == "exact"


def load_exact(run: str | Path) -> ExactRun:
    """Read an exact run directory (see module docstring); bad files raise :class:`InputError`.

    The one reader of exact runs, whether collected (``bayesrc collect --engine exact``),
    bundled or written by :func:`write_exact_run`. ``run`` may also name one of its files.
    A trials run, or a collected exact run that has not completed, is an :class:`InputError`.

    Examples
    --------
    >>> from bayesrc.datasets import path
    >>> run = load_exact(path("exact_gemma/q4"))  # bundled: Gemma-3-270M Q4_K_M, 300 items
    >>> run.items[["item_id", "p", "correct_answer"]].shape
    (300, 3)
    """
    root, items, dist = read_exact_tables(run)
    return ExactRun.from_tables(root, items, dist, read_run_record(root) or {})


def read_exact_tables(run: str | Path) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    """``(root, items, dist)`` of an exact run: its directory and its two tables, validated (the checks of
    :func:`load_exact`, which adds the run record; :class:`bayesrc.data.CollectedRun` has its own)."""
    root = _exact_root(run)
    items_p, dist_p = root / "items_exact.parquet", root / "dist.parquet"
    items = _read(items_p, ITEM_FIELDS)
    dist = _read(dist_p, DIST_FIELDS)
    for col in ("p_correct", "p_missing", "p_unresolved"):
        _check_prob(items, col, items_p)
    _check_prob(dist, "prob", dist_p)
    items = items.copy()
    items["item_id"] = items["item_id"].astype(str)
    items["domain"] = items["domain"].fillna("all").astype(str)
    dup = items["item_id"].duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError(f"duplicate item {items['item_id'].iloc[i]}", path=items_p, line=i + 1, field="item_id")
    dist = dist.copy()
    dist["item_id"] = dist["item_id"].astype(str)
    dist["answer"] = dist["answer"].astype("string")
    dist["is_correct"] = _as_boolean(dist["is_correct"], dist_p)
    unknown = ~dist["item_id"].isin(items["item_id"])
    if unknown.any():
        i = int(np.flatnonzero(unknown)[0])
        raise InputError("item not in items_exact.parquet", path=dist_p, line=i + 1, field="item_id")
    p_valid = 1.0 - items["p_missing"].to_numpy(float) - items["p_unresolved"].to_numpy(float)
    p_corr = items["p_correct"].to_numpy(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        items["p"] = np.where(p_valid > 0, np.clip(p_corr / np.maximum(p_valid, 1e-300), 0.0, 1.0), np.nan)
    if "correct_answer" not in items:
        key = dist[dist["is_correct"].fillna(False).astype(bool) & dist["answer"].notna()].drop_duplicates("item_id")
        items["correct_answer"] = items["item_id"].map(key.set_index("item_id")["answer"]).astype("string")
    return root, items.reset_index(drop=True), dist.reset_index(drop=True)


def _as_exact(run) -> ExactRun:
    return run if isinstance(run, ExactRun) else load_exact(run)


def exact_truth(run_v1, run_v2) -> pd.DataFrame:
    """Known per-item accuracies of two exact runs over their common items.

    Returns ``item_id, domain, correct_answer, p_v1, p_v2, delta_p`` (accuracy among valid
    answers, see module docstring) and ``p_correct_v1, p_correct_v2``. Items present in only
    one run are an error naming the first.

    Examples
    --------
    >>> from bayesrc.datasets import path
    >>> truth = exact_truth(path("exact_gemma/q4"), path("exact_gemma/q3"))  # bundled real runs
    >>> round(float(truth["delta_p"].abs().median()), 2), len(truth)
    (0.17, 300)
    """
    a, b = _as_exact(run_v1), _as_exact(run_v2)
    ia, ib = a.items.set_index("item_id"), b.items.set_index("item_id")
    only = sorted(set(ia.index) ^ set(ib.index))
    if only:
        where = a.path if only[0] in ia.index else b.path
        raise InputError(
            f"present in one exact run only ({len(only)} such items)",
            path=where / "items_exact.parquet",
            item=only[0],
            field="item_id",
        )
    ids = list(ia.index)
    out = pd.DataFrame(
        {
            "item_id": ids,
            "domain": ia.loc[ids, "domain"].to_numpy(),
            "correct_answer": ia.loc[ids, "correct_answer"].fillna(ib.loc[ids, "correct_answer"]).to_numpy(),
            "p_v1": ia.loc[ids, "p"].to_numpy(float),
            "p_v2": ib.loc[ids, "p"].to_numpy(float),
            "p_correct_v1": ia.loc[ids, "p_correct"].to_numpy(float),
            "p_correct_v2": ib.loc[ids, "p_correct"].to_numpy(float),
        }
    )
    out["delta_p"] = out["p_v2"] - out["p_v1"]
    return out


def _item_rng(seed: int, item_id: str) -> np.random.Generator:
    # One stream per (seed, item): an item's draws do not depend on which other items the run holds.
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(str(item_id).encode())]))


def sample_from_exact(run, k: int = 10, seed: int = 0, *, model: str | None = None) -> pd.DataFrame:
    """Draw ``k`` answers per item from an exact run's distributions: canonical trials.

    Each trial's answer is drawn from the item's categorical over ``dist`` rows (option letters
    and "no valid answer") plus the unresolved mass (drawn as a missing answer). ``extracted``
    is the drawn letter, ``is_correct`` its ``dist`` flag, ``is_missing`` true for no valid /
    unresolved answers. Reproducible: item ``i``'s draws depend only on ``(seed, item_id, k)``.

    Examples
    --------
    >>> trials = sample_from_exact("runs/exact_q4", k=10, seed=1)   # doctest: +SKIP
    >>> from bayesrc.data import item_counts
    >>> counts = item_counts(trials, sample_from_exact("runs/exact_q3", 10, 1))  # doctest: +SKIP
    """
    if int(k) < 1:
        raise InputError(f"must be >= 1, got {k}", field="k")
    ex = _as_exact(run)
    label = model or ex.label
    groups = {i: g for i, g in ex.dist.groupby("item_id", sort=False)}
    cols: dict[str, list] = {c: [] for c in TRIAL_COLUMNS if c != "model"}  # model: one label for all, inserted below
    for row in ex.items.itertuples(index=False):
        g = groups.get(row.item_id)
        answers = list(g["answer"]) if g is not None else []
        probs = list(g["prob"].astype(float)) if g is not None else []
        correct = list(g["is_correct"]) if g is not None else []
        answers.append(None)  # the unresolved mass: unknown answer, drawn as missing
        probs.append(max(float(row.p_unresolved), 0.0))
        correct.append(pd.NA)
        pr = np.asarray(probs, float)
        if pr.sum() <= 0:
            raise InputError(
                "no probability mass for this item", path=ex.path / "dist.parquet", item=row.item_id, field="prob"
            )
        draw = _item_rng(seed, row.item_id).choice(len(pr), size=int(k), p=pr / pr.sum())
        for kk, j in enumerate(draw):
            ans = answers[j]
            missing = ans is None or pd.isna(ans)
            unresolved = j == len(pr) - 1
            cols["item_id"].append(row.item_id)
            cols["domain"].append(row.domain)
            cols["k"].append(kk)
            cols["seed"].append(int(seed) * 1000 + kk)
            cols["response"].append(UNRESOLVED_RESPONSE if unresolved else MISSING_RESPONSE if missing else str(ans))
            cols["extracted"].append(None if missing else str(ans))
            cols["correct_answer"].append(row.correct_answer if not pd.isna(row.correct_answer) else None)
            cols["is_correct"].append(pd.NA if missing else bool(correct[j]))
            cols["is_missing"].append(bool(missing))
    df = pd.DataFrame(cols)
    df.insert(TRIAL_COLUMNS.index("model"), "model", label)
    df["seed"] = df["seed"].astype("Int64")
    df["is_correct"] = df["is_correct"].astype("boolean")
    for col in ("response", "extracted", "correct_answer"):
        df[col] = df[col].astype("string")
    return df


def write_exact_run(
    path: str | Path, dist: pd.DataFrame, *, label: str, p_unresolved: dict | None = None, pins: dict | None = None
) -> Path:
    """Write an exact run directory from answer distributions (known truth for tests and simulations).

    ``dist``: ``item_id, domain, answer, prob, is_correct`` (one row per answer; a null answer
    is "no valid answer"). ``p_unresolved``: item -> unexpanded mass (default 0); each item's
    probabilities must sum to ``1 - p_unresolved``. Writes ``items_exact.parquet``,
    ``dist.parquet`` and a ``run.json`` whose pins hold ``model.label`` (plus ``pins``).

    Examples
    --------
    >>> import pandas as pd
    >>> dist = pd.DataFrame(
    ...     {"item_id": ["q1", "q1"], "domain": ["d", "d"], "answer": ["A", "B"], "prob": [0.7, 0.3],
    ...      "is_correct": [True, False]}
    ... )
    >>> write_exact_run("runs/toy_exact", dist, label="toy")  # doctest: +SKIP
    """
    d = dist[list(DIST_FIELDS)].copy()
    d["answer"] = d["answer"].astype("string")
    d["is_correct"] = d["is_correct"].astype("boolean")
    unres = p_unresolved or {}
    rows = []
    for item, g in d.groupby("item_id", sort=False):
        pu = float(unres.get(item, 0.0))
        total = float(g["prob"].sum()) + pu
        if abs(total - 1.0) > 1e-9:
            raise InputError(f"probabilities sum to {total:.12g}, not 1", item=item, field="prob")
        rows.append(
            {
                "item_id": item,
                "domain": g["domain"].iloc[0],
                "p_correct": float(g.loc[g["is_correct"].fillna(False).astype(bool), "prob"].sum()),
                "p_missing": float(g.loc[g["answer"].isna(), "prob"].sum()),
                "p_unresolved": pu,
                "n_expanded": len(g),
            }
        )
    with staged_output(path) as stage:
        write_parquet(pd.DataFrame(rows), stage / "items_exact.parquet")
        write_parquet(d, stage / "dist.parquet")
        write_run_record(stage, "complete", {"model.label": label, "engine": "exact", **(pins or {})})
    return Path(path)
