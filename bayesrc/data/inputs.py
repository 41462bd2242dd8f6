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
    """Counts of one version pair (or a family of versions, the first the reference) as plain arrays.

    ``y[i, v]`` correct of ``n[i, v]`` valid responses; ``dom[i]`` the domain index of
    item ``i`` into ``domains``. Items with no valid response in a version keep
    ``n = 0`` (they add nothing to the likelihood of that version).

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> data = model_inputs(item_counts(sim.trials_v1, sim.trials_v2))
    >>> bool((data.y <= data.n).all()), data.versions
    (True, ('model-v1', 'model-v2'))
    """

    y: np.ndarray
    n: np.ndarray
    dom: np.ndarray
    items: np.ndarray
    versions: tuple[str, ...]
    domains: tuple[str, ...]
    group: np.ndarray | None = None  # item -> index into ``groups`` (the covariate's level); None: one level
    groups: tuple[str, ...] = ("all",)
    covariate: str | None = None  # the item coord the groups come from (e.g. "correct_answer")

    @property
    def grp(self) -> np.ndarray:
        """Covariate level per item (all 0 without a covariate)."""
        return np.zeros(self.n_items, np.int64) if self.group is None else self.group

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    def strata(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct (domain, group) pairs: ``(stratum per item, domain per stratum, group per stratum)``."""
        pairs, stratum = np.unique(np.stack([self.dom, self.grp], 1), axis=0, return_inverse=True)
        return stratum.ravel().astype(np.int64), pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)

    def stratum_contrasts(self) -> np.ndarray:
        """:func:`interaction_basis` of the strata (stratum x contrast; no column without a covariate)."""
        if self.n_groups <= 1:
            return np.zeros((self.n_domains, 0))
        _, s_dom, s_grp = self.strata()
        return interaction_basis(s_dom, s_grp)

    @property
    def n_items(self) -> int:
        return int(self.y.shape[0])

    @property
    def n_versions(self) -> int:
        return int(self.y.shape[1])

    @property
    def n_domains(self) -> int:
        return len(self.domains)

    @property
    def coords(self) -> dict[str, list]:
        out = {"item": list(map(str, self.items)), "version": list(self.versions), "domain": list(self.domains)}
        if self.n_groups > 1:
            out["group"] = list(self.groups)
            _, s_dom, s_grp = self.strata()
            out["stratum"] = [f"{self.domains[d]}:{self.groups[g]}" for d, g in zip(s_dom, s_grp)]
            out["contrast"] = [f"c{j}" for j in range(self.stratum_contrasts().shape[1])]
        return out

    def p_obs(self) -> np.ndarray:
        """Observed accuracies ``y / n`` (NaN where ``n = 0``)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n > 0, self.y / np.maximum(self.n, 1), np.nan)


def interaction_basis(stratum_dom: np.ndarray, stratum_group: np.ndarray) -> np.ndarray:
    """An orthonormal basis (stratum x contrast) of the per-stratum values that no domain effect
    plus level effect can make: the orthogonal complement of the domain and level indicators.

    The change model's stratum shifts live in this space (``eta = sd * basis @ z``), so they
    cannot trade off against the domain and level shifts: with every stratum's total shift pinned
    by data, such a trade-off left a ridge that NUTS diverged on. Each column's largest entry is
    positive, so the basis does not depend on the LAPACK build.

    Examples
    --------
    >>> q = interaction_basis(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))   # 2 domains x 2 levels
    >>> q.shape, np.round(np.abs(q.ravel()), 3).tolist()
    ((4, 1), [0.5, 0.5, 0.5, 0.5])
    >>> interaction_basis(np.array([0, 0, 0]), np.array([0, 1, 2])).shape         # one domain: no interaction
    (3, 0)
    """
    ind = lambda codes: np.eye(int(codes.max()) + 1)[codes]  # noqa: E731
    x = np.concatenate([ind(np.asarray(stratum_dom)), ind(np.asarray(stratum_group))], axis=1)
    u, sv, _ = np.linalg.svd(x, full_matrices=True)
    q = u[:, int((sv > 1e-9 * sv[0]).sum()) :]
    q[np.abs(q) < 1e-12] = 0.0  # a stratum with no interaction (its level only here) gets exactly zero
    return q * np.sign(q[np.abs(q).argmax(axis=0), np.arange(q.shape[1])])


