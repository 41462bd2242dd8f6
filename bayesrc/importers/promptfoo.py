"""promptfoo: ``promptfoo eval --repeat N -o results.json`` output -> trials (repeats = K).

promptfoo evaluates every test case under every (prompt, provider) pair; with ``--repeat N``
each test case appears N times (its copies are consecutive ``testIdx``). One (prompt, provider)
pair is one version: ``--prompt`` / ``--provider`` choose it where the file holds several (the
first otherwise, with a note). A test case is one item, named by the variable ``--item-id-field``
(default: the case's ``description``; else a hash of its variables), its domain by
``--domain-field`` (default: a ``domain``, ``category`` or ``subject`` variable, else
``promptfoo``). A result's ``success`` (every assertion passed) is correctness; a result that
errored (no output: ``failureReason`` 2, or an ``error`` without a response) is a missing trial.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.errors import InputError
from bayesrc.importers._common import as_text, choice_note, finish, trial_row

DOMAIN_VARS = ("domain", "category", "subject")
ERROR_REASON = 2  # promptfoo's ResultFailureReason.ERROR (1: an assertion failed)


def _results(path: Path) -> list[dict]:
    """The per-result records of a promptfoo results file (``results.results``), checked to be records."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read: {e}", path=path) from None
    except json.JSONDecodeError as e:
        raise InputError(f"not JSON: {e.msg}", path=path, line=e.lineno) from None
    results = doc.get("results") if isinstance(doc, dict) else None
    records = results.get("results") if isinstance(results, dict) else None
    if not isinstance(records, list):
        raise InputError(
            "not a promptfoo results file (no results.results list; write it with promptfoo eval -o results.json)",
            path=path,
            field="results.results",
        )
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"result {i} is not an object", path=path, field="results.results")
    return records


def _pair(rec: dict, i: int, path: Path) -> tuple[str, str]:
    """(prompt label, provider id) of one result."""
    prompt, provider = rec.get("prompt"), rec.get("provider")
    label = (prompt.get("label") or prompt.get("raw")) if isinstance(prompt, dict) else prompt
    pid = provider.get("id") if isinstance(provider, dict) else provider
    if not isinstance(label, str) or not isinstance(pid, str):
        raise InputError(f"result {i} names no prompt label or provider id", path=path, field="results.results.prompt")
    return label, pid


def _choose(values: list[str], wanted: str | None, *, noun: str, option: str, path: Path, notes: list[str]) -> str:
    """The prompt or provider to import: ``wanted`` (which must be there), or the first with a note where
    several are."""
    if wanted is not None:
        if wanted not in values:
            raise InputError(
                f"no {noun} {wanted!r}; the file has {', '.join(map(repr, values))}", path=path, field=f"--{option}"
            )
        return wanted
    if len(values) > 1:
        notes.append(
            choice_note(
                path, field=f"results.results.{noun}", noun=f"{noun}s", options=values, chosen=values[0], option=option
            )
        )
    return values[0]


def _item_id(rec: dict, vars_: dict, item_id_field: str | None, i: int, path: Path) -> str:
    if item_id_field is not None:
        if item_id_field not in vars_:
            raise InputError(f"result {i}: no variable {item_id_field!r}", path=path, field="--item-id-field")
        return str(vars_[item_id_field])
    case = rec.get("testCase") if isinstance(rec.get("testCase"), dict) else {}
    if case.get("description") not in (None, ""):
        return str(case["description"])
    return "promptfoo/" + hashlib.sha256(json.dumps(vars_, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _domain(vars_: dict, domain_field: str | None, i: int, path: Path) -> str:
    if domain_field is not None:
        if domain_field not in vars_:
            raise InputError(f"result {i}: no variable {domain_field!r}", path=path, field="--domain-field")
        return str(vars_[domain_field])
    return next((str(vars_[v]) for v in DOMAIN_VARS if vars_.get(v) not in (None, "")), "promptfoo")


def _trial(rec: dict, i: int, *, item_id: str, domain: str, k: int, answer_var: str, path: Path) -> dict:
    vars_ = rec["vars"]
    response = rec.get("response") if isinstance(rec.get("response"), dict) else {}
    output = response.get("output")
    missing = rec.get("failureReason") == ERROR_REASON or (rec.get("error") not in (None, "") and output is None)
    success = rec.get("success")
    if not missing and not isinstance(success, bool):
        raise InputError(
            f"result {i}: 'success' is {success!r}, not true or false", path=path, field="results.results.success"
        )
    return trial_row(
        item_id=item_id,
        domain=domain,
        k=k,
        response=None if output is None else as_text(output),
        extracted=None,
        correct_answer=as_text(vars_.get(answer_var)),
        is_correct=None if missing else success,
        is_missing=missing,
        line=i + 1,
    )


def read_promptfoo(
    path: str | Path,
    *,
    model: str | None = None,
    prompt: str | None = None,
    provider: str | None = None,
    item_id_field: str | None = None,
    domain_field: str | None = None,
    answer_var: str = "answer",
    notes: list[str] | None = None,
) -> pd.DataFrame:
    """Read one version (a prompt under a provider) from a promptfoo results file as canonical trials.

    Parameters
    ----------
    path : ``promptfoo eval -o results.json`` output.
    model : the version label (default: the prompt's label where the file has several prompts, else the provider id).
    prompt, provider : the prompt label and provider id to import (default: the first, with a note, where several).
    item_id_field, domain_field : variables naming each test case's item and domain (module docstring).
    answer_var : the variable holding the correct answer, kept as ``correct_answer`` where present.
    notes : a list that collects notes (a choice among several prompts or providers).

    Examples
    --------
    >>> trials = read_promptfoo("results.json", prompt="few-shot")  # doctest: +SKIP
    >>> trials.groupby("item_id")["is_correct"].sum()  # doctest: +SKIP
    """
    path = Path(path)
    notes = [] if notes is None else notes
    records = _results(path)
    pairs = [_pair(rec, i, path) for i, rec in enumerate(records)]
    prompts = list(dict.fromkeys(p for p, _ in pairs))
    chosen_prompt = _choose(prompts, prompt, noun="prompt", option="prompt", path=path, notes=notes)
    providers = list(dict.fromkeys(v for p, v in pairs if p == chosen_prompt))
    chosen_provider = _choose(providers, provider, noun="provider", option="provider", path=path, notes=notes)
    label = model or (chosen_prompt if len(prompts) > 1 else chosen_provider)
    rows, repeats = [], {}
    keep = [(i, rec) for i, (rec, pair) in enumerate(zip(records, pairs)) if pair == (chosen_prompt, chosen_provider)]
    for i, rec in sorted(keep, key=lambda t: (_test_index(t[1], t[0], path), t[0])):
        vars_ = rec.get("vars")
        if not isinstance(vars_, dict):
            raise InputError(f"result {i} has no variables (vars)", path=path, field="results.results.vars")
        item = _item_id(rec, vars_, item_id_field, i, path)
        k = repeats[item] = repeats.get(item, -1) + 1  # a test case's repeats are consecutive testIdx
        rows.append(
            _trial(
                rec,
                i,
                item_id=item,
                domain=_domain(vars_, domain_field, i, path),
                k=k,
                answer_var=answer_var,
                path=path,
            )
        )
    return finish(rows, path=path, model=label)


def _test_index(rec: dict, i: int, path: Path) -> int:
    idx: Any = rec.get("testIdx")
    if not isinstance(idx, int) or isinstance(idx, bool):
        raise InputError(f"result {i}: testIdx is {idx!r}, not an integer", path=path, field="results.results.testIdx")
    return idx
