"""Collapsed paired change model (SPEC section 3), twice: NumPyro and PyMC (nutpie).

Same model and priors as :mod:`bayesrc.bayes.change` (read its docstring), sampled the way
the collapsed beta-binomial is: NUTS on the hyperparameters only, with every item's
``theta_i``, ``delta_i`` and ``changed_i`` integrated out, then exact conditional draws of
the item quantities.

Given the hyperparameters items are independent, and an item's data enter only through the
cell ``c = (s, n1, y1, n2, y2)`` (``s`` its stratum: domain, or (domain, covariate level)).
The marginal likelihood of one cell::

    L(c) = int N(theta | mu_s, sigma_s) Bin(y1 | n1, expit theta) [ (1 - pi) Bin(y2 | n2, expit theta)
                                                                   + pi g_s(theta) ] dtheta
    g_s(theta) = int N(x | theta + m_s(theta), sigma_delta_s) Bin(y2 | n2, expit x) dx

with ``m_s(theta) = shift_s + slope (theta - mu_s) / sigma_s``. **Both integrals run on one
fixed grid of the logit scale** (:func:`logit_grid`: step 0.2 on [-10, 10] for up to 100
trials per item, finer beyond), so every binomial term is a constant of the data, computed
once per fit (:func:`likelihood_tables`); what the sampler evaluates is

* the prior weights of the theta nodes per stratum (a normal density, normalised over the grid),
* the change kernel ``K_s[j, k]``, the normal density of ``x_k`` around ``x_j + m_s``, normalised
  over ``k`` (a Toeplitz matrix without the slope: one row of ``2J - 1`` exponentials per stratum,
  tiled into place),
* the unnormalised sums of ``G = K @ Bin2`` per stratum and version-2 outcome ``(n2, y2)`` (with
  the rows' normalisers in the same product), and ``L`` as matrix products of the prior-weighted
  version-1 binomial table with ``Bin2`` (no change) and with those sums (the normalisers and
  the tails folded into the weights: :func:`cell_loglik`).

So a gradient costs a few dense matrix products and no transcendental function of the data
(0.4-0.7 ms for 40-2,000 items on a loaded 2-core machine, against 13.5 ms before on 11 strata;
``benchmarks/change_likelihood.py`` compares them on one shape).
The largest, the kernel rows times the band table, runs in single precision in the samplers
(:data:`SAMPLER_BAND_DTYPE`): its terms are all positive, so the sums keep a relative error near 1e-7.
The likelihood forms it only for the (stratum, outcome) pairs the cells have (:func:`pair_tables`:
real data fill few of them), and contracts the pairs' convolutions with the version-1 terms per
pair: on the bundled Q4_K_M -> Q3_K_M pair (70 of 308 pairs) the likelihood's value and gradient
took 0.58 ms against 0.97 ms over every pair, the same numbers (0.52 ms with the tails' normal CDF as
one ``erfc``: :func:`_ops`).
The trapezoid rule on a fixed grid converges geometrically for these analytic integrands while
the grid step is below the narrowest width involved (the binomial's ``2 / sqrt(n)`` logits,
``sigma_theta``, ``sigma_delta``): relative error below 1e-6 against ``scipy.integrate.dblquad``
for ``sigma_delta >= 0.2`` (tests/test_bayes_units.py). Both normal densities are normalised on
the grid, so a spread below the step keeps its mass (the prior keeps ``sigma_delta`` above 0.1
with probability 0.98), and the mass beyond the grid's ends (+-10 logits: accuracy 4.5e-5 and
0.99995) sits on the end nodes, where the binomials equal their limits to ``n 4.5e-5``.

The data enter the compiled likelihood as arguments, padded to fixed shape buckets
(:func:`likelihood_tables`), so one compiled sampler serves every fit of the same shape, also
in a later process (JAX's persistent compilation cache, :func:`bayesrc.configure`).

Item draws (:func:`item_draws`), for each posterior draw of the hyperparameters and each
cell, on the same grid: ``r_c = P(changed | data)`` and ``P(delta > 0 | changed, data)``
(Rao-Blackwellised); then per item ``changed_i ~ Bernoulli(r_c)``, ``theta_i | changed_i, data``
by inverse CDF of the piecewise-linear density through the grid's node values, and
``delta_i | theta_i, changed_i, data`` on 61 standardised nodes on [-6, 6] (the prior
``Normal(m, sigma_delta)`` when ``changed_i = 0``: then ``delta_i`` does not enter the
likelihood). Exact up to grid resolution: P(changed) matches a 2,001 x 1,201-node reference
to 1e-5 and the draws pass KS tests against its marginals (tests/test_bayes_units.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from types import SimpleNamespace

import numpy as np
from scipy.special import betaln, log_expit, logsumexp, ndtr

from bayesrc.bayes.change import (
    group_draws,
    group_effects_numpyro,
    group_effects_pymc,
    hyperpriors_numpyro,
    hyperpriors_pymc,
    model_dims,
    prior_settings,
    share_above_zero,
    store_item_quantities,
)
from bayesrc.bayes.draws import ITEM_DRAW_DTYPE
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.samplers import SamplerConfig, progress_bar, run_numpyro, run_pymc
from bayesrc.config import precision, prepare_jax

LOGIT_HALF, LOGIT_STEP = 10.0, 0.2  # the logit grid: [-10, 10] in steps of at most 0.2
ITEM_DRAW_STEPS_PER_CALL = 25  # item draws: vectorised steps per compiled call (the progress bar's step)
# item draws: posterior draws vectorised per step, up to 4, while draws x items stay below this
ITEM_DRAW_BATCH_ENTRIES = 12_000
# delta_i | theta_i: a piecewise-linear density through 61 nodes (0.2 SD apart)
DRAW_DELTA_NODES, DRAW_DELTA_HALF = 61, 6.0


def logit_grid(max_n: int) -> np.ndarray:
    """Fixed nodes on the logit scale for items with at most ``max_n`` trials per version.

    Step ``min(0.2, 2 / sqrt(max_n))``: the binomial likelihood's logit-scale SD is at least
    ``2 / sqrt(n)``, and the trapezoid rule's error falls like ``exp(-2 pi^2 (width / step)^2)``.

    Examples
    --------
    >>> x = logit_grid(10)
    >>> len(x), round(float(x[1] - x[0]), 12)
    (101, 0.2)
    """
    step = min(LOGIT_STEP, 2.0 / np.sqrt(max(int(max_n), 1)))
    half_nodes = int(np.ceil(LOGIT_HALF / step))
    return np.linspace(-LOGIT_HALF, LOGIT_HALF, 2 * half_nodes + 1)


@dataclass(frozen=True)
class Cells:
    """Distinct ``(s, n1, y1, n2, y2)`` cells, their multiplicities and the item -> cell map.

    ``dom`` is the cell's stratum: its domain without a covariate; with one, the distinct
    (domain, covariate level) pair, and ``stratum_dom`` / ``stratum_group`` map each stratum to
    its domain and level; the model expands its per-domain and per-level hyperparameters to
    strata (:func:`strata_hyper`), so the quadrature code is the same with or without a covariate.
    """

    dom: np.ndarray
    n1: np.ndarray
    y1: np.ndarray
    n2: np.ndarray
    y2: np.ndarray
    weight: np.ndarray
    item_cell: np.ndarray
    n_strata: int
    stratum_dom: np.ndarray | None = None
    stratum_group: np.ndarray | None = None

    @property
    def n_cells(self) -> int:
        return int(self.weight.size)


def cell_stats(data: ModelInputs) -> Cells:
    """Sufficient statistics of the change model: distinct cells with item counts.

    Without a covariate a cell's first entry is the domain; with one, the stratum (see :class:`Cells`).

    Examples
    --------
    >>> from bayesrc.bayes.inputs import ModelInputs
    >>> d = ModelInputs(items=("a", "b", "c"), versions=("v1", "v2"), domains=("x",), dom=np.zeros(3, int),
    ...                 y=np.array([[3, 4], [3, 4], [5, 5]]), n=np.full((3, 2), 10))
    >>> cells = cell_stats(d)
    >>> cells.n_cells, cells.weight.tolist(), cells.item_cell.tolist()
    (2, [2.0, 1.0], [0, 0, 1])
    """
    stratum, strata = item_strata(data)
    rows = np.stack([stratum, data.n[:, 0], data.y[:, 0], data.n[:, 1], data.y[:, 1]], axis=1)
    cells, item_cell, w = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    f = lambda a: a.astype(float)  # noqa: E731
    return Cells(
        dom=cells[:, 0],
        n1=f(cells[:, 1]),
        y1=f(cells[:, 2]),
        n2=f(cells[:, 3]),
        y2=f(cells[:, 4]),
        weight=f(w),
        item_cell=item_cell.ravel(),
        **strata,
    )


def item_strata(data: ModelInputs) -> tuple[np.ndarray, dict]:
    """Each item's stratum (its domain, or with a covariate its (domain, level) pair) and the cells'
    stratum fields ``n_strata``, ``stratum_dom``, ``stratum_group`` (None without a covariate).

    Examples
    --------
    >>> d = ModelInputs(items=("a", "b"), versions=("v1", "v2"), domains=("x", "z"), dom=np.array([1, 0]),
    ...                 y=np.zeros((2, 2)), n=np.ones((2, 2)))
    >>> item_strata(d)
    (array([1, 0]), {'n_strata': 2, 'stratum_dom': None, 'stratum_group': None})
    """
    if data.n_groups <= 1:
        return data.dom, {"n_strata": data.n_domains, "stratum_dom": None, "stratum_group": None}
    stratum, s_dom, s_grp = data.strata()
    return stratum, {"n_strata": len(s_dom), "stratum_dom": s_dom, "stratum_group": s_grp}


def bucket(n: int, least: int = 64) -> int:
    """The shape bucket of ``n`` cells: the next power of two, at least ``least`` (padding for compile reuse)."""
    return max(least, 1 << int(np.ceil(np.log2(max(n, 1)))))


def binomial_table(x: np.ndarray, n: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``exp(log Bin(y | n, expit x) - max)`` per outcome (row) and node, and the row maxima.

    The binomial coefficient is left out (constant); ``y log p + (n - y) log q = n log expit(x) - (n - y) x``.
    """
    lb = n[:, None] * log_expit(x)[None, :] - (n - y)[:, None] * x[None, :]
    top = lb.max(1)
    return np.exp(lb - top[:, None]), top


