"""Typed results, the base: one protocol to save, load and show every analysis's output.

Every analysis the CLI writes is a :class:`Result` subclass that lives beside the code
that makes it and registers itself here with :func:`register`; :func:`bayesrc.load`
imports those modules and opens any result file or folder through :func:`open_result`:

=====================  ==============================================  ==========================================
main file              class                                           written by
=====================  ==============================================  ==========================================
``rci.json``           :class:`bayesrc.classical.RCIRun`               ``bayesrc rci`` / ``bayesrc demo``
``pairwise_rci.json``  :class:`bayesrc.classical.PairwiseRCI`          ``bayesrc rci --family``
``fit.json``           :class:`bayesrc.bayes.BayesFit`                 ``bayesrc fit``
``joint.json``         :class:`bayesrc.bayes.JointFit`                 ``bayesrc fit V1 V2 V3 ...``
``loo_compare.json``   :class:`bayesrc.bayes.ModelComparison`          ``bayesrc fit --compare``
``switch.json``        :class:`bayesrc.switch.SwitchResult`            ``bayesrc switch``
``power.json``         :class:`bayesrc.power.PowerReport`              ``bayesrc power``
``plan.json``          :class:`bayesrc.power.planner.KNPlan`           ``bayesrc plan``
``compare.json``       :class:`bayesrc.compare.CompareResult`          ``bayesrc compare``
``truth.json``         :class:`bayesrc.truth.TruthResult`              ``bayesrc truth``
``sensitivity.json``   :class:`bayesrc.sensitivity.SensitivityTable`   ``bayesrc sensitivity``
``run.json``           :class:`bayesrc.data.CollectedRun`              ``bayesrc collect`` / ``bayesrc merge``
=====================  ==============================================  ==========================================

A result is its JSON **payload** (kept whole: keys another version of an analysis adds
flow through load and save untouched), named **tables** (pandas DataFrames, stored as
Parquet next to the JSON) and, for a Bayesian fit, the **posterior** (an ArviZ
DataTree, ``posterior.nc``). Subclasses only add typed accessors, ``summary()`` and
plots. ``to_dict()`` / ``from_dict()`` and ``save(dir)`` / ``load(dir)`` round-trip
exactly: the payload is normalised to strict JSON (NaN -> None, tuples -> lists) when the
result is made, so an object equals its reloaded copy. Every payload carries
``"format": FORMAT`` (files written before it, without the key, read as format 1).

This module sits at the bottom of the package's layers (above :mod:`bayesrc.errors`, :mod:`bayesrc.io` and
:mod:`bayesrc.fields`, whose :func:`~bayesrc.fields.check_fields` :meth:`Result.load` runs on every payload only):
it imports no analysis code.

Examples
--------
>>> import bayesrc
>>> run = bayesrc.load("runs/demo")          # doctest: +SKIP
>>> run.summary()                             # doctest: +SKIP
>>> run.save("copy"); bayesrc.load("copy") == run   # doctest: +SKIP
True
"""

from __future__ import annotations

import copy
import errno
import html
import json
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import xarray as xr

from bayesrc.errors import InputError
from bayesrc.fields import check_fields
from bayesrc.io import atomic_write_json, dumps_json, read_hdf5, staged_output, write_parquet
from bayesrc.io import read_parquet as io_read_parquet

#: version of the result payloads' layout (the ``format`` key every payload carries)
FORMAT = 1

#: main file name -> result class (filled by :func:`register`)
REGISTRY: dict[str, type[Result]] = {}

#: main files that may also stand in a sub-folder of a run directory (``NAME/fit.json``)
NESTED_MAIN_FILES = ("fit.json",)


def register(cls: type[Result]) -> type[Result]:
    """Class decorator: make ``cls.main_file`` loadable by :func:`open_result` / :func:`bayesrc.load`."""
    REGISTRY[cls.main_file] = cls
    return cls


def _normalise(obj: Any) -> Any:
    """The payload as it reads back from disk (strict JSON: NaN/inf -> None, numpy -> Python)."""
    return json.loads(dumps_json(obj))


