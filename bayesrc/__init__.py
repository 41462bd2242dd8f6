"""bayesrc: Bayesian reliable-change analysis of LLM evaluations.

Everything downstream of collection reads one spine: trials (one row per sampled
answer) -> item counts (an xarray Dataset with dims ``item x version``).
"""

from bayesrc.errors import BayesrcError, InputError

__version__ = "0.1.0"
__all__ = ["BayesrcError", "InputError", "__version__"]
