"""What K and N should I run? Simulation-based planning in the K-sample world.

Two questions, answered on simulated benchmarks with known truth
(:func:`bayesrc.data.item_truth` difficulties, :func:`bayesrc.data.simulate_pair` trials):

1. **Per item** (K): a share ``pi_change`` of items changes accuracy by exactly
   ``delta_p`` between versions. With K samples per item, what share of them does the
   classical RCI (:func:`bayesrc.classical.reliable_change`, SPEC 2) flag in the right
   direction (sensitivity), and how many unchanged *analysable* items does it flag (false
   positives)? Its threshold ``z S_diff`` shrinks as K grows, so K drives this. The
   recommendation requires both: sensitivity >= ``power`` and a false-positive rate
   among analysable unchanged items <= ``max_fpr`` (default 0.10, twice the nominal 5%);
   the default S_diff is the calibrated per-item ``"binomial"`` one (SPEC 2.1), since the
   paper's ``"reference"`` S_diff flags far more unchanged items than nominal.
2. **Aggregate** (N): with per-item means of the K samples, the paired ``N*`` for the
   mean change ``pi_change x delta_p`` (observed sigma_D of the per-item differences)
   and ``q = N / N*`` -- the resolution question of paper 002 for K-sample scores.

The Bayesian change model (``bayesrc.bayes``) is not used: this planner runs the RCI
only. Each (K, N, replicate) cell is cached as JSON under ``cache_dir``, keyed by a
hash of every parameter that affects it, so a grid can be refined without recomputing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrc.classical import reliable_change
from bayesrc.classical.calibration import rci_detection_probability
from bayesrc.classical.rci import DETERIORATED, IMPROVED
from bayesrc.data import item_counts, item_truth, simulate_pair
from bayesrc.io import atomic_write_json, atomic_write_text
from bayesrc.markdown import markdown_table
from bayesrc.power.analytic import ParameterError, _check_open_unit, z_sum
from bayesrc.results import Result, register

PLANNER_VERSION = 4  # bump when the simulation changes, to invalidate caches


def default_cache_dir() -> Path:
    """``$BAYESRC_CACHE/power-plan`` or ``~/.cache/bayesrc/power-plan``."""
    root = os.environ.get("BAYESRC_CACHE") or Path.home() / ".cache" / "bayesrc"
    return Path(root) / "power-plan"


def _truth_with_change(n_items: int, delta_p: float, pi_change: float, rng: np.random.Generator) -> pd.DataFrame:
    """Item truth whose changed items move by exactly ``+delta_p`` (items above ``1 - delta_p`` cannot)."""
    truth = item_truth(n_items, pi_change=0.0, seed=rng)
    p1 = truth["p_v1"].to_numpy()
    eligible = p1 + delta_p <= 1.0
    changed = eligible & (rng.random(n_items) < pi_change / max(eligible.mean(), 1e-12))
    p2 = np.where(changed, p1 + delta_p, p1)
    truth = truth.assign(p_v2=p2, delta_p=p2 - p1, changed=changed)
    return truth


def simulate_cell(
    k: int,
    n_items: int,
    delta_p: float,
    *,
    pi_change: float = 0.3,
    z: float = 1.96,
    alpha: float = 0.05,
    power: float = 0.8,
    seed: int = 0,
    n_splits: int = 100,
    s_diff: str = "binomial",
) -> dict:
    """One simulated benchmark: RCI sensitivity / false-positive rate (analysable items) and the aggregate q."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, k, n_items]))
    truth = _truth_with_change(n_items, delta_p, pi_change, rng)
    sim = simulate_pair(k=k, truth=truth, seed=int(rng.integers(2**31)))
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    # Exclusion rule (a) scales with K: 0.6 K valid responses (6 at the paper's K = 10).
    min_valid = int(np.ceil(0.6 * k))
    rci = reliable_change(
        counts,
        z=z,
        min_valid=min_valid,
        n_splits=n_splits,
        n_permutations=1,
        n_splits_by_k=1,
        n_null=0,
        s_diff=s_diff,
        seed=int(rng.integers(2**31)),
    )
    items = rci.to_frame().set_index("item_id").loc[truth["item_id"]]
    changed = truth["changed"].to_numpy()
    cls = items["class"].to_numpy()
    hit = cls == IMPROVED
    flagged = (cls == IMPROVED) | (cls == DETERIORATED)
    analysable = ~items["excluded"].to_numpy(bool)
    expected = rci_detection_probability(
        truth["p_v1"].to_numpy()[changed],
        truth["p_v2"].to_numpy()[changed],
        k,
        None if s_diff == "binomial" else rci.s_diff,
        z,
    )
    d = items["p_v2"].to_numpy() - items["p_v1"].to_numpy()
    mean_d, var_d = float(d.mean()), float(d.var())
    kk = float(z_sum(alpha, power))
    n_star = kk**2 * var_d / mean_d**2 if mean_d != 0 else float("inf")
    return {
        "k": int(k),
        "n_items": int(n_items),
        "seed": int(seed),
        "min_valid": min_valid,
        "n_changed": int(changed.sum()),
        "sensitivity": float(hit[changed].mean()) if changed.any() else float("nan"),
        "sensitivity_expected": float(expected.mean()) if changed.any() else float("nan"),
        "false_positive_rate": float(flagged[~changed & analysable].mean())
        if (~changed & analysable).any()
        else float("nan"),
        "false_positive_rate_all_items": float(flagged[~changed].mean()) if (~changed).any() else float("nan"),
        "s_diff_method": s_diff,
        "s_diff": float(rci.s_diff),
        "mdc": float(z * rci.s_diff),
        "mean_delta": mean_d,
        "n_star_mean": n_star,
        "q_mean": float(n_items / n_star) if np.isfinite(n_star) and n_star > 0 else 0.0,
    }


