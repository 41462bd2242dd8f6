"""The collapsed change model's marginal likelihood on the logit grid (:mod:`bayesrc.bayes.change_collapsed`),
one code for numpy, JAX and PyTensor (:func:`_ops`).

The marginal likelihood of one cell ``c = (s, n1, y1, n2, y2)`` (:func:`~bayesrc.bayes.change_grid.cell_stats`)::

    L(c) = int N(theta | mu_s, sigma_s) Bin(y1 | n1, expit theta) [ (1 - pi) Bin(y2 | n2, expit theta)
                                                                   + pi g_s(theta) ] dtheta
    g_s(theta) = int N(x | theta + m_s(theta), sigma_delta_s) Bin(y2 | n2, expit x) dx

with ``m_s(theta) = shift_s + slope (theta - mu_s) / sigma_s``. Both integrals run on the fixed logit grid
of :mod:`bayesrc.bayes.change_grid` (whose docstring has their accuracy), so every binomial term is a
constant of the data (:func:`~bayesrc.bayes.change_grid.likelihood_tables`); what the sampler evaluates is

* the prior weights of the theta nodes per stratum (a normal density, normalised over the grid),
* the change kernel ``K_s[j, k]``, the normal density of ``x_k`` around ``x_j + m_s``, normalised
  over ``k`` (a Toeplitz matrix without the slope: one row of ``2J - 1`` exponentials per stratum,
  tiled into place),
* the unnormalised sums of ``G = K @ Bin2`` per stratum and version-2 outcome ``(n2, y2)`` (with
  the rows' normalisers in the same product), and ``L`` as products of the strata's node weights with
  the data's tables, read at the cells: against the cells' ``Bin1 Bin2`` rows (no change), against
  ``Bin1`` times those sums (the normalisers and the tails folded into the weights: :func:`cell_loglik`).

So a gradient costs a few dense matrix products and no transcendental function of the data
(0.4-0.7 ms for 40-2,000 items on a loaded 2-core machine, against 13.5 ms before on 11 strata;
``benchmarks/change_likelihood.py`` compares them on one shape).
The largest, the kernel rows times the version-2 binomials, is formed only for the (stratum, outcome) pairs
the cells have (:func:`~bayesrc.bayes.change_grid.pair_tables`: real data fill few of them; 70 of 308 on the
bundled Q4_K_M -> Q3_K_M pair) and contracted with the version-1 terms per pair. In NumPy and JAX it is a
convolution by FFT in double precision (:func:`_spectral_band_sums`): a default fit of the bundled pair ~1.7x
faster than the product term by term over the pairs' band table in single precision, which the PyMC twin keeps
(:func:`_band_sums`; PyTensor's FFT has no JAX form for nutpie). Both agree to ~1e-6 in log L wherever a
posterior goes (docs/performance.md, "Issue 57, eleventh session").

A fit's per-cell log-likelihood for every posterior draw (:func:`cell_pointwise_loglik`, :func:`unit_loglik`)
is the input of PSIS-LOO (:func:`bayesrc.bayes.checks.loo_checks`).
"""

from __future__ import annotations

from functools import cache, partial
from types import SimpleNamespace

import numpy as np
from scipy.special import betaln, logsumexp, ndtr

from bayesrc.bayes.change import group_draws
from bayesrc.bayes.change_grid import Cells, band_spectra, cell_stats, likelihood_tables, spectrum_length, strata_hyper
from bayesrc.bayes.compiled import AheadOfTime, kept_compiled
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.config import precision, prepare_jax


