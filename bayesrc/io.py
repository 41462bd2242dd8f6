"""Atomic output: a command's files appear all together or not at all.

Results are computed first. A file is written to a temporary name and moved into place
with ``os.replace``; a result folder is built whole beside the target and swapped in by
renaming (:func:`staged_output`). A failure or a kill part-way therefore never leaves a torn
file or a folder mixing old and new files behind, and never overwrites the old output with
half of the new one. One process writes an output at a time (:mod:`bayesrc.locking`).
"""

from __future__ import annotations

import csv
import ctypes
import errno
import functools
import gc
import glob
import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bayesrc.errors import InputError
from bayesrc.locking import output_lock, swappable


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


def temp_file_beside(path: Path) -> tuple[int, str]:
    """A new, exclusively created temporary file ``.NAME.XXXXXXXX.tmp`` beside ``path``: (open fd, its path).

    Its mode comes from the umask, as a plain ``open`` gives (``tempfile.mkstemp``'s 0600 would
    carry over to the output when it is renamed into place: results unreadable to the group).

    Examples
    --------
    >>> import tempfile
    >>> fd, tmp = temp_file_beside(Path(tempfile.mkdtemp()) / "a.json")
    >>> os.close(fd); Path(tmp).name.startswith(".a.json.") and tmp.endswith(".tmp")
    True
    """
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), str(tmp)
        except FileExistsError:
            continue


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, a read-only folder: name the file (the CLI's one line)
        Path(tmp).unlink(missing_ok=True)
        raise _named(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _named(exc: OSError, path: str | Path) -> OSError:
    """``exc`` itself if it names a file, else the same error naming ``path``.

    Examples
    --------
    >>> _named(OSError(28, "No space left on device"), "out/a.txt").filename
    'out/a.txt'
    """
    if exc.filename:
        return exc
    if exc.errno:
        return type(exc)(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))
    named = OSError(str(exc))  # e.g. pyarrow's "Error writing bytes to file ... [errno 28] ..."
    named.filename = str(path)
    return named


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, dumps_json(obj))


@contextmanager
def staged_output(out_dir: str | Path) -> Iterator[Path]:
    """Yield a staging folder; on success swap a new ``out_dir`` in: all its files or none.

    The new folder is built beside ``out_dir`` (``.NAME.new-XXXX``): the files the caller
    writes into the stage, plus hard links to the old folder's other entries (a staged
    sub-folder replaces the old one whole). It then takes ``out_dir``'s place in one atomic
    exchange of the two names (``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere two
    renames, undone by :func:`recover_output` if the process dies between them), and the
    old folder is deleted. A reader or a crash therefore sees the whole old folder or the
    whole new one, never a mix. (A folder that cannot be renamed, a mount point or one in a
    read-only parent, gets its entries replaced one by one instead, each atomically.) On an
    exception nothing in ``out_dir`` changes. The writer lock
    (:func:`bayesrc.locking.output_lock`) is held throughout, so a second process writing
    the same folder is refused (:class:`~bayesrc.errors.InputError`).

    Parameters
    ----------
    out_dir : the result folder to write (created if absent).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with staged_output(f"{tmp}/out") as stage:
    ...         atomic_write_text(stage / "a.txt", "new")
    ...     sorted(p.name for p in Path(tmp, "out").iterdir())
    ['a.txt']
    """
    with output_lock(out_dir) as target:
        recover_output(target)
        in_place = not swappable(target)
        stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=target)) if in_place else _new_dir_beside(target, "new")
        try:
            yield stage
            if in_place:
                _replace_entries(stage, target)
            else:
                _commit(stage, target)
        except OSError as exc:  # e.g. a table written straight into the stage on a full disk
            raise _unstaged(_named(exc, target), stage, target) from None
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _unstaged(exc: OSError, stage: Path, target: Path) -> OSError:
    """``exc`` naming the output's file instead of its copy in the stage (which is deleted: the
    user knows ``out/report.html``, not ``.out.new-1a2b3c4d/report.html``).

    Examples
    --------
    >>> exc = OSError(28, "No space left on device", "/r/.out.new-1a2b/a.json")
    >>> _unstaged(exc, Path("/r/.out.new-1a2b"), Path("/r/out")).filename
    '/r/out/a.json'
    """
    name = Path(exc.filename) if isinstance(exc.filename, str) else None
    if name is None or not name.is_relative_to(stage):
        return exc
    return _named(
        OSError(exc.errno, exc.strerror or os.strerror(exc.errno)) if exc.errno else OSError(str(exc)),
        target / name.relative_to(stage),
    )


def _replace_entries(stage: Path, target: Path) -> None:
    """Move each entry of ``stage`` into ``target`` (each atomic, not all together): for a
    folder that cannot be swapped by renaming, such as a mount point."""
    for entry in sorted(stage.iterdir()):
        dest = target / entry.name
        if entry.is_dir() and dest.exists():
            shutil.rmtree(dest)
        os.replace(entry, dest)