def with_format(payload: dict) -> dict:
    """``payload`` with ``"format"`` first (the one it has is kept).

    Examples
    --------
    >>> with_format({"pairs": []})
    {'format': 1, 'pairs': []}
    """
    return {"format": payload.get("format", FORMAT), **payload}


#: room an HDF5 file needs beyond its arrays' bytes (metadata, chunk indexes): 2% and 1 MiB
HDF5_OVERHEAD = (0.02, 1 << 20)


def write_posterior(tree: Any, path: Path) -> None:
    """Write a posterior DataTree as NetCDF-4 at ``path``; a disk without room for it is refused first.

    Why the check: h5py crashes the process (SIGSEGV) when the disk fills part-way through its
    write. The file holds the arrays uncompressed, so less free space than their bytes (plus
    :data:`HDF5_OVERHEAD`) is one ``OSError`` (ENOSPC) naming ``path``, before anything is written.
    Serialising to memory instead would double a large fit's memory (1.4 GB at 12,000 items).

    Examples
    --------
    >>> import tempfile, numpy as np, xarray as xr
    >>> tree = xr.DataTree.from_dict({"/posterior": xr.Dataset({"a": ("x", np.arange(3.0))})})
    >>> path = Path(tempfile.mkdtemp()) / "posterior.nc"
    >>> write_posterior(tree, path)
    >>> path.read_bytes()[1:4]  # the HDF5 signature
    b'HDF'
    """
    need = sum(v.nbytes for node in tree.subtree for v in node.dataset.variables.values())
    if shutil.disk_usage(path.parent).free < need * (1 + HDF5_OVERHEAD[0]) + HDF5_OVERHEAD[1]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    tree.to_netcdf(path, engine="h5netcdf")


