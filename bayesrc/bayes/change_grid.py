"""The collapsed change model's data side (:mod:`bayesrc.bayes.change_collapsed`): the logit grid, the
cells and the binomial tables its likelihood reads.

Given the hyperparameters items are independent, and an item's data enter only through the
cell ``c = (s, n1, y1, n2, y2)`` (:func:`cell_stats`; ``s`` its stratum: domain, or (domain, covariate
level), :func:`item_strata`). **Both integrals of a cell's marginal likelihood
(:mod:`bayesrc.bayes.change_likelihood`) run on one fixed grid of the logit scale** (:func:`logit_grid`:
step 0.2 on [-10, 10] for up to 100 trials per item, finer beyond), so every binomial term is a constant
of the data, computed once per fit (:func:`likelihood_tables`).

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_expit

from bayesrc.bayes.inputs import ModelInputs

LOGIT_HALF, LOGIT_STEP = 10.0, 0.2  # the logit grid: [-10, 10] in steps of at most 0.2


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


@dataclass(frozen=True, kw_only=True)
class StrataMap:
    """Each stratum's domain and covariate level (both None without a covariate: the strata are the domains)."""

    stratum_dom: np.ndarray | None = None
    stratum_group: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True)
class StrataCells:
    """What the pair model's and the joint model's cells share: each cell's stratum and multiplicity.

    ``dom`` is the cell's stratum: its domain without a covariate; with one, the distinct
    (domain, covariate level) pair, and ``stratum_dom`` / ``stratum_group`` map each stratum to
    its domain and level; the model expands its per-domain and per-level hyperparameters to
    strata (:func:`strata_hyper`), so the quadrature code is the same with or without a covariate.
    """

    dom: np.ndarray
    weight: np.ndarray
    item_cell: np.ndarray
    n_strata: int
    stratum_dom: np.ndarray | None = None
    stratum_group: np.ndarray | None = None

    @property
    def n_cells(self) -> int:
        return int(self.weight.size)

    @property
    def strata(self) -> StrataMap:
        """What of the cells a model's structure holds (its counts are data): datasets with the same strata share
        one compiled sampler (:mod:`bayesrc.bayes.compiled`)."""
        return StrataMap(stratum_dom=self.stratum_dom, stratum_group=self.stratum_group)


@dataclass(frozen=True, kw_only=True)
class Cells(StrataCells):
    """Distinct ``(s, n1, y1, n2, y2)`` cells, their multiplicities and the item -> cell map (:class:`StrataCells`)."""

    n1: np.ndarray
    y1: np.ndarray
    n2: np.ndarray
    y2: np.ndarray


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


# above it (K in the hundreds) the likelihood term by term (the PyMC twin's) forms the Toeplitz kernel instead; by FFT
# (NumPy, JAX) it needs no band
BAND_TABLE_MAX_BYTES = 64 * 2**20
# The samplers' band table is single precision where the PyMC twin multiplies it term by term: ~1.7x as fast as in
# float64, and every term is positive (no cancellation), so the sums keep a relative error near 1e-7
# (tests/test_bayes_units.py). NumPy and JAX (the NumPyro samplers, the item draws, LOO and the checks) convolve by
# FFT in float64 (e2_spectra, pair_spectra).
SAMPLER_BAND_DTYPE = np.float32


