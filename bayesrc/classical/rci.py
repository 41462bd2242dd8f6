"""Jacobson-Truax Reliable Change Index adapted to items (paper 001, section 2.2).

For item ``i`` with per-version accuracies ``p_i,v1`` and ``p_i,v2``::

    SEM_m   = SD(p_m) * sqrt(1 - r_xx,m)          (SD with ddof = 1 over items)
    S_diff  = sqrt(SEM_v1^2 + SEM_v2^2)
    RCI_i   = (p_i,v2 - p_i,v1) / S_diff
    class   = improved if RCI > z, deteriorated if RCI < -z, else no_change

Exclusions: (a) fewer than ``ceil(0.6 K)`` valid responses in either version, K being
the number of samples the item was given in that version (6 at K = 10 as in paper 001,
3 at K = 5; a fixed ``min_valid`` overrides the rule), (b) ``p = 0`` in both or ``p = 1``
in both (floor / ceiling).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

IMPROVED, NO_CHANGE, DETERIORATED = "improved", "no_change", "deteriorated"
CLASSES: tuple[str, str, str] = (IMPROVED, NO_CHANGE, DETERIORATED)
EXCLUDED = "excluded"
#: how reports and tables name each class
CLASS_LABELS = {
    IMPROVED: "improved",
    NO_CHANGE: "no reliable change",
    DETERIORATED: "deteriorated",
    EXCLUDED: "excluded",
}
#: how figures colour each class (report and sensitivity figures alike)
CLASS_COLOURS = {IMPROVED: "#1b9e77", NO_CHANGE: "#9e9e9e", DETERIORATED: "#d95f02", EXCLUDED: "#d0d0d0"}
VALID_SHARE = 0.6


SD_BASES = ("analysable", "all")
S_DIFF_METHODS = ("reference", "binomial")
RELIABILITY_BASES = ("all", "analysed")


@dataclass(frozen=True)
class RCISettings:
    """The settings of one RCI classification, carried as one value through the classical layer.

    ``z``: the threshold on ``|RCI|``; ``min_valid``: exclusion rule (a) as a fixed count,
    per-item thresholds of each version (a pair of arrays) or ``None`` (``ceil(0.6 K)``);
    ``sd_basis``: the items whose SD gives S_diff ("analysable" or "all"); ``s_diff``:
    "reference" (the paper's SEM-based S_diff) or "binomial" (per item); ``reliability_basis``:
    the items whose split halves give r_xx ("all" or "analysed"). A value outside its
    choices is a ``ValueError``.

    Examples
    --------
    >>> from dataclasses import replace
    >>> s = RCISettings(s_diff="binomial")
    >>> replace(s, z=2.58).z, s.sd_basis
    (2.58, 'analysable')
    >>> RCISettings(sd_basis="some")
    Traceback (most recent call last):
    ...
    ValueError: sd_basis must be one of ('analysable', 'all'), got 'some'
    """

    z: float = 1.96
    min_valid: int | tuple[np.ndarray, np.ndarray] | None = None
    sd_basis: str = "analysable"
    s_diff: str = "reference"
    reliability_basis: str = "all"

    def __post_init__(self) -> None:
        for name, choices in (
            ("sd_basis", SD_BASES),
            ("s_diff", S_DIFF_METHODS),
            ("reliability_basis", RELIABILITY_BASES),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")


def min_valid_for(k: np.ndarray | int, valid_share: float = VALID_SHARE) -> np.ndarray:
    """Rule (a)'s threshold for an item given ``k`` samples: ``ceil(valid_share * k)`` (SPEC 2).

    Examples
    --------
    >>> min_valid_for(np.array([10, 5, 3])).tolist()
    [6, 3, 2]
    """
    # The small tolerance keeps 0.6 * 10 = 6.000000000000001 at 6.
    return np.ceil(valid_share * np.asarray(k, dtype=float) - 1e-9).astype(np.int64)


def min_valid_rule(min_valid: int | None = None, valid_share: float = VALID_SHARE, ks=()) -> str:
    """The rule (a) in words, for every output: ``"ceil(0.6·K) of the item's K (K = 5: 3)"`` or ``"6 (fixed)"``.

    Examples
    --------
    >>> min_valid_rule(None, ks=[5])
    "ceil(0.6·K) valid responses of the item's K (K = 5: 3)"
    >>> min_valid_rule(6)
    '6 valid responses (fixed)'
    """
    if min_valid is not None:
        return f"{int(min_valid)} valid responses (fixed)"
    ks = sorted({int(k) for k in np.asarray(ks).ravel() if k > 0})
    at = ", ".join(f"K = {k}: {int(min_valid_for(k, valid_share))}" for k in ks)
    return f"ceil({valid_share:g}·K) valid responses of the item's K" + (f" ({at})" if at else "")


def standard_error_of_measurement(p: np.ndarray, r_xx: float) -> float:
    """``SEM = SD(p) * sqrt(1 - r_xx)`` with the sample SD (ddof = 1), NaNs ignored.

    A NaN reliability gives a NaN SEM (never 0, which would shrink S_diff).

    Examples
    --------
    >>> import numpy as np
    >>> round(standard_error_of_measurement(np.array([0.2, 0.4, 0.6, 0.8]), 0.8), 4)
    0.1155
    """
    p = np.asarray(p, dtype=float)
    p = p[~np.isnan(p)]
    if p.size < 2 or not np.isfinite(r_xx):
        return float("nan")
    return float(np.std(p, ddof=1) * np.sqrt(max(0.0, 1.0 - r_xx)))


def standard_error_of_difference(sem_v1: float, sem_v2: float) -> float:
    """``S_diff = sqrt(SEM_v1^2 + SEM_v2^2)``.

    Examples
    --------
    >>> standard_error_of_difference(0.3, 0.4)
    0.5
    """
    return float(np.hypot(sem_v1, sem_v2))


def reliable_change_index(delta: np.ndarray, s_diff: float) -> np.ndarray:
    """``RCI = delta / S_diff``; NaN where ``S_diff`` is 0 or undefined.

    Examples
    --------
    >>> import numpy as np
    >>> reliable_change_index(np.array([0.3, -0.1]), 0.1).round(6)
    array([ 3., -1.])
    """
    delta = np.asarray(delta, dtype=float)
    if not np.isfinite(s_diff) or s_diff <= 0:
        return np.full_like(delta, np.nan)
    return delta / s_diff


def classify_rci(rci: np.ndarray, z: float = 1.96) -> np.ndarray:
    """Three classes: ``RCI > z`` improved, ``RCI < -z`` deteriorated, else no change.

    NaN RCI (no S_diff) is no change: nothing exceeds an undefined threshold.

    Examples
    --------
    >>> import numpy as np
    >>> classify_rci(np.array([2.5, -0.5, -3.0])).tolist()
    ['improved', 'no_change', 'deteriorated']
    """
    rci = np.asarray(rci, dtype=float)
    out = np.full(rci.shape, NO_CHANGE, dtype=object)
    out[rci > z] = IMPROVED
    out[rci < -z] = DETERIORATED
    return out


def exclusion_reasons(
    n_valid_v1: np.ndarray,
    n_valid_v2: np.ndarray,
    p_v1: np.ndarray,
    p_v2: np.ndarray,
    min_valid: int | None = None,
    *,
    k_v1: np.ndarray | None = None,
    k_v2: np.ndarray | None = None,
    valid_share: float = VALID_SHARE,
) -> np.ndarray:
    """Per-item reason: ``"low_valid"`` (rule a, checked first), ``"floor_ceiling"`` (rule b) or ``""``.

    Rule (a): fewer than ``ceil(valid_share * K)`` valid responses in either version, with
    ``k_v1`` / ``k_v2`` the samples each item was given (:func:`min_valid_for`); a fixed
    ``min_valid`` replaces the rule (6 is the paper's rule at K = 10).

    Examples
    --------
    >>> import numpy as np
    >>> exclusion_reasons(np.array([10, 3]), np.array([10, 10]), np.array([0.5, 0.5]), np.array([0.6, 0.5]),
    ...                   min_valid=6).tolist()
    ['', 'low_valid']
    """
    if min_valid is None:
        if k_v1 is None or k_v2 is None:
            raise ValueError("rule (a) needs each item's K (k_v1, k_v2) or a fixed min_valid")
        m1, m2 = min_valid_for(k_v1, valid_share), min_valid_for(k_v2, valid_share)
    else:
        m1 = m2 = int(min_valid)
    low = (np.asarray(n_valid_v1) < m1) | (np.asarray(n_valid_v2) < m2)
    p1, p2 = np.asarray(p_v1, dtype=float), np.asarray(p_v2, dtype=float)
    floor_ceiling = ((p1 == 0.0) & (p2 == 0.0)) | ((p1 == 1.0) & (p2 == 1.0))
    return np.where(low, "low_valid", np.where(floor_ceiling, "floor_ceiling", "")).astype(object)


def class_counts(classes: np.ndarray) -> dict[str, int]:
    """Counts of the three classes (items marked excluded are ignored)."""
    classes = np.asarray(classes, dtype=object)
    return {c: int(np.sum(classes == c)) for c in CLASSES}


def counts_with_proportions(classes: np.ndarray) -> dict:
    """Class counts, their total, proportions and churn (share reliably changed)."""
    counts = class_counts(classes)
    n = sum(counts.values())
    out: dict = dict(counts)
    out["n"] = n
    out["proportions"] = {c: (counts[c] / n if n else float("nan")) for c in CLASSES}
    out["churn"] = (counts[IMPROVED] + counts[DETERIORATED]) / n if n else float("nan")
    return out


def pair_frame(p_v1, p_v2, n_v1, n_v2, item_id, domain) -> pd.DataFrame:
    """Per-item table of one version pair: accuracies, valid counts and ``delta``."""
    df = pd.DataFrame(
        {
            "item_id": np.asarray(item_id, dtype=object),
            "domain": np.asarray(domain, dtype=object),
            "n_v1": np.asarray(n_v1, dtype=np.int64),
            "n_v2": np.asarray(n_v2, dtype=np.int64),
            "p_v1": np.asarray(p_v1, dtype=float),
            "p_v2": np.asarray(p_v2, dtype=float),
        }
    )
    df["delta"] = df["p_v2"] - df["p_v1"]
    return df


def s_diff_from_accuracies(p_v1: np.ndarray, p_v2: np.ndarray, r_v1: float, r_v2: float) -> tuple[float, float, float]:
    """``(SEM_v1, SEM_v2, S_diff)`` from the accuracies of the items in the SD basis."""
    sem1 = standard_error_of_measurement(p_v1, r_v1)
    sem2 = standard_error_of_measurement(p_v2, r_v2)
    return sem1, sem2, standard_error_of_difference(sem1, sem2)