def _ops(backend: str, spectral: bool = True) -> SimpleNamespace:
    """The handful of array functions the likelihood needs, for numpy, jax or pytensor.

    ``spectral``: the change kernel's products with the version-2 binomials by FFT (:func:`_spectral_band_sums`,
    :func:`convolution_parts`); ``False``, term by term over the band tables (:func:`_band_sums`): PyTensor's
    always (its FFT has no JAX form, which nutpie runs), NumPy's as the tests' independent reference.
    """
    if backend == "numpy":
        ops = SimpleNamespace(
            xp=np, logsumexp=logsumexp, tensordot=np.tensordot, einsum=np.einsum, maximum=np.maximum, ndtr=ndtr
        )
    elif backend == "jax":
        import jax
        import jax.numpy as jnp
        import jax.scipy.special as jss  # the module, not its names: logsumexp is scipy's, imported at the top

        # Phi as one erfc, as PyTensor's below: jax.scipy's ndtr evaluates erf and erfc everywhere and picks one
        # (the tails' two Phi per stratum and node were 15% of the likelihood's value and gradient).
        phi = lambda z: 0.5 * jax.lax.erfc(-z / np.sqrt(2.0))  # noqa: E731
        ops = SimpleNamespace(
            xp=jnp, logsumexp=jss.logsumexp, tensordot=jnp.tensordot, einsum=jnp.einsum, maximum=jnp.maximum, ndtr=phi
        )
    else:
        import pytensor.tensor as pt  # deferred: PyMC loads in ~2 s (bayes extra)

        ops = SimpleNamespace(
            xp=pt,
            logsumexp=pt.logsumexp,
            tensordot=pt.tensordot,
            einsum=pt.einsum,
            maximum=pt.maximum,
            ndtr=lambda z: 0.5 * pt.erfc(-z / np.sqrt(2.0)),
        )
        spectral = False
    ops.spectral = spectral
    return ops


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

    By tiling and reshaping, not by an index gather of ``n x n`` entries a row: under a sampler the gather's index
    is data (an argument), and its gradient, a scatter-add that large, cost most of a likelihood evaluation. (Rows
    read whole by a short index, as the pairs' strata, cost a few microseconds, gradient included.)

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


def node_offsets(x):
    """The ``2J - 1`` offsets ``(k - j) h`` between the grid's nodes, from ``-(J - 1) h`` to ``(J - 1) h``."""
    n = x.shape[0]
    return (np.arange(2 * n - 1) - (n - 1)) * (x[1] - x[0])


def _kernel_offsets(ops, x, shift, sigma_delta):
    """The slope-free change kernel's one row per stratum: the Gaussian over the ``2J - 1`` node
    offsets (:func:`node_offsets`) centred on ``shift_s``, scaled by its maximum: (stratum, 2J - 1)."""
    lr = -0.5 * ((node_offsets(x)[None, :] - shift[:, None]) / sigma_delta[:, None]) ** 2
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

    ``weights[0]`` must be ones (the normalisers come from it). Without the slope the kernel is one row per
    stratum: by FFT (``ops.spectral``) the sums are its convolutions with the binomials (``e2_spectra``) and the
    normalisers its convolution with a row of ones (:func:`_mass_inside`); term by term, one product of the row with
    the binomials' band table (``e2_band``, :func:`~bayesrc.bayes.change_grid.band_table`, a constant with a row of
    ones after the binomials). With the slope (or no band table) the kernel is formed and multiplied with the
    binomials and a row of ones: forming the Toeplitz kernel from the parameters made the gradient 4-9x slower than
    the band table at 16-140 strata.
    """
    x, e2 = tables["x"], tables["e2"]
    n = x.shape[0]
    if isinstance(slope, float) and slope == 0.0 and (ops.spectral or "e2_band" in tables):
        sd = grid_spread(ops, sigma_delta, x)
        rows = weights[:, None, :] * _kernel_offsets(ops, x, shift, sd)[None]  # (W, stratum, 2J - 1)
        if ops.spectral:  # (W, stratum, outcome2, node)
            spectra = _row_spectra(ops, rows, n)
            sums = _convolved(ops, spectra[:, :, None, :] * tables["e2_spectra"][None, None], n)
            inside = _mass_inside(ops, spectra[0], n)
        else:
            band = tables["e2_band"]  # in its own precision (likelihood_tables' band_dtype), the sums back in the rows'
            # (W, stratum, outcome2 + 1, node)
            sums = ops.tensordot(rows.astype(band.dtype), band, axes=[[2], [2]]).astype(rows.dtype)
            sums, inside = sums[:, :, :-1], sums[0, :, -1]
        centre, sd = x[None, :] + shift[:, None], sd[:, None]
    else:
        k, centre, sd = _kernel_rows(ops, x, mu, sigma, shift, slope, sigma_delta)
        kw = k[None] * toeplitz(ops, weights, n)[:, None]  # (W, stratum, node, node)
        e2_ones = ops.xp.concatenate([e2, ops.xp.ones_like(e2[:1])], axis=0)
        sums = ops.tensordot(kw, e2_ones, axes=[[3], [1]]).transpose(0, 1, 3, 2)  # (W, stratum, outcome2 + 1, node)
        sums, inside = sums[:, :, :-1], sums[0, :, -1]
    scale, below, above = _rows_scale_and_tails(ops, x, centre, sd, inside)
    # (W, node j): w of the change to node 0 / node J - 1
    at_first, at_last = weights[:, n - 1 :: -1], weights[:, : n - 2 : -1]
    return sums, scale, at_first[:, None, :] * below[None], at_last[:, None, :] * above[None]


def _rows_scale_and_tails(ops, x, centre, sd, inside):
    """Per kernel row (stratum, node): the scale of its sums over the grid, (1 - tails' mass) / ``inside`` (its
    sum over the grid; 0 for a row with no mass there, :func:`_safe_ratio`), and its mass below / above the grid."""
    below, above = _tails(ops, x, centre, sd)
    return _safe_ratio(ops, 1.0 - below - above, inside), below, above


def cell_loglik(ops, mu_theta, sigma_theta, shift, sigma_delta, slope, pi, tables):
    """``log L(c)`` per (padded) cell, hyperparameters per stratum (see the module docstring).

    ``L = sum_j prior[s, j] e1[u, j] ((1 - pi) e2[t, j] + pi G[s, t, j])``, each term a product of the
    strata's node weights with a data table, read at the cells: the no-change term against the cells'
    products ``e1 e2`` (``e12``), the change convolution ``G`` from the parts of :func:`convolution_parts`
    (``G`` itself, stratum x outcome x node, is never formed), and its tails' mass on the end nodes'
    binomials. Without the slope and with the tables of :func:`~bayesrc.bayes.change_grid.pair_tables`, the
    convolution's parts are formed and contracted for the cells' (stratum, outcome) pairs only
    (:func:`_pair_convolution_parts`; 1.7x on the bundled pair's shape, the same numbers), each pair reading its
    stratum's rows by index (``pair_s``): as products with a one-hot matrix (complex ones for the spectra) they and
    their transposes took a fifth of a gradient on XLA:CPU (docs/performance.md, "Issue 57, twelfth session").

    Why products at the cells: the cells are few (164 on the bundled pair) beside every (stratum, outcome1,
    outcome2) combination (11 x 16 x 28); forming the no-change term for all of them was a third of a
    gradient (docs/performance.md).
    """
    e1 = tables["e1"]
    prior = prior_weights(ops, tables["x"], mu_theta, sigma_theta)  # (stratum, node)
    cell_s, cell_u = tables["cell_s"], tables["cell_u"]
    same = ops.tensordot(prior, tables["e12"], axes=[[1], [1]])[cell_s, tables["cell_e12"]]
    # the cells' pairs only (pair_tables)
    if isinstance(slope, float) and slope == 0.0 and ("pair_spectra" if ops.spectral else "pair_band") in tables:
        scaled, first, last, sums = _pair_convolution_parts(ops, tables, shift, sigma_delta)
        weighted = (prior * scaled)[tables["pair_s"]] * sums  # (pair, node)
        changed = ops.tensordot(weighted, e1, axes=[[1], [1]])[tables["cell_pair"], cell_u]
    else:
        ones = np.ones((1, 2 * e1.shape[-1] - 1))
        sums, scale, first, last = convolution_parts(
            ops, tables, mu_theta, sigma_theta, shift, slope, sigma_delta, ones
        )
        first, last = first[0], last[0]
        changed = ops.einsum("sj,stj,uj->stu", prior * scale, sums[0], e1)
        changed = changed.reshape((-1, changed.shape[-1]))[tables["cell_key"], cell_u]
    # the tails' mass, on the end nodes' binomials: (2, stratum, outcome1)
    at_ends = ops.tensordot(ops.xp.stack([prior * first, prior * last]), e1, axes=[[2], [1]])
    ends = tables["cell_e2_ends"]
    ends = at_ends[0][cell_s, cell_u] * ends[:, 0] + at_ends[1][cell_s, cell_u] * ends[:, 1]
    per_cell = (1.0 - pi) * same + pi * (changed + ends)
    return ops.xp.log(ops.maximum(per_cell, 1e-300)) + tables["lm1"][cell_u] + tables["lm2"][tables["cell_t"]]


def _pair_convolution_parts(ops, tables, shift, sigma_delta):
    """:func:`convolution_parts` without the slope and weights, its band product over the cells' (stratum,
    outcome) pairs only (:func:`~bayesrc.bayes.change_grid.pair_tables`): the per-node scale (stratum, node),
    the tails' mass to the first and last node (stratum, node) and the kernel's sums per pair (pair, node),
    which are ``convolution_parts``' sums at the pairs' (stratum, outcome)."""
    x = tables["x"]
    sd = grid_spread(ops, sigma_delta, x)
    sums, inside = (_spectral_band_sums if ops.spectral else _band_sums)(ops, x, shift, sd, tables)
    return (*_rows_scale_and_tails(ops, x, x[None, :] + shift[:, None], sd[:, None], inside), sums)


def _band_sums(ops, x, shift, sd, tables):
    """The kernel rows' sums against the pairs' band, (pair, node), term by term in the band's precision (the PyMC
    twin's product), and each row's mass inside the grid, (stratum, node) (:func:`_inside_sums`)."""
    rows = _kernel_offsets(ops, x, shift, sd)  # (stratum, 2J - 1)
    band = tables["pair_band"]
    sums = ops.einsum("pm,pjm->pj", rows[tables["pair_s"]].astype(band.dtype), band).astype(rows.dtype)
    return sums, _inside_sums(ops, x, rows, shift)


def _inside_sums(ops, x, rows, shift):
    """Each kernel row's mass inside the grid, (stratum, node), term by term (the PyMC twin's; by FFT:
    :func:`_mass_inside`): its sum over the ``J`` offsets that keep node ``j`` on the grid (``m`` from ``J - 1 - j``
    to ``2J - 2 - j``), a difference of the row's running sums in float64, taken from the side away from the row's
    peak (``shift``), so that two tail sums never cancel.

    Why not a product with a band of ones: that (11 x 101 x 201 terms on the bundled pair) and its gradient took a
    third of a leapfrog step once the band product went by FFT.
    """
    n, xp = x.shape[0], ops.xp
    zero = xp.zeros_like(rows[..., :1])
    before = xp.concatenate([zero, xp.cumsum(rows, axis=-1)], axis=-1)  # [i]: the sum of rows[:i]
    after = xp.concatenate([xp.cumsum(rows[..., ::-1], axis=-1)[..., ::-1], zero], axis=-1)  # [i]: of rows[i:]
    from_before = before[..., n:][..., ::-1] - before[..., :n][..., ::-1]
    from_after = after[..., :n][..., ::-1] - after[..., n:][..., ::-1]
    # node j's offsets run from x_0 - x_j up: a peak below them leaves the mass before the window a tail of the row
    return xp.where(shift[:, None] < (x[0] - x)[None, :], from_after, from_before)


def _spectral_band_sums(ops, x, shift, sd, tables):
    """:func:`_band_sums` by FFT in double precision (NumPy and JAX): each pair's sums are the convolution of its
    stratum's kernel row with its binomial row, a product of their spectra (``pair_spectra``,
    :func:`~bayesrc.bayes.change_grid.band_spectra`).

    Why: term by term the product reads the pairs' band (6.5 MB on the bundled pair) and was most of a leapfrog
    step; by FFT a default fit of the bundled pair took 27 s against 48 s (docs/performance.md, "Issue 57,
    eleventh session"). The FFT's error is absolute, ~1e-16 of a row's scale (1), where the band's float32 sums
    keep a relative 1e-7: log L agrees with the product term by term in float64 to 1e-7 for every cell whose
    likelihood is above e^-20 of its rows' maxima (tests/test_bayes_units.py); below it the round-off may dominate
    the sums, which are held at zero or above. Real fits' posteriors keep every cell far above it
    (``benchmarks/fft_band.py``: e^-8 at K = 10, e^-9 at K = 40 on the bundled pair, log L within 1e-14).
    """
    n = x.shape[0]
    spectra = _row_spectra(ops, _kernel_offsets(ops, x, shift, sd), n)  # (stratum, F)
    return _convolved(ops, spectra[tables["pair_s"]] * tables["pair_spectra"], n), _mass_inside(ops, spectra, n)


def _mass_inside(ops, spectra, n: int):
    """Each kernel row's mass inside the grid, (..., node), from the rows' spectra (:func:`_row_spectra`): its
    convolution with a row of ``J`` ones, by FFT like the sums it normalises (:func:`_inside_sums` term by term).

    Why: the running sums' ~10 small operations (a cumulative sum is several on XLA:CPU) and their gradient took a
    sixth of a gradient; by FFT they are one more product of spectra (value and gradient 1.18x on the bundled pair,
    docs/performance.md, "Issue 57, twelfth session"). The error is absolute, as the sums': a row with almost no
    mass on the grid gets a relative error, but its node's change term is then as small (tests/test_bayes_units.py).
    """
    return _convolved(ops, spectra * band_spectra(np.ones((1, n))), n)


def _row_spectra(ops, rows, n: int):
    """The spectra of kernel rows (..., 2J - 1), reversed: ``sum_k K[j, k] e[k] = sum_q e[q] r[q - j + J - 1]`` is
    the convolution of ``e`` with the reversed row, read at ``J - 1 + j`` (:func:`_convolved`)."""
    return ops.xp.fft.rfft(rows[..., ::-1], spectrum_length(n), axis=-1)


def _convolved(ops, spectra, n: int):
    """The convolutions whose spectra are ``spectra`` (..., F), read at the ``J`` nodes (never below zero: the
    round-off of a sum far below its row's scale can be)."""
    sums = ops.xp.fft.irfft(spectra, spectrum_length(n), axis=-1)[..., n - 1 : 2 * n - 1]
    return ops.maximum(sums, 0.0)


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


def flat_hyper(post, cells: Cells) -> list[np.ndarray]:
    """The likelihood's hyperparameters per posterior draw, chains flattened: ``mu_theta, sigma_theta,
    shift, sigma_delta`` expanded to the cells' strata (:func:`~bayesrc.bayes.change_grid.strata_hyper`),
    then ``slope`` (0 when absent) and ``pi``; each (chain x draw, ...)."""
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
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    n_chain, n_draw = post["pi"].shape
    n_s = n_chain * n_draw
    hyper = flat_hyper(post, cells)
    has_slope = bool(np.any(hyper[4] != 0.0))
    tables = jax.device_put(likelihood_tables(cells, None))  # by FFT: no band table
    pad = (-n_s) % batch  # every call the same shape: one compile
    hyper = [np.concatenate([h, np.repeat(h[-1:], pad, 0)]) for h in hyper]
    f = kept_compiled(jax, partial(_jax_pointwise, jax, has_slope), ("pointwise log-likelihood", has_slope))
    out = np.concatenate(
        [np.asarray(f(*(h[i : i + batch] for h in hyper), tables)) for i in range(0, n_s + pad, batch)]
    )
    return out[:n_s, : cells.n_cells].reshape(n_chain, n_draw, -1)


def _jax_pointwise(jax, slope: bool) -> AheadOfTime:
    """The per-cell log-likelihood for a batch of hyperparameter draws, compiled per shape bucket (the data tables
    are arguments, not constants) and kept across fits (:mod:`bayesrc.bayes.compiled`)."""

    def one(m, s, sh, sdd, b, p, tables):
        return cell_loglik(_ops("jax"), m, s, sh, sdd, b if slope else 0.0, p, tables)

    return AheadOfTime(jax, jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, 0, 0, None))))