def band_table(e: np.ndarray) -> np.ndarray:
    """``B[t, j, m] = e[t, m + j - (J - 1)]`` (0 beyond the grid), with a row of ones after ``e``'s rows.

    The slope-free change kernel is one row ``r[m]`` over the ``2J - 1`` node offsets, so
    ``sum_k K[j, k] e[t, k] = sum_m r[m] B[t, j, m]``: a product of the parameters' row with this
    constant (:func:`~bayesrc.bayes.change_likelihood.convolution_parts`); the ones give each kernel row's
    mass inside the grid.

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
    ``e2`` / ``lm2`` the version-2 table over distinct ``(n2, y2)`` and its :func:`convolution_tables`
    (``e2_spectra``, ``e2_band``), ``e12`` the products of the
    version-1 and version-2 rows of the (outcome1, outcome2) pairs the cells have; per cell its stratum
    ``cell_s``, its row ``cell_key = s T + t`` of the (stratum, version-2 outcome) table, its outcomes
    ``cell_u`` and ``cell_t``, its row ``cell_e12`` of ``e12``, its version-2 binomials at the grid's ends
    ``cell_e2_ends`` (cell, 2) and its weight (0 on padding). Outcomes and cells are padded (cells and
    ``e12`` to powers of two), so datasets of similar size share one compiled likelihood. ``band_dtype``: the
    band table's precision (the PyMC twin passes :data:`SAMPLER_BAND_DTYPE`), None for no band table (the NumPyro
    samplers, the item draws and PSIS-LOO convolve by FFT: a band carried as an unused argument is 9 MB on the
    bundled pair); ``pairs``: with the likelihood's
    tables of the cells' (stratum, outcome) pairs (:func:`pair_tables`; the item draws, which convolve every
    pair, leave them out).
    """
    x = logit_grid(int(max(cells.n1.max(), cells.n2.max())))
    o1, u = np.unique(np.stack([cells.n1, cells.y1], 1), axis=0, return_inverse=True)
    o2, t = np.unique(np.stack([cells.n2, cells.y2], 1), axis=0, return_inverse=True)
    n_t, n_u, n_c = outcome_bucket(len(o2)), outcome_bucket(len(o1)), bucket(cells.n_cells)
    pad = pad_rows
    e1, lm1 = binomial_table(x, o1[:, 0], o1[:, 1])
    e2, lm2 = binomial_table(x, o2[:, 0], o2[:, 1])
    both, cell_both = np.unique(np.stack([u.ravel(), t.ravel()], 1), axis=0, return_inverse=True)
    tables = {
        "x": x,
        "e1": pad(e1, n_u),
        "lm1": pad(lm1, n_u),
        "e2": pad(e2, n_t),
        "lm2": pad(lm2, n_t),
        "e12": pad(e1[both[:, 0]] * e2[both[:, 1]], bucket(len(both), least=16)),
        "cell_s": pad(cells.dom, n_c),
        "cell_key": pad(cells.dom * n_t + t.ravel(), n_c),
        "cell_t": pad(t.ravel(), n_c),
        "cell_u": pad(u.ravel(), n_c),
        "cell_e12": pad(cell_both.ravel(), n_c),
        "cell_e2_ends": pad(e2[t.ravel()][:, [0, -1]], n_c),
        "weight": pad(cells.weight, n_c),
    }
    tables |= convolution_tables(tables["e2"], band_dtype)
    return tables | (pair_tables(cells.dom, t.ravel(), tables, n_c) if pairs else {})


def convolution_tables(e2: np.ndarray, band_dtype=np.float64) -> dict[str, np.ndarray]:
    """The version-2 binomials ``e2`` (outcome, node) as the change kernel's convolutions read them: ``e2_spectra``
    their spectra (:func:`band_spectra`, for the product by FFT) and ``e2_band`` their band table in ``band_dtype``
    (:func:`band_table`, for the product term by term: the PyMC twin's; left out when over
    :data:`BAND_TABLE_MAX_BYTES`, or with ``band_dtype=None``).

    Examples
    --------
    >>> t = convolution_tables(np.ones((2, 3)))
    >>> t["e2_spectra"].shape, t["e2_band"].shape
    ((2, 4), (3, 3, 5))
    """
    tables = {"e2_spectra": band_spectra(e2)}
    if band_dtype is not None and band_table_fits(len(e2), e2.shape[1], band_dtype):
        tables["e2_band"] = band_table(e2).astype(band_dtype)
    return tables


