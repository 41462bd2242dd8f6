"""Trials: one row per sampled answer (SPEC section 1).

Canonical columns::

    item_id, domain, model, k, seed, response, extracted, correct_answer,
    is_correct, is_missing

and ``score`` where the file has it: a graded sample's number (SPEC section 11), beside or instead of
``is_correct``. A version's scores are one kind (:func:`score_kind`): ordinal (whole numbers on at most
:data:`MAX_SCORE_LEVELS` levels: an LLM judge's 1-5, a rubric grade) or continuous in [0, 1] (partial
credit, F1).

Loaders read Parquet, JSONL and CSV and also accept the reference study's field
names (``item_index``, ``raw_response`` / ``raw_text``, ``extracted_answer``, and
greedy files with ``parsed_response`` and no ``k``). Every problem is raised as
:class:`~bayesrc.errors.InputError` naming file, line and field.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes, read_table

TRIAL_COLUMNS: tuple[str, ...] = (
    "item_id",
    "domain",
    "model",
    "k",
    "seed",
    "response",
    "extracted",
    "correct_answer",
    "is_correct",
    "is_missing",
)

SCORE_COLUMN = "score"  # a graded sample's number: optional, kept where the file has it
MAX_SCORE_LEVELS = 11  # an ordinal score's levels at most (0-10): beyond, a score is continuous in [0, 1]

# Reference-study field name -> canonical name (first match wins).
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "response": ("raw_response", "raw_text"),
    "extracted": ("extracted_answer", "parsed_response"),
}

_TRUE = {True, "true", "True", "TRUE", "1"}
_FALSE = {False, "false", "False", "FALSE", "0"}


def _not_whole(num: pd.Series) -> pd.Series:
    """Where ``num`` (numeric, NaN for text) is not a whole number of at most 2**53 in size (exact as a float)."""
    return num.isna() | ~np.isfinite(num.astype(float)) | (num.abs() > 2**53) | (num != np.floor(num))


def _source_lines(df: pd.DataFrame) -> pd.Series:
    """Each row's line in its source file: the readers' ``_line`` column where it holds whole numbers,
    else the row number.

    ``_line`` is the readers' own column (they overwrite a file's); a caller's frame may carry
    one of its own, which must not turn an error message into a traceback.
    """
    rows = pd.Series(np.arange(len(df)) + 1, index=df.index)
    if "_line" not in df:
        return rows
    given = pd.to_numeric(df["_line"], errors="coerce")
    return rows if _not_whole(given).any() else given.astype(np.int64)


def _check_required_keys(rec: dict, first: dict, *, path: Path, line: int) -> None:
    """A JSONL record must carry the key fields itself (an absent key is not a null).

    Required: ``item_id`` (or ``item_index``), ``is_correct`` (or, in a graded file, ``score``), and ``k``
    whenever the file's first record has it (greedy files have no ``k``).
    """
    if "item_id" not in rec and "item_index" not in rec:
        raise InputError("missing required field", path=path, line=line, field="item_id")
    if "is_correct" not in rec and SCORE_COLUMN not in rec:
        raise InputError("missing required field (nor 'score')", path=path, line=line, field="is_correct")
    score = rec.get(SCORE_COLUMN)
    if isinstance(score, float) and not np.isfinite(score):  # JSON's NaN / Infinity: no null once in a frame
        raise InputError(f"expected a finite number, got {score}", path=path, line=line, field=SCORE_COLUMN)
    if "k" in first and "k" not in rec:
        raise InputError("missing required field", path=path, line=line, field="k")


def _parse_bool(values: pd.Series, *, path: Path, fmt: str, lines: pd.Series, field: str) -> pd.Series:
    """Strict tri-state boolean: True / False / <NA>; anything else is an error."""
    out = pd.Series(pd.NA, index=values.index, dtype="boolean")
    for idx, val in values.items():
        if val is None or (isinstance(val, float) and np.isnan(val)) or val is pd.NA:
            continue
        if isinstance(val, (bool, np.bool_)):
            out[idx] = bool(val)
        elif isinstance(val, (int, np.integer)) and not isinstance(val, bool) and fmt != "jsonl" and val in (0, 1):
            out[idx] = bool(val)
        elif isinstance(val, str) and fmt == "csv" and (val in _TRUE or val in _FALSE):
            out[idx] = val in _TRUE
        elif isinstance(val, str) and val.strip().lower() in ("", "null", "none", "nan") and fmt == "csv":
            continue
        else:
            raise InputError(
                f"expected true, false or null, got {json.dumps(val, default=str)}",
                path=path,
                line=int(lines[idx]),
                field=field,
            )
    return out


def _parse_seed(values: pd.Series, *, path: Path, lines: pd.Series) -> pd.Series:
    """Integer seeds (nullable); a number that is not an integer is an error, text is null."""
    num = pd.to_numeric(values, errors="coerce").astype(float)
    bad = num.notna() & (~np.isfinite(num) | (num.abs() > 2**63 - 1) | (num != np.floor(num)))
    if bad.any():
        first = bad.idxmax()
        raise InputError(
            f"expected an integer seed, got {values[first]!r}", path=path, line=int(lines[first]), field="seed"
        )
    return num.astype("Int64")


def _aliased_columns(df: pd.DataFrame, *, path: Path, lines: pd.Series) -> dict[str, pd.Series]:
    """Canonical columns the frame lacks, taken from the reference study's field names.

    The first alias present wins; ``item_id`` may come from ``item_index`` and is required.
    """
    found = {}
    for canon, aliases in FIELD_ALIASES.items():
        alias = next((a for a in aliases if a in df), None)
        if canon not in df and alias is not None:
            found[canon] = df[alias]
    if "item_id" not in df:
        if "item_index" not in df:
            raise InputError(
                "missing required field (nor 'item_index')", path=path, line=int(lines.iloc[0]), field="item_id"
            )
        found["item_id"] = df["item_index"]
    return found


def _is_single_shot(df: pd.DataFrame, greedy: bool | None) -> bool:
    """Whether every row gets ``k = 0``: a greedy file (``None``: one without a ``k`` column) whose ``k``
    holds no value."""
    if greedy is None:
        greedy = "k" not in df
    return bool(greedy) and not ("k" in df and df["k"].notna().any())


def _check_required_fields(df: pd.DataFrame, *, path: Path, lines: pd.Series) -> None:
    """Every row needs ``item_id`` and ``k``, and the file an ``is_correct`` or a ``score`` field."""
    # Required per row: item_id, k, and is_correct or is_missing (can't tell correctness otherwise).
    if "k" not in df:  # only when greedy=False: otherwise a file without k is single-shot (k = 0)
        raise InputError(
            "missing required field (a K-sample file needs one; greedy=True reads single-shot answers)",
            path=path,
            line=int(lines.iloc[0]),
            field="k",
        )
    for field in ("item_id", "k"):
        missing = df[field].isna()
        if missing.any():
            first = missing.idxmax()
            raise InputError("missing required field", path=path, line=int(lines[first]), field=field)
    if "is_correct" not in df and SCORE_COLUMN not in df:
        raise InputError("missing required field (nor 'score')", path=path, line=int(lines.iloc[0]), field="is_correct")


def _parse_k(values: pd.Series, *, path: Path, lines: pd.Series) -> pd.Series:
    """Sample indices as int64; anything but a non-negative integer (at most 2**53, exact as a float) is an error."""
    k_num = pd.to_numeric(values, errors="coerce")
    bad_k = _not_whole(k_num) | (k_num < 0)
    if bad_k.any():
        first = bad_k.idxmax()
        raise InputError(
            f"expected a non-negative integer, got {values[first]!r}", path=path, line=int(lines[first]), field="k"
        )
    return k_num.astype(np.int64)


def _parse_item_id(values: pd.Series, *, path: Path, lines: pd.Series) -> pd.Series:
    """Item ids as stripped text; an empty one is an error."""
    item_id = values.astype(str).str.strip()
    if (item_id == "").any():
        first = (item_id == "").idxmax()
        raise InputError("empty value", path=path, line=int(lines[first]), field="item_id")
    return item_id


def _parse_correctness(
    df: pd.DataFrame, *, path: Path, fmt: str, lines: pd.Series
) -> tuple[pd.Series, pd.Series, pd.Series | None]:
    """``(is_correct, is_missing, score)``: a missing answer has no score, and an answer that is not missing must
    have one in each scoring field the file has (``is_correct``, ``score``; ``score`` None where the file has none).

    ``is_missing`` defaults to "no score" where absent or null. A graded file's ``is_correct`` may be absent or
    all null (as :func:`save_trials` writes graded trials).
    """
    graded = is_graded(df)
    is_correct = (
        pd.Series(pd.NA, index=df.index, dtype="boolean")
        if graded
        else _parse_bool(df["is_correct"], path=path, fmt=fmt, lines=lines, field="is_correct")
    )
    score = _parse_score(df[SCORE_COLUMN], path=path, lines=lines) if SCORE_COLUMN in df else None
    unscored = score.isna() if graded else is_correct.isna()
    if "is_missing" in df:
        is_missing = _parse_bool(df["is_missing"], path=path, fmt=fmt, lines=lines, field="is_missing")
        is_missing = is_missing.fillna(unscored)
    else:
        is_missing = unscored
    is_missing = is_missing.astype(bool)
    # A missing answer cannot be scored; the reference study drops its score.
    is_correct.loc[is_missing & is_correct.notna()] = pd.NA
    if score is not None:
        score.loc[is_missing] = np.nan
    for field, values in (("is_correct", None if graded else is_correct), (SCORE_COLUMN, score)):
        if values is not None and (~is_missing & values.isna()).any():
            first = (~is_missing & values.isna()).idxmax()
            raise InputError("null but 'is_missing' is false", path=path, line=int(lines[first]), field=field)
    if score is not None:
        score_kind(score[~is_missing], path=path, lines=lines)
    return is_correct, is_missing, score


def is_graded(trials: pd.DataFrame) -> bool:
    """Whether ``trials`` (canonical, or a file's own fields) are graded: a ``score`` field and no ``is_correct``
    value.

    Examples
    --------
    >>> is_graded(pd.DataFrame({"score": [4.0], "is_correct": [None]})), is_graded(pd.DataFrame({"is_correct": [True]}))
    (True, False)
    """
    return SCORE_COLUMN in trials and ("is_correct" not in trials or bool(trials["is_correct"].isna().all()))


def _parse_score(values: pd.Series, *, path: Path, lines: pd.Series) -> pd.Series:
    """Scores as float64, NaN where null; text that is not a number and infinities are errors."""
    num = pd.to_numeric(values, errors="coerce").astype(float)
    null_text = values.map(lambda v: isinstance(v, str) and v.strip().lower() in ("", "null", "none", "nan"))
    bad = values.notna() & ~null_text & ~np.isfinite(num)
    if bad.any():
        first = bad.idxmax()
        raise InputError(
            f"expected a finite number, got {json.dumps(values[first], default=str)}",
            path=path,
            line=int(lines[first]),
            field=SCORE_COLUMN,
        )
    return num


def score_kind(scores: pd.Series, *, path: str | Path = "<memory>", lines: pd.Series | None = None) -> str:
    """The kind of one version's scores: ``"ordinal"`` (whole numbers spanning at most :data:`MAX_SCORE_LEVELS`
    levels) or ``"continuous"`` (within [0, 1], not all whole); anything else is an :class:`InputError` naming
    the first score that breaks the kind. Whole numbers in [0, 1] (0 / 1 credit) are ordinal, two levels.

    Examples
    --------
    >>> score_kind(pd.Series([1.0, 5.0, 3.0])), score_kind(pd.Series([0.25, 1.0, 0.0]))
    ('ordinal', 'continuous')
    >>> try:
    ...     score_kind(pd.Series([1.0, 2.0, 0.5]))
    ... except InputError as err:
    ...     print(err.line, err.message)
    3 a mix of kinds: 0.5 among whole-number levels up to 2 (ordinal: whole numbers; continuous: in [0, 1])
    """
    x = pd.Series(scores, dtype=float).dropna()
    lines = pd.Series(np.arange(len(scores)) + 1, index=scores.index) if lines is None else lines
    whole, inside = x == np.floor(x), (x >= 0) & (x <= 1)
    if whole.all() and not (x > x.min() + MAX_SCORE_LEVELS - 1).any():
        return "ordinal"
    if inside.all() and not whole.all():
        return "continuous"
    if whole.all():
        first = (x > x.min() + MAX_SCORE_LEVELS - 1).idxmax()
        message = (
            f"outside its levels: {x[first]:g} with levels from {x.min():g}; an ordinal score takes at most "
            f"{MAX_SCORE_LEVELS} levels (rescale a wider one to [0, 1])"
        )
    elif (~whole & ~inside).any():
        first = (~whole & ~inside).idxmax()
        message = f"{x[first]:g} is neither a whole-number level (ordinal) nor in [0, 1] (continuous)"
    else:  # fractions in [0, 1] beside whole numbers above 1
        first = (~whole).idxmax()
        message = (
            f"a mix of kinds: {x[first]:g} among whole-number levels up to {x[whole].max():g} "
            "(ordinal: whole numbers; continuous: in [0, 1])"
        )
    raise InputError(message, path=path, line=int(lines[first]), field=SCORE_COLUMN)


def _model_column(df: pd.DataFrame, model: str | None, path: Path) -> pd.Series:
    """Every row's version label: ``model`` if given, else the file's ``model`` field, else the file stem;
    one per file."""
    if model is not None or "model" not in df or df["model"].isna().all():
        column = pd.Series(model if model is not None else path.stem, index=df.index)
    else:
        column = df["model"]
    column = column.astype(str)
    models = column.unique()
    if len(models) > 1:
        raise InputError(f"one model per file expected, found {sorted(map(str, models))[:3]}", path=path, field="model")
    return column


def _optional_columns(df: pd.DataFrame, *, path: Path, lines: pd.Series) -> dict[str, pd.Series]:
    """``seed`` and the answer texts, typed; null where the file has no such field."""
    absent = pd.Series(pd.NA, index=df.index)
    found = {"seed": _parse_seed(df.get("seed", absent), path=path, lines=lines)}
    for col in ("response", "extracted", "correct_answer"):
        found[col] = df.get(col, absent).astype("string")
    return found


def _check_unique_trials(df: pd.DataFrame, *, path: Path, lines: pd.Series) -> None:
    """Each (item, k) once: a repeated sample would be counted twice."""
    dup = df.duplicated(["item_id", "k"], keep="first")
    if dup.any():
        first = dup.idxmax()
        raise InputError(
            f"duplicate trial (item {df['item_id'][first]}, k {df['k'][first]})",
            path=path,
            line=int(lines[first]),
            field="k",
        )


def normalise_trials(
    raw: pd.DataFrame,
    *,
    path: str | Path = "<memory>",
    fmt: str = "jsonl",
    model: str | None = None,
    greedy: bool | None = None,
    extra_columns: bool = False,
) -> pd.DataFrame:
    """Map aliases, check required fields and types, and return canonical trials.

    ``greedy=None`` detects a single-shot file (no ``k`` column): every row gets
    ``k = 0``. The result carries a ``_line`` column for error messages; with
    ``extra_columns`` the file's other columns (a collected run's ``thinking``,
    ``n_tokens``, ...) follow the canonical ones, as they are.

    Examples
    --------
    >>> import pandas as pd
    >>> raw = pd.DataFrame(
    ...     {"item_id": [1, 1], "k": [0, 1], "domain": ["d", "d"], "model": ["m", "m"], "is_correct": [True, False]}
    ... )
    >>> normalise_trials(raw)["item_id"].tolist()
    ['1', '1']
    """
    path = Path(path)
    df = raw.copy()
    df["_line"] = _source_lines(df)
    lines = df["_line"]
    if len(df) == 0:
        raise InputError("file is empty (no trials)", path=path)
    for canon, column in _aliased_columns(df, path=path, lines=lines).items():
        df[canon] = column
    if _is_single_shot(df, greedy):
        df["k"] = 0
    # Keep this order: a file with several problems must keep reporting the same one first.
    _check_required_fields(df, path=path, lines=lines)
    df["k"] = _parse_k(df["k"], path=path, lines=lines)
    df["item_id"] = _parse_item_id(df["item_id"], path=path, lines=lines)
    df["is_correct"], df["is_missing"], score = _parse_correctness(df, path=path, fmt=fmt, lines=lines)
    if score is not None:
        df[SCORE_COLUMN] = score
    df["domain"] = df.get("domain", pd.Series("all", index=df.index)).fillna("all").astype(str)
    df["model"] = _model_column(df, model, path)
    for col, column in _optional_columns(df, path=path, lines=lines).items():
        df[col] = column
    _check_unique_trials(df, path=path, lines=lines)
    if df["is_missing"].all():
        raise InputError(
            f"all {len(df)} responses are missing for model {df['model'].iloc[0]!r}: nothing to analyse",
            path=path,
            field="is_missing",
        )

    keep = list(TRIAL_COLUMNS) + ([SCORE_COLUMN] if score is not None else []) + ["_line"]
    if extra_columns:
        keep += [c for c in raw.columns if c not in keep]
    return df[keep].reset_index(drop=True)


EXACT_RUN_FILES = ("dist.parquet", "items_exact.parquet")


def _refuse_exact_run(path: Path) -> None:
    """An exact run (answer distributions, no samples) is not a trials file: say so in one line."""
    run_dir = path if path.is_dir() else path.parent
    if (
        path.name in EXACT_RUN_FILES
        or (path.is_dir() and any((path / f).exists() for f in EXACT_RUN_FILES))
        or (path.name == "run.json" and any((run_dir / f).exists() for f in EXACT_RUN_FILES))
    ):
        raise InputError(
            "is an exact run (per-item answer distributions), not K-sample trials; "
            "draw trials from it with bayesrc.data.sample_from_exact or pass its trials where trials are needed",
            path=path,
        )


def trials_file(path: str | Path) -> Path:
    """The trials file ``path`` names: itself, or a collection run directory's ``trials.parquet``
    (a directory without one, or an exact run, is one :class:`InputError` naming it).

    Examples
    --------
    >>> trials_file("runs/v1")  # doctest: +SKIP
    PosixPath('runs/v1/trials.parquet')
    """
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=path)
    _refuse_exact_run(path)
    if path.is_dir():
        if not (path / "trials.parquet").is_file():
            raise InputError("run directory has no trials.parquet (is the run complete?)", path=path)
        return path / "trials.parquet"
    return path


def load_trials(
    path: str | Path, *, model: str | None = None, greedy: bool | None = None, extra_columns: bool = False
) -> pd.DataFrame:
    """Load and validate a trials file (Parquet, JSONL or CSV).

    Parameters
    ----------
    path : trials file, or a collection run directory (its ``trials.parquet``).
    model : version label; overrides the file's ``model`` field (default: the
        field, else the file stem).
    greedy : single-shot file without ``k`` (``None`` detects it).
    extra_columns : keep the file's columns beyond the canonical ones (after them).

    Examples
    --------
    >>> trials = load_trials("runs/v1/trials.parquet")  # doctest: +SKIP
    >>> trials.groupby("item_id")["is_correct"].mean().head()  # doctest: +SKIP
    """
    path = trials_file(path)
    check = lambda rec, first, line: _check_required_keys(rec, first, path=path, line=line)  # noqa: E731
    raw, fmt = read_table(path, kind="trials", check_record=check)
    return normalise_trials(raw, path=path, fmt=fmt, model=model, greedy=greedy, extra_columns=extra_columns)


def save_trials(trials: pd.DataFrame, path: str | Path) -> None:
    """Write trials as Parquet, atomically.

    Examples
    --------
    >>> from bayesrc.data import simulate_pair
    >>> save_trials(simulate_pair(50, 10, seed=1).trials_v1, "v1.parquet")  # doctest: +SKIP
    """
    frame = trials[[c for c in (*TRIAL_COLUMNS, SCORE_COLUMN) if c in trials]].copy()
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buf)
    atomic_write_bytes(path, buf.getvalue())


def concat_trials(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Stack trials of several versions (models) into one frame."""
    return pd.concat(list(frames), ignore_index=True)
