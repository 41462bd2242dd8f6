"""The fields of a result's payload checked against their kinds, as its readers need them (:func:`check_fields`):
a field of another kind is one :class:`~bayesrc.errors.InputError` naming the file and the field, before anything
reads it. Each :class:`~bayesrc.results.Result` subclass declares its fields' kinds (``field_kinds``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from bayesrc.errors import InputError


def _real(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


def _finite(v: Any) -> bool:
    """A number a report can do arithmetic on: NaN, infinities and |x| >= 1e300 (no sum, range or axis survives
    them) fail."""
    return _real(v) and abs(v) < 1e300


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(t, str) for t in v)


def finite_number(value: Any, field: str, *, integer: bool = False) -> Any:
    """``value`` if it is a finite number (an integer with ``integer``; a boolean is neither), as a
    result field a reader prints or draws must be; else :class:`InputError` naming ``field``.

    Examples
    --------
    >>> finite_number(1.01, "diagnostics.thresholds.max_rhat")
    1.01
    >>> finite_number(None, "q")
    Traceback (most recent call last):
    bayesrc.errors.InputError: <input>: field 'q': expected a finite number, got None
    """
    if not _finite(value) or (integer and not isinstance(value, Integral)):
        raise InputError(f"expected {'an integer' if integer else 'a finite number'}, got {value!r}", field=field)
    return value


#: kind name -> (accepts(value), what it expects): the kinds of :func:`check_fields`; "or null" kinds read null
#: as unknown
FIELD_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "number": (lambda v: v is None or _finite(v) or (_real(v) and math.isnan(v)), "a number (|x| < 1e300) or null"),
    "finite": (_finite, "a finite number (|x| < 1e300)"),
    "integer": (lambda v: v is None or (_real(v) and isinstance(v, Integral)), "an integer or null"),
    "count": (lambda v: _real(v) and isinstance(v, Integral) and v >= 0, "a count (an integer >= 0)"),
    # a two-sided normal critical value: beyond 40 its tail is below the smallest double
    "critical z": (lambda v: _real(v) and 0 < v <= 40, "a critical z in (0, 40]"),
    "interval": (
        lambda v: v is None or (isinstance(v, list) and len(v) == 2 and all(FIELD_KINDS["number"][0](b) for b in v)),
        "[low, high] or null",
    ),
    "numbers": (lambda v: isinstance(v, list) and all(map(_finite, v)), "a list of finite numbers"),
    "flag": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    "text": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "labels": (_strings, "a list of strings"),
    "versions": (lambda v: _strings(v) and len(v) >= 2, "a list of two or more version labels"),
    "texts": (lambda v: v is None or _strings(v), "a list of strings or null"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "records": (lambda v: isinstance(v, list) and all(isinstance(r, dict) for r in v), "a list of objects"),
    "some records": (lambda v: FIELD_KINDS["records"][0](v) and len(v) > 0, "a list of one or more objects"),
    "object": (lambda v: isinstance(v, dict), "an object"),  # a required block: null is an error
    "block": (lambda v: v is None or isinstance(v, dict), "an object or null"),  # an optional block
}


def check_fields(payload: dict, kinds: dict[str, str], path: Path | None = None) -> None:
    """Check the fields a result's readers use against their kinds (:data:`FIELD_KINDS`).

    ``kinds`` maps dotted field patterns to kind names; a part ``*`` matches every key of an
    object, ``[]`` every entry of a list, ``{a,b}`` the keys named. A missing field is not
    checked here (its reader names it) unless its name ends in ``!``, nor below a null (an
    optional block left out: declare a required one ``"object"``); a field on the way that is
    not an object (or a list, for ``[]``) is an error, as is a field of the wrong kind:
    :class:`InputError` naming ``path`` and the field, e.g. ``pairs.A.domain.chi2``.

    Examples
    --------
    >>> check_fields({"pairs": {"A": {"s_diff": 0.1}}}, {"pairs.*.s_diff": "number"})
    >>> check_fields({"pairs": {"A": {"s_diff": "x"}}}, {"pairs.*.s_diff": "number"})
    Traceback (most recent call last):
    bayesrc.errors.InputError: <input>: field 'pairs.A.s_diff': expected a number (|x| < 1e300) or null, got 'x'
    >>> check_fields({"ranking": [{"elpd": 1.0}]}, {"ranking.[].model!": "text"})
    Traceback (most recent call last):
    bayesrc.errors.InputError: <input>: field 'ranking[0].model': missing
    """
    for pattern, kind in kinds.items():
        accepts, expected = FIELD_KINDS[kind]
        for field, value in _fields_at(payload, pattern.split("."), "", path):
            if not accepts(value):
                raise InputError(f"expected {expected}, got {_short(value)}", path=path, field=field)


def _fields_at(node: Any, parts: list[str], prefix: str, path: Path | None) -> Iterator[tuple[str, Any]]:
    """``(field, value)`` for every field of ``node`` matching the pattern ``parts``."""
    if not parts:
        yield prefix, node
        return
    if node is None:  # an optional block left out: nothing below it to check
        return
    head, rest = parts[0], parts[1:]
    if head == "[]":
        if not isinstance(node, list):
            raise InputError(f"expected a list, got {_short(node)}", path=path, field=prefix)
        entries = [(f"{prefix}[{i}]", v) for i, v in enumerate(node)]
    elif isinstance(node, dict):
        # a key of the data may end in "!" too: only named ones are required
        named = [] if head == "*" else head.strip("{}").split(",")
        if missing := [k[:-1] for k in named if k.endswith("!") and k[:-1] not in node]:
            raise InputError("missing", path=path, field=f"{prefix}.{missing[0]}" if prefix else missing[0])
        keys = list(node) if head == "*" else [k.removesuffix("!") for k in named]
        entries = [(f"{prefix}.{k}" if prefix else str(k), node[k]) for k in keys if k in node]
    else:
        raise InputError(f"expected an object, got {_short(node)}", path=path, field=prefix)
    for field, value in entries:
        yield from _fields_at(value, rest, field, path)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def two_labels(value: Any, field: str) -> tuple[str, str]:
    """A result's two version labels (a list or tuple of two); else :class:`InputError` naming ``field``.

    Examples
    --------
    >>> two_labels(["v1", "v2"], "versions")
    ('v1', 'v2')
    """
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise InputError(f"expected the two version labels, got {value!r}", field=field)
    return str(value[0]), str(value[1])
