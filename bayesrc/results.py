"""Typed results: one class per analysis, one way to save, load and show them.

Every analysis the CLI runs writes one result folder; :func:`load` opens any of them
(or any one of their main files) and returns its typed object:

=====================  ===============================  ==========================================
main file              class                            written by
=====================  ===============================  ==========================================
``rci.json``           :class:`RCIRun`                  ``bayesrc rci`` / ``bayesrc demo``
``fit.json``           :class:`bayesrc.bayes.BayesFit`  ``bayesrc fit``
``switch.json``        :class:`SwitchResult`            ``bayesrc switch``
``power.json``         :class:`PowerReport`             ``bayesrc power``
``sensitivity.json``   :class:`SensitivityTable`        ``bayesrc sensitivity``
=====================  ===============================  ==========================================

A result is its JSON **payload** (kept whole: keys another version of an analysis adds
flow through load and save untouched), named **tables** (pandas DataFrames, stored as
Parquet next to the JSON) and, for a Bayesian fit, the **posterior** (an ArviZ
DataTree, ``posterior.nc``). Subclasses only add typed accessors, ``summary()`` and
plots. ``to_dict()`` / ``from_dict()`` and ``save(dir)`` / ``load(dir)`` round-trip
exactly: the payload is normalised to strict JSON (NaN -> None, tuples -> lists) when the
result is made, so an object equals its reloaded copy.

Examples
--------
>>> import bayesrc
>>> run = bayesrc.load("runs/demo")          # doctest: +SKIP
>>> run.summary()                             # doctest: +SKIP
>>> run.save("copy"); bayesrc.load("copy") == run   # doctest: +SKIP
True
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, ClassVar

from bayesrc.errors import InputError

#: main file name -> result class (filled by :func:`register`)
REGISTRY: dict[str, type[Result]] = {}


def register(cls: type[Result]) -> type[Result]:
    """Class decorator: make ``cls.main_file`` loadable by :func:`load`."""
    REGISTRY[cls.main_file] = cls
    return cls


def _normalise(obj: Any) -> Any:
    """The payload as it reads back from disk (strict JSON: NaN/inf -> None, numpy -> Python)."""
    from bayesrc.io import dumps_json

    return json.loads(dumps_json(obj))


class Result:
    """Base class: payload dict + named tables + optional posterior; save / load / equality.

    Parameters
    ----------
    payload : the JSON-able record of the analysis (what ``main_file`` holds).
    tables : named DataFrames, each saved as ``table_files[name]`` (default ``NAME.parquet``).
    posterior : an ``xarray.DataTree`` (saved as ``posterior.nc``), or None.

    Examples
    --------
    >>> from bayesrc.results import PowerReport
    >>> rep = PowerReport({"pairs": [], "unresolved": []})
    >>> PowerReport.from_dict(rep.to_dict()) == rep
    True
    """

    main_file: ClassVar[str] = "result.json"
    kind: ClassVar[str] = "result"

    def __init__(self, payload: dict, tables: dict | None = None, posterior: Any = None) -> None:
        self.payload: dict = _normalise(payload)
        self.tables: dict = dict(tables or {})
        self.posterior = posterior

    # ------------------------------------------------------------------ storage
    def table_file(self, name: str) -> str:
        """File name of table ``name`` inside the result folder."""
        return f"{name}.parquet"

    def table_names_on_disk(self, folder: Path) -> dict[str, Path]:
        """Tables present in ``folder`` (subclasses with patterned names override)."""
        return {}

    def to_dict(self) -> dict:
        """A deep copy of the payload plus tables as records (``from_dict`` inverts it)."""
        out = copy.deepcopy(self.payload)
        if self.tables:
            out["_tables"] = {n: _normalise(t.to_dict(orient="split", index=False)) for n, t in self.tables.items()}
        return out

    @classmethod
    def from_dict(cls, d: dict, posterior: Any = None) -> Result:
        """Rebuild a result from :meth:`to_dict` output."""
        import pandas as pd

        d = copy.deepcopy(d)
        tables = {n: pd.DataFrame(t["data"], columns=t["columns"]) for n, t in d.pop("_tables", {}).items()}
        return cls(d, tables, posterior)

    def save(self, out_dir: str | Path) -> Path:
        """Write the result folder (all files together or none: :func:`bayesrc.io.staged_output`)."""
        from bayesrc.io import staged_output

        out_dir = Path(out_dir)
        with staged_output(out_dir) as stage:
            self.write_into(stage)
        return out_dir

    def write_into(self, stage: Path) -> None:
        """Write every file of the result into ``stage`` (a staging folder the caller commits)."""
        from bayesrc.io import atomic_write_json

        atomic_write_json(stage / self.main_file, self.payload)
        for name, frame in self.tables.items():
            frame = frame.copy()
            frame.attrs = self.table_attrs(name)  # kept in the Parquet metadata (status, ...)
            frame.to_parquet(stage / self.table_file(name), index=False)
        if self.posterior is not None:
            dt = self.posterior.copy()
            dt.attrs.update(self.posterior_attrs())
            dt.to_netcdf(stage / "posterior.nc", engine="h5netcdf")
        self._save_extra(stage)

    def _save_extra(self, stage: Path) -> None:
        """Hook for side files (figures, Markdown) a subclass writes with its result."""

    def posterior_attrs(self) -> dict:
        return {}

    def table_attrs(self, name: str) -> dict:
        return {}

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """Read a result folder (or its main file) written by :meth:`save` or the CLI."""
        path = Path(path)
        folder = path.parent if path.is_file() else path
        main = folder / cls.main_file
        if not main.is_file():
            raise InputError(f"no {cls.main_file} here", path=folder)
        payload = _read_json(main)
        obj = cls(payload)
        tables = {n: _read_parquet(p) for n, p in obj.table_names_on_disk(folder).items()}
        if tables:
            obj.tables = tables
        post = folder / "posterior.nc"
        if post.is_file() and cls.has_posterior:
            obj.posterior = read_posterior(post)
        obj.path = folder
        return obj

    has_posterior: ClassVar[bool] = False
    path: Path | None = None

    # ------------------------------------------------------------------ comparison & display
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        if json.dumps(self.payload, sort_keys=True) != json.dumps(other.payload, sort_keys=True):
            return False
        if self.tables.keys() != other.tables.keys():
            return False
        for n, t in self.tables.items():
            o = other.tables[n]
            if list(t.columns) != list(o.columns) or not t.reset_index(drop=True).equals(o.reset_index(drop=True)):
                return False
        if (self.posterior is None) != (other.posterior is None):
            return False
        if self.posterior is not None:
            a, b = self.posterior, other.posterior
            for g in ("posterior", "sample_stats"):
                if (g in a) != (g in b) or (g in a and not a[g].to_dataset().equals(b[g].to_dataset())):
                    return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def summary(self):
        """A tidy DataFrame of the headline numbers (subclasses define it)."""
        import pandas as pd

        return pd.DataFrame({"key": list(self.payload)})

    def _headline(self) -> str:
        return ""

    def __repr__(self) -> str:
        head = self._headline()
        return f"<{type(self).__name__}{': ' + head if head else ''}>"

    def _repr_html_(self) -> str:
        import html

        return f"<p><b>{html.escape(type(self).__name__)}</b> {html.escape(self._headline())}</p>" + self.summary().to_html(index=False, na_rep="")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=path, line=exc.lineno) from None


def _read_parquet(path: Path):
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises many types for corrupt files
        raise InputError(f"unreadable Parquet ({type(exc).__name__})", path=path) from None


def read_posterior(path: str | Path):
    """``posterior.nc`` as an xarray DataTree (the ArviZ 1.x InferenceData), read into memory."""
    import xarray as xr

    try:
        with xr.open_datatree(path, engine="h5netcdf") as dt:
            return dt.load()
    except (OSError, ValueError, ImportError) as exc:
        raise InputError(f"unreadable posterior ({type(exc).__name__}: {exc})", path=path) from None


def _new_figure(**kw):
    """A matplotlib Figure not tied to pyplot (no backend chosen, nothing global touched)."""
    from matplotlib.figure import Figure

    return Figure(**kw)


# ====================================================================== classical
CLASS_LABELS = {"improved": "improved", "no_change": "no reliable change", "deteriorated": "deteriorated", "excluded": "excluded"}


class PairResult:
    """One version pair of an :class:`RCIRun` (a view: its ``pairs.NAME`` block and item table).

    Typed accessors for the headline fields; every other key of the block is in ``payload``.

    Examples
    --------
    >>> import bayesrc
    >>> pair = bayesrc.load("runs/demo/rci.json")["minor"]  # doctest: +SKIP
    >>> pair.n_flagged, pair.classification_table()  # doctest: +SKIP
    """

    def __init__(self, name: str, payload: dict, items=None) -> None:
        self.name, self.payload, self.items = name, payload, items

    @property
    def versions(self) -> tuple[str, str]:
        v = self.payload.get("versions") or ["v1", "v2"]
        return str(v[0]), str(v[1])

    @property
    def params(self) -> dict:
        return self.payload.get("params", {})

    @property
    def z(self) -> float:
        return float(self.params.get("z", 1.96))

    @property
    def s_diff(self) -> float | None:
        return self.payload.get("s_diff")

    @property
    def counts(self) -> dict:
        return self.payload.get("counts", {})

    @property
    def n_flagged(self) -> int:
        """Items classified reliably changed (analysable items, primary threshold)."""
        c = self.counts.get("analysable", {})
        return int(c.get("improved", 0)) + int(c.get("deteriorated", 0))

    # typed views of the pairs.NAME block (keys as PairRCI.to_dict writes them) --------------
    exclusions = property(lambda self: self.payload["exclusions"])  # n_before, n_after, low_valid, floor_ceiling, min_valid_rule
    reliability = property(lambda self: self.payload["reliability"])  # v1/v2: r_xx, ci, icc, icc_1_k
    sem = property(lambda self: self.payload["sem"])
    s_diff_method = property(lambda self: self.payload["s_diff_method"])  # "reference" | "binomial"
    sd_basis = property(lambda self: self.payload["sd_basis"])
    reliability_basis = property(lambda self: self.payload["reliability_basis"])
    min_detectable = property(lambda self: self.payload["min_detectable"])
    min_detectable_samples = property(lambda self: self.payload["min_detectable_samples"])
    null_samples = property(lambda self: self.payload.get("null_samples"))  # None when n_null = 0
    no_change_test = property(lambda self: self.payload.get("no_change_test"))  # None in rci.json files from before it
    direction_asymmetry = property(lambda self: self.payload["direction_asymmetry"])
    flips = property(lambda self: self.payload.get("flips") or {})
    domain = property(lambda self: self.payload["domain"])  # chi2, p, cramers_v, per_domain, table
    difficulty_bins = property(lambda self: self.payload["difficulty_bins"])
    warnings = property(lambda self: list(self.payload.get("warnings") or []))

    @property
    def min_valid_rule(self) -> str:
        """Rule (a) in words (rci.json files written before it was stored give their fixed ``min_valid``)."""
        ex = self.exclusions
        return ex["min_valid_rule"] if "min_valid_rule" in ex else f"{ex['min_valid']} valid responses (fixed)"

    @property
    def analysable(self) -> dict:
        """Counts of the analysable items: n, improved, no_change, deteriorated, churn, proportions."""
        return self.counts["analysable"]

    def classification_table(self):
        """The reference study's Table 1/2 layout: class x analysis set, counts and shares (%),
        with the sample-level no-change null's expected counts (analysable items) when computed."""
        import numpy as np
        import pandas as pd

        sets = (("analysable", "analysable"), ("conservative", "conservative z"), ("all", "all items"))
        ns = self.null_samples
        null_mean = {"improved": "improved_mean", "deteriorated": "deteriorated_mean"}
        rows = []
        for cls in ("improved", "no_change", "deteriorated"):
            row: dict = {"class": CLASS_LABELS[cls]}
            for key, label in sets:
                cnt = self.counts[key]
                row[f"{label} n"] = cnt[cls]
                row[f"{label} %"] = 100 * cnt["proportions"][cls] if cnt["n"] else np.nan
            if ns:
                row["no-change null n"] = ns[null_mean[cls]] if cls in null_mean else ns["n_analysable_mean"] - ns["flagged_mean"]
            rows.append(row)
        total: dict = {"class": "total"} | {k: v for key, label in sets for k, v in ((f"{label} n", self.counts[key]["n"]), (f"{label} %", 100.0))}
        if ns:
            total["no-change null n"] = ns["n_analysable_mean"]
        return pd.DataFrame([*rows, total])

    def reliability_table(self):
        """Per version: split-half r_xx with its interval, ICC(1,K), ICC(1,1) and SEM."""
        import pandas as pd

        rel = self.reliability
        return pd.DataFrame([
            {"version": v, "r_xx": rel[v]["r_xx"], "ci_lo": rel[v]["ci"][0], "ci_hi": rel[v]["ci"][1], "ICC(1,K)": rel[v]["icc_1_k"],
             "ICC(1,1)": rel[v]["icc"], "SEM": self.sem[v]}
            for v in ("v1", "v2")
        ])  # fmt: skip

    def domain_table(self):
        """Per domain: analysable items, class counts, churn (%), improved/deteriorated ratio and net."""
        import numpy as np
        import pandas as pd

        rows = []
        for d, v in self.domain["per_domain"].items():
            churn = 100 * (v["improved"] + v["deteriorated"]) / v["n"] if v["n"] else np.nan
            rows.append({"domain": d, "n": v["n"], "improved": v["improved"], "no change": v["no_change"], "deteriorated": v["deteriorated"],
                         "churn %": churn, "imp/det": np.nan if v["ratio"] is None else v["ratio"], "net": v["net"]})  # fmt: skip
        return pd.DataFrame(rows)

    def domain_crosstab(self):
        """Domain x class counts of the analysable items (rows domains)."""
        import pandas as pd

        return pd.DataFrame(self.domain["table"]).T

    def summary(self):
        """Headline numbers as a tidy table (pair, metric, value)."""
        import pandas as pd

        c, rel, ex = self.analysable, self.reliability, self.exclusions
        asym, fl, nan = self.direction_asymmetry, self.flips, float("nan")
        method = self.s_diff_method
        rows = [
            ("versions", f"{self.versions[0]} -> {self.versions[1]}"),
            ("S_diff method", method),
            ("sd_basis", self.sd_basis),
            ("reliability basis", self.reliability_basis),
            *((f"{name} {v}", rel[v][key]) for key, name in (("r_xx", "r_xx"), ("icc_1_k", "ICC(1,K)"), ("icc", "ICC(1,1)")) for v in ("v1", "v2")),
            ("SEM v1", self.sem["v1"]),
            ("SEM v2", self.sem["v2"]),
            ("S_diff (median per item)" if method == "binomial" else "S_diff", self.s_diff),
            ("min detectable |dp|", self.min_detectable),
            ("items", ex["n_before"]),
            ("analysable", ex["n_after"]),
            ("rule (a) minimum valid", self.min_valid_rule),
            ("excluded: low valid", ex["low_valid"]),
            ("excluded: floor/ceiling", ex["floor_ceiling"]),
            ("improved", c["improved"]),
            ("no change", c["no_change"]),
            ("deteriorated", c["deteriorated"]),
            ("churn (analysable)", c["churn"]),
            ("churn (all items)", self.counts["all"]["churn"]),
        ]
        if ns := self.null_samples:
            rows += [
                ("no-change null: flagged mean", ns["flagged_mean"]),
                ("no-change null: flagged 95% range", f"{ns['flagged_p025']:.0f}-{ns['flagged_p975']:.0f}"),
                ("no-change null: false-positive rate", ns["rate"]),
                ("nominal rate", ns["nominal_rate"]),
            ]
        if nc := self.no_change_test:
            rows.append(("no-change test p (within-item permutation)", nc["p_value"]))
        dom = self.domain
        rows += [
            ("direction test: improved p95", asym["improved_p95"]),
            ("direction test: deteriorated p95", asym["deteriorated_p95"]),
            ("negative flip rate", fl.get("negative_flip_rate", nan)),
            ("positive flip rate", fl.get("positive_flip_rate", nan)),
            ("domain chi2", dom.get("chi2")),
            ("domain p", dom.get("p")),
            ("Cramer's V", dom.get("cramers_v")),
            ("aggregate dp", self.payload["aggregate"]["mean_delta"]),
        ]
        rows += [("warning", w) for w in self.warnings]
        return pd.DataFrame(rows, columns=["metric", "value"]).assign(pair=self.name)[["pair", "metric", "value"]]

    def plot_rci(self, ax=None):
        """Histogram of item RCIs with the ±z thresholds; returns the Figure."""
        import numpy as np

        fig = ax.figure if ax is not None else _new_figure(figsize=(5, 3))
        ax = ax or fig.add_subplot()
        r = self.items["rci"].to_numpy(float) if self.items is not None else np.array([])
        ax.hist(r[np.isfinite(r)], bins=40, color="#777")
        for s in (-1, 1):
            ax.axvline(s * self.z, color="#d62728", ls="--")
        ax.set_xlabel("RCI")
        ax.set_ylabel("items")
        ax.set_title(f"{self.name}: {self.versions[0]} → {self.versions[1]}", fontsize=9)
        return fig

    def __repr__(self) -> str:
        c = self.counts.get("analysable", {})
        return f"<PairResult {self.name}: {self.versions[0]} -> {self.versions[1]}, {c.get('improved')} improved, {c.get('deteriorated')} deteriorated of {c.get('n')}>"


