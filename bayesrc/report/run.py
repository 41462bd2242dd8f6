"""Reading a run directory: whichever result files exist, per comparison, as typed results.

A run directory may hold (each optional; a report shows what is there):

=====================  ================================================  ==============================================
file                   written by                                        opened as
=====================  ================================================  ==============================================
``rci.json``           ``bayesrc rci`` / ``bayesrc demo``                :class:`~bayesrc.classical.RCIRun`
                       (+ ``items_NAME``)
``pairwise_rci.json``  ``bayesrc rci --family`` (+ its two tables)       :class:`~bayesrc.classical.PairwiseRCI`
``NAME/fit.json``      ``bayesrc fit``                                   :class:`~bayesrc.bayes.BayesFit`
                       (+ ``items.parquet``, ``posterior.nc``)
``switch.json``        ``bayesrc switch``                                :class:`~bayesrc.switch.SwitchResult`
``power.json``         ``bayesrc power``                                 :class:`~bayesrc.power.PowerReport`
``sensitivity.json``   ``bayesrc sensitivity``                           :class:`~bayesrc.sensitivity.SensitivityTable`
                       (+ ``sensitivity_NAME.png``)
``truth.json``         ``bayesrc truth``                                 :class:`~bayesrc.truth.TruthResult`
                       (+ ``truth_replicates.parquet``)
``family_truth.json``  ``bayesrc truth`` on three or more exact runs     :class:`~bayesrc.truth.FamilyTruth`
``loo_compare.json``   ``bayesrc fit --compare`` (+ ``MODEL/fit.json``)  :class:`~bayesrc.bayes.ModelComparison`
``run.json``           collection: the run record with its pins          :func:`bayesrc.io.read_run_record`
``demo.json``          ``bayesrc demo`` (collected): both runs' pins     a dict (``Run.demo_record``)
=====================  ================================================  ==============================================

Each file is read once, by its class's own reader (the same one :func:`bayesrc.load` uses);
the section builders use only those objects' attributes and tables.

Bayesian files of pair NAME are looked up as ``NAME/fit.json`` (with ``items.parquet``
and ``posterior.nc`` beside it), then plain ``fit.json`` (used for the pair named in its
``pair`` key, or for the only / first pair).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.bayes.fit_result import BayesFit
from bayesrc.bayes.joint_fit import JointFit
from bayesrc.bayes.model_comparison import ModelComparison
from bayesrc.classical.pairwise import PairwiseRCI
from bayesrc.classical.result import RCIRun
from bayesrc.errors import InputError
from bayesrc.io import read_run_record
from bayesrc.power.result import PowerReport
from bayesrc.results import read_json
from bayesrc.sensitivity.result import SensitivityTable
from bayesrc.switch.result import SwitchResult
from bayesrc.truth import FamilyTruth, TruthResult


@dataclass
class Comparison:
    """Everything the run directory holds about one version pair.

    Attributes
    ----------
    name : the pair's name (``rci.json``'s ``pairs`` key, or the fit folder).
    pair : its classical result (:class:`bayesrc.classical.PairResult`), or None.
    bayes : its Bayesian fit (:class:`bayesrc.bayes.BayesFit`, posterior included), or None.

    Examples
    --------
    >>> c = load_run("runs/demo").comparisons["minor"]  # doctest: +SKIP
    >>> c.pair.n_flagged, c.bayes.summary()  # doctest: +SKIP
    """

    name: str
    pair: Any = None  # bayesrc.classical.PairResult
    bayes: Any = None  # bayesrc.bayes.BayesFit
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def items(self) -> pd.DataFrame | None:
        """The RCI item table (``items_NAME.parquet``)."""
        return None if self.pair is None else self.pair.items

    @property
    def bayes_items(self) -> pd.DataFrame | None:
        """The fit's item table (``items.parquet``)."""
        return None if self.bayes is None else self.bayes.items

    @property
    def versions(self) -> tuple[str, str]:
        if self.pair is not None:
            return self.pair.versions
        if self.bayes is not None:
            try:
                return self.bayes.versions
            except InputError as exc:  # a fit's folder read on its own: name its fit.json
                raise InputError(exc.message, path=exc.path or self.files.get("fit"), field=exc.field) from None
        return "v1", "v2"