BAND_TABLE_MAX_BYTES = 64 * 2**20  # above it (K in the hundreds) the likelihood forms the Toeplitz kernel instead
# The samplers' band table is single precision: its product with the kernel rows is most of a
# gradient's cost, and ~1.7x as fast in float32. Every term is positive (no cancellation), so the
# sums keep a relative error near 1e-7 (tests/test_bayes_units.py); the item draws (stored in single
# precision: draws.ITEM_DRAW_DTYPE), LOO and the checks compute in float64.
SAMPLER_BAND_DTYPE = np.float32


def band_table(e: np.ndarray) -> np.ndarray:
    """``B[t, j, m] = e[t, m + j - (J - 1)]`` (0 beyond the grid), with a row of ones after ``e``'s rows.

    The slope-free change kernel is one row ``r[m]`` over the ``2J - 1`` node offsets, so
    ``sum_k K[j, k] e[t, k] = sum_m r[m] B[t, j, m]``: a product of the parameters' row with this
    constant (:func:`convolution_parts`); the ones give each kernel row's mass inside the grid.

    Examples
    --------
    >>> band_table(np.array([[1.0, 2.0]]))
    array([[[0., 1., 2.],
            [1., 2., 0.]],
    <BLANKLINE>
           [[0., 1., 1.],
            [1., 1., 0.]]])
    """
    e = np.concatenate([e, np.ones_like(e[:1])])
    n = e.shape[1]
    k = np.arange(2 * n - 1)[None, :] + np.arange(n)[:, None] - (n - 1)  # (j, m): the node k of offset m from j
    return np.where((k >= 0) & (k < n), e[:, np.clip(k, 0, n - 1)], 0.0)


def likelihood_tables(cells: Cells, band_dtype=np.float64, pairs: bool = True) -> dict[str, np.ndarray]:
    """Every data-dependent array of the collapsed likelihood, padded to shape buckets.

    ``x`` the logit grid, ``e1`` / ``lm1`` the version-1 binomial table over distinct ``(n1, y1)`` outcomes,
    ``e2`` / ``lm2`` the version-2 table over distinct ``(n2, y2)``, ``e2_band`` its band table
    (:func:`band_table`; left out when over :data:`BAND_TABLE_MAX_BYTES`); per cell its row ``cell_key
    = s T + t`` of the (stratum, version-2 outcome) table, its version-1 outcome ``cell_u`` and
    its weight (0 on padding). Outcomes and cells are padded to powers of two, so datasets of
    similar size share one compiled likelihood. ``band_dtype``: the band table's precision (the
    samplers pass :data:`SAMPLER_BAND_DTYPE`); ``pairs``: with the likelihood's tables of the cells'
    (stratum, outcome) pairs (:func:`pair_tables`; the item draws, which convolve every pair, leave them out).
    """
    x = logit_grid(int(max(cells.n1.max(), cells.n2.max())))
    o1, u = np.unique(np.stack([cells.n1, cells.y1], 1), axis=0, return_inverse=True)
    o2, t = np.unique(np.stack([cells.n2, cells.y2], 1), axis=0, return_inverse=True)
    n_t, n_u, n_c = outcome_bucket(len(o2)), outcome_bucket(len(o1)), bucket(cells.n_cells)
    pad = pad_rows
    e1, lm1 = binomial_table(x, o1[:, 0], o1[:, 1])
    e2, lm2 = binomial_table(x, o2[:, 0], o2[:, 1])
    tables = {
        "x": x,
        "e1": pad(e1, n_u),
        "lm1": pad(lm1, n_u),
        "e2": pad(e2, n_t),
        "lm2": pad(lm2, n_t),
        "cell_key": pad(cells.dom * n_t + t.ravel(), n_c),
        "cell_t": pad(t.ravel(), n_c),
        "cell_u": pad(u.ravel(), n_c),
        "weight": pad(cells.weight, n_c),
    }
    if band_table_fits(n_t, len(x), band_dtype):
        tables["e2_band"] = band_table(tables["e2"]).astype(band_dtype)
        tables |= pair_tables(cells.dom, t.ravel(), cells.n_strata, tables["e2_band"], n_c) if pairs else {}
    return tables


