"""The leaderboard resolution's typed result: :class:`PowerReport` (``power.json``), what
:func:`bayesrc.power.leaderboard_report` returns and ``bayesrc.load`` gives back: one class in
memory and on disk, with the tables ``bayesrc power`` writes beside it (``pairs.csv``,
``power.md``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrc.markdown import markdown_table
from bayesrc.plotting import new_figure
from bayesrc.results import Result, register

#: the stress tests of a power verdict, in report order
VERDICT_PARADIGMS = ("fixed_n", "bonferroni", "holm", "bh", "clustered", "anytime")

#: a verdict of ``power.json`` (``pairs[i].verdicts``) as a boolean; None: the paradigm does not apply
VERDICT_BOOL = {"resolved": True, "unresolved": False, None: None}


@register
class PowerReport(Result):
    """Resolution of every adjacent pair of a leaderboard (``power.json``).

    :func:`bayesrc.power.leaderboard_report` returns one and ``bayesrc.load("power.json")`` gives it
    back (what ``bayesrc power`` writes): the same accessors in memory and from disk, and a report
    equals its saved and reloaded copy. The payload holds ``info`` (settings), ``ranking``,
    ``unresolved`` (per paradigm), ``pairs`` (one record per adjacent pair:
    :meth:`bayesrc.power.PairResolution.to_dict`) and, for K-sample scores, ``noise``.

    N* and q are never NaN: N* is infinite where the observed δ = 0, and q where N* = 0. JSON has
    no infinity, so ``power.json`` holds null there, and :meth:`to_frame` and :meth:`to_markdown`
    read it back as infinite.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesrc.power import leaderboard_report
    >>> rng = np.random.default_rng(0)
    >>> rep = leaderboard_report({m: (rng.random(500) < p).astype(float)
    ...                           for m, p in (("a", 0.7), ("b", 0.6), ("c", 0.5))})
    >>> rep.ranking["model"].tolist(), rep.pairs_table()["pair"].tolist()  # adjacent pairs of the ranking
    (['a', 'b', 'c'], ['a vs b', 'b vs c'])
    >>> rep.to_frame()[["rank", "pair", "resolved_fixed_n"]].shape
    (2, 3)
    >>> print(rep.to_markdown().splitlines()[0])
    # Resolution report
    >>> rep.save("out/power")  # doctest: +SKIP
    """

    main_file = "power.json"
    kind = "power"
    field_kinds = {  # what the summary, the tables and the report read (bayesrc.fields.check_fields)
        "pairs.[]": "object",
        "pairs.[].{delta,mde,q,rho,p_exact}": "number",
        "pairs.[].{n,b,c,n_star_ceil}": "integer",
        "pairs.[].verdicts": "object",
        "pairs.[].verdicts.*": "text",
        "noise.[]": "object",
        "noise.[].{k,se,share_sampling,share_items}": "number",
        "noise.[].{n_items,n_half,k_half}": "integer",
        "{pairs,noise,unresolved,ranking}": "records",
    }

    @property
    def info(self) -> dict:
        """The settings: alpha, power, comparisons, anytime and what the CLI adds (aggregate, missing, sources,
        cluster_by, ...)."""
        return self.payload.get("info", {})

    @property
    def ranking(self) -> pd.DataFrame:
        """The models ranked by accuracy, best first (rank, model, accuracy)."""
        return pd.DataFrame(self.payload.get("ranking", []))

    @property
    def noise(self) -> list[dict]:
        """Per pair, the noise of the mean-accuracy difference, K vs N (:func:`bayesrc.power.leaderboard_noise`);
        empty for single-shot scores."""
        return list(self.payload.get("noise", []))

    def with_noise(self, noise: list[dict]) -> PowerReport:
        """A copy holding ``noise`` (:func:`bayesrc.power.leaderboard_noise` of this report); an empty list leaves the
        key out."""
        payload = {k: v for k, v in self.payload.items() if k != "noise"}
        return PowerReport({**payload, "noise": noise} if noise else payload)

    def pairs(self):
        """One row per pair (the ``pairs`` records of ``power.json``)."""
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
        rows = []
        for p in self.pair_records(versions):
            row = {
                "pair": f"{p['name_a']} vs {p['name_b']}",
                "N": p["n"],
                "delta": p["delta"],
                "rho": p["rho"],
                "b": p["b"],
                "c": p["c"],
                "MDE": p["mde"],
                "N*": p["n_star_ceil"],
                "q = N/N*": p["q"],
                "p exact": p["p_exact"],
            }
            row.update({k: p["verdicts"][k] for k in VERDICT_PARADIGMS if k in p["verdicts"]})
            rows.append(row)
        return pd.DataFrame(rows)

    def noise_table(self, versions: tuple[str, str] | None = None) -> pd.DataFrame:
        """Per pair: the variance of the mean-accuracy difference split into sampling within items (K) and the
        item set (N), with the N and K that would halve it (empty for single-shot scores or an older ``power.json``).

        Examples
        --------
        >>> rep = PowerReport({"pairs": [], "noise": [{"name_a": "a", "name_b": "b", "n_items": 100, "k": 10.0,
        ...                    "se": 0.01, "share_sampling": 0.8, "share_items": 0.2, "n_half": 200, "k_half": 27}]})
        >>> int(rep.noise_table().iloc[0]["K to halve"])
        27
        """
        rows = [
            r
            for r in self.payload.get("noise", [])
            if versions is None or {r["name_a"], r["name_b"]} == set(map(str, versions))
        ]
        rows = rows or ([] if versions is None else self.payload.get("noise", []))
        return pd.DataFrame(
            [
                {
                    "pair": f"{r['name_a']} vs {r['name_b']}",
                    "N": r["n_items"],
                    "K": r["k"],
                    "SE": r["se"],
                    "sampling share": r["share_sampling"],
                    "item-set share": r["share_items"],
                    "N to halve": r["n_half"],
                    "K to halve": r["k_half"],
                }
                for r in rows
            ]
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per adjacent pair (rank r vs r + 1): figures, verdict per paradigm and the stressed
        N* (what ``bayesrc power`` writes to ``pairs.csv``)."""
        return pd.DataFrame([pair_row(p, rank) for rank, p in enumerate(self.pair_records(), start=1)])

    def summary(self):
        """Unresolved pairs per paradigm (paradigm, pairs, unresolved: the ``unresolved`` records)."""
        return pd.DataFrame(self.payload.get("unresolved", []))

    def to_markdown(self) -> str:
        """Markdown report: ranking's pairs, verdicts per paradigm, unresolved counts, noise and notes
        (what ``bayesrc power`` writes to ``power.md``)."""
        info, pairs = self.info, self.pair_records()
        parts = [
            "# Resolution report",
            "",
            f"alpha = {info.get('alpha')}, power = {info.get('power')}, "
            f"family of {info.get('comparisons')} comparison(s), "
            f"anytime boundary: {info.get('anytime')}"
            + (f", scores: {info['aggregate']}" if "aggregate" in info else "")
            + (f", missing answers: {info['missing']}" if "missing" in info else "")
            + (f", clusters: {info['cluster_by']}" if info.get("cluster_by") else ""),
            "",
            "q = N / N*; a pair is resolved under a paradigm iff N is at least its (inflated) N*.",
            "",
            "## Pairs",
            "",
            markdown_table(
                [
                    "rank",
                    "pair",
                    "N",
                    "acc A",
                    "acc B",
                    "δ",
                    "ρ",
                    "b",
                    "c",
                    "MDE",
                    "N*",
                    "q",
                    "McNemar exact p",
                    "asymptotic p",
                    "paired t p",
                ],
                [
                    [
                        i,
                        _pair_name(p),
                        p["n"],
                        p["p_a"],
                        p["p_b"],
                        p["delta"],
                        p["rho"],
                        p["b"],
                        p["c"],
                        p["mde"],
                        _size(p["n_star"]),
                        _size(p["q"]),
                        p["p_exact"],
                        p["p_asymptotic"],
                        p["p_paired_t"],
                    ]
                    for i, p in enumerate(pairs, start=1)
                ],
                cell=_md_cell,
            ),
            "",
            "## Verdicts",
            "",
            markdown_table(
                ["pair", *VERDICT_PARADIGMS, "DE", "N* clustered", "N* anytime"],
                [
                    [
                        _pair_name(p),
                        *[VERDICT_BOOL[p["verdicts"][k]] for k in VERDICT_PARADIGMS],
                        p["design_effect"],
                        _n_star_clustered(p),
                        _size(p["anytime"]["n_star"]),
                    ]
                    for p in pairs
                ],
                cell=_md_cell,
            ),
            "",
            "## Unresolved pairs per paradigm",
            "",
            markdown_table(
                ["paradigm", "unresolved", "pairs"],
                [[r["paradigm"], r["unresolved"], r["pairs"]] for r in self.payload.get("unresolved", [])],
                cell=_md_cell,
            ),
        ]
        if self.noise:
            parts += [
                "",
                "## Noise: more samples (K) or more items (N)?",
                "",
                "Variance of the mean-accuracy difference (per-item accuracy over the K samples), split by the law of "
                "total variance into sampling within items and the item set; the N and K that would halve it "
                "(K: none when item-set noise is half or more).",
                "",
                markdown_table(
                    ["pair", "N", "K", "SE", "sampling share", "item-set share", "N to halve", "K to halve"],
                    [
                        [
                            _pair_name(r),
                            r["n_items"],
                            r["k"],
                            r["se"],
                            r["share_sampling"],
                            r["share_items"],
                            r["n_half"],
                            r["k_half"] if r["k_half"] is not None else "none",
                        ]
                        for r in self.noise
                    ],
                    cell=_md_cell,
                ),
            ]
        notes = [f"- {_pair_name(p)}: {n}" for p in pairs for n in p["notes"]]
        if notes:
            parts += ["", "## Notes", "", *notes]
        return "\n".join(parts) + "\n"

    def plot_resolution(self, ax=None):
        """Observed ``|Δ|`` of each pair against its minimum resolvable Δ at the sample size; returns the Figure."""
        t = self.pairs()
        fig = ax.figure if ax is not None else new_figure(figsize=(5, 3))
        ax = ax or fig.add_subplot()
        cols = [c for c in t.columns if c.endswith("mde") or c == "mde"]
        x = np.arange(len(t))
        ax.bar(
            x,
            np.abs(t["delta"].astype(float)) if "delta" in t else np.zeros(len(t)),
            color="#777",
            label="|Δ| observed",
        )
        if cols:
            ax.plot(x, t[cols[0]].astype(float), "D", color="#d62728", label="minimum detectable")
        ax.set_xticks(x, t["pair"] if "pair" in t else x, rotation=45, ha="right", fontsize=7)
        ax.legend(fontsize=7)
        return fig

    def _headline(self) -> str:
        return f"{len(self.payload.get('pairs', []))} pair(s)"


