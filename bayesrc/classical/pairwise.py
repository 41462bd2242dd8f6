"""Pairwise reliable change in a family of versions, with the multiplicity stated (issue 32, the classical side).

:func:`pairwise_rci` runs :func:`bayesrc.classical.reliable_change` on every pair of the ``V``
versions of a counts Dataset, ``P = V(V-1)/2`` pairs, each pair exactly as if it were analysed alone
(its own exclusions, reliability, S_diff and sample-level no-change null), and returns one
:class:`PairwiseRCI` (``pairwise_rci.json`` + ``pairwise_rci_pairs.parquet`` +
``pairwise_rci_items.parquet``).

**Multiplicity.** Every item is tested once per pair, ``P`` times in all. At a per-pair threshold
``z`` each test flags an unchanged item with the two-sided rate ``a = 2 (1 - Phi(z))`` (5% at 1.96),
so an item that changed in no version can be flagged in *some* pair with probability up to
``P a`` (the union bound; the pairs share versions, so their flags are dependent and the share is
somewhat lower), and the family expects about ``a`` times the number of item x pair tests flags by
chance. ``family_alpha`` replaces ``z`` by Bonferroni's per-pair threshold, the ``z`` with
``2 (1 - Phi(z)) = family_alpha / P`` (:func:`family_wise_z`), so that an unchanged item is flagged
in some pair with probability at most ``family_alpha``, whatever the dependence between the pairs,
as far as each pair's test holds its nominal rate. The binomial S_diff (the default here) does; the
reference S_diff does not with many floor / ceiling items, and least in the tail that Bonferroni's
``z`` reaches: each pair's sample-level null measures it, and the result warns when the nulls
expect more than twice the nominal number of flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import pandas as pd
import xarray as xr
from scipy import stats

from bayesrc.classical.calibration import nominal_rate
from bayesrc.classical.pipeline import reliable_change
from bayesrc.classical.rci import DETERIORATED, IMPROVED, RCISettings
from bayesrc.classical.result import ITEM_COLUMNS, PairResult, _float
from bayesrc.results import Result, register

#: the per-pair table (``pairwise_rci_pairs.parquet``): one row per pair
PAIR_COLUMNS = (
    "pair",
    "v1",
    "v2",
    "n_analysable",
    "improved",
    "deteriorated",
    "flagged",
    "expected_no_change",
    "no_change_p975",
    "expected_nominal",
    "no_change_rate",
)
#: the item table (``pairwise_rci_items.parquet``): every pair's item table, one row per item and pair
PAIR_KEY_COLUMNS = ("pair", "v1", "v2")
TABLE_FILES = {"pairs": "pairwise_rci_pairs.parquet", "items": "pairwise_rci_items.parquet"}
#: the family warns when its pairs' no-change nulls expect more than this many times the nominal flags
#: (as each pair's null does)
MISCALIBRATION_FACTOR = 2.0


def family_wise_z(alpha: float, n_pairs: int) -> float:
    """Bonferroni's per-pair RCI threshold for a family-wise rate ``alpha`` over ``n_pairs`` pairs.

    The ``z`` with ``2 (1 - Phi(z)) = alpha / n_pairs`` (the two-sided normal rate split evenly over
    the pairs), so that an item that changed in no version is flagged in some pair with probability
    at most ``n_pairs * alpha / n_pairs = alpha`` (the union bound: it holds for any dependence
    between the pairs, as far as each pair's test holds its nominal rate).

    Parameters
    ----------
    alpha : the family-wise rate, in (0, 1).
    n_pairs : the number of pairs, >= 1 (``V(V-1)/2`` for ``V`` versions).

    Returns
    -------
    float
        The threshold on ``|RCI|``.

    Examples
    --------
    >>> round(family_wise_z(0.05, 1), 2)  # one pair: the usual 1.96
    1.96
    >>> round(family_wise_z(0.05, 6), 3)  # four versions, six pairs
    2.638
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_pairs < 1:
        raise ValueError(f"n_pairs must be >= 1, got {n_pairs}")
    return float(stats.norm.isf(alpha / (2 * n_pairs)))


def version_pairs(versions: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of ``versions`` as (earlier, later) in the order given: ``V(V-1)/2`` of them.

    Examples
    --------
    >>> version_pairs(["a", "b", "c"])
    [('a', 'b'), ('a', 'c'), ('b', 'c')]
    """
    return list(combinations(versions, 2))


def pair_name(v1: str, v2: str) -> str:
    """The name of the pair ``v1 -> v2`` (its key in ``pairwise_rci.json`` and its ``pair`` column).

    Examples
    --------
    >>> pair_name("model-v1", "model-v3")
    'model-v1 -> model-v3'
    """
    return f"{v1} -> {v2}"


def pairwise_rci(
    counts: xr.Dataset,
    *,
    versions: Sequence[str] | None = None,
    z: float | None = None,
    family_alpha: float | None = None,
    s_diff: str = "binomial",
    **rci_options,
) -> PairwiseRCI:
    """Item-level reliable change (Jacobson-Truax RCI) for every pair of a family of versions, with the multiplicity
    stated.

    Each pair ``(v1, v2)``, ``v1`` earlier in ``versions``, is :func:`bayesrc.classical.reliable_change`
    on those two versions' counts alone, with its calibrated sample-level no-change null (the
    expected flags when nothing changed). ``P = V(V-1)/2`` pairs test each item ``P`` times: see the
    module's note on multiplicity.

    Parameters
    ----------
    counts : item counts (:func:`bayesrc.data.item_counts`, ``item x version``).
    versions : the versions to compare, two or more (default: every version in ``counts``, in its order).
    z : a per-pair threshold on ``|RCI|`` (default 1.96, :class:`~bayesrc.classical.RCISettings`'), not
        adjusted for the number of pairs: an unchanged item may be flagged in up to ``P`` tests.
    family_alpha : instead of ``z``, a family-wise rate: every pair uses Bonferroni's
        ``z = family_wise_z(family_alpha, P)``, the ``z`` with ``2 (1 - Phi(z)) = family_alpha / P``,
        so that an item with no change is flagged in some pair with probability ``<= family_alpha``
        (as far as each pair's test is calibrated).
    s_diff : "binomial" (default here: per-item S_diff, calibrated, so the stated rates hold) or
        "reference" (the paper's; over-flags with many floor / ceiling items, most in the tail a
        family-wise ``z`` reaches; the result then warns).
    **rci_options : any other keyword of :func:`~bayesrc.classical.reliable_change` (``n_null``,
        ``null_splits``, ``n_splits``, ``n_permutations``, ``min_valid``, ``seed``, ...), the same for every pair.

    Returns
    -------
    PairwiseRCI
        Every pair's :class:`~bayesrc.classical.PairResult` (``res[pair_name(v1, v2)]``), the per-pair
        table with the flags expected under each pair's no-change null, and the multiplicity.

    Examples
    --------
    >>> from bayesrc.data import simulate_family
    >>> fam = simulate_family(200, 10, versions=3, pi_change=0.0, seed=1)
    >>> res = pairwise_rci(fam.counts, family_alpha=0.05, n_splits=50, n_permutations=50, n_null=20, n_splits_by_k=20)
    >>> res.n_pairs, round(res.z, 3), res.names[0]
    (3, 2.394, 'model-v1 -> model-v2')
    >>> list(res.pairs_table.columns[:7])
    ['pair', 'v1', 'v2', 'n_analysable', 'improved', 'deteriorated', 'flagged']
    >>> res.multiplicity_sentence()  # doctest: +SKIP
    """
    chosen = family_versions(counts, versions)
    pairs = version_pairs(chosen)
    threshold = pair_threshold(z, family_alpha, len(pairs))
    results = {
        pair_name(a, b): reliable_change(
            counts.sel(version=[a, b]), a, b, name=pair_name(a, b), z=threshold, s_diff=s_diff, **rci_options
        )
        for a, b in pairs
    }
    return PairwiseRCI.from_pairs(results, versions=chosen, z=threshold, family_alpha=family_alpha)


def family_versions(counts: xr.Dataset, versions: Sequence[str] | None) -> list[str]:
    """The versions to compare: ``versions`` (two or more distinct ones, each in ``counts``), or every version of
    ``counts``.

    Examples
    --------
    >>> from bayesrc.data import simulate_family
    >>> family_versions(simulate_family(10, 4, versions=3).counts, None)
    ['model-v1', 'model-v2', 'model-v3']
    """
    present = [str(v) for v in counts["version"].values]
    chosen = present if versions is None else [str(v) for v in versions]
    unknown = [v for v in chosen if v not in present]
    if unknown:
        raise ValueError(f"version {unknown[0]!r} is not in the counts (they hold {', '.join(present)})")
    if len(set(chosen)) < len(chosen) or len(chosen) < 2:
        raise ValueError(f"give two or more different versions, got {chosen}")
    return chosen


def pair_threshold(z: float | None, family_alpha: float | None, n_pairs: int) -> float:
    """The ``|RCI|`` threshold every pair uses: ``z`` (default 1.96), or Bonferroni's for ``family_alpha``
    (:func:`family_wise_z`).

    Examples
    --------
    >>> pair_threshold(None, None, 6), round(pair_threshold(None, 0.05, 6), 3)
    (1.96, 2.638)
    """
    if z is not None and family_alpha is not None:
        raise ValueError("give z (a per-pair threshold) or family_alpha (a family-wise rate), not both")
    if family_alpha is not None:
        return family_wise_z(family_alpha, n_pairs)
    threshold = RCISettings().z if z is None else float(z)
    if not threshold > 0:
        raise ValueError(f"z must be > 0, got {z}")
    return threshold


def pairs_frame(pairs: dict[str, PairResult]) -> pd.DataFrame:
    """The per-pair table: analysable items, improved, deteriorated and flagged items, and the flags
    expected with no change (each pair's sample-level null: mean, 97.5th percentile and rate; NaN
    where it was not computed) beside the nominal number, ``n_analysable * 2 (1 - Phi(z))``.

    Examples
    --------
    >>> from bayesrc.data import simulate_family
    >>> fam = simulate_family(100, 10, versions=3, seed=1)
    >>> res = pairwise_rci(fam.counts, n_splits=20, n_permutations=20, n_null=0, n_splits_by_k=20)
    >>> t = pairs_frame({n: res[n] for n in res})
    >>> bool((t["flagged"] == t["improved"] + t["deteriorated"]).all()), bool(t["expected_no_change"].isna().all())
    (True, True)
    """
    rows = []
    for name, pair in pairs.items():
        c, null = pair.analysable, pair.null_samples or {}
        rows.append(
            {
                "pair": name,
                "v1": pair.versions[0],
                "v2": pair.versions[1],
                "n_analysable": int(c["n"]),
                "improved": int(c["improved"]),
                "deteriorated": int(c["deteriorated"]),
                "flagged": pair.n_flagged,
                "expected_no_change": _float(null.get("flagged_mean")),
                "no_change_p975": _float(null.get("flagged_p975")),
                "expected_nominal": int(c["n"]) * nominal_rate(pair.z),
                "no_change_rate": _float(null.get("rate")),
            }
        )
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def family_items(pairs: dict[str, PairResult]) -> pd.DataFrame:
    """Every pair's item table stacked, one row per item and pair, led by ``pair``, ``v1``, ``v2``.

    Examples
    --------
    >>> from bayesrc.data import simulate_family
    >>> fam = simulate_family(50, 10, versions=3, seed=1)
    >>> res = pairwise_rci(fam.counts, n_splits=20, n_permutations=20, n_null=0, n_splits_by_k=20)
    >>> t = family_items({n: res[n] for n in res})
    >>> len(t), list(t.columns[:4])
    (150, ['pair', 'v1', 'v2', 'item_id'])
    """
    frames = [
        pair.to_frame().assign(pair=name, v1=pair.versions[0], v2=pair.versions[1]) for name, pair in pairs.items()
    ]
    stacked = pd.concat(frames, ignore_index=True)
    return stacked[[*PAIR_KEY_COLUMNS, *(c for c in stacked.columns if c not in PAIR_KEY_COLUMNS)]]


def multiplicity(
    pairs: dict[str, PairResult],
    table: pd.DataFrame,
    items: pd.DataFrame,
    *,
    versions: list[str],
    z: float,
    family_alpha: float | None,
) -> dict:
    """The ``multiplicity`` block: pairs, item x pair tests, the threshold and its rule, the per-test
    rate and its family-wise bound, flags observed and expected with no change, items flagged in some pair.

    Examples
    --------
    >>> from bayesrc.data import simulate_family
    >>> fam = simulate_family(100, 10, versions=3, seed=1)
    >>> res = pairwise_rci(fam.counts, n_splits=20, n_permutations=20, n_null=0, n_splits_by_k=20)
    >>> m = res.multiplicity
    >>> m["n_pairs"], m["rule"], m["n_tests"] == int(res.pairs_table["n_analysable"].sum())
    (3, 'per pair', True)
    """
    rate = nominal_rate(z)
    expected = table["expected_no_change"]
    per_item = _item_flag_counts(items)
    return {
        "n_versions": len(versions),
        "n_pairs": len(pairs),
        "n_tests": int(table["n_analysable"].sum()),
        "z": z,
        "rule": "per pair" if family_alpha is None else "family-wise (Bonferroni)",
        "family_alpha": family_alpha,
        "per_test_rate": rate,
        "family_rate_bound": min(1.0, len(pairs) * rate),
        "observed_flags": int(table["flagged"].sum()),
        "expected_no_change": float(expected.sum()) if expected.notna().all() else None,
        "expected_nominal": float(table["expected_nominal"].sum()),
        "items_tested": int((per_item["n_pairs_tested"] > 0).sum()),
        "items_flagged": int((per_item["n_pairs_flagged"] > 0).sum()),
        "s_diff_method": next(iter(pairs.values())).s_diff_method,
    }


def _item_flag_counts(items: pd.DataFrame) -> pd.DataFrame:
    """Per item (in the items' order): the pairs in which it was analysable and those in which it was flagged, and the
    latter's names."""
    flagged = items["class"].isin([IMPROVED, DETERIORATED])
    marks = items.assign(
        tested=~items["excluded"].astype(bool), flagged=flagged, flagged_pair=items["pair"].where(flagged)
    )
    grouped = marks.groupby("item_id", sort=False)
    return pd.DataFrame(
        {
            "n_pairs_tested": grouped["tested"].sum().astype(int),
            "n_pairs_flagged": grouped["flagged"].sum().astype(int),
            "flagged_in": grouped["flagged_pair"].agg(lambda s: "; ".join(s.dropna())),
        }
    ).reset_index()


def family_warnings(m: dict) -> list[str]:
    """The family's warning: its pairs' no-change nulls expect more than twice the nominal flags (the stated rates do
    not hold).

    Examples
    --------
    >>> family_warnings({"expected_no_change": 44.0, "expected_nominal": 19.0, "s_diff_method": "reference",
    ...                  "rule": "family-wise (Bonferroni)"})[0][:48]
    "The pairs' no-change nulls expect 44.0 flags acr"
    >>> family_warnings({"expected_no_change": 18.0, "expected_nominal": 19.0, "s_diff_method": "binomial",
    ...                  "rule": "per pair"})
    []
    """
    expected, nominal = m["expected_no_change"], m["expected_nominal"]
    if expected is None or not nominal or expected <= MISCALIBRATION_FACTOR * nominal:
        return []
    bound = "the family-wise bound" if m["rule"] != "per pair" else "the nominal per-test rate"
    return [
        f"The pairs' no-change nulls expect {expected:.1f} flags across the family "
        f"against {nominal:.1f} at the nominal rate: "
        f"method '{m['s_diff_method']}' is not calibrated on these items, so {bound} does not hold; "
        "use s_diff binomial (--s-diff binomial)."
    ]


def multiplicity_sentence(m: dict) -> str:
    """The multiplicity in words: what was tested, at which z and why, and the flags expected with no change.

    Examples
    --------
    >>> m = {"n_versions": 4, "n_pairs": 6, "n_tests": 2255, "z": 2.638, "rule": "family-wise (Bonferroni)",
    ...      "family_alpha": 0.05, "per_test_rate": 0.05 / 6, "family_rate_bound": 0.05, "observed_flags": 19,
    ...      "expected_no_change": 18.3, "expected_nominal": 18.8, "items_tested": 391, "items_flagged": 16,
    ...      "s_diff_method": "binomial"}
    >>> multiplicity_sentence(m)[:86]
    '4 versions, 6 pairs: 2255 item x pair tests at z = 2.638, family-wise (Bonferroni): 2('
    """
    p, rate = m["n_pairs"], m["per_test_rate"]
    head = f"{m['n_versions']} versions, {p} pairs: {m['n_tests']} item x pair tests at z = {m['z']:.3f}, "
    if m["family_alpha"] is None:  # a per-pair z
        rule = (
            f"per pair, not adjusted for the {p} pairs (two-sided rate 2(1 - Phi(z)) = {rate:.2%} per test): "
            "an item that changed in no "
            f"version may be flagged in any of its {p} tests, "
            f"in some pair with probability up to {m['family_rate_bound']:.0%}. "
        )
    else:
        rule = (
            f"family-wise (Bonferroni): 2(1 - Phi(z)) = {m['family_alpha']:g} / {p} = {rate:.2%} per test, "
            "so an item that changed in "
            f"no version is flagged in some pair with probability at most {m['family_alpha']:.0%} "
            "(as far as each pair's test is calibrated). "
        )
    expected = m["expected_no_change"]
    nominal = f"{m['expected_nominal']:.1f} at the nominal rate"
    expected_text = (
        f"{expected:.1f} flags (the sum of the pairs' sample-level no-change nulls; {nominal})"
        if expected is not None
        else f"{nominal} flags"
    )
    tail = (
        f"With no change the family expects {expected_text}; observed {m['observed_flags']} flags, "
        f"{m['items_flagged']} of the {m['items_tested']} items tested flagged in some pair."
    )
    return head + rule + tail


@register
class PairwiseRCI(Result):
    """Pairwise reliable change in a family of versions (:func:`pairwise_rci`, ``bayesrc rci --family``):
    every pair's classical analysis and the multiplicity of testing each item once per pair.

    The record is ``pairwise_rci.json`` (``versions``, ``multiplicity``, ``params``, ``warnings`` and
    every pair's ``rci.json`` block under ``pairs``) plus ``pairwise_rci_pairs.parquet`` (the per-pair
    table, :attr:`pairs_table`) and ``pairwise_rci_items.parquet`` (every pair's item table, stacked);
    :meth:`save` writes them together and :func:`bayesrc.load` reads them back equal. ``res[NAME]`` is
    a pair's :class:`~bayesrc.classical.PairResult`, equal to :func:`~bayesrc.classical.reliable_change`
    of that pair alone.

    Examples
    --------
    >>> from bayesrc.data import simulate_family
    >>> fam = simulate_family(100, 10, versions=3, seed=1)
    >>> res = pairwise_rci(fam.counts, n_splits=20, n_permutations=20, n_null=0, n_splits_by_k=20)
    >>> res.pair("model-v1", "model-v3").versions, len(res)
    (('model-v1', 'model-v3'), 3)
    >>> res.summary().head(3)  # doctest: +SKIP
    >>> res.save("out/family"); bayesrc.load("out/family") == res  # doctest: +SKIP
    True
    """

    main_file = "pairwise_rci.json"
    kind = "pairwise_rci"
    table_names = tuple(TABLE_FILES)
    field_kinds = {  # what the sentence, summary() and the report read (bayesrc.fields.check_fields)
        "{pairs!,multiplicity!}": "object",
        "multiplicity.z": "critical z",
        "multiplicity.{per_test_rate,family_rate_bound,expected_nominal}": "finite",
        "multiplicity.{family_alpha,expected_no_change}": "number",
        "multiplicity.{n_versions,n_pairs,n_tests,observed_flags,items_tested,items_flagged}": "count",
        "multiplicity.{rule,s_diff_method}": "text",
        "versions": "labels",
        "warnings": "texts",
    }

    @classmethod
    def from_pairs(
        cls, pairs: dict[str, PairResult], *, versions: list[str], z: float, family_alpha: float | None
    ) -> PairwiseRCI:
        """The result of a family's pairs (:func:`pairwise_rci`): its tables and multiplicity from the pairs'
        results."""
        table, items = pairs_frame(pairs), family_items(pairs)
        m = multiplicity(pairs, table, items, versions=versions, z=z, family_alpha=family_alpha)
        params = {k: v for k, v in next(iter(pairs.values())).params.items() if k != "k"}
        payload = {
            "versions": versions,
            "multiplicity": m,
            "params": params,
            "warnings": family_warnings(m),
            "pairs": {n: p.payload for n, p in pairs.items()},
        }
        return cls(payload, {"pairs": table, "items": items})

    # storage ---------------------------------------------------------------------------
    def table_file(self, name: str) -> str:
        return TABLE_FILES[name]

    def required_columns(self, name: str) -> tuple[str, ...]:
        return PAIR_COLUMNS if name == "pairs" else (*PAIR_KEY_COLUMNS, *ITEM_COLUMNS)

    # accessors -------------------------------------------------------------------------
    versions = property(lambda self: list(self.payload["versions"]))
    # n_pairs, n_tests, z, rule, family_alpha, per_test_rate, expected_no_change, ...
    multiplicity = property(lambda self: self.payload["multiplicity"])
    # the settings every pair used (reliable_change's keywords)
    params = property(lambda self: self.payload.get("params", {}))
    z = property(lambda self: float(self.multiplicity["z"]))
    family_alpha = property(lambda self: self.multiplicity.get("family_alpha"))  # None: a per-pair z
    n_pairs = property(lambda self: int(self.multiplicity["n_pairs"]))
    n_tests = property(lambda self: int(self.multiplicity["n_tests"]))
    pairs_table = property(lambda self: self.tables.get("pairs"))
    items = property(lambda self: self.tables.get("items"))

    @property
    def names(self) -> list[str]:
        """The pairs' names (``v1 -> v2``), in order."""
        return list(self.payload["pairs"])

    def __getitem__(self, name: str) -> PairResult:
        items = self.items
        own = (
            None
            if items is None
            else items.loc[items["pair"] == name].drop(columns=list(PAIR_KEY_COLUMNS)).reset_index(drop=True)
        )
        return PairResult(name, self.payload["pairs"][name], own)

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def pair(self, v1: str, v2: str) -> PairResult:
        """The pair ``v1 -> v2`` (``v1`` the earlier version of the family)."""
        return self[pair_name(v1, v2)]

    @property
    def warnings(self) -> list[str]:
        """The family's warnings, then each pair's (prefixed with its name)."""
        return list(self.payload.get("warnings") or []) + [f"{n}: {w}" for n in self.names for w in self[n].warnings]

    def item_flags(self) -> pd.DataFrame:
        """Per item: in how many pairs it was analysable (``n_pairs_tested``) and flagged (``n_pairs_flagged``), and
        those pairs (``flagged_in``).

        Examples
        --------
        >>> res = bayesrc.load("out/family")  # doctest: +SKIP
        >>> res.item_flags().query("n_pairs_flagged > 0")  # doctest: +SKIP
        """
        return _item_flag_counts(self.items)

    def multiplicity_sentence(self) -> str:
        """The multiplicity in words (:func:`multiplicity_sentence`)."""
        return multiplicity_sentence(self.multiplicity)

    def summary(self) -> pd.DataFrame:
        """Headline numbers as a tidy table (pair, metric, value): the family's multiplicity first (pair "family"),
        then each pair's flags."""
        m = self.multiplicity
        rule = m["rule"] + (
            f", alpha {m['family_alpha']:g} over {m['n_pairs']} pairs" if m["family_alpha"] is not None else ""
        )
        rows = [
            ("versions", ", ".join(self.versions)),
            ("pairs", m["n_pairs"]),
            ("item x pair tests", m["n_tests"]),
            ("z", round(m["z"], 4)),
            ("z rule", rule),
            ("per-test rate 2(1 - Phi(z))", m["per_test_rate"]),
            (
                "P(flagged in some pair | no change) at most",
                m["family_rate_bound"] if m["family_alpha"] is None else m["family_alpha"],
            ),
            ("S_diff method", m["s_diff_method"]),
            ("flags observed", m["observed_flags"]),
            ("flags expected with no change (pairs' nulls)", m["expected_no_change"]),
            ("flags expected at the nominal rate", m["expected_nominal"]),
            ("items flagged in some pair", f"{m['items_flagged']} of {m['items_tested']}"),
            ("multiplicity", self.multiplicity_sentence()),
        ]
        out = [("family", metric, value) for metric, value in rows]
        for r in self.pairs_table.itertuples(index=False):
            out += [
                (r.pair, "improved", r.improved),
                (r.pair, "deteriorated", r.deteriorated),
                (r.pair, "flagged", r.flagged),
                (r.pair, "expected with no change", r.expected_no_change),
                (r.pair, "analysable", r.n_analysable),
            ]
        out += [("family", "warning", w) for w in self.payload.get("warnings") or []]
        out += [(n, "warning", w) for n in self.names for w in self[n].warnings]
        return pd.DataFrame(out, columns=["pair", "metric", "value"])

    def _headline(self) -> str:
        m = self.multiplicity
        return (
            f"{m['n_versions']} versions, {m['n_pairs']} pairs at z = {m['z']:.3f} ({m['rule']}), "
            f"{m['observed_flags']} flags, {m['items_flagged']} items flagged in some pair"
        )