def pair_tables(
    cell_s: np.ndarray, cell_t: np.ndarray, n_strata: int, e2_band: np.ndarray, n_cells: int
) -> dict[str, np.ndarray]:
    """The (stratum, version-2 outcome) pairs the cells have, for :func:`cell_loglik`'s band product:
    ``pair_onehot`` (pair, stratum), ``pair_band`` the band table's rows of the pairs' outcomes
    (:func:`band_table`), ``ones_band`` its row of ones, ``cell_pair`` each cell's pair; pairs padded to a
    multiple of 16 (zero rows). Empty when the pairs' band would be over :data:`BAND_TABLE_MAX_BYTES`.

    Why: the band product is most of a gradient's cost, and real data fill few of the pairs (70 of the
    308 on the bundled Q4_K_M -> Q3_K_M pair, 34 of 192 on 40 simulated items).

    Examples
    --------
    >>> t = pair_tables(np.array([0, 0, 1]), np.array([2, 2, 0]), 2, band_table(np.eye(3)), 4)
    >>> t["pair_onehot"].shape, t["pair_band"].shape, t["cell_pair"].tolist()
    ((16, 2), (16, 3, 5), [0, 0, 1, 0])
    """
    pairs, cell_pair = np.unique(np.stack([cell_s, cell_t], 1), axis=0, return_inverse=True)
    n_p = -(-len(pairs) // 16) * 16
    if n_p * e2_band[0].nbytes > BAND_TABLE_MAX_BYTES:
        return {}
    return {
        "pair_onehot": pad_rows(np.eye(n_strata)[pairs[:, 0]], n_p),
        "pair_band": pad_rows(e2_band[pairs[:, 1]], n_p),
        "ones_band": e2_band[-1],
        "cell_pair": pad_rows(cell_pair.ravel(), n_cells),
    }


def outcome_bucket(n: int) -> int:
    """Outcome rows padded to a multiple of 4 (they cost matrix columns; shapes shared between fits)."""
    return -(-n // 4) * 4


def pad_rows(a: np.ndarray, size: int) -> np.ndarray:
    """``a`` with zero rows appended up to ``size`` rows (the shape buckets' padding).

    Examples
    --------
    >>> pad_rows(np.ones((2, 3)), 4).sum(1).tolist()
    [3.0, 3.0, 0.0, 0.0]
    """
    return np.concatenate([a, np.zeros((size - len(a), *a.shape[1:]), a.dtype)])


def band_table_fits(n_outcomes: int, n_nodes: int, dtype) -> bool:
    """Whether the band table of ``n_outcomes`` binomial rows on ``n_nodes`` nodes stays within
    :data:`BAND_TABLE_MAX_BYTES`."""
    return (n_outcomes + 1) * n_nodes * (2 * n_nodes - 1) * np.dtype(dtype).itemsize <= BAND_TABLE_MAX_BYTES


def strata_hyper(cells: Cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta):
    """Per-domain ``mu_theta, sigma_theta, shift`` (+ per-level ``alpha``, ``gamma``, ``sigma_delta`` and
    per-stratum ``eta``) expanded to the cells' strata; without a covariate the strata are the
    domains and the one ``sigma_delta`` is repeated for each. Works on the last axis (numpy, jax
    or pytensor)."""
    if cells.stratum_dom is None:
        return mu_theta, sigma_theta, shift, sigma_delta[..., None] + 0.0 * shift
    sd, sg = cells.stratum_dom, cells.stratum_group
    return (
        mu_theta[..., sd] + alpha[..., sg],
        sigma_theta[..., sd],
        shift[..., sd] + gamma[..., sg] + eta,
        sigma_delta[..., sg],
    )


def _ops(backend: str) -> SimpleNamespace:
    """The handful of array functions the likelihood needs, for numpy, jax or pytensor."""
    if backend == "numpy":
        return SimpleNamespace(
            xp=np, logsumexp=logsumexp, tensordot=np.tensordot, einsum=np.einsum, maximum=np.maximum, ndtr=ndtr
        )
    if backend == "jax":
        import jax
        import jax.numpy as jnp
        import jax.scipy.special as jss  # the module, not its names: logsumexp is scipy's, imported at the top

        # Phi as one erfc, as PyTensor's below: jax.scipy's ndtr evaluates erf and erfc everywhere and picks one
        # (the tails' two Phi per stratum and node were 15% of the likelihood's value and gradient).
        phi = lambda z: 0.5 * jax.lax.erfc(-z / np.sqrt(2.0))  # noqa: E731
        return SimpleNamespace(
            xp=jnp, logsumexp=jss.logsumexp, tensordot=jnp.tensordot, einsum=jnp.einsum, maximum=jnp.maximum, ndtr=phi
        )
    import pytensor.tensor as pt  # deferred: PyMC loads in ~2 s (bayes extra)

    return SimpleNamespace(
        xp=pt,
        logsumexp=pt.logsumexp,
        tensordot=pt.tensordot,
        einsum=pt.einsum,
        maximum=pt.maximum,
        ndtr=lambda z: 0.5 * pt.erfc(-z / np.sqrt(2.0)),
    )


def _lump_tails(ops, weights, below, above):
    """Node weights (summing to 1 over the last axis) scaled to ``1 - below - above``, with the mass
    below / above the grid put on its first / last node: the binomials there (accuracy 4.5e-5 and
    0.99995) stand for everything beyond."""
    w = weights * (1.0 - below - above)[..., None]
    return ops.xp.concatenate([w[..., :1] + below[..., None], w[..., 1:-1], w[..., -1:] + above[..., None]], axis=-1)


def grid_spread(ops, sigma, x):
    """The spread a normal has on the grid: ``sqrt(sigma^2 + (h / 2)^2)``, never below half the step ``h``.

    Why: a normal narrower than the step sits on one or two nodes, and its weights then jump as
    its centre crosses a node: a likelihood NUTS cannot traverse (no-change data, where an
    item's spread or change shrinks towards 0, diverged and hit the tree depth). Half a step
    (0.1 logits) keeps neighbouring nodes within ``e^-2`` of each other, so the weights move
    smoothly with the centre; the model reads it as an extra Normal(0, 0.1) logit jitter of
    each item's easiness and change (0.5% of a 1-logit spread, 5% of a 0.3-logit one).
    """
    half = 0.5 * (x[1] - x[0])
    return ops.xp.sqrt(sigma**2 + half**2)


def prior_weights(ops, x, mu, sigma):
    """Normal(mu_s, sigma_s) weights of the grid's nodes per stratum: (stratum, node) (spread at least
    half a step: :func:`grid_spread`).

    Inside the grid the nodes share the mass in proportion to the density (normalised: exact
    mass for any spread), the tails beyond its end cells sit on the end nodes (:func:`_lump_tails`).
    """
    sigma = grid_spread(ops, sigma, x)
    lp = -0.5 * ((x[None, :] - mu[:, None]) / sigma[:, None]) ** 2
    inside = ops.xp.exp(lp - ops.logsumexp(lp, axis=-1, keepdims=True))
    return _lump_tails(ops, inside, *_tails(ops, x, mu, sigma))


def toeplitz(ops, row, n: int):
    """``T[..., j, k] = row[..., k - j + n - 1]`` from the last axis's ``2n - 1`` entries.

    By tiling and reshaping, not by an index gather: under a sampler the gather's index is data
    (an argument), and its gradient, a scatter-add, cost most of a likelihood evaluation.

    Examples
    --------
    >>> toeplitz(_ops("numpy"), np.arange(5.0)[None], 3)[0]
    array([[2., 3., 4.],
           [1., 2., 3.],
           [0., 1., 2.]])
    """
    xp = ops.xp
    period = xp.concatenate([row, xp.zeros_like(row[..., :1])], axis=-1)  # length 2n
    tiled = xp.tile(period, (1,) * (row.ndim - 1) + (n,))[..., : n * (2 * n - 1)]
    return tiled.reshape((*row.shape[:-1], n, 2 * n - 1))[..., n - 1 :]


def _kernel_offsets(ops, x, shift, sigma_delta):
    """The slope-free change kernel's one row per stratum: the Gaussian over the ``2J - 1`` node
    offsets ``(k - j) h`` centred on ``shift_s``, scaled by its maximum: (stratum, 2J - 1)."""
    n = x.shape[0]
    offsets = (np.arange(2 * n - 1) - (n - 1)) * (x[1] - x[0])
    lr = -0.5 * ((offsets[None, :] - shift[:, None]) / sigma_delta[:, None]) ** 2
    return ops.xp.exp(lr - ops.xp.max(lr, axis=-1, keepdims=True))


def _kernel_rows(ops, x, mu, sigma, shift, slope, sigma_delta):
    """Unnormalised change-kernel rows ``k[s, j, k]``, their centres ``x_j + m_s(x_j)`` and spread.

    Without the slope (``slope`` the float 0.0) the rows are one Gaussian over the ``2J - 1``
    offsets per stratum (:func:`_kernel_offsets`) laid out as a Toeplitz matrix: a row centred
    far beyond the grid may then underflow (its inside mass relative to the peak row's is below
    1e-150: :func:`_safe_ratio` gives it none). With the slope each row is scaled by its own maximum.
    """
    sigma_delta = grid_spread(ops, sigma_delta, x)
    if isinstance(slope, float) and slope == 0.0:
        k = toeplitz(ops, _kernel_offsets(ops, x, shift, sigma_delta), x.shape[0])
        centre = x[None, :] + shift[:, None]
    else:
        centre = x[None, :] + shift[:, None] + slope * (x[None, :] - mu[:, None]) / sigma[:, None]  # (stratum, node)
        lk = -0.5 * ((x[None, None, :] - centre[:, :, None]) / sigma_delta[:, None, None]) ** 2
        k = ops.xp.exp(lk - ops.xp.max(lk, axis=-1, keepdims=True))
    return k, centre, sigma_delta[:, None]


def _safe_ratio(ops, num, den):
    """``num / den``, 0 where ``den`` is below 1e-150 (a kernel row with no mass on the grid).

    Why not smaller: the gradient divides by ``den ** 2``, which must not underflow to 0.
    """
    ok = den > 1e-150
    return ops.xp.where(ok, num / ops.xp.where(ok, den, 1.0), 0.0)


def _tails(ops, x, centre, sd):
    """Mass of Normal(centre, sd) below / above the grid's end cells."""
    half = 0.5 * (x[1] - x[0])
    return ops.ndtr((x[0] - half - centre) / sd), ops.ndtr((centre - x[-1] - half) / sd)


def change_kernel(ops, tables, mu, sigma, shift, slope, sigma_delta):
    """``K[s, j, k]``: the Normal(x_j + m_s(x_j), sigma_delta_s) weight of node ``x_k``, as
    :func:`prior_weights` (rows sum to 1, tails on the end nodes, :func:`grid_spread`).

    Without the slope (``slope`` the float 0.0) ``m_s`` is constant and ``K_s`` Toeplitz inside the
    grid (:func:`_kernel_rows`). The item draws use the kernel itself; the likelihood applies it to
    the version-2 binomials without forming it normalised (:func:`convolution_parts`).
    """
    x = tables["x"]
    k, centre, sd = _kernel_rows(ops, x, mu, sigma, shift, slope, sigma_delta)
    inside = _safe_ratio(ops, k, k.sum(-1, keepdims=True))
    return _lump_tails(ops, inside, *_tails(ops, x, centre, sd))


def weighted_convolutions(ops, tables, mu, sigma, shift, slope, sigma_delta, weights):
    """``G_w[s, t, j] = sum_k K[s, j, k] w[k - j + J - 1] e2[t, k]`` for each row ``w`` of ``weights``
    (W, 2J - 1), a function of the change ``x_k - x_j`` (a row of ones: ``G = K @ e2`` itself;
    the share of a node's cell above zero: the item draws' ``P(delta > 0)``): (W, stratum, outcome2, node).

    Assembled from :func:`convolution_parts`: the kernel's sums inside the grid, scaled per node by
    the row's inside mass over its normaliser, plus the tails' mass on the end nodes' binomials.
    """
    sums, scale, first, last = convolution_parts(ops, tables, mu, sigma, shift, slope, sigma_delta, weights)
    e2 = tables["e2"]
    return (
        sums * scale[None, :, None, :]
        + first[:, :, None, :] * e2[None, None, :, :1]
        + last[:, :, None, :] * e2[None, None, :, -1:]
    )


def convolution_parts(ops, tables, mu, sigma, shift, slope, sigma_delta, weights):
    """The pieces of :func:`weighted_convolutions`: ``sums[w, s, t, j] = sum_k k[s, j, k] w[k - j + J - 1]
    e2[t, k]`` over the grid (unnormalised kernel rows), ``scale[s, j]`` = (1 - tails' mass) / the
    row's sum over the grid (0 for a row with no mass on the grid: :func:`_safe_ratio`), and the
    tails' mass per weight row that goes to the first and last node's binomials (W, stratum, node).

    The sums and the kernel rows' normalisers come out of one matrix product (a row of ones beside
    the binomials). ``weights[0]`` must be ones (the normalisers come from it). Without the slope
    the product is the kernel's one row per stratum times the binomials' band table (``e2_band``,
    :func:`band_table`), a constant: forming the Toeplitz kernel from the parameters instead made
    the gradient 4-9x slower at 16-140 strata.
    """
    x, e2 = tables["x"], tables["e2"]
    n = x.shape[0]
    if isinstance(slope, float) and slope == 0.0 and "e2_band" in tables:
        sd = grid_spread(ops, sigma_delta, x)
        rows = weights[:, None, :] * _kernel_offsets(ops, x, shift, sd)[None]  # (W, stratum, 2J - 1)
        band = tables["e2_band"]  # in its own precision (likelihood_tables' band_dtype), the sums back in the rows'
        # (W, stratum, outcome2 + 1, node)
        sums = ops.tensordot(rows.astype(band.dtype), band, axes=[[2], [2]]).astype(rows.dtype)
        centre, sd = x[None, :] + shift[:, None], sd[:, None]
    else:
        k, centre, sd = _kernel_rows(ops, x, mu, sigma, shift, slope, sigma_delta)
        kw = k[None] * toeplitz(ops, weights, n)[:, None]  # (W, stratum, node, node)
        e2_ones = ops.xp.concatenate([e2, ops.xp.ones_like(e2[:1])], axis=0)
        sums = ops.tensordot(kw, e2_ones, axes=[[3], [1]]).transpose(0, 1, 3, 2)  # (W, stratum, outcome2 + 1, node)
    scale, below, above = _rows_scale_and_tails(ops, x, centre, sd, sums[0, :, -1])
    # (W, node j): w of the change to node 0 / node J - 1
    at_first, at_last = weights[:, n - 1 :: -1], weights[:, : n - 2 : -1]
    return sums[:, :, :-1], scale, at_first[:, None, :] * below[None], at_last[:, None, :] * above[None]


def _rows_scale_and_tails(ops, x, centre, sd, inside):
    """Per kernel row (stratum, node): the scale of its sums over the grid, (1 - tails' mass) / ``inside`` (its
    sum over the grid; 0 for a row with no mass there, :func:`_safe_ratio`), and its mass below / above the grid."""
    below, above = _tails(ops, x, centre, sd)
    return _safe_ratio(ops, 1.0 - below - above, inside), below, above


def cell_loglik(ops, mu_theta, sigma_theta, shift, sigma_delta, slope, pi, tables):
    """``log L(c)`` per (padded) cell, hyperparameters per stratum (see the module docstring).

    ``L = sum_j prior[s, j] e1[u, j] ((1 - pi) e2[t, j] + pi G[s, t, j])`` with ``G`` from the parts of
    :func:`convolution_parts` contracted one by one against ``prior e1``: ``G`` itself (stratum x
    outcome x node) is never formed, nor the elementwise passes over it (1.1-1.5x per value and
    gradient on the q3 pair's shape, docs/performance.md). Without the slope and with the tables of
    :func:`pair_tables`, the parts are formed and contracted for the cells' (stratum, outcome) pairs
    only (:func:`_pair_convolution_parts`; 1.7x on that shape, the same numbers).
    """
    e1, e2 = tables["e1"], tables["e2"]
    prior = prior_weights(ops, tables["x"], mu_theta, sigma_theta)  # (stratum, node)
    pe1 = prior[:, None, :] * e1[None]  # (stratum, outcome1, node)
    same = ops.tensordot(pe1, e2, axes=[[2], [1]])  # (stratum, outcome1, outcome2)
    by_pair = isinstance(slope, float) and slope == 0.0 and "pair_band" in tables
    if by_pair:  # the change convolutions of the pairs the cells have only (pair_tables)
        scaled, first, last, sums = _pair_convolution_parts(ops, tables, shift, sigma_delta)
        # (pair, outcome1)
        changed = (ops.tensordot(tables["pair_onehot"], prior * scaled, axes=[[1], [0]]) * sums) @ e1.T
    else:
        ones = np.ones((1, 2 * e1.shape[-1] - 1))
        sums, scale, first, last = convolution_parts(
            ops, tables, mu_theta, sigma_theta, shift, slope, sigma_delta, ones
        )
        first, last = first[0], last[0]
        changed = ops.einsum("suj,stj->sut", pe1 * scale[:, None, :], sums[0])
    # (stratum, outcome1, 1): the tails' mass
    at_ends = [(pe1 * tail[:, None, :]).sum(-1)[:, :, None] for tail in (first, last)]
    ends = at_ends[0] * e2[None, None, :, 0] + at_ends[1] * e2[None, None, :, -1]  # on the end nodes' binomials
    lik = (1.0 - pi) * same + pi * (ends if by_pair else changed + ends)
    lik = lik.transpose(0, 2, 1)  # (stratum, outcome2, outcome1)
    per_cell = lik.reshape((-1, lik.shape[-1]))[tables["cell_key"], tables["cell_u"]]
    if by_pair:
        per_cell = per_cell + pi * changed[tables["cell_pair"], tables["cell_u"]]
    return ops.xp.log(ops.maximum(per_cell, 1e-300)) + tables["lm1"][tables["cell_u"]] + tables["lm2"][tables["cell_t"]]


def _pair_convolution_parts(ops, tables, shift, sigma_delta):
    """:func:`convolution_parts` without the slope and weights, its band product over the cells' (stratum,
    outcome) pairs only (:func:`pair_tables`): the per-node scale (stratum, node), the tails' mass to the first
    and last node (stratum, node) and the kernel's sums per pair (pair, node), which are ``convolution_parts``'
    sums at the pairs' (stratum, outcome)."""
    x = tables["x"]
    sd = grid_spread(ops, sigma_delta, x)
    rows = _kernel_offsets(ops, x, shift, sd)  # (stratum, 2J - 1)
    band = tables["pair_band"]
    # (pair, 2J - 1): a product, not a gather (see toeplitz)
    pair_rows = ops.tensordot(tables["pair_onehot"], rows, axes=[[1], [0]])
    sums = ops.einsum("pm,pjm->pj", pair_rows.astype(band.dtype), band).astype(rows.dtype)
    # (stratum, node): each row's sum over the grid, in the band's precision as the sums
    # (in float64 it took an eighth of a step)
    inside = ops.tensordot(rows.astype(band.dtype), tables["ones_band"], axes=[[1], [1]]).astype(rows.dtype)
    return (*_rows_scale_and_tails(ops, x, x[None, :] + shift[:, None], sd[:, None], inside), sums)


@cache
def _jax_loglik(slope: bool):
    """The summed cell log-likelihood as one compiled JAX function (``slope``: whether it is sampled).

    Why compiled apart: NumPyro runs the model once eagerly to find its sites before any
    sampler is compiled; op by op, the likelihood's ~170 operations each compiled on their own
    (3-4 s per fit). Inside the sampler this function is inlined like any other.
    """
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp

    def total(mu_theta, sigma_theta, shift, sigma_delta, b, pi, tables):
        ll = cell_loglik(_ops("jax"), mu_theta, sigma_theta, shift, sigma_delta, b if slope else 0.0, pi, tables)
        return jnp.sum(tables["weight"] * ll)

    return jax.jit(total)


def _numpyro_model(tables, *, cells: Cells, n_domains: int, slope: bool, prior=None, n_groups: int = 1, contrasts=None):
    import numpyro  # deferred: NumPyro and JAX load in seconds (bayes extra)

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_numpyro(n_domains, slope, prior, n_groups)
    alpha, gamma, eta = group_effects_numpyro(n_groups, prior, contrasts)
    strata = strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta)
    numpyro.factor("y", _jax_loglik(slope)(*strata, b, pi, tables))


def change_collapsed_numpyro(
    data: ModelInputs,
    *,
    slope: bool = False,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    items: bool = True,
):
    """Collapsed change model with NumPyro: NUTS on the hyperparameters, exact item draws after
    (``items=False``: the hyperparameters only; :func:`with_item_draws` adds the items later).

    Examples
    --------
    >>> from bayesrc.bayes.inputs import model_inputs
    >>> dt = change_collapsed_numpyro(model_inputs(counts))   # doctest: +SKIP
    >>> dt["posterior"]["pi"].mean()                          # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    model, args = collapsed_model_numpyro(data, slope=slope, prior=prior)
    dims = {k: v for k, v in model_dims(data.n_groups).items() if k != "theta"}  # theta is not sampled here
    dt = run_numpyro(model, args, cfg, data.coords, dims)
    return with_item_draws(dt, data, cfg, slope=slope, prior=prior) if items else dt


def collapsed_model_numpyro(
    data: ModelInputs, *, slope: bool = False, prior: dict | None = None
) -> tuple[Callable, dict]:
    """The NumPyro twin as a model function and its data arguments (the sampler's tables): what
    :func:`change_collapsed_numpyro` samples, e.g. for ``numpyro.infer.util.potential_energy``.

    Examples
    --------
    >>> model, args = collapsed_model_numpyro(model_inputs(counts))   # doctest: +SKIP
    """
    cells = cell_stats(data)
    model = partial(
        _numpyro_model,
        cells=cells,
        n_domains=data.n_domains,
        slope=slope,
        prior=prior_settings(prior),
        n_groups=data.n_groups,
        contrasts=data.stratum_contrasts(),
    )
    return model, {"tables": likelihood_tables(cells, SAMPLER_BAND_DTYPE)}


def change_collapsed_pymc(
    data: ModelInputs,
    *,
    slope: bool = False,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    items: bool = True,
):
    """The same collapsed model with PyMC (nutpie); same priors, names and dims as the NumPyro twin
    (``items`` as there).

    Examples
    --------
    >>> dt = change_collapsed_pymc(model_inputs(counts))   # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    dt = run_pymc(collapsed_model_pymc(data, slope=slope, prior=prior), cfg)
    return with_item_draws(dt, data, cfg, slope=slope, prior=prior) if items else dt


def collapsed_model_pymc(data: ModelInputs, *, slope: bool = False, prior: dict | None = None):
    """The PyMC twin as a built ``pymc.Model``: what :func:`change_collapsed_pymc` samples.

    Examples
    --------
    >>> model = collapsed_model_pymc(model_inputs(counts))   # doctest: +SKIP
    >>> model.compile_logp()(model.initial_point())        # doctest: +SKIP
    """
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)
    import pytensor.tensor as pt

    cells = cell_stats(data)
    tables = likelihood_tables(cells, SAMPLER_BAND_DTYPE)
    with pm.Model(coords=data.coords) as model:
        mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_pymc(slope, prior, data.n_groups)
        alpha, gamma, eta = group_effects_pymc(data.n_groups, prior, data.stratum_contrasts())
        strata = strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta)
        ll = cell_loglik(_ops("pytensor"), *strata, b, pi, tables)
        pm.Potential("y", pt.sum(tables["weight"] * ll))
    return model


