"""A run's provenance: its pins and whether two runs are comparable (SPEC section 6; paper 003).

Two runs are comparable iff their pins match except the fields that define the
comparison: the ``model.*`` fields (label, GGUF SHA-256, tokenizer and chat-template
hashes) may differ, since the model is what is being compared. ``items.*`` (bank hash and
range), ``prompt.*`` (user template, system prompt), ``sampling.*`` (K, T, top-k/p, min-p,
max_tokens, seed rule) and ``tooling.*`` (llama-cpp-python version, llama.cpp library
hash, backend) must match unless explicitly allowed; ``runtime.*`` (engine, context,
threads) never changes what is measured and is only listed. The evaluation pins
(:data:`EVALUATION_PINS`: the scheme, items per decode) are allowed only by name, never by
``--allow prompt``: a prompt change compared under two schemes would show spurious changes.

A run's pins are its run record's (``run.json``, read and checked by
:func:`bayesrc.io.read_run_record`); :mod:`bayesrc.collect` writes them, and every analysis
reads its runs through :func:`check_comparable` or :func:`load_comparable_counts`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import xarray as xr

from bayesrc.data.counts import load_counts, load_items
from bayesrc.errors import InputError
from bayesrc.io import read_run_record

#: Evaluation schemes: how a prompt's tokens are decoded (pinned as ``prompt.blocks``, the text
#: below). llama.cpp's CPU kernels give other logits for other batch splits, so two runs of one
#: model under different schemes differ in distribution (``benchmarks/scheme_drift.py``).
#: ``blocks`` (default): shared block, then the item's own block, two batches, the shared KV kept
#: once per model. ``whole``: the concatenated prompt decoded from an emptied cache in ``n_batch``
#: pieces, as ``Llama.create_completion`` evaluates it on a fresh context.
SCHEMES = {
    "blocks": (
        "shared+own/1: shared = rendered prompt up to the line break before the first item field, tokenised with BOS; "
        "own = the rest, tokenised without BOS; decoded as two batches, shared KV kept once per run"
    ),
    "whole": (
        "whole/1: shared + own tokens (tokenised as for blocks) decoded as one prompt from an emptied KV cache "
        "in n_batch pieces, as create_completion on a fresh context"
    ),
}

# Category of each pin: "model" fields define a comparison and may differ; "items",
# "prompt", "sampling", "tooling" must match for two runs to be comparable; "runtime"
# must match to resume a run but does not change what is measured.
PIN_CATEGORIES = ("model", "items", "prompt", "sampling", "tooling", "runtime")


def pin_category(field: str) -> str:
    """A pin's category (:data:`PIN_CATEGORIES`): the part of its name before the first dot.

    Examples
    --------
    >>> pin_category("sampling.temperature")
    'sampling'
    """
    return field.split(".", 1)[0]


ALLOWED_BY_DEFAULT = ("model",)
IGNORED = ("runtime",)
#: How prompts are evaluated: llama.cpp's logits depend on it, so these differ only when named.
EVALUATION_PINS = ("prompt.blocks", "prompt.items_per_batch")


def scheme_of(pins: dict) -> str | None:
    """The evaluation scheme a run's pins name (``"blocks"``, ``"whole"``), None if unknown (e.g. a server run).

    Examples
    --------
    >>> scheme_of({"prompt.blocks": SCHEMES["whole"]})
    'whole'
    """
    return next((name for name, text in SCHEMES.items() if pins.get("prompt.blocks") == text), None)


@dataclass
class PinComparison:
    """Result of comparing the pins of two runs.

    Examples
    --------
    >>> from bayesrc.datasets import path
    >>> comp = compare_runs(path("exact_gemma/q4"), path("exact_gemma/q3"))  # bundled exact runs
    >>> comp.comparable
    True
    """

    run_a: str
    run_b: str
    pinned: bool  # both runs have a run record
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)  # field, category, a, b, status

    @property
    def blocking(self) -> pd.DataFrame:
        return self.differences[self.differences["status"] == "blocking"] if len(self.differences) else self.differences

    @property
    def comparable(self) -> bool:
        return len(self.blocking) == 0

    def summary(self) -> str:
        if not self.pinned:
            return (
                f"not pinned: no run.json for {self.run_a if read_run_record(self.run_a) is None else self.run_b}; "
                "comparability cannot be checked"
            )
        head = "comparable" if self.comparable else "NOT comparable"
        lines = [f"{head}: {self.run_a} vs {self.run_b}"]
        for row in self.differences.itertuples(index=False):
            lines.append(f"  {row.status:<9} {row.field}: {_short(row.a)} | {_short(row.b)}")
        if len(self.differences) == 0:
            lines.append("  all pins match")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "pinned": self.pinned,
            "comparable": self.comparable,
            "differences": self.differences.to_dict(orient="records"),
        }


def _short(v) -> str:
    s = str(v)
    return s if len(s) <= 24 else s[:21] + "..."


def _allowed(fld: str, allow: Iterable[str]) -> bool:
    return any(fld == a or (pin_category(fld) == a and fld not in EVALUATION_PINS) for a in allow)


def compare_runs(run_a: str | Path, run_b: str | Path, *, allow: Iterable[str] = ()) -> PinComparison:
    """Compare the pins of two runs (run directories, their run.json, or a trials file inside one).

    ``allow`` names extra fields (``"prompt.template_sha256"``) or whole categories
    (``"prompt"``) that may differ, e.g. when the comparison *is* a prompt change.

    Examples
    --------
    >>> from bayesrc.datasets import path
    >>> print(compare_runs(path("exact_gemma/q4"), path("exact_gemma/q3")).summary())  # doctest: +ELLIPSIS
    comparable: ...
      allowed   model.file_sha256: ... | ...
    """
    ra, rb = read_run_record(run_a), read_run_record(run_b)
    cols = ["field", "category", "a", "b", "status"]
    if ra is None or rb is None:
        return PinComparison(str(run_a), str(run_b), False, pd.DataFrame(columns=cols))
    pa, pb = record_pins(ra, run_a), record_pins(rb, run_b)
    allow = tuple(ALLOWED_BY_DEFAULT) + tuple(allow)
    rows = []
    for fld in sorted(set(pa) | set(pb)):
        if pa.get(fld) == pb.get(fld):
            continue
        cat = pin_category(fld)
        status = "ignored" if cat in IGNORED else "allowed" if _allowed(fld, allow) else "blocking"
        rows.append((fld, cat, pa.get(fld), pb.get(fld), status))
    return PinComparison(str(run_a), str(run_b), True, pd.DataFrame(rows, columns=cols))


def check_comparable(
    run_a: str | Path, run_b: str | Path, *, allow: Iterable[str] = (), force: bool = False
) -> PinComparison:
    """Refuse (``InputError``, exit 2) two runs whose non-model pins differ, unless ``force``.

    Runs without a run record (e.g. the reference study's files) pass unchecked
    (``PinComparison.pinned`` is False). Call this from ``rci``/``fit`` before pairing runs.

    Examples
    --------
    >>> check_comparable("runs/v1", "runs/v2", allow=["prompt"])  # a prompt change is the comparison  # doctest: +SKIP
    """
    comp = compare_runs(run_a, run_b, allow=allow)
    if comp.pinned and not comp.comparable:
        message = (
            f"runs are not comparable: pins differ in {', '.join(comp.blocking['field'])}{_scheme_note(run_a, run_b)}"
        )
        if not force:
            raise InputError(f"{message} (see `bayesrc pins`; --force to override)", path=run_b)
        print(f"bayesrc: warning: {message}; analysed anyway (--force)", file=sys.stderr)
    return comp


def check_all_comparable(runs: Iterable[str | Path], *, allow: Iterable[str] = (), force: bool = False) -> None:
    """:func:`check_comparable` of every run against the first (``bayesrc power``'s score files).

    Examples
    --------
    >>> check_all_comparable(["runs/v1", "runs/v2", "runs/v3"])  # doctest: +SKIP
    """
    runs = list(runs)
    for other in runs[1:]:
        check_comparable(runs[0], other, allow=allow, force=force)


def _scheme_note(run_a: str | Path, run_b: str | Path) -> str:
    """``"; evaluation schemes differ (blocks vs whole)"`` when they do, else ``""``."""
    sa, sb = (scheme_of(record_pins(read_run_record(r), r)) for r in (run_a, run_b))
    return (
        f"; evaluation schemes differ ({sa} vs {sb}): llama.cpp's logits depend on how the prompt is evaluated"
        if sa != sb
        else ""
    )


def record_pins(record: dict, run: str | Path) -> dict:
    """A run record's pins; a record without them is refused (``InputError`` naming ``run``).

    :func:`~bayesrc.io.read_run_record` has checked that ``pins``, when present, is an
    object; every collector writes it, so a record without it was edited or damaged, and
    comparing it as "no pins" would report every pin as a difference.

    Examples
    --------
    >>> record_pins({"status": "complete", "pins": {"sampling.k": 10}}, "runs/v1")
    {'sampling.k': 10}
    >>> record_pins({"status": "complete"}, "runs/v1")
    Traceback (most recent call last):
    bayesrc.errors.InputError: runs/v1: field 'pins': missing from the run record
    """
    if "pins" not in record:
        raise InputError("missing from the run record", path=run, field="pins")
    return record["pins"]


def load_comparable_counts(
    runs: Sequence[str | Path],
    *,
    allow: Iterable[str] = (),
    force: bool = False,
    on_unmatched: str = "raise",
    graded: bool = False,
) -> xr.Dataset:
    """The item counts of one trials file per version, every run's pins checked against the first's.

    Only the model may differ (SPEC 6) unless ``allow`` names the pins (or categories) that may
    (``--allow-pin``), or ``force`` analyses them anyway with a warning (``--force``); runs without a
    run record pass unchecked (:func:`check_comparable`). A file given twice is refused. Version names
    come from the trials' ``model`` field; items missing from a version are an error unless
    ``on_unmatched="drop"`` (then only the items every version has; ``--allow-unmatched``). ``graded``: graded
    trials give their item scores (:func:`~bayesrc.data.counts.load_items`: ``bayesrc rci --family``), else they are
    refused in one line (``bayesrc fit V1 V2 V3 ...``, whose models read right / wrong trials).

    Examples
    --------
    >>> from bayesrc.datasets import GREEDY_LLAMA3, path
    >>> ds = load_comparable_counts([path(f) for f in GREEDY_LLAMA3], on_unmatched="drop")  # bundled, unpinned
    >>> [str(v) for v in ds["version"].values]
    ['llama3-8b', 'llama3.1-8b']
    >>> load_comparable_counts([path(GREEDY_LLAMA3[0])] * 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    bayesrc.errors.InputError: ...llama3-8b_greedy.jsonl: given twice in one family (one trials file per version)
    """
    runs = [Path(r) for r in runs]
    seen: set[Path] = set()
    for run in runs:
        if run.resolve() in seen:
            raise InputError("given twice in one family (one trials file per version)", path=run)
        seen.add(run.resolve())
    check_all_comparable(runs, allow=allow, force=force)
    return (load_items if graded else load_counts)(runs, on_unmatched=on_unmatched)
