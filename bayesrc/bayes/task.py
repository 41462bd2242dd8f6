"""One Bayesian fit as a task body (for Ray or any process pool): the device count set first."""

from __future__ import annotations

import os
import re
import sys

from bayesrc.bayes.fit import fit  # JAX itself is imported only when a model is sampled


def fit_task(n_devices: int, counts, kwargs: dict):
    """One :func:`bayesrc.bayes.fit` (a Ray task body): JAX gets the driver's device count first.

    The device count decides how chains are grouped into parallel rounds, so it is set to
    the driver's before JAX starts in the worker (a worker that already runs JAX keeps its own).

    Examples
    --------
    >>> fit_task(2, counts, {"model": "change"})   # doctest: +SKIP
    """
    if "jax" not in sys.modules:  # an inherited XLA_FLAGS device count is replaced, not kept
        flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", "")).strip()
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n_devices}".strip()
    return fit(counts, **kwargs)