# ---------------------------------------------------------------- exact conditional item draws


def _pwlinear_tables(f):
    """Node values (max-scaled) and the normalised CDF over intervals of each row's piecewise-linear
    density through the non-negative node values ``f`` (trapezoid interval masses ``(f_k + f_k+1) / 2``)."""
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    f = f / jnp.maximum(f.max(-1, keepdims=True), 1e-300)
    cdf = jnp.cumsum(0.5 * (f[..., 1:] + f[..., :-1]), -1)
    return f, cdf / jnp.maximum(cdf[..., -1:], 1e-300)


def _pwlinear_draw(f, cdf, rows, u1, u2, x0: float, h: float):
    """One draw per entry of ``rows`` from row ``rows[i]`` of the piecewise-linear density.

    Interval by inverse CDF (one ``searchsorted`` over all rows: row ``r``'s CDF shifted to
    ``[r, r + 1]``); within interval ``k`` the offset ``t`` solves
    ``f_k t + (f_k+1 - f_k) t^2 / 2 = u2 (f_k + f_k+1) / 2``. Returns ``x0 + (k + t) h``.
    """
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    n_int = cdf.shape[-1]
    flat = (jnp.arange(cdf.shape[0])[:, None] + cdf).ravel()
    pos = jnp.searchsorted(flat, rows + u1 * (1.0 - 1e-12), side="left")
    k = jnp.clip(pos - rows * n_int, 0, n_int - 1)
    fa, fb = f[rows, k], f[rows, k + 1]
    c = u2 * 0.5 * (fa + fb)
    # Stable root of (fb - fa) / 2 t^2 + fa t - c = 0 (t = u2 when the density is flat).
    t = 2.0 * c / (fa + jnp.sqrt(jnp.maximum(fa**2 + 2.0 * (fb - fa) * c, 0.0)))
    t = jnp.where(fa + fb > 0, jnp.clip(t, 0.0, 1.0), u2)
    return x0 + (k + t) * h


