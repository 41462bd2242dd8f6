"""Errors that the CLI turns into one clear line and a non-zero exit."""

from __future__ import annotations

from pathlib import Path


class BayesrcError(Exception):
    """Base class: a user-facing problem, reported without a traceback.

    Examples
    --------
    >>> from bayesrc.errors import InputError
    >>> err = InputError("expected true, false or null", path="trials.jsonl", line=17, field="is_correct")
    >>> isinstance(err, BayesrcError), err.exit_code
    (True, 2)
    """

    exit_code = 2


class InputError(BayesrcError):
    """Bad input: names the file, the line (or row / item) and the field.

    ``str(err)`` is the one line the CLI prints, e.g.
    ``trials.jsonl:17: field 'is_correct': expected true, false or null, got "yes"``.

    Examples
    --------
    >>> print(InputError("expected true, false or null", path="trials.jsonl", line=17, field="is_correct"))
    trials.jsonl:17: field 'is_correct': expected true, false or null
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        item: object | None = None,
        field: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.item = item
        self.field = field
        self.message = message
        where = self.path or "<input>"
        if line is not None:
            where += f":{line}"
        if item is not None:
            where += f": item {item!s}"
        if field is not None:
            where += f": field {field!r}"
        super().__init__(f"{where}: {message}")


class ConvergenceError(BayesrcError):
    """A posterior fit failed the diagnostics gate (CLI exit status 3).

    Examples
    --------
    >>> from bayesrc.bayes import check, fit
    >>> check(fit(counts))  # raises ConvergenceError (CLI exit 3) when the gate fails  # doctest: +SKIP
    """

    exit_code = 3


class ParameterError(InputError, ValueError):
    """A parameter outside its domain: a ``ValueError`` for the API, one line (exit 2) at the CLI.

    Examples
    --------
    >>> from bayesrc.power import required_n
    >>> required_n(0.6, 0.5, 2.0)
    Traceback (most recent call last):
    ...
    bayesrc.errors.ParameterError: <parameters>: field 'rho': a correlation must lie in [-1, 1], got 2
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message, path="<parameters>", field=field)


def float_parameter(name: str, x):
    """``x`` as a float array; not numbers, or a NaN, is a :class:`ParameterError` naming ``name``.

    Examples
    --------
    >>> float_parameter("b", [3, 4]).tolist()
    [3.0, 4.0]
    >>> float_parameter("b", "x")
    Traceback (most recent call last):
    ...
    bayesrc.errors.ParameterError: <parameters>: field 'b': expected numbers, got 'x'
    """
    import numpy as np  # numpy only where a parameter is checked: the CLI's error path stays light

    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"expected numbers, got {x!r}", field=name) from None
    if np.isnan(arr).any():
        raise ParameterError("NaN is not a valid value", field=name)
    return arr
