"""Simulated K-sample trials with known per-item truth.

The generator mimics the reference study's data (paper 001): items whose
difficulty varies widely within domain (so many items sit at floor or ceiling),
a real share of items that do not change between versions, domain-level version
shifts, and optional missing answers. Truth is returned alongside the trials so
tests can check recovery and coverage.

Generative model (logit scale)::

    theta_i ~ Normal(mu_domain[d_i], sigma_theta)            # item easiness in v1
    changed_i ~ Bernoulli(pi_change)
    delta_i = changed_i * Normal(shift_domain[d_i], sigma_delta)
    p_i,v1 = expit(theta_i),  p_i,v2 = expit(theta_i + delta_i)
    correct_i,v,k ~ Bernoulli(p_i,v)   for k < K_i,v
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from bayesrc.data.counts import item_counts
from bayesrc.data.seeds import seed_salt
from bayesrc.data.trials import normalise_trials

LETTERS = "ABCDEFGHIJ"
DEFAULT_DOMAINS = ("physics", "law", "psychology", "economics")


@dataclass(frozen=True)
class SimulatedPair:
    """Two versions' trials and the truth that generated them.

    Examples
    --------
    >>> sim = simulate_pair(50, 10, seed=1)
    >>> {"item_id", "p_v1", "p_v2", "delta_p", "changed"} <= set(sim.truth.columns)
    True
    """

    trials_v1: pd.DataFrame
    trials_v2: pd.DataFrame
    truth: pd.DataFrame  # item_id, domain, p_v1, p_v2, delta_p, changed


def domain_blocks(domains: Sequence[str], n_items: int) -> np.ndarray:
    """Each simulated item's domain: the items split into consecutive, near-equal blocks, one per domain.

    Parameters
    ----------
    domains : sequence of str
        The domains, in the order their blocks follow each other.
    n_items : int
        How many items.

    Returns
    -------
    numpy.ndarray
        ``n_items`` domain names (object dtype).

    Examples
    --------
    >>> domain_blocks(("law", "physics"), 5).tolist()
    ['law', 'law', 'law', 'physics', 'physics']
    """
    return np.array([domains[i * len(domains) // n_items] for i in range(n_items)], dtype=object)


def truth_table(
    id_prefix: str, domain: np.ndarray, theta: np.ndarray, delta: np.ndarray, changed: np.ndarray, **labels: np.ndarray
) -> pd.DataFrame:
    """The per-item truth of a simulated pair: ids, domains, the logits and the two versions' true accuracies.

    Parameters
    ----------
    id_prefix : str
        The items' ids are this and the item's index in five digits (``q00000``, ...).
    domain : numpy.ndarray
        Each item's domain.
    theta : numpy.ndarray
        Each item's easiness in the reference version (logit scale).
    delta : numpy.ndarray
        Each item's change on the logit scale (0 where it did not change).
    changed : numpy.ndarray of bool
        Whether the item changed.
    **labels : numpy.ndarray
        Further item columns (e.g. ``correct_answer``), placed after ``domain``.

    Returns
    -------
    pandas.DataFrame
        ``item_id, item_index, domain, *labels, theta, delta_logit, p_v1, p_v2, delta_p, changed``, with
        ``p_v1 = expit(theta)`` and ``p_v2 = expit(theta + delta)``.

    Examples
    --------
    >>> import numpy as np
    >>> t = truth_table("q", np.array(["law", "law"]), np.zeros(2), np.array([0.0, 1.0]), np.array([False, True]))
    >>> t["item_id"].tolist(), t["p_v2"].round(3).tolist()
    (['q00000', 'q00001'], [0.5, 0.731])
    """
    p1, p2 = expit(theta), expit(theta + delta)
    return pd.DataFrame(
        {
            "item_id": [f"{id_prefix}{i:05d}" for i in range(theta.size)],
            "item_index": np.arange(theta.size),
            "domain": domain,
            **labels,
            "theta": theta,
            "delta_logit": delta,
            "p_v1": p1,
            "p_v2": p2,
            "delta_p": p2 - p1,
            "changed": changed,
        }
    )


def item_truth(
    n_items: int = 2000,
    *,
    domains: Sequence[str] = DEFAULT_DOMAINS,
    domain_mean: Mapping[str, float] | None = None,
    domain_shift: Mapping[str, float] | None = None,
    sigma_theta: float = 5.0,
    sigma_delta: float = 3.0,
    pi_change: float = 0.5,
    seed: int | np.random.Generator = 0,
) -> pd.DataFrame:
    """Draw per-item true accuracies for two versions (see module docstring).

    Examples
    --------
    >>> t = item_truth(100, seed=1)
    >>> len(t), bool(((t["p_v1"] > 0) & (t["p_v1"] < 1)).all())
    (100, True)
    """
    rng = np.random.default_rng(seed)
    domains = list(domains)
    domain_mean = dict(domain_mean or {d: m for d, m in zip(domains, np.linspace(-1.0, 0.6, len(domains)))})
    domain_shift = dict(domain_shift or {d: s for d, s in zip(domains, np.linspace(-0.6, 0.6, len(domains)))})
    dom = domain_blocks(domains, n_items)
    theta = np.array([domain_mean[d] for d in dom]) + rng.normal(0.0, sigma_theta, n_items)
    changed = rng.random(n_items) < pi_change
    delta = np.where(changed, np.array([domain_shift[d] for d in dom]) + rng.normal(0.0, sigma_delta, n_items), 0.0)
    return truth_table("q", dom, theta, delta, changed)


def trials_from_accuracy(
    item_ids: Sequence[str],
    domains: Sequence[str],
    p: np.ndarray,
    *,
    model: str,
    k: int | np.ndarray = 10,
    missing_rate: float = 0.0,
    seed: int | np.random.Generator = 0,
    item_index: Sequence[int] | None = None,
    answers: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Bernoulli K-sample trials for items with true accuracy ``p``.

    ``k`` may be an array (K per item). Seeds follow the version-specific rule
    ``seed = salt(model) + item_index * 10 + k`` (:mod:`bayesrc.data.seeds`): the
    versions' draws are independent, and the seeds say so. Answers are letters A-J; ``answers`` fixes
    each item's correct letter (default: drawn at random).

    Examples
    --------
    >>> import numpy as np
    >>> t = trials_from_accuracy(["q1", "q2"], ["d", "d"], np.array([0.9, 0.1]), model="m", k=5, seed=0)
    >>> len(t)
    10
    """
    rng = np.random.default_rng(seed)
    n = len(item_ids)
    ks = np.broadcast_to(np.asarray(k), (n,)).astype(int)
    idx = np.arange(n) if item_index is None else np.asarray(item_index)
    rows_item = np.repeat(np.arange(n), ks)
    rows_k = np.concatenate([np.arange(kk) for kk in ks]) if n else np.array([], dtype=int)
    answer = np.array(list(LETTERS))[rng.integers(0, 10, n)] if answers is None else np.asarray(answers, dtype="<U1")
    correct = rng.random(rows_item.size) < np.asarray(p)[rows_item]
    missing = rng.random(rows_item.size) < missing_rate
    wrong = np.array(list(LETTERS))[rng.integers(0, 10, rows_item.size)]
    # A wrong answer is any letter but the key.
    clash = wrong == answer[rows_item]
    wrong[clash] = np.array(list(LETTERS))[(np.searchsorted(list(LETTERS), wrong[clash]) + 1) % 10]
    extracted = np.where(correct, answer[rows_item], wrong).astype(object)
    extracted[missing] = None
    is_correct = pd.array(np.where(missing, None, correct), dtype="boolean")
    return pd.DataFrame(
        {
            "item_id": np.asarray(item_ids, dtype=object)[rows_item],
            "item_index": idx[rows_item],
            "domain": np.asarray(domains, dtype=object)[rows_item],
            "model": model,
            "k": rows_k,
            "seed": seed_salt(str(model)) + idx[rows_item] * 10 + rows_k,
            "response": [e if e is not None else "I am not sure." for e in extracted],
            "extracted": extracted,
            "correct_answer": answer[rows_item],
            "is_correct": is_correct,
            "is_missing": missing,
        }
    )


