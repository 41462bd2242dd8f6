"""Model inputs from item counts: arrays plus the named coords every backend shares.

Both backends (PyMC and NumPyro) read the same :class:`ModelInputs`, so their
posteriors carry identical dims: ``item``, ``version``, ``domain``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from bayesrc.errors import InputError


@dataclass(frozen=True)
class ModelInputs:
    """Counts of one version pair as plain arrays.

    ``y[i, v]`` correct of ``n[i, v]`` valid responses; ``dom[i]`` the domain index of
    item ``i`` into ``domains``. Items with no valid response in a version keep
    ``n = 0`` (they add nothing to the likelihood of that version).
    """

    y: np.ndarray
    n: np.ndarray
    dom: np.ndarray
    items: np.ndarray
    versions: tuple[str, str]
    domains: tuple[str, ...]

    @property
    def n_items(self) -> int:
        return int(self.y.shape[0])

    @property
    def n_domains(self) -> int:
        return len(self.domains)

    @property
    def coords(self) -> dict[str, list]:
        return {"item": list(map(str, self.items)), "version": list(self.versions), "domain": list(self.domains)}

    def p_obs(self) -> np.ndarray:
        """Observed accuracies ``y / n`` (NaN where ``n = 0``)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n > 0, self.y / np.maximum(self.n, 1), np.nan)


def model_inputs(counts: xr.Dataset, v1: str | None = None, v2: str | None = None) -> ModelInputs:
    """Extract ``y, n`` (item x version) and the domain index from item counts."""
    versions = [str(v) for v in counts["version"].values]
    if len(versions) < 2:
        raise InputError(f"need two versions, found {versions}", field="version")
    v1 = versions[0] if v1 is None else v1
    v2 = versions[1] if v2 is None else v2
    sub = counts.sel(version=[v1, v2])
    y = sub["n_correct"].values.astype(np.int64)
    n = sub["n_valid"].values.astype(np.int64)
    dom_labels = np.asarray(counts["domain"].values, dtype=str)
    domains, dom = np.unique(dom_labels, return_inverse=True)
    if n.sum() == 0:
        raise InputError("no valid responses in either version", field="is_missing")
    return ModelInputs(
        y=y,
        n=n,
        dom=dom.astype(np.int64),
        items=np.asarray(counts["item"].values).astype(str),
        versions=(str(v1), str(v2)),
        domains=tuple(map(str, domains)),
    )