@register
class RCIRun(Result):
    """``bayesrc rci`` output: every pair's classical analysis (``rci.json`` + ``items_NAME.parquet``).

    Examples
    --------
    >>> from bayesrc.classical import analyse_pairs
    >>> run = analyse_pairs({"demo": counts}).to_result()   # doctest: +SKIP
    >>> run["demo"].n_flagged, run.summary()                   # doctest: +SKIP
    """

    main_file = "rci.json"
    kind = "rci"

    def table_file(self, name: str) -> str:
        return f"items_{name}.parquet"

    def table_names_on_disk(self, folder: Path) -> dict[str, Path]:
        return {n: folder / f"items_{n}.parquet" for n in self.payload.get("pairs", {}) if (folder / f"items_{n}.parquet").is_file()}

    @classmethod
    def load(cls, path: str | Path) -> RCIRun:
        obj = super().load(path)
        if not isinstance(obj.payload, dict) or not isinstance(obj.payload.get("pairs"), dict):
            raise InputError("expected an object with 'pairs' (output of bayesrc rci)", path=Path(obj.path) / cls.main_file, field="pairs")
        return obj

    @property
    def names(self) -> list[str]:
        return list(self.payload.get("pairs", {}))

    def __getitem__(self, name: str) -> PairResult:
        return PairResult(name, self.payload["pairs"][name], self.tables.get(name))

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def cross_pair(self) -> dict | None:
        return self.payload.get("cross_pair")

    def summary(self):
        import pandas as pd

        return pd.concat([self[n].summary() for n in self.names], ignore_index=True) if self.names else pd.DataFrame(columns=["pair", "metric", "value"])

    def plot_rci(self, name: str | None = None, ax=None):
        return self[name or self.names[0]].plot_rci(ax=ax)

    def _headline(self) -> str:
        return ", ".join(f"{n} ({self[n].n_flagged} reliably changed)" for n in self.names)