def _cell_posteriors(hyper, data):
    """Per cell and grid node, the joint posterior weights of (unchanged, theta_j) and (changed, theta_j),
    and per cell ``P(delta > 0 | changed, data)`` (JAX, one hyperparameter draw; ``data``: :func:`draw_data`)."""
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyper
    ops = _ops("jax")
    x = data["x"]
    prior = prior_weights(ops, x, mu_theta, sigma_theta)
    n, h = x.shape[0], x[1] - x[0]
    # per node offset k - j: the change x_k - x_j above 0
    up = share_above_zero((jnp.arange(2 * n - 1) - (n - 1)) * h, h)
    g, g_up = weighted_convolutions(
        ops, data, mu_theta, sigma_theta, shift, b, sigma_delta, jnp.stack([jnp.ones_like(up), up])
    )
    e2 = data["e2"]
    s, t, u = data["cell_dom"], data["cell_t"], data["cell_u"]
    base = prior[s] * data["e1"][u]  # (cell, node)
    w0 = base * (1.0 - pi) * e2[t]
    w1 = base * pi * g[s, t]
    p_up = (base * g_up[s, t]).sum(-1) / jnp.maximum((base * g[s, t]).sum(-1), 1e-300)
    return w0, w1, p_up


def _draws_one(hyper, key, data: dict, fine_v):
    """Item quantities for one hyperparameter draw (JAX; ``data``: :func:`draw_data`; see :func:`item_draws`)."""
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyper
    w0, w1, p_up = _cell_posteriors(hyper, data)
    tot0, tot1 = w0.sum(-1), w1.sum(-1)
    r = tot1 / jnp.maximum(tot0 + tot1, 1e-300)
    item_cell = data["item_cell"]
    n_items = item_cell.shape[0]
    k1, k2, k3, k4, k5, k6 = jax.random.split(key, 6)
    changed = jax.random.uniform(k1, (n_items,)) < r[item_cell]
    # theta_i | changed_i from the node weights (piecewise linear between nodes).
    f, cdf = _pwlinear_tables(jnp.concatenate([w0, w1], 0))  # rows: (changed, cell)
    rows = item_cell + changed * w0.shape[0]
    x = data["x"]
    theta = _pwlinear_draw(
        f, cdf, rows, jax.random.uniform(k2, (n_items,)), jax.random.uniform(k3, (n_items,)), x[0], x[1] - x[0]
    )
    d = data["cell_dom"][item_cell]
    m_i = shift[d] + b * (theta - mu_theta[d]) / sigma_theta[d]
    # delta_i | theta_i, changed_i = 1 on a fine standardised grid; the prior when changed_i = 0
    # (delta_i is not in the likelihood).
    spread = grid_spread(_ops("jax"), sigma_delta, x)[d]
    zv = standardised_change_draw(theta + m_i, spread, data["item_y2"], data["item_n2"], changed, fine_v, (k4, k5, k6))
    # stored in single precision (computed in double): half the memory, and the transfer, at 12,000 items
    f = ITEM_DRAW_DTYPE
    # r, p_up per cell
    return theta.astype(f), (m_i + spread * zv).astype(f), changed.astype(jnp.int8), r.astype(f), p_up.astype(f)