def simulate_pair(
    n_items: int = 2000,
    k: int = 10,
    *,
    models: tuple[str, str] = ("model-v1", "model-v2"),
    missing_rate: float = 0.0,
    seed: int = 0,
    truth: pd.DataFrame | None = None,
    **truth_kwargs,
) -> SimulatedPair:
    """Simulate a version pair: truth (or the one given) plus K-sample trials of each.

    Examples
    --------
    >>> sim = simulate_pair(50, 10, seed=1)
    >>> len(sim.trials_v1), int(sim.truth["changed"].sum()) >= 0
    (500, True)
    """
    ss = np.random.SeedSequence(seed)
    s_truth, s1, s2 = ss.spawn(3)
    if truth is None:
        truth = item_truth(n_items, seed=np.random.default_rng(s_truth), **truth_kwargs)
    common = dict(
        k=k,
        missing_rate=missing_rate,
        item_index=truth["item_index"],
        answers=truth["correct_answer"] if "correct_answer" in truth else None,
    )
    t1, t2 = (
        trials_from_accuracy(
            truth["item_id"],
            truth["domain"],
            truth[f"p_{version}"].to_numpy(),
            model=model,
            seed=np.random.default_rng(s),
            **common,
        )
        for version, model, s in (("v1", models[0], s1), ("v2", models[1], s2))
    )
    return SimulatedPair(t1, t2, truth)