# ====================================================================== switch
@register
class SwitchResult(Result):
    """``bayesrc switch`` output (``switch.json``): switch effects, LS and Bayesian factor fits per benchmark.

    Examples
    --------
    >>> from bayesrc.switch import analyse_switch, simulate_switch
    >>> res = analyse_switch(simulate_switch(4, 30, seed=3).data, n_boot=100, backends=()).to_result()
    >>> res.benchmarks, res.effects().shape[0]
    (['sim'], 12)
    """

    main_file = "switch.json"
    kind = "switch"

    @property
    def benchmarks(self) -> list[str]:
        return list(self.payload.get("benchmarks", {}))

    def benchmark(self, name: str) -> dict:
        return self.payload["benchmarks"][name]

    @property
    def failed_fits(self) -> list[str]:
        """``benchmark/backend`` of every Bayesian factor fit that failed the convergence gate."""
        return list(self.failed_fit_reasons())

    def failed_fit_reasons(self) -> dict[str, str]:
        """``{benchmark/backend: the gate's worst diagnostic}`` of the failed Bayesian fits."""
        return {f"{b}/{n}": (d.get("diagnostics") or {}).get("worst", "") for b, r in self.payload.get("benchmarks", {}).items() for n, d in r.get("bayes", {}).items() if not d.get("passed")}

    def effects(self, benchmark: str | None = None):
        """Switch effects (prefix, suffix, delta, interval, stars) of a benchmark."""
        import pandas as pd

        return pd.DataFrame(self.benchmark(benchmark or self.benchmarks[0]).get("effects", []))

    def cells(self, benchmark: str | None = None):
        """Observed switch cells with the factor model's fit (prefix, suffix, observed, fitted, resid, ...)."""
        import pandas as pd

        return pd.DataFrame(self.benchmark(benchmark or self.benchmarks[0]).get("cells") or [])

    def factors(self, benchmark: str | None = None):
        """The additive factor model's α (prefix influence) and β (suffix susceptibility) per model."""
        import pandas as pd

        b = self.benchmark(benchmark or self.benchmarks[0])
        ab = pd.DataFrame({"alpha (prefix influence)": pd.Series(b.get("alpha") or {}, dtype=float), "beta (suffix susceptibility)": pd.Series(b.get("beta") or {}, dtype=float)})
        return ab.rename_axis("model").reset_index()

    def factor_table(self, benchmark: str | None = None):
        """Posterior summary of μ, τ, α and β for every backend fitted (long format)."""
        import pandas as pd

        rows = []
        for backend, d in self.benchmark(benchmark or self.benchmarks[0]).get("bayes", {}).items():
            for term, v in d.get("terms", {}).items():
                rows.append({"backend": backend, "term": term, **v})
        return pd.DataFrame(rows)

    def summary(self):
        import pandas as pd

        rows = []
        for b, r in self.payload.get("benchmarks", {}).items():
            eff = r.get("effects", [])
            rows.append({
                "benchmark": b, "models": len(r.get("models", [])), "cells": len(eff),
                "significant_95": sum(1 for e in eff if e.get("stars")), "mu": r.get("mu"), "r2": r.get("r2"), "cv_r2": r.get("cv_r2"),
                "bayes_passed": ",".join(f"{n}={'yes' if d.get('passed') else 'NO'}" for n, d in r.get("bayes", {}).items()),
            })  # fmt: skip
        return pd.DataFrame(rows)

    def plot_effects(self, benchmark: str | None = None, ax=None):
        """Heatmap of the switch effects Δ_ab (rows prefix, columns suffix); returns the Figure."""
        import numpy as np

        b = benchmark or self.benchmarks[0]
        models = self.benchmark(b)["models"]
        eff = self.effects(b)
        pos = {m: i for i, m in enumerate(models)}
        vals = np.full((len(models), len(models)), np.nan)
        for r in eff.itertuples():
            if r.delta is not None and np.isfinite(r.delta):
                vals[pos[r.prefix], pos[r.suffix]] = r.delta
        fig = ax.figure if ax is not None else _new_figure(figsize=(1.0 + 0.8 * len(models), 0.8 + 0.7 * len(models)))
        ax = ax or fig.add_subplot()
        lim = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
        im = ax.imshow(vals, cmap="RdBu", vmin=-lim, vmax=lim)
        ax.set_xticks(range(len(models)), models, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(models)), models, fontsize=7)
        ax.set_xlabel("suffix model")
        ax.set_ylabel("prefix model")
        fig.colorbar(im, ax=ax, shrink=0.8)
        return fig

    def _headline(self) -> str:
        return f"{len(self.benchmarks)} benchmark(s)" + (f", failed fits: {', '.join(self.failed_fits)}" if self.failed_fits else "")