def draw_data(cells: Cells) -> dict[str, np.ndarray]:
    """The item draws' data: :func:`likelihood_tables` and, padded like its cells, each cell's stratum
    ``cell_dom``; per item (padded to :func:`bucket` items, as cell 0) its cell and version-2 counts.

    Passed to the compiled draw as arguments, not baked into it as constants: one compiled draw
    serves every dataset of the same buckets, in later processes too (JAX's persistent cache).

    Examples
    --------
    >>> from bayesrc.bayes.inputs import ModelInputs
    >>> d = ModelInputs(items=("a", "b", "c"), versions=("v1", "v2"), domains=("x",), dom=np.zeros(3, int),
    ...                 y=np.array([[3, 4], [3, 4], [5, 5]]), n=np.full((3, 2), 10))
    >>> data = draw_data(cell_stats(d))
    >>> data["item_cell"].shape, data["cell_dom"].shape == data["weight"].shape, data["item_y2"][:3].tolist()
    ((64,), True, [4.0, 4.0, 5.0])
    """
    tables = likelihood_tables(cells, pairs=False)
    n_cells, n_items = len(tables["weight"]), bucket(cells.item_cell.size)
    item_cell = pad_rows(cells.item_cell, n_items)
    return {
        **tables,
        "cell_dom": pad_rows(cells.dom, n_cells),
        "item_cell": item_cell,
        "item_y2": cells.y2[item_cell],
        "item_n2": cells.n2[item_cell],
    }


