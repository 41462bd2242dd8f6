"""The classical RCI's typed result: :class:`RCIRun` (``rci.json`` + ``items_NAME.parquet``), one
:class:`PairResult` view per version pair. :func:`bayesrc.classical.reliable_change` returns a
:class:`PairResult` too: in memory and from disk a pair is one class.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bayesrc.classical.rci import CLASS_LABELS, CLASSES
from bayesrc.errors import InputError
from bayesrc.fields import two_labels
from bayesrc.plotting import new_figure
from bayesrc.results import Result, register, same_frame, same_payload

#: the columns of a pair's item table (``items_NAME.parquet``) that its summaries, figures and the report read
ITEM_COLUMNS = ("item_id", "p_v1", "p_v2", "delta", "rci", "class", "excluded")


def _count(x, field: str) -> int:
    """A count of the payload as an int; a null count is an InputError naming the field (there is no count to show)."""
    if x is None:
        raise InputError("expected a count, got null", field=field)
    return int(x)


def _bounds(interval: list | None) -> tuple[float, float]:
    """An interval's (lower, upper) as floats; NaN where it is null or has fewer than two bounds."""
    lo, hi = [*(interval or []), None, None][:2]
    return _float(lo), _float(hi)


def _float(x) -> float:
    """A number of the payload as a float: NaN where ``rci.json`` holds null (JSON has no NaN)."""
    return float("nan") if x is None else float(x)


