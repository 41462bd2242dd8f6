"""An independent, deliberately plain implementation of paper 001's method.

Written from the paper's section 2.2 as a reference study would: pandas pivots,
one loop iteration per random split and per permutation, its own RNG. The
package's vectorised pipeline is tested against it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats


def accuracy_table(trials: pd.DataFrame) -> pd.DataFrame:
    valid = trials[~trials["is_missing"].astype(bool)]
    g = valid.groupby(["item_id", "domain"])["is_correct"]
    out = pd.DataFrame({"n_valid": g.count(), "n_correct": g.sum().astype(int)}).reset_index()
    out["p"] = out["n_correct"] / out["n_valid"]
    return out


def split_half(trials: pd.DataFrame, n_splits: int = 1000, seed: int = 42) -> float:
    valid = trials[~trials["is_missing"].astype(bool)].copy()
    valid["is_correct"] = valid["is_correct"].astype(float)
    pivot = valid.pivot_table(index="item_id", columns="k", values="is_correct", aggfunc="first")
    cols = sorted(pivot.columns)
    rng = np.random.RandomState(seed)
    values = []
    for _ in range(n_splits):
        perm = rng.permutation(cols)
        half = len(cols) // 2
        a = pivot[list(perm[:half])].mean(axis=1)
        b = pivot[list(perm[half:])].mean(axis=1)
        r = np.corrcoef(a.values, b.values)[0, 1]
        values.append(2 * r / (1 + r))
    return float(np.median(values))


def icc_oneway(trials: pd.DataFrame) -> float:
    valid = trials[~trials["is_missing"].astype(bool)].copy()
    valid["is_correct"] = valid["is_correct"].astype(float)
    data = valid.pivot_table(index="item_id", columns="k", values="is_correct", aggfunc="first").values
    n, k = data.shape
    grand = data.mean()
    means = data.mean(axis=1)
    msb = k * ((means - grand) ** 2).sum() / (n - 1)
    msw = ((data - means[:, None]) ** 2).sum() / (n * (k - 1))
    return float((msb - msw) / (msb + (k - 1) * msw))


def classify(delta: pd.Series, s_diff: float, z: float) -> pd.Series:
    rci = delta / s_diff
    return pd.Series(np.select([rci > z, rci < -z], ["improved", "deteriorated"], "no_change"), index=delta.index)


def full_analysis(
    trials_v1: pd.DataFrame, trials_v2: pd.DataFrame, sd_basis: str = "analysable", z: float = 1.96, min_valid: int = 6
) -> dict:
    r1, r2 = split_half(trials_v1), split_half(trials_v2)
    merged = accuracy_table(trials_v1).merge(
        accuracy_table(trials_v2), on=["item_id", "domain"], suffixes=("_v1", "_v2")
    )
    merged["delta"] = merged["p_v2"] - merged["p_v1"]

    def sdiff(frame: pd.DataFrame) -> tuple[float, float, float]:
        sem1 = frame["p_v1"].std() * math.sqrt(1 - r1)
        sem2 = frame["p_v2"].std() * math.sqrt(1 - r2)
        return sem1, sem2, math.sqrt(sem1**2 + sem2**2)

    _, _, s_all = sdiff(merged)
    merged["class_all"] = classify(merged["delta"], s_all, z)

    low = (merged["n_valid_v1"] < min_valid) | (merged["n_valid_v2"] < min_valid)
    fc = ((merged["p_v1"] == 0) & (merged["p_v2"] == 0)) | ((merged["p_v1"] == 1) & (merged["p_v2"] == 1))
    post = merged[~low & ~fc].copy()
    sem1, sem2, s_post = sdiff(post if sd_basis == "analysable" else merged)
    post["class"] = classify(post["delta"], s_post, z)

    table = pd.crosstab(post["domain"], post["class"])
    chi2 = stats.chi2_contingency(table.values)[0]
    v = math.sqrt(chi2 / (len(post) * (min(table.shape) - 1)))
    return {
        "r_xx_v1": r1,
        "r_xx_v2": r2,
        "icc_v1": icc_oneway(trials_v1),
        "icc_v2": icc_oneway(trials_v2),
        "sem_v1": sem1,
        "sem_v2": sem2,
        "s_diff": s_post,
        "s_diff_all": s_all,
        "n_before": len(merged),
        "n_after": len(post),
        "low_valid": int(low.sum()),
        "floor_ceiling": int((~low & fc).sum()),
        "counts": post["class"].value_counts().to_dict(),
        "counts_all": merged["class_all"].value_counts().to_dict(),
        "chi2": chi2,
        "cramers_v": v,
        "post": post,
    }
