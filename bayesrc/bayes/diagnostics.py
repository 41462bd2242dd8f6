"""The convergence gate (SPEC section 3): R-hat, bulk / tail ESS and divergences.

A fit passes when every gated quantity has rank-normalised split R-hat <= ``max_rhat``,
bulk and tail ESS >= ``min_ess`` and the sampler reported at most ``max_divergences``
divergent transitions (after warm-up). Anything non-finite fails the gate.

R-hat, ESS and the mean's Monte Carlo SE are Vehtari et al. (2021)'s, computed exactly as
arviz-stats computes them (tests/test_bayes_units.py compares them), but for all of a
variable's entries at once: arviz-stats loops over entries in Python, which took 11 s of a
2,000-item beta-binomial fit whose item accuracies ``p`` (4,000 entries) are gated. Many entries
are taken :data:`ENTRY_CHUNK` at a time on the machine's cores (:func:`by_entries`): each entry's
numbers are computed alone, so they do not depend on the chunking.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri

from bayesrc.config import GateConfig
from bayesrc.errors import InputError
from bayesrc.fields import finite_number
from bayesrc.results import Result

# The tail ESS: the worse of two quantiles' ESS. These are arviz-stats' (its default interval,
# rcParams["stats.ci_prob"] = 0.89), which the gate has always used; Vehtari et al. use 5% / 95%.
TAIL_PROBS = (1 - 0.89, 0.89)
# Entries per chunk: a chunk's sorts and FFTs (64 entries x 4,000 draws: 2 MB) stay in the cache, and NumPy
# releases the GIL in them, so chunks run in parallel threads. 4,000 entries: 2.0 s whole, 1.3 s in chunks on
# one core, 0.7 s on two.
ENTRY_CHUNK = 64


def _valid(x: np.ndarray, min_chains: int) -> np.ndarray:
    """Per entry of ``x`` (..., chain, draw): no NaN, enough chains and at least 4 draws."""
    ok = ~np.isnan(x).any(axis=(-2, -1))
    return ok & (x.shape[-2] >= min_chains) & (x.shape[-1] >= 4)


def _split_chains(x: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as two chains (the middle draw of an odd count dropped)."""
    half = x.shape[-1] // 2
    return np.concatenate([x[..., :half], x[..., -half:]], axis=-2)


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Normal scores of the ranks over each entry's pooled draws (Blom's offset 3/8)."""
    flat = x.reshape(-1, x.shape[-2] * x.shape[-1])
    return ndtri((_average_ranks(flat) - 0.375) / (flat.shape[-1] + 0.25)).reshape(x.shape)


def _average_ranks(rows: np.ndarray) -> np.ndarray:
    """Ranks 1..n within each row of ``rows`` (2-D), tied values sharing their mean rank, a row with a NaN all NaN:
    ``scipy.stats.rankdata(rows, "average", axis=-1)``, which took 3 of a 2,000-item beta-binomial fit's 15 s (its
    4,000 gated item accuracies); here one unstable sort, and the ties (rare in continuous draws) resolved only in
    the rows that have them.

    Examples
    --------
    >>> _average_ranks(np.array([[0.3, 0.1, 0.3, 0.2], [4.0, 3.0, 2.0, 1.0]]))
    array([[3.5, 1. , 3.5, 2. ],
           [4. , 3. , 2. , 1. ]])
    """
    order = np.argsort(rows, axis=-1)
    ordered = np.take_along_axis(rows, order, -1)
    n = rows.shape[-1]
    rank = np.tile(np.arange(1.0, n + 1), (rows.shape[0], 1))
    starts = np.ones(ordered.shape, bool)
    np.not_equal(ordered[:, 1:], ordered[:, :-1], out=starts[:, 1:])
    tied = ~starts.all(-1)
    if tied.any():  # a run of equal values from position first to last shares (first + last) / 2 + 1
        pos, new = np.arange(n), starts[tied]
        first = np.maximum.accumulate(np.where(new, pos, 0), axis=-1)
        ends = np.ones(new.shape, bool)
        ends[:, :-1] = new[:, 1:]
        last = np.minimum.accumulate(np.where(ends, pos, n)[:, ::-1], axis=-1)[:, ::-1]
        rank[tied] = (first + last) / 2 + 1
    out = np.empty(rows.shape)
    np.put_along_axis(out, order, rank, -1)
    out[np.isnan(rows).any(-1)] = np.nan
    return out


def _rhat_basic(x: np.ndarray) -> np.ndarray:
    """Gelman-Rubin R-hat of each entry's chains (``x``: ..., chain, draw)."""
    n = x.shape[-1]
    between = n * np.var(x.mean(-1), axis=-1, ddof=1)
    within = np.var(x, axis=-1, ddof=1).mean(-1)
    return np.sqrt((between / within + n - 1) / n)