def standardised_change_draw(centre, spread, y, n, changed, fine_v, keys):
    """One draw per item of ``z = (delta_i - m_i) / spread_i`` given its easiness (JAX).

    Changed items: from ``Normal(0, 1) Bin(y_i | n_i, expit(centre_i + spread_i z))``, a piecewise-linear
    density through the nodes ``fine_v``; unchanged ones from the prior ``Normal(0, 1)`` (their change
    does not enter the likelihood). ``centre = theta_i + m_i``; ``keys``: three JAX keys.
    """
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp
    from jax.nn import log_sigmoid

    n_items = centre.shape[0]
    xi = centre[:, None] + spread[:, None] * fine_v
    y, n = y[:, None], n[:, None]
    fd, cdfd = _pwlinear_tables(jnp.exp(_max_shift(-0.5 * fine_v**2 + n * log_sigmoid(xi) - (n - y) * xi)))
    hv = fine_v[1] - fine_v[0]
    zv = _pwlinear_draw(
        fd,
        cdfd,
        jnp.arange(n_items),
        jax.random.uniform(keys[0], (n_items,)),
        jax.random.uniform(keys[1], (n_items,)),
        fine_v[0],
        hv,
    )
    return jnp.where(changed, zv, jax.random.normal(keys[2], (n_items,)))


def _max_shift(logf):
    """``logf`` minus each row's maximum (so that its exponential has maximum 1)."""
    return logf - logf.max(-1, keepdims=True)