AUTO = "auto"
DEFAULT_COVARIATE = "correct_answer"
# "auto" adds the covariate only up to this many (domain, level) strata: the collapsed change
# model integrates each stratum's version-2 term separately, so its cost grows with them (name
# the covariate explicitly to use it beyond).
AUTO_MAX_STRATA = 24


def model_inputs(
    counts: xr.Dataset, v1: str | None = None, v2: str | None = None, *more: str, covariate: str | None = AUTO
) -> ModelInputs:
    """Extract ``y, n`` (item x version), the domain index and an item covariate from item counts.

    The versions are ``v1, v2`` (default the counts' first two), then ``more`` (the joint model of a
    family: :mod:`bayesrc.bayes.joint`), in that order; the first is the reference.

    ``covariate``: the name of an item coord whose levels shift the change model's mean easiness
    and mean change (``theta_i ~ Normal(mu_theta_d + alpha_g, .)``,
    ``delta_i ~ Normal(shift_d + gamma_g, sigma_delta)``); ``"auto"`` (default) uses
    ``correct_answer`` when the counts carry it with more than one level and at most
    ``AUTO_MAX_STRATA`` (domain, level) pairs; ``None`` none.

    Examples
    --------
    >>> from bayesrc.bayes import model_inputs
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> data = model_inputs(item_counts(sim.trials_v1, sim.trials_v2))
    >>> data.n_items, data.y.shape
    (60, (60, 2))
    """
    versions = [str(v) for v in counts["version"].values]
    if len(versions) < 2:
        raise InputError(f"need two versions, found {versions}", field="version")
    v1 = versions[0] if v1 is None else v1
    v2 = versions[1] if v2 is None else v2
    chosen = [v1, v2, *more]
    if len(set(map(str, chosen))) < len(chosen):
        raise InputError(f"each version once, got {chosen}", field="version")
    sub = counts.sel(version=chosen)
    y = sub["n_correct"].values.astype(np.int64)
    n = sub["n_valid"].values.astype(np.int64)
    dom_labels = np.asarray(counts["domain"].values, dtype=str)
    domains, dom = np.unique(dom_labels, return_inverse=True)
    if n.sum() == 0:
        raise InputError("no valid responses in either version", field="is_missing")
    group, groups, cov = None, ("all",), None
    name = DEFAULT_COVARIATE if covariate == AUTO else covariate
    if name is not None:
        if name not in counts.coords or counts[name].dims != ("item",):
            if covariate != AUTO:
                known = [c for c in counts.coords if counts[c].dims == ("item",)]
                raise InputError(
                    f"no item covariate {name!r} in the item counts (item coords: {', '.join(known)})",
                    field="covariate",
                )
        else:
            labels = np.asarray(counts[name].values).astype(str)
            levels, idx = np.unique(labels, return_inverse=True)
            n_strata = len(np.unique(np.stack([dom, idx], 1), axis=0))
            if len(levels) > 1 and (covariate != AUTO or n_strata <= AUTO_MAX_STRATA):
                group, groups, cov = idx.astype(np.int64), tuple(map(str, levels)), name
    return ModelInputs(
        y=y,
        n=n,
        dom=dom.astype(np.int64),
        items=np.asarray(counts["item"].values).astype(str),
        versions=tuple(map(str, chosen)),
        domains=tuple(map(str, domains)),
        group=group,
        groups=groups,
        covariate=cov,
    )