def unit_loglik(post, data: ModelInputs) -> tuple[np.ndarray, np.ndarray]:
    """The log marginal likelihoods per posterior draw of the distinct units of a collapsed fit's
    data, (chain, draw, unit), and each item's unit: the input of PSIS-LOO over items
    (:func:`bayesrc.bayes.checks.loo_checks`).

    Change model: the cells (:func:`cell_pointwise_loglik`; items of one cell have the same
    likelihood, so the same PSIS-LOO); beta-binomial (collapsed): the distinct (domain, counts) of the
    items (likewise; at K = 10 a few hundred against thousands of items), the sum over versions of
    their beta-binomial marginals.

    Examples
    --------
    >>> ll, item_unit = unit_loglik(fit.posterior["posterior"].to_dataset(), data)  # doctest: +SKIP
    """
    if "sigma_delta" in post:
        cells = cell_stats(data)
        return cell_pointwise_loglik(post, cells), cells.item_cell
    _, first, item_unit = np.unique(
        np.column_stack([data.dom, data.y, data.n]), axis=0, return_index=True, return_inverse=True
    )
    dom, y, n = data.dom[first], data.y[first], data.n[first]
    mu, kappa = post["mu"].values, post["kappa"].values  # (chain, draw, domain, version)
    a, b = (mu * kappa)[:, :, dom, :], ((1 - mu) * kappa)[:, :, dom, :]
    return (betaln(a + y, b + n - y) - betaln(a, b)).sum(-1), item_unit.ravel()
