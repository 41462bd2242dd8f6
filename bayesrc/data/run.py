"""A collected run directory: its record, pins and data, read once and validated (:class:`CollectedRun`).

``bayesrc collect`` (and ``bayesrc merge``) write a run directory whose record is
``run.json`` (pins, info, status) and whose data is ``trials.parquet`` (K samples per item)
or, for ``--engine exact``, ``dist.parquet`` and ``items_exact.parquet``. Registered like
every other output, so :func:`bayesrc.load` opens one. Its tables come through the data
layer's readers: trials with the checks of :func:`bayesrc.data.load_trials` (the file's
extra columns kept), an exact run's with those of :func:`bayesrc.data.load_exact`, whose
:class:`~bayesrc.data.ExactRun` view of the same tables is :attr:`CollectedRun.exact`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bayesrc.data.exact import ExactRun, read_exact_tables
from bayesrc.data.trials import load_trials
from bayesrc.errors import InputError
from bayesrc.results import Result, register

#: the data tables a complete run directory holds (one kind or the other)
RUN_TABLES = ("trials", "dist", "items_exact")


@register
class CollectedRun(Result):
    """A complete run directory: its record and its tables (``trials``, or ``dist`` and ``items_exact``).

    A run still in progress (parts only) is not a result yet: :func:`bayesrc.load` does not
    list it. A damaged table is the one-line :class:`~bayesrc.errors.InputError` that
    :func:`bayesrc.data.load_trials` or :func:`bayesrc.data.load_exact` gives for it.

    Examples
    --------
    >>> import bayesrc
    >>> from bayesrc.datasets import path
    >>> run = bayesrc.load(path("exact_gemma/q4"))  # a bundled exact run
    >>> sorted(run.tables), run.engine, run.exact.n_items
    (['dist', 'items_exact'], 'exact', 300)
    """

    main_file = "run.json"
    kind = "run"
    table_names = RUN_TABLES

    @classmethod
    def found_in(cls, folder: Path) -> bool:
        # run.json alone (a run in progress, or the record of its runs an older `bayesrc demo` wrote) is no result
        return super().found_in(folder) and any((folder / f"{t}.parquet").is_file() for t in RUN_TABLES)

    @classmethod
    def owns(cls, file_name: str) -> bool:
        return file_name == cls.main_file or file_name in {f"{t}.parquet" for t in RUN_TABLES}

    def read_tables(self, folder: Path) -> dict[str, pd.DataFrame]:
        on_disk = self.table_names_on_disk(folder)
        tables = {}
        if "trials" in on_disk:  # the reader's line numbers (for its messages) are no data
            tables["trials"] = load_trials(on_disk["trials"], extra_columns=True).drop(columns="_line")
        if "dist" in on_disk or "items_exact" in on_disk:
            _, tables["items_exact"], tables["dist"] = read_exact_tables(folder)
        return {t: tables[t] for t in RUN_TABLES if t in tables}

    pins = property(lambda self: dict(self.payload.get("pins") or {}))
    status = property(lambda self: self.payload.get("status"))  # "complete", or "failed" for a run that stopped

    @property
    def engine(self) -> str:
        """The engine that wrote the run (``fast``, ``naive``, ``exact``, ``server``, ...)."""
        pins = self.pins
        return str(pins.get("runtime.engine") or pins.get("engine") or ("exact" if "dist" in self.tables else "fast"))

    @property
    def label(self) -> str:
        return str(self.pins.get("model.label", ""))

    @property
    def exact(self) -> ExactRun:
        """An exact run's view for the truth code (:func:`bayesrc.data.load_exact`'s, from the tables read here)."""
        if "items_exact" not in self.tables or "dist" not in self.tables:
            raise InputError("is not an exact run (no dist.parquet and items_exact.parquet)", path=self.path)
        return ExactRun.from_tables(
            Path(self.path or "."), self.tables["items_exact"], self.tables["dist"], dict(self.payload)
        )

    def summary(self) -> pd.DataFrame:
        rows = [("label", self.label), ("engine", self.engine), ("status", self.status)]
        rows += [(f"{name} rows", len(t)) for name, t in self.tables.items()]
        rows += sorted((k, v) for k, v in self.pins.items() if k.startswith(("sampling.", "items.")) and v is not None)
        return pd.DataFrame([(k, str(v)) for k, v in rows], columns=["metric", "value"])

    def _headline(self) -> str:
        return f"{self.label or 'run'} ({self.engine}, {self.status})"