class Result:
    """Base class: payload dict + named tables + optional posterior; save / load / equality.

    Parameters
    ----------
    payload : the JSON-able record of the analysis (what ``main_file`` holds).
    tables : named DataFrames, each saved as ``table_files[name]`` (default ``NAME.parquet``).
    posterior : an ``xarray.DataTree`` (saved as ``posterior.nc``), or None.

    Examples
    --------
    >>> rep = Result({"answer": 42})
    >>> Result.from_dict(rep.to_dict()) == rep, rep.payload["format"]
    (True, 1)
    """

    main_file: ClassVar[str] = "result.json"
    kind: ClassVar[str] = "result"
    field_kinds: ClassVar[dict[str, str]] = {}  # payload fields its readers use, checked by load (check_fields)
    table_names: ClassVar[tuple[str, ...]] = ()  # the tables a saved result may hold

    def __init__(self, payload: dict, tables: dict | None = None, posterior: Any = None) -> None:
        self.payload: dict = _normalise(with_format(payload) if isinstance(payload, dict) else payload)
        self.tables: dict = dict(tables or {})
        self.posterior = posterior

    # ------------------------------------------------------------------ storage
    def table_file(self, name: str) -> str:
        """File name of table ``name`` inside the result folder."""
        return f"{name}.parquet"

    def table_names_on_disk(self, folder: Path) -> dict[str, Path]:
        """Those of :attr:`table_names` in ``folder`` (a subclass whose names depend on its payload overrides)."""
        return {n: folder / self.table_file(n) for n in self.table_names if (folder / self.table_file(n)).is_file()}

    def required_columns(self, name: str) -> tuple[str, ...]:
        """Columns table ``name`` must hold when read back: those its summaries, figures and the
        report read (a file without one is refused by :meth:`load`, naming the file and column)."""
        return ()

    def to_dict(self) -> dict:
        """A deep copy of the payload plus tables as records with their dtypes (``from_dict`` inverts it)."""
        out = copy.deepcopy(self.payload)
        if self.tables:
            out["_tables"] = {
                n: {**_normalise(t.to_dict(orient="split", index=False)), "dtypes": [str(d) for d in t.dtypes]}
                for n, t in self.tables.items()
            }
        return out

    @classmethod
    def from_dict(cls, d: dict, posterior: Any = None) -> Result:
        """Rebuild a result from :meth:`to_dict` output."""
        d = copy.deepcopy(d)
        tables = {n: _frame_of(t) for n, t in d.pop("_tables", {}).items()}
        return cls(d, tables, posterior)

    def save(self, out_dir: str | Path) -> Path:
        """Write the result folder (all files together or none: :func:`bayesrc.io.staged_output`)."""
        out_dir = Path(out_dir)
        with staged_output(out_dir) as stage:
            self.write_into(stage)
        return out_dir

    def write_into(self, stage: Path) -> None:
        """Write every file of the result into ``stage`` (a staging folder the caller commits)."""
        atomic_write_json(stage / self.main_file, self.payload)
        for name, frame in self.tables.items():
            frame = frame.copy()
            frame.attrs = self.table_attrs(name)  # kept in the Parquet metadata (status, ...)
            write_parquet(frame, stage / self.table_file(name))
        if self.posterior is not None:
            dt = self.posterior.copy()
            dt.attrs.update(self.posterior_attrs())
            write_posterior(dt, stage / "posterior.nc")
        self._save_extra(stage)

    def _save_extra(self, stage: Path) -> None:
        """Hook for side files (figures, Markdown) a subclass writes with its result."""

    def posterior_attrs(self) -> dict:
        return {}

    def table_attrs(self, name: str) -> dict:
        return {}

    @classmethod
    def found_in(cls, folder: Path) -> bool:
        """True if ``folder`` holds this result (its main file; subclasses may ask for more)."""
        return (folder / cls.main_file).is_file()

    @classmethod
    def owns(cls, file_name: str) -> bool:
        """True if ``file_name`` is one of this result's files that :func:`open_result` may be given."""
        return file_name == cls.main_file

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """Read a result folder (or its main file) written by :meth:`save` or the CLI."""
        path = Path(path)
        folder = path.parent if path.is_file() else path
        main = folder / cls.main_file
        if not main.is_file():
            raise InputError(f"no {cls.main_file} here", path=folder)
        payload = read_json(main)
        if not isinstance(payload, dict):
            raise InputError(f"expected a JSON object, got {type(payload).__name__}", path=main)
        check_fields(payload, cls.field_kinds, main)
        obj = cls(payload)
        tables = obj.read_tables(folder)
        if tables:
            obj.tables = tables
        post = folder / "posterior.nc"
        if post.is_file() and cls.has_posterior:
            obj.posterior = read_posterior(post)
        obj.check_files_agree(folder)
        obj.path = folder
        return obj

    def read_tables(self, folder: Path) -> dict[str, pd.DataFrame]:
        """The tables :meth:`load` reads from ``folder``: each of :meth:`table_names_on_disk`, checked for its
        :meth:`required_columns` (a subclass whose data has a validated reader of its own overrides this)."""
        return {
            n: _with_columns(read_parquet(p), self.required_columns(n), p)
            for n, p in self.table_names_on_disk(folder).items()
        }

    def check_files_agree(self, folder: Path) -> None:
        """Hook: raise :class:`InputError` where the loaded files contradict each other (e.g. one
        copied in from another run), which each file's own checks cannot see."""

    has_posterior: ClassVar[bool] = False
    path: Path | None = None

    # ------------------------------------------------------------------ comparison & display
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        if not same_payload(self.payload, other.payload):
            return False
        if self.tables.keys() != other.tables.keys():
            return False
        if not all(same_frame(t, other.tables[n]) for n, t in self.tables.items()):
            return False
        if (self.posterior is None) != (other.posterior is None):
            return False
        if self.posterior is not None:
            a, b = self.posterior, other.posterior
            for g in ("posterior", "sample_stats"):
                if (g in a) != (g in b) or (g in a and not a[g].to_dataset().equals(b[g].to_dataset())):
                    return False
        return True

    __hash__ = None  # type: ignore[assignment]

    #: The summary's rows (its ``metric`` column) a notebook shows first, beside every warning (:func:`headline_rows`)
    headline_metrics: ClassVar[tuple[str, ...]] = ()

    def summary(self):
        """A tidy DataFrame of the headline numbers (subclasses define it)."""
        return pd.DataFrame({"key": list(self.payload)})

    def _headline(self) -> str:
        return ""

    def __repr__(self) -> str:
        head = self._headline()
        return f"<{type(self).__name__}{': ' + head if head else ''}>"

    def _repr_html_(self) -> str:
        """The headline, the summary's headline rows (:func:`headline_rows`) and the whole summary folded below."""
        table = self.summary()
        short = headline_rows(table, self.headline_metrics)
        out = f"<p><b>{html.escape(type(self).__name__)}</b> {html.escape(self._headline())}</p>" + summary_html(short)
        if len(short) < len(table):
            out += f"<details><summary>all {len(table)} rows</summary>{summary_html(table)}</details>"
        return out


