"""Switch-matrix inputs (SPEC section 4, paper 004 section 2).

Two shapes are accepted, in CSV, JSONL or Parquet:

* **episode level** -- one row per (episode, prefix model, suffix model) with the
  episode's ``score`` under the benchmark metric (optional ``benchmark`` column);
* **cell level** -- the published summaries: ``benchmark, metric, prefix_model,
  suffix_model, mean, ci_low, ci_high, n_episodes`` (as ``data/switch_matrix_cells.csv``).

The diagonal cell (b -> b) is the no-switch baseline of suffix model b, so every
model that appears must have it. Every problem is an :class:`InputError` naming
file, line and field.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes, atomic_write_text, read_table

EPISODE_COLUMNS: tuple[str, ...] = ("episode", "prefix_model", "suffix_model", "score")
CELL_COLUMNS: tuple[str, ...] = ("prefix_model", "suffix_model", "mean", "ci_low", "ci_high", "n_episodes")
DEFAULT_BENCHMARK = "default"
Z95 = 1.959963984540054


@dataclass(frozen=True)
class SwitchData:
    """Validated switch-matrix input.

    ``kind`` is ``"episodes"`` (columns benchmark, episode, prefix, suffix, score) or
    ``"cells"`` (benchmark, metric, prefix, suffix, mean, ci_low, ci_high, n, se); ``models``
    maps each benchmark to its models in order of first appearance.

    Examples
    --------
    >>> from bayesrc.datasets import SWITCH_CELLS, path
    >>> data = load_switch(path(SWITCH_CELLS), benchmark="coqa")  # the published cells, bundled
    >>> len(data.models["coqa"])
    9
    """

    kind: str
    frame: pd.DataFrame
    models: dict[str, list[str]]
    path: str

    @property
    def benchmarks(self) -> list[str]:
        return list(self.models)

    def select(self, benchmark: str) -> SwitchData:
        if benchmark not in self.models:
            raise InputError(
                f"benchmark {benchmark!r} not in the input (has {self.benchmarks})", path=self.path, field="benchmark"
            )
        frame = self.frame[self.frame["benchmark"] == benchmark].reset_index(drop=True)
        return SwitchData(self.kind, frame, {benchmark: self.models[benchmark]}, self.path)


def _numeric(df: pd.DataFrame, field: str, path: Path) -> np.ndarray:
    """Column as float; the first non-numeric / non-finite value is an error."""
    col = df[field]
    values = pd.to_numeric(col.astype(object).where(col.notna(), None), errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"expected a finite number, got {col.iloc[i]!r}", path=path, line=int(df["_line"].iloc[i]), field=field
        )
    return values


def _text(df: pd.DataFrame, field: str, path: Path) -> pd.Series:
    col = df[field]
    empty = col.isna() | (col.astype(str).str.strip() == "")
    if empty.any():
        i = int(np.argmax(empty.to_numpy()))
        raise InputError("empty value", path=path, line=int(df["_line"].iloc[i]), field=field)
    return col.astype(str).str.strip()


def _check_matrix(df: pd.DataFrame, keys: list[str], path: Path) -> dict[str, list[str]]:
    """Duplicates, at least two models, and a diagonal cell for every model."""
    dup = df.duplicated(keys, keep="first").to_numpy()
    if dup.any():
        i = int(np.argmax(dup))
        row = df.iloc[i]
        src = {"prefix": "prefix_model", "suffix": "suffix_model"}
        what = ", ".join(f"{src.get(k, k)}={row[k]!r}" for k in keys)
        raise InputError(
            f"duplicate cell ({what})", path=path, line=int(row["_line"]), field=src.get(keys[-1], keys[-1])
        )
    models: dict[str, list[str]] = {}
    for bench, sub in df.groupby("benchmark", sort=False):
        order = list(dict.fromkeys(np.ravel(sub[["prefix", "suffix"]].to_numpy())))
        if len(order) < 2:
            raise InputError(
                f"switch matrix needs at least two models, benchmark {bench!r} has only {order}",
                path=path,
                line=int(sub["_line"].iloc[0]),
                field="prefix_model",
            )
        diag = set(sub.loc[sub["prefix"] == sub["suffix"], "suffix"])
        for m in order:
            if m not in diag:
                first = sub[(sub["prefix"] == m) | (sub["suffix"] == m)].iloc[0]
                raise InputError(
                    f"model {m!r} has no diagonal (no-switch) cell {m} -> {m} in benchmark {bench!r}",
                    path=path,
                    line=int(first["_line"]),
                    field="suffix_model",
                )
        models[str(bench)] = order
    return models


def load_switch(path: str | Path, *, benchmark: str | None = None) -> SwitchData:
    """Load episode-level scores or cell-level summaries (detected from the columns).

    Raises :class:`InputError` for a missing column, a non-numeric score/mean/interval,
    an interval that does not contain its mean, duplicate cells (or duplicate
    episode rows), a model without its diagonal cell, or a matrix with one model.

    Examples
    --------
    >>> from bayesrc.datasets import path
    >>> data = load_switch(path("switch_matrix_cells.csv"), benchmark="coqa")
    >>> len(data.models["coqa"])
    9
    """
    path = Path(path)
    df, _ = read_table(path, kind="switch-matrix")
    return _validate(df, path, benchmark)


def _validate(df: pd.DataFrame, path: Path, benchmark: str | None) -> SwitchData:
    """Checked switch data from a table with a ``_line`` column (the source line each error names)."""
    if len(df) == 0:
        raise InputError("file is empty (no rows)", path=path)
    kind = _input_kind(df, path)
    out = pd.DataFrame({"_line": df["_line"].to_numpy()})
    columns = _model_columns(df, path)  # checked first: an empty model field is reported before a bad value
    columns |= _episode_columns(df, path) if kind == "episodes" else _cell_columns(df, path)
    for name, values in columns.items():
        out[name] = values
    keys = ["benchmark", "episode", "prefix", "suffix"] if kind == "episodes" else ["benchmark", "prefix", "suffix"]
    out = _only_benchmark(out, benchmark, path)
    models = _check_matrix(out, keys, path)
    if kind == "episodes":
        _check_episode_baselines(out, path)
    return SwitchData(kind, out, models, str(path))


def _input_kind(df: pd.DataFrame, path: Path) -> str:
    """``"episodes"`` or ``"cells"``, told by the columns; every required column of that shape must be there."""
    cols = set(df.columns)
    if "score" in cols:
        kind, required = "episodes", EPISODE_COLUMNS
    elif "mean" in cols or "ci_low" in cols:
        kind, required = "cells", CELL_COLUMNS
    else:
        raise InputError(
            "neither episode-level (episode, prefix_model, suffix_model, score) "
            "nor cell-level (prefix_model, suffix_model, mean, ci_low, ci_high, n_episodes) columns",
            path=path,
            line=1,
            field="score",
        )
    for field in required:
        if field not in cols:
            raise InputError("missing required column", path=path, line=1, field=field)
    return kind


def _model_columns(df: pd.DataFrame, path: Path) -> dict:
    """``benchmark`` (default :data:`DEFAULT_BENCHMARK`), ``prefix`` and ``suffix``, as stripped text."""
    return {
        "benchmark": _text(df, "benchmark", path).to_numpy() if "benchmark" in df.columns else DEFAULT_BENCHMARK,
        "prefix": _text(df, "prefix_model", path).to_numpy(),
        "suffix": _text(df, "suffix_model", path).to_numpy(),
    }


def _episode_columns(df: pd.DataFrame, path: Path) -> dict:
    """An episode-level table's own columns: ``episode`` (text) and ``score``."""
    return {"episode": _text(df, "episode", path).to_numpy(), "score": _numeric(df, "score", path)}


