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

Bayesian files of pair NAME are looked up as ``NAME/fit.json``, ``fit_NAME.json``,
then plain ``fit.json`` (used for the pair named in its ``pair`` key, or for the
only / first pair); ``items.parquet`` and ``posterior.nc`` follow the same rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.errors import InputError


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=path, line=exc.lineno) from None


def read_parquet(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises many types for corrupt files
        raise InputError(f"unreadable Parquet ({type(exc).__name__})", path=path) from None


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
    truth: dict | None = None
    truth_replicates: pd.DataFrame | None = None


def _first(*paths: Path) -> Path | None:
    return next((p for p in paths if p.is_file()), None)


def load_run(run_dir: str | Path) -> Run:
    """Read every known result file of a run directory (absent files are fine)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise InputError("not a run directory", path=root)
    files: dict[str, Path] = {}
    rci = read_json(root / "rci.json") if (root / "rci.json").is_file() else None
    if rci is not None:
        files["rci.json"] = root / "rci.json"
        if not isinstance(rci, dict) or not isinstance(rci.get("pairs"), dict):
            raise InputError("expected an object with 'pairs' (output of bayesrc rci)", path=root / "rci.json", field="pairs")
    names = list((rci or {}).get("pairs", {}))
    plain_fit = read_json(root / "fit.json") if (root / "fit.json").is_file() else None
    if not names:
        names = [str((plain_fit or {}).get("pair") or "comparison")] if plain_fit is not None else []
    comps: dict[str, Comparison] = {}
    for i, name in enumerate(names):
        c = Comparison(name=name, rci=(rci or {}).get("pairs", {}).get(name))
        p = root / f"items_{name}.parquet"
        if p.is_file():
            c.items, c.files["items"] = read_parquet(p), p
        fit_path = _first(root / name / "fit.json", root / f"fit_{name}.json")
        owner = (plain_fit or {}).get("pair")
        plain_is_mine = plain_fit is not None and (owner == name or (owner is None and i == 0) or len(names) == 1)
        sub = root / name if (root / name / "fit.json").is_file() else None
        if fit_path is not None:
            c.fit, c.files["fit"] = read_json(fit_path), fit_path
        elif plain_is_mine:
            c.fit, c.files["fit"] = plain_fit, root / "fit.json"
        if c.fit is not None:
            base = sub or root
            items_p = _first(base / "items.parquet", root / f"items_bayes_{name}.parquet")
            if items_p is not None:
                c.bayes_items, c.files["bayes_items"] = read_parquet(items_p), items_p
            post = _first(base / "posterior.nc", root / f"posterior_{name}.nc")
            if post is not None:
                c.posterior_path = c.files["posterior"] = post
        comps[name] = c
    run = Run(path=root, comparisons=comps, rci=rci, files=files)
    for attr, fname in (("run_record", "run.json"), ("switch", "switch.json"), ("power", "power.json"), ("truth", "truth.json")):
        p = root / fname
        if p.is_file():
            setattr(run, attr, read_json(p))
            files[fname] = p
    for csv in sorted(root.glob("sensitivity_*.csv")):
        name = csv.stem[len("sensitivity_"):]
        try:
            table = pd.read_csv(csv)
        except Exception as exc:
            raise InputError(f"unreadable CSV ({type(exc).__name__})", path=csv) from None
        png = csv.with_suffix(".png")
        run.sensitivity[name] = (table, png if png.is_file() else None)
        files[csv.name] = csv
    if run.truth is not None and (root / "truth_replicates.parquet").is_file():
        run.truth_replicates = read_parquet(root / "truth_replicates.parquet")
        files["truth_replicates.parquet"] = root / "truth_replicates.parquet"
    if not comps and run.switch is None and run.power is None and not run.sensitivity and run.truth is None:
        raise InputError("no result files (rci.json, fit.json, switch.json, power.json, truth.json or sensitivity_*.csv) in this run directory", path=root)
    return run