#: A text cell longer than this is printed as a numbered note below the table (:func:`summary_text`)
SUMMARY_CELL_MAX = 60
#: A summary without headline metrics shows this many of its first rows in a notebook, the rest folded below
REPR_HEAD_ROWS = 12


def headline_rows(table: pd.DataFrame, metrics: tuple[str, ...] = ()) -> pd.DataFrame:
    """The rows of a summary a reader looks at first: those whose ``metric`` is one of ``metrics`` or a warning, or
    without ``metrics`` (or a ``metric`` column) the first :data:`REPR_HEAD_ROWS`.

    Examples
    --------
    >>> t = pd.DataFrame({"metric": ["items", "S_diff", "improved", "warning"], "value": [40, 0.1, 3, "few items"]})
    >>> headline_rows(t, ("items", "improved"))["metric"].tolist()
    ['items', 'improved', 'warning']
    """
    if metrics and "metric" in table.columns:
        return table[table["metric"].isin((*metrics, "warning"))]
    return table.head(REPR_HEAD_ROWS)


def headline_text(result: Result, path: str | Path | None = None) -> str:
    """What the CLI prints of a result it wrote: the summary's headline rows and every warning (:func:`headline_rows`)
    as :func:`summary_text`, then how many rows that is and where to read them all (``bayesrc show PATH``). A result
    without :attr:`Result.headline_metrics` prints its whole summary.

    Examples
    --------
    >>> class Demo(Result):
    ...     headline_metrics = ("items",)
    ...     def summary(self):
    ...         return pd.DataFrame({"metric": ["items", "S_diff", "warning"], "value": [40, 0.1, "few items"]})
    >>> print(headline_text(Demo({}), "out/rci.json"))
     metric     value
      items        40
    warning few items
    (2 of 3 rows; all of them: bayesrc show out/rci.json)
    """
    table = result.summary()
    if not result.headline_metrics:
        return summary_text(table)
    short = headline_rows(table, result.headline_metrics)
    if len(short) == len(table):
        return summary_text(table)
    where = f": bayesrc show {path}" if path is not None else ""
    return summary_text(short) + f"\n({len(short)} of {len(table)} rows; all of them{where})"