def _pair_name(record: dict) -> str:
    return f"{record['name_a']} vs {record['name_b']}"


def _size(x) -> float:
    """An N* or q of ``power.json`` as a float: null is infinite (neither is ever NaN; JSON has no infinity)."""
    return float("inf") if x is None else float(x)


def _n_star_clustered(record: dict) -> float | None:
    """N* times the design effect; None where no design effect was estimated."""
    return None if record["design_effect"] is None else _size(record["n_star_clustered"])


def pair_row(p: dict, rank: int | None = None) -> dict:
    """A pair's figures and verdicts as one row, from its ``pairs`` record of ``power.json``
    (:meth:`bayesrc.power.PairResolution.to_dict`): a row of :meth:`PowerReport.to_frame` (with its ``rank``)
    and :meth:`bayesrc.power.PairResolution.summary` (without).

    Examples
    --------
    >>> from bayesrc.power import resolution_report
    >>> r = resolution_report([1, 1, 0, 1, 0, 1] * 20, [1, 0, 0, 1, 0, 0] * 20, names=("A", "B"))
    >>> row = pair_row(r.to_dict())
    >>> row["pair"], row["n"], row["resolved_fixed_n"]
    ('A vs B', 120, True)
    """
    row = {
        **({} if rank is None else {"rank": rank}),
        "pair": _pair_name(p),
        **{k: p[k] for k in ("n", "p_a", "p_b", "delta", "rho", "b", "c", "mde")},
    }
    row.update(n_star=_size(p["n_star"]), q=_size(p["q"]), p_exact=p["p_exact"], p_asymptotic=p["p_asymptotic"])
    if not p["binary"]:
        row["p_paired_t"] = p["p_paired_t"]
    p_test = p["p_exact"] if p["binary"] else p["p_paired_t"]
    row["significant"] = p_test is not None and p_test < p["alpha"]
    row.update({f"resolved_{k}": VERDICT_BOOL[v] for k, v in p["verdicts"].items()})
    row.update(n_star_clustered=_n_star_clustered(p), n_star_anytime=_size(p["anytime"]["n_star"]))
    return row


def _fmt(x, digits: int = 3) -> str:
    """A number of ``power.md``: n/a for None and NaN, ∞, thousands separators, ``digits`` significant digits."""
    if x is None:
        return "n/a"
    if isinstance(x, (bool, np.bool_)):
        return "resolved" if x else "**unresolved**"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    x = float(x)
    if np.isnan(x):
        return "n/a"
    if np.isinf(x):
        return "∞"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _md_cell(v: object) -> str:
    """A Markdown cell of power.md: text as it is, numbers through :func:`_fmt`."""
    return v if isinstance(v, str) else _fmt(v)