def _cell_columns(df: pd.DataFrame, path: Path) -> dict:
    """A cell-level table's own columns: ``metric``, ``mean``, ``ci_low``, ``ci_high``, ``n`` and the SE ``se``."""
    cols = {"metric": _text(df, "metric", path).to_numpy() if "metric" in df.columns else "score"}
    for field in ("mean", "ci_low", "ci_high"):
        cols[field] = _numeric(df, field, path)
    cols["n"] = _episode_counts(df, path)
    bad = ~((cols["ci_low"] <= cols["mean"]) & (cols["mean"] <= cols["ci_high"]))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            "interval [ci_low, ci_high] does not contain mean", path=path, line=int(df["_line"].iloc[i]), field="ci_low"
        )
    # SE of a cell mean from its published 95% interval (normal approximation).
    cols["se"] = (cols["ci_high"] - cols["ci_low"]) / (2 * Z95)
    return cols


def _episode_counts(df: pd.DataFrame, path: Path) -> np.ndarray:
    """``n_episodes`` as integers; the first one that is not a positive integer is an error."""
    n = _numeric(df, "n_episodes", path)
    bad = (n < 1) | (n != np.round(n))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"expected a positive integer, got {df['n_episodes'].iloc[i]!r}",
            path=path,
            line=int(df["_line"].iloc[i]),
            field="n_episodes",
        )
    return n.astype(int)