def recover_output(out_dir: str | Path) -> Path:
    """Finish or undo a folder swap a killed process left half done; return the resolved path.

    A ``.NAME.old-XXXX`` folder beside ``out_dir`` while ``out_dir`` is missing is the old
    folder set aside by the two-rename swap: it is renamed back. Other leftovers
    (``.NAME.new-XXXX`` stages, old folders whose replacement is in place) are deleted.
    :func:`staged_output` calls it before each write; call it yourself before reading an
    output a killed writer may have left (the caller should hold the writer lock).

    Examples
    --------
    >>> recover_output("runs/rci")  # doctest: +SKIP
    PosixPath('/home/me/runs/rci')
    """
    target = Path(out_dir).resolve()
    if not target.parent.is_dir():
        return target
    for aside in sorted(target.parent.glob(f".{glob.escape(target.name)}.old-*")):
        if target.exists() or target.is_symlink():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(aside, target)
    for stage in target.parent.glob(f".{glob.escape(target.name)}.new-*"):
        shutil.rmtree(stage, ignore_errors=True)
    return target


def _new_dir_beside(target: Path, tag: str) -> Path:
    """A fresh empty folder ``.NAME.TAG-XXXXXXXX`` beside ``target`` (mode from the umask)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        path = target.parent / f".{target.name}.{tag}-{secrets.token_hex(4)}"
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue


def _commit(stage: Path, target: Path) -> None:
    """Complete ``stage`` with the old folder's other entries and swap it in for ``target``."""
    if target.exists() and not target.is_dir():
        raise InputError("exists and is not a directory", path=target)
    if target.is_dir():
        _link_missing(target, stage)
        shutil.copymode(target, stage)
    _fsync_tree(stage)
    cwd = _cwd_inside(target)
    _swap(stage, target)
    _fsync_dir(target.parent)
    if cwd is not None:
        _reenter(cwd, target)


def _link_missing(old: Path, stage: Path) -> None:
    """Hard-link (or copy) each entry of ``old`` that ``stage`` does not hold into ``stage``."""
    for entry in os.scandir(old):
        dst = stage / entry.name
        if os.path.lexists(dst):
            continue
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), dst)
        elif entry.is_dir():
            shutil.copytree(entry.path, dst, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry.path, dst)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # a filesystem without hard links
        shutil.copy2(src, dst)


def _fsync_tree(root: Path) -> None:
    """Flush every file and folder under ``root`` to disk before it becomes visible."""
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: use Linux's atomic exchange of two names when the filesystem supports it (the
#: two-rename fallback is what other systems get; tests switch it off to cover both)
USE_EXCHANGE = sys.platform == "linux"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _swap(stage: Path, target: Path) -> None:
    """Put ``stage`` at ``target``; the old folder (if any) is deleted afterwards."""
    if not target.exists():
        os.rename(stage, target)
        return
    if _exchange(stage, target):  # stage now holds the old folder; the caller removes it
        return
    aside = _new_dir_beside(target, "old")
    os.rename(target, aside)  # over the empty placeholder: a crash from here on is undone
    os.rename(stage, target)  # by recover_output, which restores the old folder
    shutil.rmtree(aside, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths with ``renameat2``; False where it is unavailable."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _renameat2() -> Callable[..., int] | None:
    return _libc_renameat2() if USE_EXCHANGE else None


@functools.cache
def _libc_renameat2() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # an older C library
        return None


def _cwd_inside(target: Path) -> Path | None:
    """This process's working directory if it lies in ``target`` (the swap moves it away)."""
    try:
        cwd = Path.cwd()
    except FileNotFoundError:
        return None
    return cwd if cwd.is_relative_to(target) else None


def _reenter(cwd: Path, target: Path) -> None:
    """Move the working directory into the new folder (the old one is being deleted)."""
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir(target)


# ---------------------------------------------------------------- reading input tables


def iter_jsonl(path: str | Path, *, what: str = "a JSON object per line", hint: str = "") -> Iterator[tuple[int, dict]]:
    """Yield ``(line number, record)`` of a JSONL file; blank lines are skipped.

    A malformed line or a non-object raises :class:`InputError` naming file and line
    (``hint`` is appended to the malformed-JSON message, e.g. "partial log?").
    """
    path = Path(path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)", path=path, line=lineno
                ) from None
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
        if not isinstance(df.index, pd.RangeIndex):  # pandas made the extra leading fields an index
            raise InputError(
                f"more fields than the header's {len(df.columns)} names",
                path=path,
                line=_first_long_row(path, len(df.columns)),
            )
        df["_line"] = np.arange(len(df)) + 2  # header is line 1
        return df, "csv"
    if suffix in (".parquet", ".pq"):
        df = read_parquet(path)
        df["_line"] = np.arange(len(df)) + 1
        return df, "parquet"
    raise InputError(f"unknown format {suffix!r}; expected .parquet, .jsonl or .csv", path=path)


