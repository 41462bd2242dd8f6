"""The leaderboard resolution's typed result: :class:`PowerReport` (``power.json``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrc.plotting import new_figure
from bayesrc.results import Result, register

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
            row = {"pair": f"{p['name_a']} vs {p['name_b']}", "N": p["n"], "delta": p["delta"], "rho": p["rho"], "b": p["b"], "c": p["c"],
                   "MDE": p["mde"], "N*": p["n_star_ceil"], "q = N/N*": p["q"], "p exact": p["p_exact"]}  # fmt: skip
            row.update({k: p["verdicts"][k] for k in VERDICT_PARADIGMS if k in p["verdicts"]})
            rows.append(row)
        return pd.DataFrame(rows)

    def noise_table(self, versions: tuple[str, str] | None = None) -> pd.DataFrame:
        """Per pair: the variance of the mean-accuracy difference split into sampling within items (K) and the
        item set (N), with the N and K that would halve it (empty for single-shot scores or an older ``power.json``).

        Examples
        --------
        >>> rep = PowerReport({"pairs": [], "noise": [{"name_a": "a", "name_b": "b", "n_items": 100, "k": 10.0, "se": 0.01,
        ...                    "share_sampling": 0.8, "share_items": 0.2, "n_half": 200, "k_half": 27}]})
        >>> int(rep.noise_table().iloc[0]["K to halve"])
        27
        """
        rows = [r for r in self.payload.get("noise", []) if versions is None or {r["name_a"], r["name_b"]} == set(map(str, versions))]
        rows = rows or ([] if versions is None else self.payload.get("noise", []))
        return pd.DataFrame(
            [{"pair": f"{r['name_a']} vs {r['name_b']}", "N": r["n_items"], "K": r["k"], "SE": r["se"], "sampling share": r["share_sampling"],
              "item-set share": r["share_items"], "N to halve": r["n_half"], "K to halve": r["k_half"]} for r in rows]
        )  # fmt: skip

    def summary(self):
        """Unresolved pairs per paradigm (the ``unresolved`` records)."""
        return pd.DataFrame(self.payload.get("unresolved", []))

    def plot_resolution(self, ax=None):
        """Observed ``|Δ|`` of each pair against its minimum resolvable Δ at the sample size; returns the Figure."""
        t = self.pairs()
        fig = ax.figure if ax is not None else new_figure(figsize=(5, 3))
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