def _only_benchmark(out: pd.DataFrame, benchmark: str | None, path: Path) -> pd.DataFrame:
    """The rows of ``benchmark`` (all rows for None); a benchmark the input lacks is an error."""
    if benchmark is None:
        return out
    if benchmark not in set(out["benchmark"]):
        raise InputError(
            f"benchmark {benchmark!r} not in the input (has {sorted(set(out['benchmark']))})",
            path=path,
            field="benchmark",
        )
    return out[out["benchmark"] == benchmark].reset_index(drop=True)


def _check_episode_baselines(out: pd.DataFrame, path: Path) -> None:
    """Pairing needs each (episode, suffix) to have its own no-switch score."""
    diag = out[out["prefix"] == out["suffix"]][["benchmark", "episode", "suffix"]]
    merged = out.merge(diag.assign(_has=True), on=["benchmark", "episode", "suffix"], how="left")
    missing = merged["_has"].isna().to_numpy()
    if missing.any():
        row = merged.iloc[int(np.argmax(missing))]
        raise InputError(
            f"episode {row['episode']!r} has no no-switch score {row['suffix']} -> {row['suffix']} to pair with",
            path=path,
            line=int(row["_line"]),
            field="episode",
        )


def episodes_from_frame(frame: pd.DataFrame, *, name: str = "<episodes>") -> SwitchData:
    """Validated :class:`SwitchData` from an in-memory episode table
    (columns episode, prefix_model|prefix, suffix_model|suffix, score[, benchmark]).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"episode": [0, 0, 0, 0], "prefix": ["a", "a", "b", "b"], "suffix": ["a", "b", "a", "b"],
    ...                       "score": [1.0, 0.0, 1.0, 1.0]})
    >>> list(episodes_from_frame(frame).models.values())
    [['a', 'b']]
    """
    df = frame.rename(columns={"prefix": "prefix_model", "suffix": "suffix_model"}).copy()
    df["_line"] = np.arange(len(df)) + 1
    return _validate(df, Path(name), None)


def save_episodes(frame: pd.DataFrame, path: str | Path) -> None:
    """Write episode-level scores (columns benchmark, episode, prefix_model, suffix_model, score).

    Examples
    --------
    >>> save_episodes(sim.data.frame, "episodes.csv")  # doctest: +SKIP
    """
    path = Path(path)
    df = frame.rename(columns={"prefix": "prefix_model", "suffix": "suffix_model"})
    cols = [c for c in ("benchmark", "episode", "prefix_model", "suffix_model", "score") if c in df.columns]
    df = df[cols]
    if path.suffix.lower() == ".parquet":
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        atomic_write_bytes(path, buf.getvalue())
    elif path.suffix.lower() == ".jsonl":
        atomic_write_text(path, df.to_json(orient="records", lines=True))
    else:
        atomic_write_text(path, df.to_csv(index=False))