def item_draws(
    post, cells: Cells, seed: int, batch: int | None = None, progress: bool | None = None
) -> dict[str, np.ndarray]:
    """Exact conditional item draws for every posterior draw (JAX: ``batch`` draws vectorised,
    spread over the JAX devices, in calls of :data:`ITEM_DRAW_STEPS_PER_CALL` steps a progress
    bar follows; ``progress`` as :class:`SamplerConfig`'s). Each draw has its own random key, so
    ``batch`` (default: up to 4, fewer above :data:`ITEM_DRAW_BATCH_ENTRIES` / 4 items, where
    the per-item temporaries of a vectorised step would cost more memory than they save time)
    does not change the draws.

    Returns ``theta, delta, changed`` with shape (chain, draw, item) and ``r, p_up`` with shape
    (chain, draw, cell), in :data:`~bayesrc.bayes.draws.ITEM_DRAW_DTYPE` (``changed``: int8).

    Examples
    --------
    >>> c = item_draws(dt["posterior"].to_dataset(), cell_stats(data), seed=0)   # doctest: +SKIP
    >>> c["changed"].mean((0, 1))   # posterior share of draws in which each item changed  # doctest: +SKIP
    """
    prepare_jax()
    batch = batch or int(np.clip(ITEM_DRAW_BATCH_ENTRIES // max(cells.item_cell.size, 1), 1, 4))
    with precision():  # float64 like the sampler, scoped to this call
        return _item_draws(post, cells, seed, batch, progress)


def flat_hyper(post, cells: Cells) -> list[np.ndarray]:
    """The likelihood's hyperparameters per posterior draw, chains flattened: ``mu_theta, sigma_theta,
    shift, sigma_delta`` expanded to the cells' strata (:func:`strata_hyper`), then ``slope`` (0 when
    absent) and ``pi``; each (chain x draw, ...)."""
    n_chain, n_draw = post["pi"].shape
    flat = lambda a: np.asarray(a, float).reshape(n_chain * n_draw, *np.shape(a)[2:])  # noqa: E731
    slope = post["slope"].values if "slope" in post else np.zeros((n_chain, n_draw))
    strata = strata_hyper(
        cells,
        *(post[k].values for k in ("mu_theta", "sigma_theta", "shift")),
        *group_draws(post),
        post["sigma_delta"].values,
    )
    return [flat(h) for h in (*strata, slope, post["pi"].values)]


def _item_draws(post, cells: Cells, seed: int, batch: int, progress: bool | None) -> dict[str, np.ndarray]:
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp

    n_chain, n_draw = post["pi"].shape
    n_s = n_chain * n_draw
    hyper = flat_hyper(post, cells)
    has_slope = bool(np.any(hyper[4] != 0.0))
    data = {k: jnp.asarray(v) for k, v in draw_data(cells).items()}
    fine_v = jnp.linspace(-DRAW_DELTA_HALF, DRAW_DELTA_HALF, DRAW_DELTA_NODES)
    n_dev = jax.local_device_count()
    steps = -(-n_s // (batch * n_dev))
    n_calls = -(-steps // ITEM_DRAW_STEPS_PER_CALL)
    chunk = -(-steps // n_calls)  # steps per compiled call: every call the same shape
    pad = n_dev * n_calls * chunk * batch - n_s
    shape = lambda h: h.reshape(n_dev, -1, batch, *h.shape[1:])  # noqa: E731  (device, step, batch, ...)
    hyper = tuple(shape(np.concatenate([h, np.repeat(h[-1:], pad, 0)])) for h in hyper)
    keys = shape(np.asarray(jax.random.split(jax.random.PRNGKey(seed), n_s + pad)))

    def run(hyper, keys, data):
        def one_draw(h, k):
            h = h if has_slope else (*h[:4], 0.0, h[5])  # a float 0.0 slope: the Toeplitz kernel
            return _draws_one(h, k, data, fine_v)

        return jax.lax.map(lambda hk: jax.vmap(one_draw)(*hk), (hyper, keys))

    run_all, out = jax.pmap(run, in_axes=(0, 0, None)), None  # the data as an argument, the same on every device
    with progress_bar(progress, n_s, desc="item draws") as bar:
        for i in range(0, n_calls * chunk, chunk):
            got = run_all(*(jax.tree.map(lambda a: a[:, i : i + chunk], t) for t in (hyper, keys)), data)
            if out is None:  # filled in place: a list of parts and their concatenation held the draws twice
                out = [np.empty((n_dev, n_calls * chunk, *v.shape[2:]), v.dtype) for v in got]
            for whole, part in zip(out, got):
                whole[:, i : i + chunk] = part
            bar.update(max(0, min(chunk * batch * n_dev, n_s - i * batch * n_dev)))
    names = ("theta", "delta", "changed", "r", "p_up")  # each (device, step, batch, item or cell), padded
    real = dict.fromkeys(names[:3], cells.item_cell.size) | dict.fromkeys(names[3:], cells.n_cells)
    return {k: v.reshape(n_s + pad, -1)[:n_s, : real[k]].reshape(n_chain, n_draw, -1) for k, v in zip(names, out)}


def with_item_draws(dt, data: ModelInputs, cfg: SamplerConfig, *, slope: bool = False, prior: dict | None = None):
    """A hyperparameter posterior of the collapsed change model with its item draws added (:func:`item_draws`,
    seeded by ``cfg.seed``) in the full model's layout (:func:`bayesrc.bayes.change.store_item_quantities`).

    :func:`bayesrc.bayes.fit` samples without them and adds them once the gate has passed (or the last
    attempt failed): at 12,000 items the draws take as long as the sampling.

    Examples
    --------
    >>> dt = change_collapsed_numpyro(data, items=False)           # doctest: +SKIP
    >>> dt = with_item_draws(dt, data, SamplerConfig())            # doctest: +SKIP
    >>> item_block(dt["posterior"])["dp"].dims                     # doctest: +SKIP
    ('chain', 'draw', 'item')
    """
    post = dt["posterior"].to_dataset()
    cells = cell_stats(data)
    c = item_draws(post, cells, cfg.seed, progress=cfg.progress)
    post["theta"] = (("chain", "draw", "item"), c["theta"])
    return store_item_quantities(dt, post, c, cells.item_cell, slope, prior, collapsed=1)


def cell_pointwise_loglik(post, cells: Cells, batch: int = 64) -> np.ndarray:
    """Each *cell's* log marginal likelihood ``log L(c)`` for every posterior draw: (chain, draw, cell).

    The collapsed model's likelihood of an item of the cell given the hyperparameters (theta,
    delta and changed integrated out, binomial coefficients left out as everywhere), the input of
    PSIS-LOO (:func:`unit_loglik`, :func:`bayesrc.bayes.checks.loo_checks`) for comparing
    change-model variants with each other and with the collapsed beta-binomial, whose marginal
    leaves out the same constants. Per cell, not per item: 1,375 cells against 12,000 items at
    MMLU-Pro's size.

    Examples
    --------
    >>> ll = cell_pointwise_loglik(fit.posterior["posterior"].to_dataset(), cell_stats(data))  # doctest: +SKIP
    """
    prepare_jax()
    with precision():  # float64 like the sampler: in float32 e^(k sigma_delta v) overflows past sigma_delta ~ 3
        return _pointwise_loglik(post, cells, batch)


def _pointwise_loglik(post, cells: Cells, batch: int):
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    n_chain, n_draw = post["pi"].shape
    n_s = n_chain * n_draw
    hyper = flat_hyper(post, cells)
    has_slope = bool(np.any(hyper[4] != 0.0))
    tables = {k: jnp.asarray(v) for k, v in likelihood_tables(cells).items()}
    pad = (-n_s) % batch  # every call the same shape: one compile
    hyper = [np.concatenate([h, np.repeat(h[-1:], pad, 0)]) for h in hyper]
    f = _jax_pointwise(has_slope)
    out = np.concatenate(
        [np.asarray(f(*(h[i : i + batch] for h in hyper), tables)) for i in range(0, n_s + pad, batch)]
    )
    return out[:n_s, : cells.n_cells].reshape(n_chain, n_draw, -1)


@cache
def _jax_pointwise(slope: bool):
    """The per-cell log-likelihood for a batch of hyperparameter draws, compiled once per process and
    shape bucket: the data tables are arguments, not constants, so fits of the same shape reuse it
    (also from JAX's persistent cache in a later process)."""
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    def one(m, s, sh, sdd, b, p, tables):
        return cell_loglik(_ops("jax"), m, s, sh, sdd, b if slope else 0.0, p, tables)

    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, 0, 0, None)))


def unit_loglik(post, data: ModelInputs) -> tuple[np.ndarray, np.ndarray]:
    """The log marginal likelihoods per posterior draw of the distinct units of a collapsed fit's
    data, (chain, draw, unit), and each item's unit: the input of PSIS-LOO over items
    (:func:`bayesrc.bayes.checks.loo_checks`).

    Change model: the cells (:func:`cell_pointwise_loglik`; items of one cell have the same
    likelihood, so the same PSIS-LOO); beta-binomial (collapsed): each item, the sum over versions
    of its beta-binomial marginals.

    Examples
    --------
    >>> ll, item_unit = unit_loglik(fit.posterior["posterior"].to_dataset(), data)  # doctest: +SKIP
    """
    if "sigma_delta" in post:
        cells = cell_stats(data)
        return cell_pointwise_loglik(post, cells), cells.item_cell
    mu, kappa = post["mu"].values, post["kappa"].values  # (chain, draw, domain, version)
    a, b = (mu * kappa)[:, :, data.dom, :], ((1 - mu) * kappa)[:, :, data.dom, :]
    return (betaln(a + data.y, b + data.n - data.y) - betaln(a, b)).sum(-1), np.arange(data.n_items)
