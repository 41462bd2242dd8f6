"""Helpers shared by the importers: dotted-path look-ups, answer matching, trial rows, notes, finishing."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.data.trials import normalise_trials
from bayesrc.errors import InputError

_MISSING = object()


def lookup(record: Any, dotted: str, default: Any = _MISSING) -> Any:
    """``lookup({"doc": {"category": "law"}}, "doc.category") -> "law"``; ``default`` if absent."""
    cur = record
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            if default is _MISSING:
                raise KeyError(dotted)
            return default
    return cur


_STRIP = re.compile(r"^[\s(\[]+|[\s)\].:]+$")


def normalise_answer(text: object) -> str:
    """Case-fold and strip whitespace, brackets and a trailing full stop: ``" (B)."`` -> ``"b"``."""
    return _STRIP.sub("", str(text)).casefold()


def as_text(value: object) -> str | None:
    """A target / answer as text (lists are joined with ``|``)."""
    if value is None:
        return None
    if isinstance(value, list):
        return "|".join(map(str, value))
    return str(value)


def trial_row(
    *,
    item_id: str,
    domain: str,
    k: int,
    response: str | None,
    extracted: str | None,
    correct_answer: str | None,
    is_correct: bool | None,
    is_missing: bool,
    line: int,
) -> dict:
    """One imported trial in the canonical layout; ``line`` (the record's place in the log) names it in errors."""
    return {
        "item_id": item_id,
        "domain": domain,
        "k": k,
        "seed": None,  # neither tool logs a per-sample seed
        "response": response,
        "extracted": extracted,
        "correct_answer": correct_answer,
        "is_correct": is_correct,
        "is_missing": is_missing,
        "_line": line,
    }


def choice_note(path: str | Path, *, field: str, noun: str, options: Collection[str], chosen: str, option: str) -> str:
    """The note that a log offered several ``noun`` and the first was used,
    e.g. ``... 2 filters (a, b); used 'a' (choose with --filter)``."""
    return (
        f"{path}: field '{field}': {len(options)} {noun} ({', '.join(options)}); "
        f"used {chosen!r} (choose with --{option})"
    )


def finish(rows: list[dict], *, path: str | Path, model: str) -> pd.DataFrame:
    """Validate imported rows with the data spine and return canonical trials."""
    if not rows:
        raise InputError("no trials found in the log", path=path)
    raw = pd.DataFrame.from_records(rows)
    trials = normalise_trials(raw, path=path, fmt="jsonl", model=model)
    return trials.drop(columns="_line")