def _autocov(x: np.ndarray) -> np.ndarray:
    """Autocovariance at every lag along the last axis (FFT, biased: divided by the length)."""
    n = x.shape[-1]
    m = 2 * n  # zero padding beyond the longest lag
    f = np.fft.rfft(x - x.mean(-1, keepdims=True), n=m, axis=-1)
    return np.fft.irfft(f * np.conj(f), n=m, axis=-1)[..., :n] / n


def _ess_chains(x: np.ndarray) -> np.ndarray:
    """ESS of each entry's chains (..., chain, draw) by Geyer's initial positive and monotone
    sequences of paired autocorrelations, as arviz-stats ``_ess`` does it, loop-free."""
    n_chain, n = x.shape[-2:]
    acov = _autocov(x)
    mean_var = acov[..., 0].mean(-1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n + (np.var(x.mean(-1), axis=-1, ddof=1) if n_chain > 1 else 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (mean_var[..., None] - acov.mean(-2)) / var_plus[..., None]
    rho[..., 0] = 1.0
    n_pairs = max((n - 2 + 1) // 2, 1)  # pairs 1.. are read while 2k - 1 < n - 3; pair 0 always
    pairs = rho[..., 0 : 2 * n_pairs : 2] + rho[..., 1 : 2 * n_pairs : 2]  # (..., pair)
    # K: the first pair after the 0th whose sum is <= 0 (else the last pair read).
    stop = np.concatenate([np.zeros_like(pairs[..., :1], bool), pairs[..., 1:] <= 0], -1)
    stop[..., -1] = True
    k_stop = np.where(pairs[..., 0] > 0, np.argmax(stop, -1), 0)
    monotone = np.minimum.accumulate(pairs, axis=-1)
    summed = np.where(np.arange(pairs.shape[-1]) < k_stop[..., None], monotone, 0.0).sum(-1)
    last = np.take_along_axis(rho, (2 * k_stop)[..., None], -1)[..., 0]
    last_pair = np.take_along_axis(pairs, k_stop[..., None], -1)[..., 0]
    last = np.where((last > 0) | ((last_pair >= 0) & (k_stop > 0)), last, 0.0)
    size = n_chain * n
    tau = np.maximum(-1.0 + 2.0 * summed + last, 1.0 / np.log10(size))
    out = size / tau
    constant = (x.max(axis=(-2, -1)) - x.min(axis=(-2, -1))) < np.finfo(float).resolution
    return np.where(constant, float(size), np.where(np.isnan(rho).any(-1), np.nan, out))


def _ess_tail(x: np.ndarray) -> np.ndarray:
    """The worse of the :data:`TAIL_PROBS` quantiles' ESS (of each quantile's indicator)."""
    q = np.quantile(x, TAIL_PROBS, axis=(-2, -1))  # (prob, ...)
    return np.minimum(*(_ess_chains(_split_chains((x <= qi[..., None, None]).astype(float))) for qi in q))


def by_entries(fn: Callable[[np.ndarray], dict | np.ndarray], x: np.ndarray, chunk: int = ENTRY_CHUNK):
    """``fn`` of ``x`` (..., chain, draw), :data:`ENTRY_CHUNK` entries at a time on the process's cores: ``fn``
    maps (entry, chain, draw) to one value per entry (an array, or a dict of arrays), each entry's alone.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(3, 70, 2, 50))
    >>> bool(np.array_equal(by_entries(_rhat_basic, x), _rhat_basic(x)))
    True
    """
    flat = x.reshape(-1, *x.shape[-2:])
    parts = [flat[i : i + chunk] for i in range(0, max(len(flat), 1), chunk)]
    if len(parts) == 1:
        out = [fn(flat)]
    else:
        with ThreadPoolExecutor(min(len(parts), _cores())) as pool:
            out = list(pool.map(fn, parts))
    if isinstance(out[0], dict):
        return {k: np.concatenate([o[k] for o in out]).reshape(x.shape[:-2]) for k in out[0]}
    return np.concatenate(out).reshape(x.shape[:-2])


def _cores() -> int:
    """The cores this process may run on (its affinity on Linux, else every core)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def convergence(x: np.ndarray) -> dict[str, np.ndarray]:
    """Rank-normalised split R-hat (the larger of its bulk and folded values), bulk ESS and tail
    ESS per entry of ``x`` (..., chain, draw). R-hat is NaN with one chain; all are NaN under 4
    draws or with a NaN draw.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(3, 4, 500))
    >>> c = convergence(x)
    >>> bool((c["r_hat"] < 1.01).all()), bool((c["ess_bulk"] > 1500).all())
    (True, True)
    """
    return by_entries(_convergence, np.asarray(x, float))


def _convergence(x: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`convergence` of the entries of ``x`` (entry, chain, draw) in one pass."""
    split = _split_chains(x)
    z = _z_scale(split)
    folded = np.abs(split - np.median(split, axis=(-2, -1), keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        r_hat = np.maximum(_rhat_basic(z), _rhat_basic(_z_scale(folded)))
    ok = _valid(x, 1)
    return {
        "r_hat": np.where(_valid(x, 2), r_hat, np.nan),
        "ess_bulk": np.where(ok, _ess_chains(z), np.nan),
        "ess_tail": np.where(ok, _ess_tail(x), np.nan),
    }


def ess_bulk(x: np.ndarray) -> np.ndarray:
    """:func:`convergence`'s bulk ESS alone (rank-normalised split chains), per entry of ``x`` (..., chain, draw).

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(3, 4, 500))
    >>> bool(np.allclose(ess_bulk(x), convergence(x)["ess_bulk"]))
    True
    """
    return by_entries(_ess_bulk, np.asarray(x, float))


def _ess_bulk(x: np.ndarray) -> np.ndarray:
    return np.where(_valid(x, 1), _ess_chains(_z_scale(_split_chains(x))), np.nan)


def mcse_mean(x: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of each entry's posterior mean (..., chain, draw): sd / sqrt(ESS
    of the mean, on the split chains).

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(4, 1000))
    >>> round(float(mcse_mean(x)), 3)
    0.016
    """
    return by_entries(_mcse_mean, np.asarray(x, float))


def _mcse_mean(x: np.ndarray) -> np.ndarray:
    return np.std(x.reshape(len(x), -1), axis=-1, ddof=1) / np.sqrt(_ess_mean(x))


def _ess_mean(x: np.ndarray) -> np.ndarray:
    """The ESS of each entry's mean (entry, chain, draw; any float dtype), on the split chains."""
    x = np.asarray(x, float)
    return np.where(_valid(x, 1), _ess_chains(_split_chains(x)), np.nan)


def mean_relative_ess(post, max_entries: int = 8192) -> float:
    """PSIS-LOO's relative efficiency as arviz-stats ``loo`` takes it by default: the mean over every
    entry of every variable of ``post`` (chain, draw, ...) of its mean's ESS, over the draws.

    The same number (tests/test_bayes_units.py), loop-free and in chunks (:func:`by_entries`), up to
    ``max_entries`` entries; beyond, the mean over every k-th entry (k the smallest step that keeps at
    most ``max_entries``), an estimate within ~1% (the tests): the item draws make ~100,000 entries at
    12,000 items, 39 s of the fit's checks even loop-free, and the number only sets the length of
    PSIS's Pareto tail (through its square root) and the Monte Carlo SE.

    Examples
    --------
    >>> import xarray as xr
    >>> post = xr.Dataset({"a": (("chain", "draw"), np.random.default_rng(0).normal(size=(4, 500)))})
    >>> round(mean_relative_ess(post), 1)
    1.0
    """
    n_samples = post.sizes["chain"] * post.sizes["draw"]
    # not the item -> cell map
    post = post[[k for k, da in post.data_vars.items() if {"chain", "draw"} <= set(da.dims)]]
    sizes = [int(np.prod(da.shape)) // n_samples for da in post.data_vars.values()]
    step = -(-sum(sizes) // max_entries)
    total, count, offset = 0.0, 0, 0
    for da, size in zip(post.data_vars.values(), sizes):
        x = da.transpose(..., "chain", "draw").values  # a view: entries are picked before the copy to float64
        x = x.reshape(-1, *x.shape[-2:])[(-offset) % step :: step]  # every step-th entry of all variables together
        offset += size
        ess = by_entries(_ess_mean, x)  # in float64 a chunk at a time, not the whole (0.26 GB at 8,192 x 4,000 draws)
        total, count = total + ess.sum(), count + ess.size
    return float(total / count / n_samples)


@dataclass(frozen=True)
class Diagnostics:
    """The convergence gate's verdict (:func:`gate`): worst R-hat, bulk and tail ESS, divergences.

    ``passed`` iff max R-hat <= ``thresholds["max_rhat"]``, both ESS >= ``thresholds["min_ess"]``
    and divergences <= ``thresholds["max_divergences"]`` (Vehtari et al. 2021's rank-normalised
    R-hat and ESS, via arviz_stats); ``worst`` names the variable that decided it.

    Examples
    --------
    >>> d = Diagnostics(1.004, 812.0, 655.0, 0, True, {"max_rhat": 1.01, "min_ess": 400.0, "max_divergences": 0},
    ...                 "sigma_delta")
    >>> d.passed, d.to_dict()["min_ess_tail"]
    (True, 655.0)
    """

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    passed: bool
    thresholds: dict
    worst: str

    def to_dict(self) -> dict:
        return asdict(self)


def _extreme(per_variable: dict[str, np.ndarray], worst: str) -> tuple[float, str]:
    """Largest (``worst="max"``, R-hat) or smallest (``"min"``, ESS) value over all variables.

    Non-finite values (a constant chain, NaN draws) count as the worst possible value.
    """
    bad = np.inf if worst == "max" else 0.0
    best, where = None, ""
    for name, values in per_variable.items():
        vals = np.asarray(values, dtype=float).ravel()
        if vals.size == 0:
            continue
        vals = np.where(np.isfinite(vals), vals, bad)
        v = float(vals.max() if worst == "max" else vals.min())
        if best is None or (v > best if worst == "max" else v < best):
            best, where = v, str(name)
    return (float("nan") if best is None else best), where


def chain_draw_last(da) -> np.ndarray:
    """A posterior variable's values with ``chain`` and ``draw`` as the last two axes (as
    :func:`convergence` takes them).

    Examples
    --------
    >>> import xarray as xr
    >>> chain_draw_last(xr.DataArray(np.zeros((4, 100, 3)), dims=("chain", "draw", "item"))).shape
    (3, 4, 100)
    """
    return np.asarray(da.transpose(..., "chain", "draw").values, float)


def gate(
    dt,
    var_names: list[str],
    config: GateConfig | None = None,
) -> Diagnostics:
    """Check the posterior of ``var_names`` against the gate's thresholds (``config``, default
    :class:`GateConfig`'s; its ``escalate`` is :func:`~bayesrc.bayes.gating.sample_gated`'s business).

    Examples
    --------
    >>> from bayesrc.bayes import fit
    >>> res = fit(counts, model="betabinom")  # doctest: +SKIP
    >>> gate(res.posterior, ["logit_mu", "log_kappa"], GateConfig(min_ess=400)).passed  # doctest: +SKIP
    True
    """
    config = config or GateConfig()
    post = dt["posterior"].to_dataset()[[v for v in var_names if v in dt["posterior"]]]
    per_variable = {name: convergence(chain_draw_last(da)) for name, da in post.data_vars.items()}
    # A constant draw (e.g. a parameter pinned by the data) has undefined R-hat; treat as failed.
    max_r, where_r = _extreme({k: v["r_hat"] for k, v in per_variable.items()}, "max")
    min_b, where_b = _extreme({k: v["ess_bulk"] for k, v in per_variable.items()}, "min")
    min_t, where_t = _extreme({k: v["ess_tail"] for k, v in per_variable.items()}, "min")
    div = int(np.asarray(dt["sample_stats"]["diverging"].values).sum())
    checks = {
        "rhat": max_r <= config.max_rhat,
        "ess_bulk": min_b >= config.min_ess,
        "ess_tail": min_t >= config.min_ess,
        "divergences": div <= config.max_divergences,
    }
    failed = [f"{k} ({where})" for (k, ok), where in zip(checks.items(), (where_r, where_b, where_t, "")) if not ok]
    return Diagnostics(
        max_rhat=max_r,
        min_ess_bulk=min_b,
        min_ess_tail=min_t,
        divergences=div,
        passed=all(checks.values()),
        thresholds=config.thresholds,
        worst=", ".join(failed),
    )


def gate_table(d: Diagnostics) -> pd.DataFrame:
    """Each gated diagnostic of ``d``, its value and the requirement the fit used (a failed gate reads FAILED).

    Examples
    --------
    >>> d = Diagnostics(1.02, 812.0, 655.0, 0, False, {"max_rhat": 1.01, "min_ess": 400.0, "max_divergences": 0},
    ...                 "rhat (pi)")
    >>> gate_table(d).iloc[-1].tolist()
    ['gate', 'FAILED', '']
    """
    t = d.thresholds
    rows = [
        ("max R-hat", d.max_rhat, f"≤ {t['max_rhat']:g}"),
        ("min bulk ESS", d.min_ess_bulk, f"≥ {t['min_ess']:g}"),
        ("min tail ESS", d.min_ess_tail, f"≥ {t['min_ess']:g}"),
        ("divergences", d.divergences, f"≤ {t['max_divergences']:d}"),
        ("gate", "passed" if d.passed else "FAILED", ""),
    ]
    return pd.DataFrame(rows, columns=["diagnostic", "value", "requirement"]).astype({"value": str})


class GatedResult(Result):
    """A result whose payload records the convergence gate (``payload["diagnostics"]``): a pair's
    :class:`~bayesrc.bayes.BayesFit` and a family's :class:`~bayesrc.bayes.JointFit`.

    Examples
    --------
    >>> d = Diagnostics(1.002, 800.0, 650.0, 0, True, GateConfig().thresholds, "")
    >>> GatedResult({"diagnostics": d.to_dict()}).status
    'ok'
    """

    # the thresholds: checked by the property below
    field_kinds = {"diagnostics": "object", "diagnostics.passed": "flag", "runtime_s": "number"}
    # the fit's wall time, every attempt and the item draws
    runtime_s = property(lambda self: self.payload.get("runtime_s") or 0.0)

    @property
    def diagnostics(self) -> Diagnostics:
        recorded = self.payload["diagnostics"]
        try:
            d = Diagnostics(**recorded)
        except TypeError:  # not an object, or not the gate's fields
            raise InputError(
                f"expected the convergence gate's record, got {recorded!r}"[:160], field="diagnostics"
            ) from None
        _check_thresholds(d.thresholds)
        return d

    @property
    def status(self) -> str:
        return "ok" if self.diagnostics.passed else "failed"

    def gate_table(self) -> pd.DataFrame:
        """Each gated diagnostic, its value and the requirement *this fit* used (:func:`gate_table`)."""
        return gate_table(self.diagnostics)


def _check_thresholds(thresholds: object) -> None:
    """The gate's recorded thresholds are numbers (the report prints them); else :class:`InputError` naming the
    field."""
    if not isinstance(thresholds, dict):
        raise InputError(f"expected an object, got {thresholds!r}", field="diagnostics.thresholds")
    for key in ("max_rhat", "min_ess", "max_divergences"):
        finite_number(thresholds.get(key), f"diagnostics.thresholds.{key}", integer=key == "max_divergences")