def write_parquet(frame: pd.DataFrame, path: str | Path) -> None:
    """``frame`` as a Parquet file at ``path`` (no index), an ``OSError`` naming ``path``: pyarrow's
    own write errors (a full disk: "Error writing bytes to file ... [errno 28]") name no file.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_parquet(pd.DataFrame({"a": [1]}), f"{tmp}/t.parquet")
    ...     read_parquet(f"{tmp}/t.parquet")["a"].tolist()
    [1]
    """
    try:
        frame.to_parquet(path, index=False)
    except OSError as exc:
        raise _named(exc, path) from None


def read_parquet(path: str | Path) -> pd.DataFrame:
    """A Parquet file as a DataFrame, checked whole: a damaged file is one :class:`InputError`.

    Besides what ``pd.read_parquet`` refuses, a damaged page can leave invalid UTF-8 in a
    string column that would only fail when a value is used; Arrow's full validation finds it here.

    Examples
    --------
    >>> read_parquet("runs/v1/trials.parquet").shape  # doctest: +SKIP
    (3000, 12)
    """
    try:
        pq.read_table(path).validate(full=True)
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises many types for corrupt files
        raise InputError(f"unreadable Parquet ({type(exc).__name__}: {exc})", path=path) from None


def read_hdf5[T](path: str | Path, load: Callable[[Path], T], *, what: str) -> T:
    """``load(path)`` of a NetCDF / HDF5 file; a damaged file is one :class:`InputError` naming it.

    h5py raises many types for a damaged file (``KeyError`` and ``RuntimeError`` among them),
    and h5netcdf's half-opened file then fails again when it is garbage-collected, which
    Python prints as "Exception ignored in ..." with a traceback; that cleanup runs here,
    silenced, so a bad file gives only the one line.

    Examples
    --------
    >>> import xarray as xr
    >>> read_hdf5("README.md", lambda p: xr.open_dataset(p, engine="h5netcdf"), what="NetCDF")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bayesrc.errors.InputError: README.md: unreadable NetCDF (...)
    """
    path = Path(path)
    hook = sys.unraisablehook
    sys.unraisablehook = lambda _: None
    try:
        try:
            return load(path)
        except Exception as exc:  # noqa: BLE001 - see above: any error of the HDF5 stack means a file it cannot read
            message = f"unreadable {what} ({type(exc).__name__}: {exc})"
        gc.collect()  # the half-opened file goes now, while its second failure is silenced
    finally:
        sys.unraisablehook = hook
    raise InputError(message, path=path)  # outside the except block: the HDF5 error is not kept alive as its context


def _first_long_row(path: Path, n_names: int) -> int | None:
    """The first CSV line with more than ``n_names`` fields (None if there is none)."""
    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        for row in reader:
            if len(row) > n_names:
                return reader.line_num
    return None


#: the ``format`` key of every run directory's ``run.json`` (collected, merged or written exact runs)
RUN_FORMAT = "bayesrc-run/1"


def write_run_record(
    run_dir: str | Path,
    status: str,
    pins: dict,
    info: dict | None = None,
    *,
    n_items_done: int | None = None,
    n_trials: int | None = None,
) -> None:
    """Write a run directory's ``run.json`` atomically: the one writer of the record that
    :func:`read_run_record` reads (collection, merge, exact runs); ``info`` and the counts are
    left out where a writer has none (a run that starts has no counts yet).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> write_run_record(d, "complete", {"sampling.k": 10}, {}, n_items_done=2, n_trials=20)
    >>> read_run_record(d)["n_trials"]
    20
    """
    record = {"format": RUN_FORMAT, "status": status, "pins": pins}
    if info is not None:
        record["info"] = info
    if n_items_done is not None:
        record |= {"n_items_done": n_items_done, "n_trials": n_trials}
    atomic_write_json(Path(run_dir) / "run.json", record)


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
                record = json.loads(c.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed run record ({exc.msg})", path=c, line=exc.lineno) from None
            except UnicodeDecodeError as exc:
                raise InputError(f"run record is not UTF-8 text ({exc.reason} at byte {exc.start})", path=c) from None
            # every reader of a run looks up record["pins"][...]: check the two levels once, here
            if not isinstance(record, dict):
                raise InputError(f"expected a JSON object (a run record), got {type(record).__name__}", path=c)
            if not isinstance(record.get("pins", {}), dict):
                raise InputError(f"expected an object, got {json.dumps(record['pins'])}", path=c, field="pins")
            return record
    return None