@register
class KNPlan(Result):
    """Simulated K x N grid and the recommendation drawn from it (``plan.json`` + ``plan_cells.parquet``;
    ``plan.md`` is written beside them).

    Examples
    --------
    >>> plan = plan_k_n(0.35, k_grid=(4,), n_grid=(300,), replicates=1, n_splits=20)  # doctest: +SKIP
    >>> plan.recommend()["k_per_item"], bayesrc.load(plan.save("runs/plan")) == plan   # doctest: +SKIP
    """

    main_file = "plan.json"
    kind = "plan"
    table_names = ("cells",)

    @classmethod
    def from_cells(cls, cells: pd.DataFrame, params: dict) -> KNPlan:
        """The plan of simulated ``cells`` (one row per (k, n_items, replicate)) under ``params``."""
        draft = cls({"params": params}, {"cells": cells})
        return cls(
            {"params": params, "recommendation": draft.recommend(), "grid": draft.to_frame().to_dict(orient="records")},
            {"cells": cells},
        )

    cells = property(lambda self: self.tables["cells"])  # one row per (k, n_items, replicate)
    params = property(lambda self: self.payload.get("params", {}))

    def table_file(self, name: str) -> str:
        return f"plan_{name}.parquet"

    def _save_extra(self, stage: Path) -> None:
        atomic_write_text(stage / "plan.md", plan_markdown(self))

    def to_frame(self) -> pd.DataFrame:
        """Mean over replicates per (k, n_items)."""
        g = self.cells.groupby(["k", "n_items"], as_index=False)
        out = g[
            [
                "sensitivity",
                "sensitivity_expected",
                "false_positive_rate",
                "false_positive_rate_all_items",
                "s_diff",
                "mdc",
                "mean_delta",
                "n_star_mean",
                "q_mean",
            ]
        ].mean()
        out["replicates"] = g.size()["size"].to_numpy()
        out["samples_per_version"] = out["k"] * out["n_items"]
        return out

    def recommend(self) -> dict:
        """Cheapest (fewest samples per version) cell meeting both targets.

        Per item: mean RCI sensitivity >= ``power`` and false-positive rate among analysable
        unchanged items <= ``max_fpr``. Aggregate: ``q_mean >= 1``. Also the smallest K
        meeting the per-item targets (at any N) and the smallest N with q >= 1 (at any K).
        ``None`` where no simulated cell qualifies.
        """
        f = self.to_frame()
        target = self.params["power"]
        fpr_ok = f["false_positive_rate"] <= self.params.get("max_fpr", 0.10)
        per_item = f[(f["sensitivity"] >= target) & fpr_ok]
        agg = f[f["q_mean"] >= 1]
        both = f[(f["sensitivity"] >= target) & fpr_ok & (f["q_mean"] >= 1)].sort_values(["samples_per_version", "k"])
        best = None if both.empty else both.iloc[0]
        return {
            "k_per_item": None if per_item.empty else int(per_item["k"].min()),
            "n_aggregate": None if agg.empty else int(agg["n_items"].min()),
            "k": None if best is None else int(best["k"]),
            "n_items": None if best is None else int(best["n_items"]),
            "sensitivity": None if best is None else float(best["sensitivity"]),
            "q_mean": None if best is None else float(best["q_mean"]),
            "false_positive_rate": None if best is None else float(best["false_positive_rate"]),
            "max_fpr": self.params.get("max_fpr", 0.10),
            "method": "rci",
            "s_diff": self.params.get("s_diff", "binomial"),
        }

    def summary(self) -> pd.DataFrame:
        return self.to_frame()