def letter_shift_truth(
    n_items: int = 300,
    *,
    domains: Sequence[str] = ("repeat", "forward", "backward"),
    letters: str = "ABC",
    letter_shift: Mapping[str, float] | None = None,
    letter_level: Mapping[str, float] | None = None,
    mu_theta: float = -0.5,
    sigma_theta: float = 1.0,
    sigma_delta: float | Mapping[str, float] = 0.35,
    pi_change: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> pd.DataFrame:
    """Per-item truth shaped like a real quantisation change (issue 12's exact Gemma pair).

    Near-universal small changes whose direction follows the correct option's letter: the
    new version prefers some letters, so items keyed on them rise and the others fall; the old
    version already has letter preferences of its own (the real Q4_K_M run answers C-keyed
    items correctly with p = 0.15 on average, B-keyed ones with p = 0.51)::

        theta_i ~ Normal(mu_theta + letter_level[letter_i], sigma_theta),  letter_i uniform over ``letters``
        changed_i ~ Bernoulli(pi_change)
        delta_i = changed_i * Normal(letter_shift[letter_i], sigma_delta[letter_i])

    ``sigma_delta``: one spread, or one per letter (the real pair's items spread 0.20-0.47 logits
    about their letter's change, by letter). Returns the columns of :func:`item_truth` plus ``correct_answer``.

    Examples
    --------
    >>> t = letter_shift_truth(30, seed=0)
    >>> sorted(t["correct_answer"].unique())
    ['A', 'B', 'C']
    """
    rng = np.random.default_rng(seed)
    shifts = dict(letter_shift or {"A": 0.8, "B": -0.5, "C": -0.3})
    levels = dict(letter_level or {"A": 0.0, "B": 0.6, "C": -1.2})
    dom = domain_blocks(domains, n_items)
    letter = np.array(list(letters))[rng.integers(0, len(letters), n_items)]
    theta = mu_theta + np.array([levels.get(x, 0.0) for x in letter]) + rng.normal(0.0, sigma_theta, n_items)
    changed = rng.random(n_items) < pi_change
    spread = (
        np.array([sigma_delta[x] for x in letter])
        if isinstance(sigma_delta, Mapping)
        else np.full(n_items, float(sigma_delta))
    )
    delta = np.where(
        changed, np.array([shifts.get(x, 0.0) for x in letter]) + rng.normal(0.0, 1.0, n_items) * spread, 0.0
    )
    return truth_table("s", dom, theta, delta, changed, correct_answer=letter)


@dataclass(frozen=True)
class SimulatedFamily:
    """``V`` versions' trials and counts on one item set, and the truth that generated them.

    ``p`` holds each item's true accuracy per version (item x version, the counts' order),
    ``mean_accuracy`` each version's true mean accuracy over the items, ``truth`` the per-item
    table of the reference version (:func:`item_truth`'s columns) with ``p_<version>``,
    ``delta_logit_<version>`` and ``changed_<version>`` per other version.

    Examples
    --------
    >>> fam = simulate_family(40, 10, versions=3, seed=1)
    >>> fam.p.shape, list(fam.mean_accuracy.index) == fam.versions
    ((40, 3), True)
    """

    trials: list[pd.DataFrame]
    counts: object  # xarray.Dataset (item x version), as :func:`bayesrc.data.item_counts` builds it
    truth: pd.DataFrame
    p: np.ndarray
    mean_accuracy: pd.Series
    versions: list[str]


def _per_version(value: float | Sequence[float], n: int, name: str) -> list[float]:
    """``value`` repeated for ``n`` versions, or the ``n`` values given (one per non-reference version)."""
    values = [float(value)] * n if np.isscalar(value) else [float(v) for v in value]
    if len(values) != n:
        raise ValueError(f"{name}: need one value per non-reference version ({n}), got {len(values)}")
    return values


def simulate_family(
    n_items: int = 2000,
    k: int = 10,
    *,
    versions: int | Sequence[str] = 4,
    shifts: float | Sequence[float] = 0.0,
    pi_change: float | Sequence[float] = 0.5,
    sigma_delta: float | Sequence[float] = 1.0,
    sigma_theta: float = 1.5,
    missing_rate: float = 0.0,
    seed: int = 0,
    **truth_kwargs,
) -> SimulatedFamily:
    """Simulate a family of versions evaluated on one item set: the first is the reference, each
    other version ``v`` changes each item independently of the others given its easiness::

        theta_i ~ Normal(mu_domain[d_i], sigma_theta)                (shared: item_truth's)
        changed_iv ~ Bernoulli(pi_change_v)
        delta_iv = changed_iv * Normal(shifts_v, sigma_delta_v)      p_iv = expit(theta_i + delta_iv)

    ``shifts``, ``pi_change`` and ``sigma_delta``: one value for every non-reference version or one
    per version; ``versions``: their number or their labels. Each version's changes come from its own
    :func:`item_truth` draw (domain shifts all ``shifts_v``); ``truth_kwargs`` go to every such draw.

    Examples
    --------
    >>> fam = simulate_family(60, 10, versions=4, shifts=[0.8, 0.0, -0.8], seed=3)
    >>> dict(fam.counts.sizes)["version"], fam.versions
    (4, ['model-v1', 'model-v2', 'model-v3', 'model-v4'])
    >>> bool(fam.mean_accuracy.iloc[1] > fam.mean_accuracy.iloc[3])
    True
    """
    labels = [f"model-v{i + 1}" for i in range(versions)] if isinstance(versions, int) else [str(v) for v in versions]
    if len(labels) < 2:
        raise ValueError(f"a family needs at least two versions, got {labels}")
    n_other = len(labels) - 1
    shift, pis, spreads = (
        _per_version(shifts, n_other, "shifts"),
        _per_version(pi_change, n_other, "pi_change"),
        _per_version(sigma_delta, n_other, "sigma_delta"),
    )
    seeds = np.random.SeedSequence(seed).spawn(2 * len(labels) + 1)
    domains = truth_kwargs.pop("domains", DEFAULT_DOMAINS)
    draws = [
        item_truth(
            n_items,
            domains=domains,
            domain_shift={d: s for d in domains},
            sigma_theta=sigma_theta,
            sigma_delta=sd,
            pi_change=pc,
            seed=np.random.default_rng(seeds[v]),
            **truth_kwargs,
        )
        for v, (s, sd, pc) in enumerate(zip([0.0, *shift], [1.0, *spreads], [0.0, *pis]))
    ]
    truth = (
        draws[0].rename(columns={"p_v1": f"p_{labels[0]}"}).drop(columns=["p_v2", "delta_p", "delta_logit", "changed"])
    )
    for label, d in zip(labels[1:], draws[1:]):
        truth[f"delta_logit_{label}"], truth[f"changed_{label}"] = d["delta_logit"].to_numpy(), d["changed"].to_numpy()
        truth[f"p_{label}"] = expit(truth["theta"].to_numpy() + d["delta_logit"].to_numpy())
    p = truth[[f"p_{v}" for v in labels]].to_numpy()
    # one key per item, in every version
    answers = np.array(list(LETTERS))[np.random.default_rng(seeds[-1]).integers(0, 10, n_items)]
    common = dict(k=k, missing_rate=missing_rate, item_index=truth["item_index"], answers=answers)
    trials = [
        trials_from_accuracy(
            truth["item_id"],
            truth["domain"],
            p[:, v],
            model=label,
            seed=np.random.default_rng(seeds[len(labels) + v]),
            **common,
        )
        for v, label in enumerate(labels)
    ]
    return SimulatedFamily(
        trials,
        item_counts(*trials, versions=labels),
        truth,
        p,
        pd.Series(p.mean(0), index=labels, name="mean_accuracy"),
        labels,
    )


def ordinal_cutpoints(levels: int, spread: float = 1.5) -> np.ndarray:
    """Evenly spaced cutpoints of a cumulative-logit score on ``levels`` levels, from ``-spread`` to ``spread``.

    Examples
    --------
    >>> ordinal_cutpoints(5).tolist()
    [-1.5, -0.5, 0.5, 1.5]
    """
    return np.linspace(-spread, spread, levels - 1)


def ordinal_mean(theta: np.ndarray, cutpoints: np.ndarray) -> np.ndarray:
    """The mean score, on levels 1 to ``len(cutpoints) + 1``, of a cumulative-logit item of easiness ``theta``:
    ``P(score > l) = expit(theta - c_l)``, so the mean is ``1 + sum_l expit(theta - c_l)``.

    Examples
    --------
    >>> float(ordinal_mean(np.array([0.0]), ordinal_cutpoints(5))[0])
    3.0
    """
    return 1.0 + expit(np.asarray(theta, float)[..., None] - cutpoints).sum(-1)


@dataclass(frozen=True)
class SimulatedGradedPair:
    """Two versions' graded trials (a ``score`` per sample on levels 1 to ``levels``) and their truth.

    ``truth`` holds :func:`item_truth`'s columns (``theta``, ``delta_logit``, ``changed``, ...) and each item's true
    mean score per version (``mean_v1``, ``mean_v2``) and its change ``delta_mean``.

    Examples
    --------
    >>> sim = simulate_graded_pair(20, 5, seed=1)
    >>> sorted(sim.trials_v1["score"].unique().tolist())[0] >= 1, {"mean_v1", "delta_mean"} <= set(sim.truth)
    (True, True)
    """

    trials_v1: pd.DataFrame
    trials_v2: pd.DataFrame
    truth: pd.DataFrame
    levels: int


def simulate_graded_pair(
    n_items: int = 300,
    k: int = 10,
    *,
    levels: int = 5,
    models: tuple[str, str] = ("model-v1", "model-v2"),
    seed: int = 0,
    sigma_theta: float = 1.5,
    sigma_delta: float = 1.5,
    **truth_kwargs,
) -> SimulatedGradedPair:
    """Simulate a graded version pair: a judge's rating of each sample on ``levels`` levels (1 to ``levels``).

    Each item's easiness and change come from :func:`item_truth` (logit scale); a sample's score is cumulative
    logit, ``P(score > l) = expit(theta_i + delta_i - c_l)`` with :func:`ordinal_cutpoints`, so an item that changes
    moves its whole score distribution; the truth holds the exact mean scores (:func:`ordinal_mean`).

    Examples
    --------
    >>> sim = simulate_graded_pair(30, 10, pi_change=0.0, seed=2)
    >>> len(sim.trials_v1), bool((sim.truth["delta_mean"] == 0).all())
    (300, True)
    """
    s_truth, s1, s2 = np.random.SeedSequence(seed).spawn(3)
    truth = item_truth(
        n_items, sigma_theta=sigma_theta, sigma_delta=sigma_delta, seed=np.random.default_rng(s_truth), **truth_kwargs
    )
    cut = ordinal_cutpoints(levels)
    theta = truth["theta"].to_numpy()
    logits = {"v1": theta, "v2": theta + truth["delta_logit"].to_numpy()}
    truth = truth.assign(mean_v1=ordinal_mean(logits["v1"], cut), mean_v2=ordinal_mean(logits["v2"], cut))
    truth["delta_mean"] = truth["mean_v2"] - truth["mean_v1"]
    trials = []
    for version, model, s in (("v1", models[0], s1), ("v2", models[1], s2)):
        above = expit(np.repeat(logits[version], k)[:, None] - cut)  # (item x k, level - 1): P(score > l)
        score = 1 + (np.random.default_rng(s).random((n_items * k, 1)) < above).sum(1)
        raw = pd.DataFrame(
            {
                "item_id": np.repeat(truth["item_id"].to_numpy(), k),
                "domain": np.repeat(truth["domain"].to_numpy(), k),
                "model": model,
                "k": np.tile(np.arange(k), n_items),
                "score": score.astype(float),
            }
        )
        trials.append(normalise_trials(raw))
    return SimulatedGradedPair(trials[0], trials[1], truth, levels)
