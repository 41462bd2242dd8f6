"""bayesrc: Bayesian reliable-change analysis of LLM evaluations.

Everything downstream of collection reads one spine: trials (one row per sampled
answer) -> item counts (an xarray Dataset with dims ``item x version``).

Importing bayesrc (or any subpackage) has no global side effects: no matplotlib
backend is chosen and JAX is neither imported nor configured (see :func:`configure`).
:func:`load` opens any result the CLI writes as its typed object (:mod:`bayesrc.results`).
"""

from bayesrc.config import configure
from bayesrc.errors import BayesrcError, InputError
from bayesrc.results import load

__version__ = "0.1.0"
__all__ = ["BayesrcError", "InputError", "__version__", "configure", "load"]
