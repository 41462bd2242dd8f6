"""Helpers shared by the importers: dotted-path look-ups, answer matching, finishing."""

from __future__ import annotations

import re
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


def finish(rows: list[dict], *, path: str | Path, model: str) -> pd.DataFrame:
    """Validate imported rows with the data spine and return canonical trials."""
    if not rows:
        raise InputError("no trials found in the log", path=path)
    raw = pd.DataFrame.from_records(rows)
    trials = normalise_trials(raw, path=path, fmt="jsonl", model=model)
    return trials.drop(columns="_line")
