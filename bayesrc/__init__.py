"""bayesrc: Bayesian reliable-change analysis of LLM evaluations.

Everything downstream of collection reads one spine: trials (one row per sampled
answer) -> item counts (an xarray Dataset with dims ``item x version``).

Importing bayesrc (or any subpackage) has no global side effects: no matplotlib
backend is chosen and JAX is neither imported nor configured (see :func:`configure`).
:func:`load` opens any result the CLI writes as its typed object (:mod:`bayesrc.results`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from bayesrc.config import configure
from bayesrc.errors import BayesrcError, InputError

__version__ = "0.1.0"
__all__ = ["RESULT_MODULES", "BayesrcError", "InputError", "__version__", "configure", "load"]

#: the modules that define (and register) a result class, one per output kind
RESULT_MODULES: tuple[str, ...] = (
    "bayesrc.classical.result",
    "bayesrc.classical.pairwise",
    "bayesrc.bayes.fit_result",
    "bayesrc.bayes.joint_fit",
    "bayesrc.bayes.model_comparison",
    "bayesrc.switch.result",
    "bayesrc.power.result",
    "bayesrc.power.planner",
    "bayesrc.compare.result",
    "bayesrc.truth.score",
    "bayesrc.truth.family",
    "bayesrc.sensitivity.result",
    "bayesrc.data.run",
)


def load(path: str | Path):
    """Open any result file or folder the CLI writes and return its typed object.

    Parameters
    ----------
    path : a result folder (``bayesrc rci|fit|switch|power|plan|compare|truth|sensitivity|collect --out DIR``)
        or one of its main files (``rci.json``, ``pairwise_rci.json``, ``fit.json``, ``joint.json``, ``switch.json``,
        ``power.json``, ``plan.json``, ``compare.json``, ``truth.json``, ``sensitivity.json`` /
        ``sensitivity_NAME.csv``, a complete run's ``run.json``, ``trials.parquet``, ``dist.parquet`` or
        ``items_exact.parquet``).

    Returns
    -------
    The typed result (a :class:`bayesrc.results.Result`: ``RCIRun``, ``PairwiseRCI``, ``BayesFit``, ``JointFit``,
    ``SwitchResult``, ``PowerReport``, ``KNPlan``, ``CompareResult``, ``TruthResult``,
    ``SensitivityTable``, ``CollectedRun``). A folder holding several results (a run directory after
    ``bayesrc demo``) gives a dict ``{main file: result}``; Bayesian fits kept in
    sub-folders (``NAME/fit.json``) appear as ``"NAME/fit.json"``.

    Examples
    --------
    >>> import bayesrc
    >>> fit = bayesrc.load("runs/demo/fit")    # doctest: +SKIP
    >>> fit.summary()                          # doctest: +SKIP
    """
    for name in RESULT_MODULES:  # each registers its result class; imported here, not at
        importlib.import_module(name)  # `import bayesrc`, so `bayesrc --help` stays light
    return importlib.import_module("bayesrc.results").open_result(path)