def plan_k_n(
    delta_p: float,
    *,
    k_grid: Sequence[int] = (5, 10, 20),
    n_grid: Sequence[int] = (250, 500, 1000, 2000),
    pi_change: float = 0.3,
    replicates: int = 2,
    z: float = 1.96,
    alpha: float = 0.05,
    power: float = 0.8,
    seed: int = 0,
    n_splits: int = 100,
    cache_dir: str | Path | None = None,
    s_diff: str = "binomial",
    max_fpr: float = 0.10,
) -> KNPlan:
    """Simulate the K x N grid for a per-item change ``delta_p`` and recommend K and N.

    Parameters
    ----------
    delta_p : per-item change in accuracy of the changed items (``0 < delta_p < 1``).
    k_grid, n_grid : samples per item and items per benchmark to try.
    pi_change : share of items that change (by ``+delta_p``); the rest are unchanged.
    replicates : simulated benchmarks per cell.
    z : RCI threshold (1.96); alpha, power: the targets of both questions.
    s_diff : the RCI's S_diff, "binomial" (calibrated, default) or "reference" (the paper's).
    max_fpr : the largest false-positive rate among analysable unchanged items a
        recommended cell may have (default 0.10, twice the nominal rate of z = 1.96).
    cache_dir : where cell results are cached (default :func:`default_cache_dir`);
        ``False``-y strings are not accepted, pass a folder.
    """
    delta_p = float(_check_open_unit("delta_p", delta_p))
    pi_change = float(_check_open_unit("pi_change", pi_change))
    _check_open_unit("power", power)
    ks = [int(k) for k in k_grid]
    ns = [int(n) for n in n_grid]
    if not ks or not ns or min(ks) < 2 or min(ns) < 10:
        raise ParameterError("k_grid needs K >= 2 and n_grid N >= 10", field="k_grid")
    if int(replicates) < 1:
        raise ParameterError("replicates must be positive", field="replicates")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in ks:
        for n in ns:
            for r in range(int(replicates)):
                key = dict(
                    v=PLANNER_VERSION,
                    k=k,
                    n=n,
                    delta_p=delta_p,
                    pi_change=pi_change,
                    z=z,
                    alpha=alpha,
                    power=power,
                    seed=seed,
                    rep=r,
                    n_splits=n_splits,
                    s_diff=s_diff,
                )
                digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
                path = cache / f"cell-{digest}.json"
                if path.exists():
                    try:
                        rows.append(json.loads(path.read_text()))
                        continue
                    except (OSError, json.JSONDecodeError):
                        pass  # a damaged cache entry is recomputed
                res = simulate_cell(
                    k,
                    n,
                    delta_p,
                    pi_change=pi_change,
                    z=z,
                    alpha=alpha,
                    power=power,
                    seed=seed * 1000 + r,
                    n_splits=n_splits,
                    s_diff=s_diff,
                )

                atomic_write_json(path, res)
                rows.append(res)
    params = dict(
        delta_p=delta_p,
        pi_change=pi_change,
        z=z,
        alpha=alpha,
        power=power,
        replicates=int(replicates),
        seed=seed,
        method="rci",
        s_diff=s_diff,
        max_fpr=float(max_fpr),
        cache_dir=str(cache),
    )
    return KNPlan.from_cells(pd.DataFrame(rows), params)


PLAN_COLUMNS = ("k", "n_items", "sensitivity", "sensitivity_expected", "false_positive_rate", "mdc", "q_mean")


def plan_markdown(plan: KNPlan) -> str:
    """``plan.md``: the grid's means per (K, N) and the recommendation.

    Examples
    --------
    >>> print(plan_markdown(plan_k_n(0.35, k_grid=(10,), n_grid=(500,))))   # doctest: +SKIP
    """
    table, rec, prm = plan.to_frame(), plan.recommend(), plan.params
    cols = list(PLAN_COLUMNS)
    lines = [
        "# K x N plan (classical RCI)",
        "",
        f"per-item change {prm['delta_p']}, share changed {prm['pi_change']}, target power {prm['power']}",
        "",
        markdown_table(cols, ([r[c] for c in cols] for _, r in table.iterrows()), cell=lambda v: f"{v:.3g}"),
    ]
    lines += [
        "",
        f"Recommendation: K = {rec['k']}, N = {rec['n_items']} "
        f"(smallest K for per-item detection: {rec['k_per_item']}; smallest N with q >= 1: {rec['n_aggregate']})",
        "",
    ]
    return "\n".join(lines)
