"""Atomic output: a command's files appear all together or not at all.

Results are computed first, then written into a staging folder beside the target
and moved into place with ``os.replace`` (atomic on one filesystem), so a failure
part-way never leaves a torn or partial file behind and never overwrites the old
output with half of the new one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrc.errors import InputError


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite(obj: Any) -> Any:
    """Replace NaN / inf floats by None so the JSON is strict (RFC 8259)."""
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, np.floating) and not np.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps_json(obj: Any) -> str:
    """Strict JSON (no NaN), numpy-aware, stable key order."""
    return json.dumps(_finite(obj), default=_json_default, indent=2, allow_nan=False) + "\n"


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, dumps_json(obj))


@contextmanager
def staged_output(out_dir: str | Path) -> Iterator[Path]:
    """Yield a staging folder; on success move every file in it into ``out_dir``.

    On an exception nothing in ``out_dir`` changes (the staging folder is removed).
    Sub-folders are moved whole.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=out_dir))
    try:
        yield stage
        for entry in sorted(stage.iterdir()):
            target = out_dir / entry.name
            if entry.is_dir() and target.exists():
                shutil.rmtree(target)
            os.replace(entry, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


# ---------------------------------------------------------------- reading input tables


def iter_jsonl(path: str | Path, *, what: str = "a JSON object per line", hint: str = "") -> Iterator[tuple[int, dict]]:
    """Yield ``(line number, record)`` of a JSONL file; blank lines are skipped.

    A malformed line or a non-object raises :class:`InputError` naming file and line
    (``hint`` is appended to the malformed-JSON message, e.g. "partial log?").
    """
    path = Path(path)
    with path.open("r", encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            text = raw.strip()
            if not text:
                continue
            try:
                rec = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed JSON ({exc.msg}){hint}", path=path, line=lineno) from None
            if not isinstance(rec, dict):
                raise InputError(f"expected {what}", path=path, line=lineno)
            yield lineno, rec


def read_table(
    path: str | Path,
    *,
    kind: str = "table",
    check_record: Callable[[dict, dict, int], None] | None = None,
) -> tuple[pd.DataFrame, str]:
    """Read a JSONL, CSV or Parquet file into a DataFrame with a 1-based ``_line`` column.

    Returns ``(frame, format)`` with format ``"jsonl"``, ``"csv"`` or ``"parquet"``. CSV
    values stay strings (callers parse them strictly); ``_line`` is the source line
    (CSV: the header is line 1; Parquet: the row number). ``check_record(record,
    first_record, line)`` may reject a JSONL record as it is read. ``kind`` names what
    the file should be, for the error messages.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=path)
    if path.is_dir():
        raise InputError(f"is a directory, expected a {kind} file", path=path)
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        records: list[dict] = []
        lines: list[int] = []
        for lineno, rec in iter_jsonl(path):
            if check_record is not None:
                check_record(rec, records[0] if records else rec, lineno)
            records.append(rec)
            lines.append(lineno)
        df = pd.DataFrame.from_records(records)
        df["_line"] = lines
        return df, "jsonl"
    if suffix == ".csv":
        try:
            df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
        except pd.errors.EmptyDataError:
            raise InputError("file is empty", path=path) from None
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InputError(f"malformed CSV ({exc})", path=path) from None
        df["_line"] = np.arange(len(df)) + 2  # header is line 1
        return df, "csv"
    if suffix in (".parquet", ".pq"):
        try:
            df = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises many types for corrupt files
            raise InputError(f"unreadable Parquet ({type(exc).__name__}: {exc})", path=path) from None
        df["_line"] = np.arange(len(df)) + 1
        return df, "parquet"
    raise InputError(f"unknown format {suffix!r}; expected .parquet, .jsonl or .csv", path=path)


def read_run_record(run: str | Path) -> dict | None:
    """The run.json of a run directory (or of the directory holding a trials file); None if absent.

    Examples
    --------
    >>> read_run_record("runs/v1")["pins"]["sampling.k"]  # doctest: +SKIP
    10
    """
    run = Path(run)
    candidates = [run / "run.json"] if run.is_dir() else [run.parent / "run.json"] if run.name != "run.json" else [run]
    for c in candidates:
        if c.exists():
            try:
                return json.loads(c.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed run record ({exc.msg})", path=c, line=exc.lineno) from None
    return None