def _with_notes(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``table`` with each text cell over :data:`SUMMARY_CELL_MAX` characters replaced by ``[1]``, ``[2]``, ...,
    and those texts in order."""
    notes: list[str] = []

    def note(v: Any) -> Any:
        if isinstance(v, str) and len(v) > SUMMARY_CELL_MAX:
            notes.append(v)
            return f"[{len(notes)}]"
        return v

    return table.map(note), notes


def summary_text(table: pd.DataFrame, **to_string: Any) -> str:
    """A summary table as the CLI prints it: text cells over :data:`SUMMARY_CELL_MAX` characters (warnings,
    sentences) replaced by ``[1]``, ``[2]``, ... and printed in full below it, one line each, so one long
    warning does not pad every row to its width. ``to_string``: :meth:`pandas.DataFrame.to_string`'s options.

    Examples
    --------
    >>> t = pd.DataFrame({"metric": ["items", "warning"], "value": [40, "x" * 70]})
    >>> print(summary_text(t))
     metric value
      items    40
    warning   [1]
    [1] xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
    """
    shown, notes = _with_notes(table)
    return "\n".join([shown.to_string(**{"index": False} | to_string), *(f"[{i}] {v}" for i, v in enumerate(notes, 1))])


def summary_html(table: pd.DataFrame) -> str:
    """A summary table as a notebook shows it: :func:`summary_text`'s long cells as numbered notes below the table.

    Examples
    --------
    >>> t = pd.DataFrame({"metric": ["warning"], "value": ["x" * 70]})
    >>> "<td>[1]</td>" in summary_html(t) and "<ol><li>xxx" in summary_html(t)
    True
    """
    shown, notes = _with_notes(table)
    items = "".join(f"<li>{html.escape(v)}</li>" for v in notes)
    return shown.to_html(index=False, na_rep="") + (f"<ol>{items}</ol>" if notes else "")


def same_payload(a: Any, b: Any) -> bool:
    """True if two JSON payloads hold the same keys and values (key order aside).

    Examples
    --------
    >>> same_payload({"a": 1, "b": None}, {"b": None, "a": 1})
    True
    """
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def same_frame(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """True if two tables hold the same columns, in order, and values (the index is not compared).

    Examples
    --------
    >>> same_frame(pd.DataFrame({"x": [1, 2]}), pd.DataFrame({"x": [1, 2]}, index=[5, 6]))
    True
    """
    return list(a.columns) == list(b.columns) and a.reset_index(drop=True).equals(b.reset_index(drop=True))


def _frame_of(records: dict) -> pd.DataFrame:
    """A table from :meth:`Result.to_dict`'s records, its columns' dtypes restored (nullable
    strings, booleans and integers read back as JSON values otherwise)."""
    frame = pd.DataFrame(records["data"], columns=records["columns"])
    dtypes = records.get("dtypes")  # absent in records written before dtypes were kept
    return frame if dtypes is None else frame.astype(dict(zip(frame.columns, dtypes)))


def read_json(path: Path) -> Any:
    """A JSON file; malformed JSON is an :class:`InputError` naming the file and line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=path, line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=path) from None


def read_parquet(path: Path) -> pd.DataFrame:
    """A Parquet file; an unreadable one is an :class:`InputError` naming the file."""
    return io_read_parquet(path)


def _with_columns(frame: pd.DataFrame, columns: tuple[str, ...], path: Path) -> pd.DataFrame:
    """``frame`` if it holds every one of ``columns``; else an :class:`InputError` naming ``path`` and the first
    missing column.

    Examples
    --------
    >>> _with_columns(pd.DataFrame({"a": [1]}), ("a", "b"), Path("t.parquet"))
    Traceback (most recent call last):
    bayesrc.errors.InputError: t.parquet: field 'b': lacks column 'b' (rerun the analysis with this bayesrc)
    """
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            f"lacks column {missing[0]!r} (rerun the analysis with this bayesrc)", path=path, field=missing[0]
        )
    return frame


def read_posterior(path: str | Path):
    """``posterior.nc`` as an xarray DataTree (the ArviZ 1.x InferenceData), read into memory."""

    def load(p: Path):
        with xr.open_datatree(p, engine="h5netcdf") as dt:
            return dt.load()

    return read_hdf5(path, load, what="posterior")


def _result_class(path: Path) -> type[Result]:
    for cls in REGISTRY.values():
        if cls.owns(path.name):
            return cls
    raise InputError(f"not a bayesrc result file (expected one of {', '.join(sorted(REGISTRY))})", path=path)


def open_result(path: str | Path) -> Result | dict[str, Result]:
    """Open a result file or folder with the classes registered so far (see :func:`bayesrc.load`,
    which registers them all first).

    Examples
    --------
    >>> open_result("no/such/folder")
    Traceback (most recent call last):
    ...
    bayesrc.errors.InputError: no/such/folder: no such file or folder
    """
    path = Path(path)
    if path.is_file():
        return _result_class(path).load(path.parent)
    if not path.is_dir():
        raise InputError("no such file or folder", path=path)
    found = {name: cls.load(path) for name, cls in REGISTRY.items() if cls.found_in(path)}
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        for name in NESTED_MAIN_FILES:
            if name in REGISTRY and (sub / name).is_file():
                found[f"{sub.name}/{name}"] = REGISTRY[name].load(sub)
    if not found:
        raise InputError(f"no result files ({', '.join(sorted(REGISTRY))}) in this folder", path=path)
    return next(iter(found.values())) if len(found) == 1 else found