@dataclass
class Run:
    """A run directory's results, each read once through its typed class.

    Examples
    --------
    >>> run = load_run("runs/demo")  # doctest: +SKIP
    >>> list(run.comparisons), run.power.pairs_table()  # doctest: +SKIP
    """

    path: Path
    comparisons: dict[str, Comparison]
    rci: Any = None  # bayesrc.classical.RCIRun
    run_record: dict | None = None  # run.json (collection pins)
    demo_record: dict | None = None  # demo.json (bayesrc demo: both collection runs' pins and their comparison)
    switch: Any = None  # bayesrc.switch.SwitchResult
    power: Any = None  # bayesrc.power.PowerReport
    sensitivity: Any = None  # bayesrc.sensitivity.SensitivityTable
    truth: Any = None  # bayesrc.truth.TruthResult
    family_truth: Any = None  # bayesrc.truth.FamilyTruth (bayesrc truth on three or more exact runs)
    model_comparison: Any = None  # bayesrc.bayes.ModelComparison (bayesrc fit --compare: one comparison per model)
    joint: Any = None  # bayesrc.bayes.JointFit (bayesrc fit V1 V2 V3 ...: a family of versions)
    # bayesrc.classical.PairwiseRCI (bayesrc rci --family: every pair of a family, the multiplicity stated)
    pairwise: Any = None
    files: dict[str, Path] = field(default_factory=dict)

    def sensitivity_png(self, name: str) -> Path | None:
        """The figure ``bayesrc sensitivity`` drew for analysis ``name``, if it is there."""
        png = self.path / f"sensitivity_{name}.png"
        return png if png.is_file() else None


#: run-wide results: Run attribute -> result class (read from the run folder when its main file is there)
RUN_WIDE = {
    "switch": SwitchResult,
    "power": PowerReport,
    "sensitivity": SensitivityTable,
    "truth": TruthResult,
    "family_truth": FamilyTruth,
    "joint": JointFit,
    "pairwise": PairwiseRCI,
}


def load_run(run_dir: str | Path) -> Run:
    """Read every known result file of a run directory (absent files are fine).

    Parameters
    ----------
    run_dir : a folder the analysis commands wrote into (``bayesrc demo --out``, or
        ``bayesrc rci|fit|power|switch|sensitivity|truth --out`` pointed at one folder).

    Returns
    -------
    Run
        The typed results by comparison (``run.comparisons[NAME].pair`` / ``.bayes``) and
        run-wide (``run.power``, ``run.switch``, ``run.sensitivity``, ``run.truth``, a family's ``run.joint`` and
        ``run.pairwise``).

    Examples
    --------
    >>> from bayesrc.report import load_run, report_sections
    >>> run = load_run("runs/demo")                                   # doctest: +SKIP
    >>> run.comparisons["minor"].pair.n_flagged                       # doctest: +SKIP
    >>> [s.title for s in report_sections(run, run.comparisons["minor"])]  # doctest: +SKIP
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise InputError("not a run directory", path=root)
    run = Run(path=root, comparisons={})
    if (root / RCIRun.main_file).is_file():
        run.rci, run.files["rci.json"] = RCIRun.load(root), root / "rci.json"
        if not run.rci.names:  # a report is per pair: an rci.json without one has nothing to show
            raise InputError("holds no version pair", path=root / "rci.json", field="pairs")
    # a fit written into the run folder itself
    plain = BayesFit.load(root) if (root / BayesFit.main_file).is_file() else None
    owner = None if plain is None else plain.payload.get("pair")  # the pair it belongs to, when recorded
    names = list(run.rci.names) if run.rci is not None else []
    if not names and plain is not None:
        names = [str(owner or "comparison")]
    if (root / ModelComparison.main_file).is_file():  # bayesrc fit --compare: each model's fit in MODEL/
        run.model_comparison, run.files[ModelComparison.main_file] = (
            ModelComparison.load(root),
            root / ModelComparison.main_file,
        )
        names += [
            m for m in run.model_comparison.models if m not in names and (root / m / BayesFit.main_file).is_file()
        ]
    for i, name in enumerate(names):
        c = Comparison(name=name)
        if run.rci is not None and name in run.rci.names:
            c.pair = run.rci[name]
            if c.pair.items is not None:
                c.files["items"] = root / f"items_{name}.parquet"
        if (root / name / BayesFit.main_file).is_file():
            c.bayes, c.files["fit"] = BayesFit.load(root / name), root / name / "fit.json"
        elif plain is not None and (owner == name or (owner is None and i == 0) or len(names) == 1):
            c.bayes, c.files["fit"] = plain, root / "fit.json"
        run.comparisons[name] = c
    for attr, cls in RUN_WIDE.items():
        if (root / cls.main_file).is_file():
            setattr(run, attr, cls.load(root))
            run.files[cls.main_file] = root / cls.main_file
    if (root / "run.json").is_file():
        run.run_record, run.files["run.json"] = read_run_record(root), root / "run.json"
    if (root / "demo.json").is_file():
        run.demo_record, run.files["demo.json"] = read_json(root / "demo.json"), root / "demo.json"
    if not run.comparisons and run.model_comparison is None and all(getattr(run, attr) is None for attr in RUN_WIDE):
        raise InputError(
            "no result files (rci.json, fit.json, loo_compare.json, "
            f"{', '.join(cls.main_file for cls in RUN_WIDE.values())}) in this run directory",
            path=root,
        )
    return run
