"""The sensitivity analyses' typed result: :class:`SensitivityTable` (``sensitivity.json`` +
``sensitivity_NAME.csv`` / ``.png``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes, atomic_write_json, atomic_write_text, staged_output
from bayesrc.plotting import to_png
from bayesrc.results import Result, register
from bayesrc.sensitivity.figure import sensitivity_figure


def sensitivity_payload(tables: dict[str, pd.DataFrame]) -> dict:
    """``sensitivity.json``'s record of the analyses' tables (one list of row records per analysis).

    Examples
    --------
    >>> import pandas as pd
    >>> sensitivity_payload({"k": pd.DataFrame({"k": [3], "detections": [4]})})
    {'analyses': {'k': [{'k': 3, 'detections': 4}]}}
    """
    return {"analyses": {n: t.to_dict(orient="records") for n, t in tables.items()}}


def _analyses(payload: dict) -> dict[str, list[dict]] | None:
    """The payload's ``analyses`` (none: an empty object), or None where it is not an object of lists of row objects.

    Examples
    --------
    >>> _analyses({"analyses": {"k": [{"k": 3}]}}), _analyses({"analyses": {"k": 3}})
    ({'k': [{'k': 3}]}, None)
    """
    analyses = payload.get("analyses", {}) if isinstance(payload, dict) else None
    if not isinstance(analyses, dict) or not all(
        isinstance(recs, list) and all(isinstance(r, dict) for r in recs) for recs in analyses.values()
    ):
        return None
    return analyses


@register
class SensitivityTable(Result):
    """``bayesrc sensitivity`` output: one table per analysis (``sensitivity_NAME.csv``, ``sensitivity.json``).

    Examples
    --------
    >>> import pandas as pd
    >>> t = SensitivityTable.from_tables({"threshold": pd.DataFrame({"z": [1.96, 2.58], "detections": [40, 22]})})
    >>> t.analyses, SensitivityTable.from_dict(t.to_dict()) == t
    (['threshold'], True)
    """

    main_file = "sensitivity.json"
    kind = "sensitivity"

    @classmethod
    def owns(cls, file_name: str) -> bool:
        return file_name == cls.main_file or (file_name.startswith("sensitivity_") and file_name.endswith(".csv"))

    def __init__(self, payload: dict, tables: dict | None = None, posterior: Any = None) -> None:
        super().__init__(payload, tables, posterior)
        if not self.tables:  # the tables are the payload's records; keep frames for use
            self.tables = {n: pd.DataFrame(recs) for n, recs in (_analyses(self.payload) or {}).items()}

    @classmethod
    def load(cls, path: str | Path) -> SensitivityTable:
        obj = super().load(path)
        if _analyses(obj.payload) is None:
            raise InputError(
                "expected an object of lists of row objects (output of bayesrc sensitivity)",
                path=Path(obj.path) / cls.main_file,
                field="analyses",
            )
        return obj

    @classmethod
    def from_tables(cls, tables: dict) -> SensitivityTable:
        return cls(sensitivity_payload(tables))

    def to_dict(self) -> dict:
        return copy.deepcopy(self.payload)

    @classmethod
    def from_dict(cls, d: dict, posterior: Any = None) -> SensitivityTable:
        return cls(copy.deepcopy(d))

    def save(self, out_dir: str | Path) -> Path:
        write_sensitivity(self.tables, out_dir)
        return Path(out_dir)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return json.dumps(self.payload, sort_keys=True) == json.dumps(other.payload, sort_keys=True)

    __hash__ = None  # type: ignore[assignment]

    @property
    def analyses(self) -> list[str]:
        return list(self.tables)

    def __getitem__(self, name: str):
        return self.tables[name]

    def summary(self):
        frames = [t.assign(analysis=t.get("analysis", n)) for n, t in self.tables.items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def plot(self, name: str | None = None):
        return sensitivity_figure(self.tables[name or self.analyses[0]])

    def _headline(self) -> str:
        return ", ".join(self.analyses)


def write_sensitivity(tables: dict[str, pd.DataFrame], out_dir) -> list:
    """``sensitivity_<name>.csv`` + ``.png`` per analysis and ``sensitivity.json``, all together.

    Examples
    --------
    >>> write_sensitivity(run_sensitivity_analyses(counts), "runs/sens")   # doctest: +SKIP
    """
    out_dir = Path(out_dir)
    written = []
    with staged_output(out_dir) as stage:
        for name, t in tables.items():
            atomic_write_text(stage / f"sensitivity_{name}.csv", t.to_csv(index=False))
            atomic_write_bytes(stage / f"sensitivity_{name}.png", to_png(sensitivity_figure(t)))
            written += [out_dir / f"sensitivity_{name}.csv", out_dir / f"sensitivity_{name}.png"]
        atomic_write_json(stage / "sensitivity.json", SensitivityTable.from_tables(tables).payload)
        written.append(out_dir / "sensitivity.json")
    return written