# ====================================================================== power
#: the stress tests of a power verdict, in report order
VERDICT_PARADIGMS = ("fixed_n", "bonferroni", "holm", "bh", "clustered", "anytime")


@register
class PowerReport(Result):
    """``bayesrc power`` output (``power.json``): resolution of every leaderboard pair.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesrc.power import leaderboard_report
    >>> rng = np.random.default_rng(0)
    >>> rep = leaderboard_report({m: (rng.random(500) < p).astype(float) for m, p in (("a", 0.7), ("b", 0.6))}).to_result()
    >>> rep.pairs_table()["pair"].tolist()
    ['a vs b']
    """

    main_file = "power.json"
    kind = "power"

    def pairs(self):
        """One row per pair (the ``pairs`` records of ``power.json``)."""
        import pandas as pd

        return pd.json_normalize(self.payload.get("pairs", []), sep=".")

    def pair_records(self, versions: tuple[str, str] | None = None) -> list[dict]:
        """The ``pairs`` records of ``power.json`` (keys of :meth:`bayesrc.power.PairResolution.to_dict`);
        with ``versions``, only the pair comparing those two (all pairs when none does)."""
        recs = list(self.payload["pairs"])
        if versions is not None:
            mine = [q for q in recs if {str(q["name_a"]), str(q["name_b"])} == set(map(str, versions))]
            recs = mine or recs
        return recs

    def pairs_table(self, versions: tuple[str, str] | None = None):
        """One row per pair: N, δ, ρ, discordant counts, MDE, N*, q = N/N*, exact p and each paradigm's verdict."""
        import pandas as pd

        rows = []
        for p in self.pair_records(versions):
            row = {"pair": f"{p['name_a']} vs {p['name_b']}", "N": p["n"], "delta": p["delta"], "rho": p["rho"], "b": p["b"], "c": p["c"],
                   "MDE": p["mde"], "N*": p["n_star_ceil"], "q = N/N*": p["q"], "p exact": p["p_exact"]}  # fmt: skip
            row.update({k: p["verdicts"][k] for k in VERDICT_PARADIGMS if k in p["verdicts"]})
            rows.append(row)
        return pd.DataFrame(rows)

    def summary(self):
        """Unresolved pairs per paradigm (the ``unresolved`` records)."""
        import pandas as pd

        return pd.DataFrame(self.payload.get("unresolved", []))

    def plot_resolution(self, ax=None):
        """Observed |Δ| of each pair against its minimum resolvable Δ at the sample size; returns the Figure."""
        import numpy as np

        t = self.pairs()
        fig = ax.figure if ax is not None else _new_figure(figsize=(5, 3))
        ax = ax or fig.add_subplot()
        cols = [c for c in t.columns if c.endswith("mde") or c == "mde"]
        x = np.arange(len(t))
        ax.bar(x, np.abs(t["delta"].astype(float)) if "delta" in t else np.zeros(len(t)), color="#777", label="|Δ| observed")
        if cols:
            ax.plot(x, t[cols[0]].astype(float), "D", color="#d62728", label="minimum detectable")
        ax.set_xticks(x, t["pair"] if "pair" in t else x, rotation=45, ha="right", fontsize=7)
        ax.legend(fontsize=7)
        return fig

    def _headline(self) -> str:
        return f"{len(self.payload.get('pairs', []))} pair(s)"