class PairResult:
    """The classical analysis of one version pair: its ``pairs.NAME`` block of ``rci.json``
    (``payload``) and its item table (``items``, one row per item; None when
    ``items_NAME.parquet`` is absent).

    :func:`bayesrc.classical.reliable_change` returns one, and ``bayesrc.load("rci.json")[NAME]``
    gives it back (a view of the :class:`RCIRun`): the same accessors in memory and from disk, and
    a pair equals its saved and reloaded copy. Typed accessors for the fields; every key of the
    block is in ``payload`` (strict JSON: NaN reads as None there, as NaN through the float
    accessors).

    Parameters
    ----------
    name : the pair's name (its key under ``pairs`` in ``rci.json``).
    payload : the ``pairs.NAME`` block.
    items : the item table (``items_NAME.parquet``), or None.

    Examples
    --------
    >>> from bayesrc.classical import reliable_change
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(200, 10, seed=1)
    >>> pair = reliable_change(item_counts(sim.trials_v1, sim.trials_v2), n_splits=50, n_permutations=50, n_null=0,
    ...                        name="demo")
    >>> pair.versions, pair.n_flagged == pair.analysable["improved"] + pair.analysable["deteriorated"]
    (('model-v1', 'model-v2'), True)
    >>> pair.classification_table()  # doctest: +SKIP
    >>> import bayesrc
    >>> bayesrc.load("runs/demo/rci.json")["minor"].n_flagged  # doctest: +SKIP
    """

    def __init__(self, name: str, payload: dict, items: pd.DataFrame | None = None) -> None:
        self.name, self.payload, self.items = name, payload, items

    def to_frame(self) -> pd.DataFrame:
        """A copy of the item table: item_id, domain, p_v1, p_v2, delta, rci, class, excluded, reason, ..."""
        if self.items is None:
            raise ValueError(f"pair {self.name!r} has no item table (items_{self.name}.parquet)")
        return self.items.copy()

    @property
    def versions(self) -> tuple[str, str]:
        return two_labels(self.payload.get("versions") or ["v1", "v2"], "versions")

    @property
    def params(self) -> dict:
        return self.payload.get("params", {})

    @property
    def z(self) -> float:
        z = self.params.get("z", 1.96)
        if z is None:
            raise InputError("expected the RCI threshold, got null", field="params.z")
        return float(z)

    @property
    def s_diff(self) -> float:
        """The pair's S_diff (the median per-item one for ``s_diff_method = "binomial"``); NaN when undefined."""
        return _float(self.payload.get("s_diff"))

    @property
    def s_diff_all(self) -> float:
        """S_diff from the SD of every item scored in both versions (the pre-exclusion analysis)."""
        return _float(self.payload.get("s_diff_all_items"))

    @property
    def min_detectable(self) -> float:
        """The smallest reliable change in accuracy, ``z * s_diff``."""
        return _float(self.payload.get("min_detectable"))

    @property
    def sem(self) -> dict[str, float]:
        """Standard error of measurement per version (``v1``, ``v2``)."""
        return {v: _float(x) for v, x in self.payload["sem"].items()}

    @property
    def r_xx(self) -> dict[str, float]:
        """Split-half reliability per version (``v1``, ``v2``); its interval, ICCs and splits are in
        :attr:`reliability`."""
        return {v: _float(self.reliability[v]["r_xx"]) for v in ("v1", "v2")}

    @property
    def counts(self) -> dict:
        return self.payload.get("counts", {})

    @property
    def n_flagged(self) -> int:
        """Items classified reliably changed (analysable items, primary threshold)."""
        c = self.counts.get("analysable", {})
        return _count(c.get("improved", 0), "counts.analysable.improved") + _count(
            c.get("deteriorated", 0), "counts.analysable.deteriorated"
        )

    # typed views of the pairs.NAME block (keys as reliable_change writes them) --------------
    # n_before, n_after, low_valid, floor_ceiling, min_valid_rule
    exclusions = property(lambda self: self.payload["exclusions"])
    # v1/v2: r_xx, ci, mean, sd, n_splits, n_items, k, icc, icc_1_k
    reliability = property(lambda self: self.payload["reliability"])
    s_diff_method = property(lambda self: self.payload["s_diff_method"])  # "reference" | "binomial"
    sd_basis = property(lambda self: self.payload["sd_basis"])
    reliability_basis = property(lambda self: self.payload["reliability_basis"])
    min_detectable_samples = property(lambda self: self.payload["min_detectable_samples"])
    null_samples = property(lambda self: self.payload.get("null_samples"))  # None when n_null = 0
    no_change_test = property(lambda self: self.payload.get("no_change_test"))  # None in rci.json files from before it
    direction_asymmetry = property(lambda self: self.payload["direction_asymmetry"])
    flips = property(lambda self: self.payload.get("flips") or {})
    domain = property(lambda self: self.payload["domain"])  # chi2, p, cramers_v, per_domain, table
    difficulty_bins = property(lambda self: self.payload["difficulty_bins"])  # records: difficulty_table()
    # |dp| of all / of the reliably changed items: n, mean, median, shares >= 0.2, 0.4
    effect_sizes = property(lambda self: self.payload["effect_sizes"])
    aggregate = property(lambda self: self.payload["aggregate"])  # n, mean_delta, ci95 (t interval)
    # v1/v2: the K that reaches r_xx = 0.8 (None: r_xx not in (0, 1))
    k_for_r80 = property(lambda self: self.payload["k_for_r80"])
    k_for_r90 = property(lambda self: self.payload["k_for_r90"])
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
        sets = (("analysable", "analysable"), ("conservative", "conservative z"), ("all", "all items"))
        ns = self.null_samples
        null_mean = {"improved": "improved_mean", "deteriorated": "deteriorated_mean"}
        rows = []
        for cls in CLASSES:
            row: dict = {"class": CLASS_LABELS[cls]}
            for key, label in sets:
                cnt = self.counts[key]
                row[f"{label} n"] = cnt[cls]
                row[f"{label} %"] = 100 * _float(cnt["proportions"][cls]) if cnt["n"] else np.nan
            if ns:  # null means read as NaN (a missing number in the table)
                row["no-change null n"] = (
                    _float(ns[null_mean[cls]])
                    if cls in null_mean
                    else _float(ns["n_analysable_mean"]) - _float(ns["flagged_mean"])
                )
            rows.append(row)
        total: dict = {"class": "total"} | {
            k: v for key, label in sets for k, v in ((f"{label} n", self.counts[key]["n"]), (f"{label} %", 100.0))
        }
        if ns:
            total["no-change null n"] = ns["n_analysable_mean"]
        return pd.DataFrame([*rows, total])

    def reliability_table(self):
        """Per version: split-half r_xx with its interval, ICC(1,K), ICC(1,1) and SEM."""
        rel = self.reliability
        return pd.DataFrame(
            [
                {
                    "version": v,
                    "r_xx": rel[v]["r_xx"],
                    "ci_lo": _bounds(rel[v]["ci"])[0],
                    "ci_hi": _bounds(rel[v]["ci"])[1],
                    "ICC(1,K)": rel[v]["icc_1_k"],
                    "ICC(1,1)": rel[v]["icc"],
                    "SEM": self.sem[v],
                }
                for v in ("v1", "v2")
            ]
        )

    def domain_table(self):
        """Per domain: analysable items, class counts, churn (%), improved/deteriorated ratio and net."""
        rows = []
        for d, v in self.domain["per_domain"].items():
            n, up, same, down = (
                _count(v[k], f"domain.per_domain.{d}.{k}") for k in ("n", "improved", "no_change", "deteriorated")
            )
            churn = 100 * (up + down) / n if n else np.nan
            rows.append(
                {
                    "domain": d,
                    "n": n,
                    "improved": up,
                    "no change": same,
                    "deteriorated": down,
                    "churn %": churn,
                    "imp/det": np.nan if v["ratio"] is None else v["ratio"],
                    "net": v["net"],
                }
            )
        return pd.DataFrame(rows)

    def domain_crosstab(self):
        """Domain x class counts of the analysable items (rows domains)."""
        return pd.DataFrame(self.domain["table"]).T

    def difficulty_table(self) -> pd.DataFrame:
        """Churn and direction of the analysable items by v1 accuracy bin (one row per bin)."""
        return pd.DataFrame(self.difficulty_bins)

    def stratified_table(self) -> pd.DataFrame:
        """Difficulty-stratified S_diff from per-item binomial SEs and the classes it gives (one row per stratum)."""
        return pd.DataFrame(self.payload["stratified"])

    def reliability_vs_k_table(self) -> pd.DataFrame:
        """Split-half r_xx (with its interval) on the first K samples, per version and K."""
        rows = [
            {
                "version": v,
                "k": int(k),
                "r_xx": _float(r["r_xx"]),
                "ci_lo": _float(r["ci"][0]),
                "ci_hi": _float(r["ci"][1]),
            }
            for v, by_k in self.payload["reliability_vs_k"].items()
            for k, r in by_k.items()
        ]
        return pd.DataFrame(rows, columns=["version", "k", "r_xx", "ci_lo", "ci_hi"])

    def summary(self):
        """Headline numbers as a tidy table (pair, metric, value)."""
        c, rel, ex = self.analysable, self.reliability, self.exclusions
        asym, fl, nan = self.direction_asymmetry, self.flips, float("nan")
        method = self.s_diff_method
        graded = self.payload.get("graded")
        rows = [
            ("versions", f"{self.versions[0]} -> {self.versions[1]}"),
            *(
                [("scores", f"{graded['kind']} {graded['low']:g}-{graded['high']:g}, as p on [0, 1] (mean score)")]
                if graded
                else []
            ),
            ("S_diff method", method),
            ("sd_basis", self.sd_basis),
            ("reliability basis", self.reliability_basis),
            *(
                (f"{name} {v}", rel[v][key])
                for key, name in (("r_xx", "r_xx"), ("icc_1_k", "ICC(1,K)"), ("icc", "ICC(1,1)"))
                for v in ("v1", "v2")
            ),
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
        if graded:
            tests = graded["paired_tests"]
            rows += [
                ("Wilcoxon signed-rank p (mean-score changes)", tests["wilcoxon"]["p_value"]),
                (f"sign test p ({tests['sign']['up']} up, {tests['sign']['down']} down)", tests["sign"]["p_value"]),
            ]
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
        fig = ax.figure if ax is not None else new_figure(figsize=(5, 3))
        ax = ax or fig.add_subplot()
        r = self.items["rci"].to_numpy(float) if self.items is not None else np.array([])
        ax.hist(r[np.isfinite(r)], bins=40, color="#777")
        for s in (-1, 1):
            ax.axvline(s * self.z, color="#d62728", ls="--")
        ax.set_xlabel("RCI")
        ax.set_ylabel("items")
        ax.set_title(f"{self.name}: {self.versions[0]} → {self.versions[1]}", fontsize=9)
        return fig

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PairResult):
            return NotImplemented
        same_items = (self.items is None) == (other.items is None) and (
            self.items is None or same_frame(self.items, other.items)
        )
        return self.name == other.name and same_payload(self.payload, other.payload) and same_items

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        c = self.counts.get("analysable", {})
        return (
            f"<PairResult {self.name}: {self.versions[0]} -> {self.versions[1]}, {c.get('improved')} improved, "
            f"{c.get('deteriorated')} deteriorated of {c.get('n')}>"
        )


