"""Reading a run directory: whichever result files exist, per comparison.

A run directory may hold (each optional; a report shows what is there):

=========================  ====================================================
``rci.json``               ``bayesrc rci`` / ``bayesrc demo``: every pair's classical analysis
``items_NAME.parquet``     per-item RCI table of pair NAME
``fit.json``               ``bayesrc fit``: diagnostics, selection, crosscheck, domain_shift
``items.parquet``          ``bayesrc fit``: per-item posterior summaries
``posterior.nc``           ``bayesrc fit``: the posterior (InferenceData / DataTree)
``switch.json``            ``bayesrc switch``: switch matrices and factor model
``power.json``             ``bayesrc power``: resolution diagnostics
``run.json``               collection: the run record with its pins
``sensitivity_NAME.csv``   ``bayesrc sensitivity``: one table (+ ``.png`` figure) per analysis
``truth.json``             ``bayesrc truth``: real-model truth (+ ``truth_replicates.parquet``)
=========================  ====================================================

Every file is opened through its typed result class (:mod:`bayesrc.results`):
``Comparison.pair`` is a :class:`~bayesrc.results.PairResult`, ``Comparison.bayes`` a
:class:`~bayesrc.bayes.BayesFit`, ``Run.switch_result`` a :class:`~bayesrc.results.SwitchResult`,
``Run.power_result`` a :class:`~bayesrc.results.PowerReport`; the ``rci`` / ``fit`` / ``switch``
/ ``power`` dicts are those objects' payloads (kept for the section builders).

Bayesian files of pair NAME are looked up as ``NAME/fit.json`` (with ``items.parquet``
and ``posterior.nc`` beside it), then plain ``fit.json`` (used for the pair named in its ``pair`` key, or for the
only / first pair); ``items.parquet`` and ``posterior.nc`` follow the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.errors import InputError
from bayesrc.results import _read_json as read_json  # noqa: E402,F401
from bayesrc.results import _read_parquet as read_parquet


@dataclass
class Comparison:
    """Everything the run directory holds about one version pair."""

    name: str
    rci: dict | None = None
    items: pd.DataFrame | None = None
    fit: dict | None = None
    bayes_items: pd.DataFrame | None = None
    posterior_path: Path | None = None
    files: dict[str, Path] = field(default_factory=dict)
    pair: Any = None  # bayesrc.results.PairResult
    bayes: Any = None  # bayesrc.bayes.BayesFit (posterior read lazily from posterior_path)

    @property
    def versions(self) -> tuple[str, str]:
        for src in (self.rci, self.fit):
            if src and src.get("versions"):
                v = src["versions"]
                return str(v[0]), str(v[1])
        return "v1", "v2"


@dataclass
class Run:
    """A run directory's files, read once."""

    path: Path
    comparisons: dict[str, Comparison]
    rci: dict | None = None
    run_record: dict | None = None
    switch: dict | None = None
    power: dict | None = None
    sensitivity: dict[str, tuple[pd.DataFrame, Path | None]] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    rci_result: Any = None  # bayesrc.results.RCIRun
    switch_result: Any = None  # bayesrc.results.SwitchResult
    power_result: Any = None  # bayesrc.results.PowerReport
    truth: dict | None = None
    truth_replicates: pd.DataFrame | None = None


def _load_fit(cls, folder: Path):
    """The fit's record and tables; the posterior stays on disk until a section needs it."""
    obj = cls(read_json(folder / "fit.json"))
    obj.tables = {n: read_parquet(p) for n, p in obj.table_names_on_disk(folder).items()}
    obj.path = folder
    return obj


def load_run(run_dir: str | Path) -> Run:
    """Read every known result file of a run directory (absent files are fine)."""
    from bayesrc.bayes.fit import BayesFit
    from bayesrc.results import RCIRun

    root = Path(run_dir)
    if not root.is_dir():
        raise InputError("not a run directory", path=root)
    files: dict[str, Path] = {}
    rci_run = RCIRun.load(root) if (root / "rci.json").is_file() else None
    rci = rci_run.payload if rci_run is not None else None
    if rci_run is not None:
        files["rci.json"] = root / "rci.json"
    names = rci_run.names if rci_run is not None else []
    plain_fit = read_json(root / "fit.json") if (root / "fit.json").is_file() else None
    if not names:
        names = [str((plain_fit or {}).get("pair") or "comparison")] if plain_fit is not None else []
    comps: dict[str, Comparison] = {}
    for i, name in enumerate(names):
        c = Comparison(name=name)
        if rci_run is not None and name in rci_run.names:
            c.pair = rci_run[name]
            c.rci, c.items = c.pair.payload, c.pair.items
            if c.items is not None:
                c.files["items"] = root / f"items_{name}.parquet"
        fit_dir = root / name if (root / name / "fit.json").is_file() else None
        owner = (plain_fit or {}).get("pair")
        plain_is_mine = plain_fit is not None and (owner == name or (owner is None and i == 0) or len(names) == 1)
        if fit_dir is None and plain_is_mine:
            fit_dir = root
        if fit_dir is not None:
            c.bayes = _load_fit(BayesFit, fit_dir)
            c.fit, c.bayes_items, c.files["fit"] = c.bayes.payload, c.bayes.items, fit_dir / "fit.json"
            if c.bayes_items is not None:
                c.files["bayes_items"] = fit_dir / "items.parquet"
            if (fit_dir / "posterior.nc").is_file():
                c.posterior_path = c.files["posterior"] = fit_dir / "posterior.nc"
        comps[name] = c
    run = Run(path=root, comparisons=comps, rci=rci, files=files, rci_result=rci_run)
    if (root / "run.json").is_file():
        run.run_record, files["run.json"] = read_json(root / "run.json"), root / "run.json"
    from bayesrc.results import PowerReport, SwitchResult

    for attr, cls in (("switch", SwitchResult), ("power", PowerReport)):
        p = root / cls.main_file
        if p.is_file():
            res = cls.load(root)
            setattr(run, f"{attr}_result", res)
            setattr(run, attr, res.payload)
            files[cls.main_file] = p
    for csv in sorted(root.glob("sensitivity_*.csv")):
        name = csv.stem[len("sensitivity_") :]
        try:
            table = pd.read_csv(csv)
        except Exception as exc:
            raise InputError(f"unreadable CSV ({type(exc).__name__})", path=csv) from None
        png = csv.with_suffix(".png")
        run.sensitivity[name] = (table, png if png.is_file() else None)
        files[csv.name] = csv
    if (root / "truth.json").is_file():
        run.truth, files["truth.json"] = read_json(root / "truth.json"), root / "truth.json"
    if run.truth is not None and (root / "truth_replicates.parquet").is_file():
        run.truth_replicates = read_parquet(root / "truth_replicates.parquet")
        files["truth_replicates.parquet"] = root / "truth_replicates.parquet"
    if not comps and run.switch is None and run.power is None and not run.sensitivity and run.truth is None:
        raise InputError("no result files (rci.json, fit.json, switch.json, power.json, truth.json or sensitivity_*.csv) in this run directory", path=root)
    return run