def pair_tables(cell_s: np.ndarray, cell_t: np.ndarray, tables: dict, n_cells: int) -> dict[str, np.ndarray]:
    """The (stratum, version-2 outcome) pairs the cells have, for the band product of
    :func:`~bayesrc.bayes.change_likelihood.cell_loglik`: ``pair_s`` each pair's stratum, ``pair_spectra`` the
    spectra of the pairs' binomial rows (for the product by FFT), ``pair_band`` their rows of the band table (for the
    product term by term, where ``tables`` (:func:`convolution_tables`) has it), ``cell_pair`` each cell's pair;
    pairs padded to a multiple of 16 (zero rows, stratum 0).

    Why: the band product is most of a gradient's cost, and real data fill few of the pairs (70 of the
    308 on the bundled Q4_K_M -> Q3_K_M pair, 34 of 192 on 40 simulated items).

    Examples
    --------
    >>> t = pair_tables(np.array([0, 0, 1]), np.array([2, 2, 0]), convolution_tables(np.eye(3)), 4)
    >>> t["pair_s"][:3].tolist(), t["pair_band"].shape, t["pair_spectra"].shape, t["cell_pair"].tolist()
    ([0, 1, 0], (16, 3, 5), (16, 4), [0, 0, 1, 0])
    """
    pairs, cell_pair = np.unique(np.stack([cell_s, cell_t], 1), axis=0, return_inverse=True)
    n_p = -(-len(pairs) // 16) * 16
    out = {
        "pair_s": pad_rows(pairs[:, 0], n_p),
        "pair_spectra": pad_rows(tables["e2_spectra"][pairs[:, 1]], n_p),
        "cell_pair": pad_rows(cell_pair.ravel(), n_cells),
    }
    band = tables.get("e2_band")
    if band is not None and n_p * band[0].nbytes <= BAND_TABLE_MAX_BYTES:
        out["pair_band"] = pad_rows(band[pairs[:, 1]], n_p)
    return out


def spectrum_length(n_nodes: int) -> int:
    """The FFT length of the band product on ``n_nodes`` grid nodes: the smallest even 5-smooth number (fast for
    the FFT) of at least ``2 n_nodes - 1``, so that the circular convolution of a kernel row (``2J - 1`` offsets)
    with a binomial row (``J`` nodes) wraps around only onto outputs the product does not read.

    Examples
    --------
    >>> spectrum_length(101), spectrum_length(3)
    (216, 6)
    """
    length = 2 * n_nodes - 1
    while True:
        rest = length
        for factor in (2, 3, 5):
            while rest % factor == 0:
                rest //= factor
        if rest == 1 and length % 2 == 0:
            return length
        length += 1


def band_spectra(e: np.ndarray) -> np.ndarray:
    """The discrete Fourier transforms of the binomial rows ``e`` (row, node), of length
    :func:`spectrum_length`, in double precision: what the band product by FFT multiplies with each kernel row's
    (:func:`~bayesrc.bayes.change_likelihood.cell_loglik`).

    Examples
    --------
    >>> band_spectra(np.ones((2, 3))).shape
    (2, 4)
    """
    return np.fft.rfft(np.asarray(e, dtype=np.float64), spectrum_length(e.shape[-1]), axis=-1)


def outcome_bucket(n: int) -> int:
    """Outcome rows padded to a multiple of 8 (they cost matrix columns; shapes shared between fits: new samples of
    the bundled pair have 12-16 outcomes for version 1 and 24-32 for version 2, so with multiples of 4 most of its
    refits compiled a sampler of their own)."""
    return -(-n // 8) * 8


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


def strata_hyper(strata: StrataMap | StrataCells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta):
    """Per-domain ``mu_theta, sigma_theta, shift`` (+ per-level ``alpha``, ``gamma``, ``sigma_delta`` and
    per-stratum ``eta``) expanded to the cells' strata; without a covariate the strata are the
    domains and the one ``sigma_delta`` is repeated for each. Works on the last axis (numpy, jax
    or pytensor)."""
    if strata.stratum_dom is None:
        return mu_theta, sigma_theta, shift, sigma_delta[..., None] + 0.0 * shift
    sd, sg = strata.stratum_dom, strata.stratum_group
    return (
        mu_theta[..., sd] + alpha[..., sg],
        sigma_theta[..., sd],
        shift[..., sd] + gamma[..., sg] + eta,
        sigma_delta[..., sg],
    )