@register
class RCIRun(Result):
    """``bayesrc rci`` output: every pair's classical analysis (``rci.json`` + ``items_NAME.parquet``).

    :func:`bayesrc.classical.analyse_pairs` returns one (:meth:`from_pairs`); ``run[NAME]`` is
    a pair's :class:`PairResult`, ``run.pairs`` all of them.

    Examples
    --------
    >>> from bayesrc.classical import analyse_pairs
    >>> run = analyse_pairs({"demo": counts})   # doctest: +SKIP
    >>> run["demo"].n_flagged, run.summary()    # doctest: +SKIP
    """

    main_file = "rci.json"
    kind = "rci"
    headline_metrics = (
        *("versions", "scores", "items", "analysable", "improved", "no change", "deteriorated", "min detectable |dp|"),
        *("no-change null: flagged mean", "no-change null: false-positive rate"),
        "no-change test p (within-item permutation)",
    )
    field_kinds = {  # what PairResult, the report and its figures read (bayesrc.fields.check_fields)
        "pairs!": "object",
        "pairs.*": "object",
        "pairs.*.{params,reliability,exclusions,sem,counts,domain,direction_asymmetry}": "object",
        "pairs.*.reliability.*": "object",
        "pairs.*.counts.*": "object",
        "pairs.*.counts.*.proportions": "object",
        "pairs.*.domain.{per_domain,table}": "object",
        "pairs.*.domain.{per_domain,table}.*": "object",
        "pairs.*.{s_diff,min_detectable}": "number",
        "pairs.*.min_detectable_samples": "integer",
        "pairs.*.warnings": "texts",
        "pairs.*.params.z": "critical z",
        "pairs.*.params.k": "integer",
        "pairs.*.sem.*": "number",
        "pairs.*.reliability.*.{r_xx,icc,icc_1_k}": "number",
        "pairs.*.reliability.*.ci": "interval",
        "pairs.*.exclusions.{n_before,n_after,low_valid,floor_ceiling}": "integer",
        "pairs.*.counts.*.{improved,no_change,deteriorated,n}": "integer",
        "pairs.*.counts.*.churn": "number",
        "pairs.*.counts.*.proportions.*": "number",
        "pairs.*.null_samples.replicates": "integer",
        (
            "pairs.*.null_samples.{flagged_mean,flagged_p025,flagged_p975,improved_mean,deteriorated_mean,"
            "n_analysable_mean,rate,nominal_rate}"
        ): "number",
        "pairs.*.no_change_test.p_value": "number",
        "pairs.*.no_change_test.n_permutations": "integer",
        "pairs.*.direction_asymmetry.{n_permutations,n_items,observed_improved,observed_deteriorated}": "integer",
        "pairs.*.direction_asymmetry.{improved_p95,deteriorated_p95}": "number",
        "pairs.*.flips.{n,negative_flips,positive_flips}": "integer",
        "pairs.*.flips.{negative_flip_rate,positive_flip_rate}": "number",
        "pairs.*.domain.{chi2,p,cramers_v}": "number",
        "pairs.*.domain.per_domain.*.{n,improved,no_change,deteriorated}": "integer",
        "pairs.*.domain.table.*.*": "integer",
        "pairs.*.difficulty_bins": "records",
        "pairs.*.difficulty_bins.[].{n,improved,no_change,deteriorated}": "integer",
        "pairs.*.difficulty_bins.[].{lo,hi,churn}": "number",
        "pairs.*.graded": "object",  # graded scores only (bayesrc.classical.graded)
        "pairs.*.graded.{low,high}": "number",
        "pairs.*.graded.paired_tests.{wilcoxon,sign}": "object",
        "pairs.*.graded.paired_tests.*.p_value": "number",
    }

    @classmethod
    def from_pairs(
        cls, pairs: dict[str, PairResult], cross_pairs: list[dict] | None = None, greedy: dict[str, dict] | None = None
    ) -> RCIRun:
        """The run of analysed ``pairs``, with the cross-pair tests and greedy comparisons
        (:func:`bayesrc.classical.greedy_comparison` records, their tables as DataFrames)."""
        payload: dict = {"pairs": {n: p.payload for n, p in pairs.items()}}
        if cross_pairs:
            payload |= {"cross_pair": cross_pairs[0], "cross_pairs": list(cross_pairs)}
        if greedy:
            payload["greedy"] = {n: _greedy_record(g) for n, g in greedy.items()}
        return cls(payload, {n: p.items for n, p in pairs.items() if p.items is not None})

    def table_file(self, name: str) -> str:
        return f"items_{name}.parquet"

    def table_names_on_disk(self, folder: Path) -> dict[str, Path]:
        return {
            n: folder / f"items_{n}.parquet" for n in self.payload["pairs"] if (folder / f"items_{n}.parquet").is_file()
        }  # an object: field_kinds

    def required_columns(self, name: str) -> tuple[str, ...]:
        return ITEM_COLUMNS

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
    def pairs(self) -> dict[str, PairResult]:
        """Every pair's :class:`PairResult`, by name."""
        return {n: self[n] for n in self.names}

    @property
    def cross_pair(self) -> dict | None:
        return self.payload.get("cross_pair")

    def to_frame(self) -> pd.DataFrame:
        """All pairs' item tables, one below the other, with a ``pair`` column."""
        return pd.concat([self[n].to_frame().assign(pair=n) for n in self.names], ignore_index=True)

    def summary(self):
        return (
            pd.concat([self[n].summary() for n in self.names], ignore_index=True)
            if self.names
            else pd.DataFrame(columns=["pair", "metric", "value"])
        )

    def plot_rci(self, name: str | None = None, ax=None):
        return self[name or self.names[0]].plot_rci(ax=ax)

    def _headline(self) -> str:
        return ", ".join(f"{n} ({self[n].n_flagged} reliably changed)" for n in self.names)


def _greedy_record(comparison: dict) -> dict:
    """A greedy comparison as ``rci.json`` holds it: its 3 x 3 table as nested objects of counts."""
    table = {str(r): {str(c): int(x) for c, x in row.items()} for r, row in comparison["table"].iterrows()}
    return {k: v for k, v in comparison.items() if k != "table"} | {"table": table}
