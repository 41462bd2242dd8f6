"""Model comparison by PSIS-LOO (issue 31): :func:`compare` ranks fits of the same items by
ELPD and returns a :class:`ModelComparison` (``loo_compare.json``), which ``bayesrc fit
--compare``, the report and :func:`bayesrc.load` use.

Each fit's ELPD comes from its saved per-item ``elpd_loo`` and ``pareto_k``
(:func:`bayesrc.bayes.checks.loo_checks`), so fits read back from disk compare as fitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes.check_figures import loo_compare_figure
from bayesrc.bayes.checks import K_THRESHOLD
from bayesrc.results import Result, register

#: the ranking's columns, best model first (``arviz_stats.compare``'s, plus ``n_high_k``)
RANKING_COLUMNS = ("rank", "elpd", "se", "p", "elpd_diff", "dse", "p_worse", "weight", "n_high_k")


def elpd_of(fit):
    """The ``arviz_stats`` ELPD object of a fit, rebuilt from its saved per-item ``elpd_loo`` and ``pareto_k``.

    Examples
    --------
    >>> elpd_of(res).elpd  # doctest: +SKIP
    """
    import arviz_stats as azs  # deferred: arviz_stats loads in ~3 s (bayes extra)

    items, payload = fit.items, (fit.payload.get("loo") or {})
    if items is None or "elpd_loo" not in items or not payload:
        raise ValueError(f"{fit.model} ({fit.backend}) fit has no per-item PSIS-LOO (fitted before issue 31?)")
    ids = items["item_id"].astype(str).to_numpy()
    da = lambda v: xr.DataArray(np.asarray(v, float), dims=["item"], coords={"item": ids})  # noqa: E731
    return azs.ELPDData(
        elpd=float(payload["elpd"]),
        se=float(payload["se"]),
        p=float(payload["p_loo"]),
        n_samples=int(payload["n_draws"]),
        n_data_points=len(ids),
        scale="log",
        warning=bool(payload.get("n_high_k")),
        good_k=float(payload.get("k_threshold", K_THRESHOLD)),
        elpd_i=da(items["elpd_loo"]),
        pareto_k=da(items["pareto_k"]),
    )


def _named(fits: Mapping | Sequence) -> dict:
    """``fits`` as a mapping: a sequence is named by model (``model_backend_i`` when models repeat)."""
    if isinstance(fits, Mapping):
        return dict(fits)
    fits = list(fits)
    names = [f.model for f in fits]
    if len(set(names)) < len(names):
        names = [f"{f.model}_{f.backend}_{i}" for i, f in enumerate(fits)]
    return dict(zip(names, fits))


def compare(fits: Mapping | Sequence) -> ModelComparison:
    """Rank fits of the same items by PSIS-LOO ELPD (``arviz_stats.compare``), best first.

    Parameters
    ----------
    fits : a mapping name -> :class:`~bayesrc.bayes.BayesFit` (or a sequence, named ``model``
        or ``model_backend_i`` when models repeat), each with its per-item PSIS-LOO.

    Returns
    -------
    ModelComparison
        ``.table``: ``rank``, ``elpd``, ``se``, ``p``, ``elpd_diff`` (against the best), ``dse``
        (SE of the difference), ``p_worse``, ``weight`` (stacking) and ``n_high_k`` (items with
        Pareto k above 0.7), one row per fit, best first.

    Examples
    --------
    >>> compare({"change": fit(counts), "betabinom": fit(counts, model="betabinom")}).table  # doctest: +SKIP
    """
    import arviz_stats as azs  # deferred: arviz_stats loads in ~3 s (bayes extra)

    fits = _named(fits)
    if len(fits) < 2:
        raise ValueError("compare needs at least two fits")
    ids = {name: tuple(f.items["item_id"].astype(str)) for name, f in fits.items()}
    if len(set(ids.values())) > 1:
        raise ValueError("the fits compared must cover the same items in the same order")
    table = azs.compare({name: elpd_of(f) for name, f in fits.items()}, round_to="none")
    table["n_high_k"] = [int((fits[name].payload.get("loo") or {}).get("n_high_k") or 0) for name in table.index]
    ranking = [
        {"model": str(name), **{c: row[c] for c in RANKING_COLUMNS if c in row}} for name, row in table.iterrows()
    ]
    about = {
        name: {"model": f.model, "backend": f.backend, "status": f.status, "n_items": len(f.items)}
        for name, f in fits.items()
    }
    return ModelComparison({"ranking": ranking, "fits": about})


@register
class ModelComparison(Result):
    """Fits of the same items ranked by PSIS-LOO ELPD (``loo_compare.json``; :func:`compare`).

    Examples
    --------
    >>> rows = [{"model": "change", "rank": 0, "elpd": -410.0, "se": 12.0, "elpd_diff": 0.0, "dse": 0.0,
    ...          "weight": 0.9},
    ...         {"model": "betabinom", "rank": 1, "elpd": -431.0, "se": 12.5, "elpd_diff": -21.0, "dse": 6.0,
    ...          "weight": 0.1}]
    >>> mc = ModelComparison({"ranking": rows, "fits": {}})
    >>> mc.best, mc.separated("betabinom"), ModelComparison.from_dict(mc.to_dict()) == mc
    ('change', True, True)
    """

    main_file = "loo_compare.json"
    kind = "loo_compare"
    field_kinds = {  # what the table, the sentence and the report read (bayesrc.fields.check_fields)
        "ranking!": "some records",
        "ranking.[].model!": "text",
        "ranking.[].{elpd_diff!,dse!}": "finite",
        "ranking.[].{rank,elpd,se,p,p_worse,weight}": "number",
        "ranking.[].n_high_k": "integer",
    }

    @property
    def table(self) -> pd.DataFrame:
        """The ranking, one row per fit (index ``model``), best first."""
        frame = pd.DataFrame(self.payload.get("ranking") or [])
        return frame.set_index("model") if "model" in frame else frame

    @property
    def models(self) -> list[str]:
        """The fits' names, best first."""
        return [str(r["model"]) for r in self.payload.get("ranking") or []]

    @property
    def best(self) -> str:
        return self.models[0]

    def separated(self, name: str, n_se: float = 2.0) -> bool:
        """True if fit ``name``'s ELPD is below the best's by more than ``n_se`` SEs of the difference."""
        return _separated(self.table.loc[[name]].iloc[0], n_se)

    def summary(self) -> pd.DataFrame:
        """The ranking as a tidy table (model, rank, elpd, se, elpd_diff, dse, weight, n_high_k)."""
        cols = [c for c in ("rank", "elpd", "se", "elpd_diff", "dse", "weight", "n_high_k") if c in self.table]
        return self.table[cols].reset_index()

    def plot(self, **kwargs):
        """ELPD differences from the best fit with ±2 SE (:func:`bayesrc.bayes.check_figures.loo_compare_figure`)."""
        return loo_compare_figure(self.table, **kwargs)

    def _others(self) -> list[tuple[str, pd.Series]]:
        """Every fit but the best, in rank order (by position: a hand-edited file may repeat a name)."""
        return [(str(m), row) for m, row in self.table.iloc[1:].iterrows()]

    def _headline(self) -> str:
        rest = [f"{m} {row['elpd_diff']:+.1f} ± {row['dse']:.1f}" for m, row in self._others()]
        return f"best {self.best}" + (f"; {', '.join(rest)}" if rest else "")

    def sentence(self) -> str:
        """The ranking in words: which fit predicts left-out items best, and whether the others are separated from
        it."""
        parts = []
        for m, row in self._others():
            verdict = "clearly worse" if _separated(row) else "not separated from it (difference within 2 SE)"
            parts.append(f"{m}: ELPD {row['elpd_diff']:+.1f} ± {row['dse']:.1f}, {verdict}")
        return f"By PSIS-LOO, {self.best} predicts left-out items best; " + "; ".join(parts) + "."


def _separated(row: pd.Series, n_se: float = 2.0) -> bool:
    """A ranking row's ELPD below the best's by more than ``n_se`` SEs of the difference."""
    return bool(-row["elpd_diff"] > n_se * row["dse"] > 0)