# ====================================================================== sensitivity
@register
class SensitivityTable(Result):
    """``bayesrc sensitivity`` output: one table per analysis (``sensitivity_NAME.csv``, ``sensitivity.json``).

    Examples
    --------
    >>> import pandas as pd
    >>> t = SensitivityTable.from_tables({"threshold": pd.DataFrame({"z": [1.96, 2.58], "detections": [40, 22]})})
    >>> t.analyses, SensitivityTable.from_dict(t.to_dict()) == t
    (['threshold'], True)
    """

    main_file = "sensitivity.json"
    kind = "sensitivity"

    def __init__(self, payload: dict, tables: dict | None = None, posterior: Any = None) -> None:
        import pandas as pd

        super().__init__(payload, tables, posterior)
        if not self.tables:  # the tables are the payload's records; keep frames for use
            self.tables = {n: pd.DataFrame(recs) for n, recs in self.payload.get("analyses", {}).items()}

    @classmethod
    def from_tables(cls, tables: dict) -> SensitivityTable:
        return cls({"analyses": {n: t.to_dict(orient="records") for n, t in tables.items()}})

    def to_dict(self) -> dict:
        return copy.deepcopy(self.payload)

    @classmethod
    def from_dict(cls, d: dict, posterior: Any = None) -> SensitivityTable:
        return cls(copy.deepcopy(d))

    def save(self, out_dir: str | Path) -> Path:
        from bayesrc.report.sensitivity import write_sensitivity

        write_sensitivity(self.tables, out_dir)
        return Path(out_dir)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return json.dumps(self.payload, sort_keys=True) == json.dumps(other.payload, sort_keys=True)

    __hash__ = None  # type: ignore[assignment]

    @property
    def analyses(self) -> list[str]:
        return list(self.tables)

    def __getitem__(self, name: str):
        return self.tables[name]

    def summary(self):
        import pandas as pd

        frames = [t.assign(analysis=t.get("analysis", n)) for n, t in self.tables.items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def plot(self, name: str | None = None):
        from bayesrc.report.sensitivity import sensitivity_figure

        return sensitivity_figure(self.tables[name or self.analyses[0]])

    def _headline(self) -> str:
        return ", ".join(self.analyses)


# ====================================================================== load
def _bayes_fit_class() -> type[Result]:
    from bayesrc.bayes.fit import BayesFit  # registers fit.json

    return BayesFit


def load(path: str | Path) -> Result | dict[str, Result]:
    """Open any result file or folder the CLI writes and return its typed object.

    Parameters
    ----------
    path : a result folder (``bayesrc rci|fit|switch|power|sensitivity --out DIR``) or one of
        its main files (``rci.json``, ``fit.json``, ``switch.json``, ``power.json``,
        ``sensitivity.json`` / ``sensitivity_NAME.csv``).

    Returns
    -------
    The typed result (:class:`RCIRun`, :class:`~bayesrc.bayes.BayesFit`, :class:`SwitchResult`,
    :class:`PowerReport`, :class:`SensitivityTable`). A folder holding several results (a
    run directory after ``bayesrc demo``) gives a dict ``{main file: result}``; Bayesian
    fits kept in sub-folders (``NAME/fit.json``) appear as ``"NAME/fit.json"``.

    Examples
    --------
    >>> import bayesrc
    >>> fit = bayesrc.load("runs/demo/fit")    # doctest: +SKIP
    >>> fit.summary()                          # doctest: +SKIP
    """
    _bayes_fit_class()
    path = Path(path)
    if path.is_file():
        name = path.name
        if name.startswith("sensitivity_") and name.endswith(".csv"):
            name = "sensitivity.json"
        if name not in REGISTRY:
            raise InputError(f"not a bayesrc result file (expected one of {', '.join(sorted(REGISTRY))})", path=path)
        return REGISTRY[name].load(path.parent)
    if not path.is_dir():
        raise InputError("no such file or folder", path=path)
    found = {name: cls.load(path) for name, cls in REGISTRY.items() if (path / name).is_file()}
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        if (sub / "fit.json").is_file():
            found[f"{sub.name}/fit.json"] = REGISTRY["fit.json"].load(sub)
    if not found:
        raise InputError(f"no result files ({', '.join(sorted(REGISTRY))}) in this folder", path=path)
    return next(iter(found.values())) if len(found) == 1 else found
