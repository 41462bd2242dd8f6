"""Inspect AI eval logs (``.json`` or ``.eval``) -> canonical trials; epochs are the K samples.

An Inspect log (``inspect_ai.log.EvalLog``) holds ``version``, ``status``, ``eval``
(the spec: ``task``, ``model``, ``config.epochs``, ...), ``results`` and
``samples``. Each sample (``EvalSample``) is one item at one epoch::

    {"id": "q00017", "epoch": 2, "input": ..., "target": "C",
     "output": {"choices": [{"message": {"role": "assistant", "content": "..."}}]},
     "scores": {"choice": {"value": "C", "answer": "C", "explanation": "..."}},
     "metadata": {"subject": "physics"}, "error": null}

The JSON format stores all of it in one file; the ``.eval`` format is a zip with
``_journal/start.json`` (or ``header.json``) and one ``samples/<id>_epoch_<n>.json``
per sample. Current Inspect (0.3.1xx and later) compresses the zip members with
Zstandard (zip method 93), which Python's ``zipfile`` cannot read before 3.14; those
members are decompressed here with the ``zstandard`` package (CRC-checked). Score values map to
numbers as Inspect's ``value_to_float`` maps them (:func:`score_value`): ``"C"`` / true / "yes" 1,
``"I"`` / false / "no" 0, partial credit ``"P"`` 0.5, numbers (and numeric text) as they are;
``"N"`` (no answer), a NaN score (a model-graded scorer that found no grade) and samples that
ended in an error are missing responses. Every trial carries its ``score`` (SPEC section 11), and
``is_correct`` too when every score of the log is 0 or 1: a log of a partial-credit scorer that
happened to give no partial credit is still a graded version beside one that did.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrc.errors import InputError
from bayesrc.importers._common import as_text, choice_note, finish, lookup, trial_row

CORRECT, INCORRECT, NOANSWER, PARTIAL = "C", "I", "N", "P"
LETTER_SCORES = {CORRECT: 1.0, INCORRECT: 0.0, PARTIAL: 0.5}  # as written
NAMED_SCORES = {"true": 1.0, "yes": 1.0, "correct": 1.0, "false": 0.0, "no": 0.0, "incorrect": 0.0}  # any case
DOMAIN_KEYS = ("domain", "category", "subject")


def _load_json_log(path: Path) -> tuple[dict, list[tuple[str, Any]]]:
    try:
        log = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON ({exc.msg}, column {exc.colno}); truncated or partial log?", path=path, line=exc.lineno
        ) from None
    except UnicodeDecodeError:
        raise InputError("not a text file (an Inspect .eval log must end in .eval)", path=path) from None
    if not isinstance(log, dict) or "eval" not in log:
        raise InputError("not an Inspect eval log (no 'eval' header)", path=path, field="eval")
    if "samples" not in log or log["samples"] is None:
        raise InputError(
            "log has no samples (was it written with --no-log-samples, or is it a header-only log?)",
            path=path,
            field="samples",
        )
    if not isinstance(log["samples"], list):
        raise InputError("expected a list of samples", path=path, field="samples")
    return log, [(f"sample {i}", s) for i, s in enumerate(log["samples"])]


ZIP_ZSTANDARD = 93  # zip compression method id of Zstandard (APPNOTE 4.4.5)


def read_zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A zip member's bytes; Zstandard members (method 93) are decompressed with ``zstandard``.

    Raises ``zipfile.BadZipFile`` on a damaged member (bad local header or CRC) and
    ``InputError`` when ``zstandard`` is missing or the compression method is unknown.
    """
    if info.compress_type != ZIP_ZSTANDARD:
        try:
            return zf.read(info)
        except NotImplementedError as exc:  # another method zipfile lacks (e.g. LZMA without liblzma)
            raise InputError(f"member {info.filename}: {exc}", path=zf.filename) from None
    try:
        import zstandard  # deferred: only Zstandard-compressed logs need it; missing: the InputError below
    except ImportError:
        raise InputError(
            "this .eval log's members are Zstandard-compressed; pip install zstandard", path=zf.filename
        ) from None
    fp = zf.fp
    fp.seek(info.header_offset)
    head = fp.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    n_name, n_extra = struct.unpack("<HH", head[26:30])
    fp.seek(info.header_offset + 30 + n_name + n_extra)
    raw = fp.read(info.compress_size)
    try:
        with zstandard.ZstdDecompressor().stream_reader(raw) as reader:
            data = reader.read()
    except zstandard.ZstdError as exc:
        raise zipfile.BadZipFile(f"{info.filename}: {exc}") from None
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"{info.filename}: size or CRC mismatch (truncated member?)")
    return data


def _load_eval_zip(path: Path) -> tuple[dict, list[tuple[str, Any]]]:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"not a readable .eval (zip) log ({exc}); truncated or partial?", path=path) from None
    with zf:
        infos = {i.filename: i for i in zf.infolist()}
        names = list(infos)
        head_name = next((n for n in ("header.json", "_journal/start.json", "start.json") if n in names), None)
        if head_name is None:
            raise InputError("no header.json or _journal/start.json in the .eval log", path=path, field="eval")
        member = head_name
        try:
            header = json.loads(read_zip_member(zf, infos[head_name]))
            samples = []
            for member in sorted(n for n in names if n.startswith("samples/") and n.endswith(".json")):
                samples.append((member, json.loads(read_zip_member(zf, infos[member]))))
        except (json.JSONDecodeError, UnicodeDecodeError, zipfile.BadZipFile, OSError, EOFError) as exc:
            raise InputError(f"unreadable member {member} in the .eval log ({exc})", path=path) from None
    if not samples:
        raise InputError("log has no samples/ entries", path=path, field="samples")
    if not isinstance(header, dict):
        raise InputError(f"{head_name}: expected a JSON object", path=path, field="eval")
    log = {
        "eval": header.get("eval", {}),
        "status": header.get("status", "success" if "header.json" in names else None),
    }
    return log, samples


def score_value(value: Any) -> float | None:
    """An Inspect score value as a number (as Inspect's ``value_to_float``); ``None`` for no answer or no grade.
    Raises ValueError.

    Examples
    --------
    >>> score_value("C"), score_value("P"), score_value("I"), score_value("N"), score_value(0.75), score_value(True)
    (1.0, 0.5, 0.0, None, 0.75, 1.0)
    """
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        if math.isnan(value):
            return None  # a model-graded scorer that found no grade in its grader's reply
        if math.isinf(value):
            raise ValueError(f"expected a finite score, got {value!r}")
        return float(value)
    if isinstance(value, str):
        v = value.strip()
        if v == NOANSWER:
            return None
        named = LETTER_SCORES.get(v, NAMED_SCORES.get(v.lower()))
        if named is not None:
            return named
        try:
            return score_value(float(v))
        except ValueError:
            pass
    raise ValueError(f"cannot read {json.dumps(value)} as a score (C, P, I, N, true, false or a number)")


def _output_text(sample: dict) -> str | None:
    choices = lookup(sample, "output.choices", None) or []
    if not isinstance(choices, list) or not choices:
        return None
    content = lookup(choices[0], "message.content", None)
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return None if content is None else str(content)


def _check_finished(status: Any, *, n_samples: int, allow_partial: bool, path: Path) -> None:
    """Refuse an unfinished run (its items may lack epochs) unless the caller allows it."""
    if status not in (None, "success") and not allow_partial:
        raise InputError(
            f"log status is {status!r}: the run did not finish, so items may lack epochs; "
            f"pass --allow-partial to import the {n_samples} samples it holds",
            path=path,
            field="status",
        )


def _sample_ident(
    where: str, s: Any, *, seen: dict[tuple[str, int], str], epochs: int | None, path: Path
) -> tuple[Any, int, str]:
    """A sample's ``(id, epoch, name for messages)``, checked: an object, an epoch >= 1, not a duplicate of one
    in ``seen``."""
    if not isinstance(s, dict):
        raise InputError(f"{where}: expected a JSON object", path=path, field="samples")
    for field in ("id", "epoch"):
        if s.get(field) is None:
            raise InputError(f"{where}: missing required field; partial sample?", path=path, field=field)
    sid, epoch = s["id"], s["epoch"]
    ident = f"{where} (id {sid}, epoch {epoch})"
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise InputError(f"{ident}: expected an epoch number >= 1, got {epoch!r}", path=path, field="epoch")
    if (str(sid), epoch) in seen:
        raise InputError(f"{ident}: duplicate of {seen[(str(sid), epoch)]}", path=path, field="id")
    if epochs is not None and epoch > epochs:
        raise InputError(f"{ident}: epoch beyond config.epochs = {epochs}", path=path, field="epoch")
    return sid, epoch, ident


def _sample_scores(s: dict, ident: str, *, path: Path) -> dict:
    """The sample's ``scores`` (scorer name -> score), ``{}`` when it has none; anything but an object is refused."""
    scores = s.get("scores")
    if scores is None:
        return {}
    if not isinstance(scores, dict):
        raise InputError(
            f"{ident}: expected an object of scores by scorer name, got {json.dumps(scores)}", path=path, field="scores"
        )
    return scores


def _sample_score(s: dict, scores: dict, ident: str, scorer: str | None, *, path: Path) -> tuple[float | None, Any]:
    """``(score, answer)`` from the ``scorer``'s entry in ``scores`` (:func:`score_value`); ``(None, None)`` for an
    unscored sample that ended in an error."""
    if not scores:
        if s.get("error") is not None:
            return None, None
        raise InputError(
            f"{ident}: sample has no scores (unscored log? run `inspect score` first)", path=path, field="scores"
        )
    if scorer not in scores:
        raise InputError(
            f"{ident}: no score from scorer {scorer!r} (has {', '.join(scores)})", path=path, field="scores"
        )
    score = scores[scorer]
    if not isinstance(score, dict) or "value" not in score:
        raise InputError(f"{ident}: expected a score object with a 'value'", path=path, field=f"scores.{scorer}")
    try:
        value = score_value(score["value"])
    except ValueError as exc:
        raise InputError(f"{ident}: {exc}", path=path, field=f"scores.{scorer}.value") from None
    return value, score.get("answer")


def _sample_domain(s: dict, ident: str, *, domain_field: str | None, task: str, path: Path) -> Any:
    """The ``domain_field`` value (required), else the first of ``metadata.domain / category / subject``,
    else the task."""
    if domain_field:
        domain = lookup(s, domain_field, None)
        if domain is None:
            raise InputError(f"{ident}: not in the sample", path=path, field=domain_field)
        return domain
    meta = s.get("metadata") or {}
    return next((meta[k] for k in DOMAIN_KEYS if isinstance(meta, dict) and meta.get(k) is not None), task)


def _sample_rows(
    samples: list[tuple[str, Any]],
    *,
    path: Path,
    task: str,
    epochs: int | None,
    scorer: str | None,
    domain_field: str | None,
    notes: list[str],
) -> list[dict]:
    """One trial row per sample (``k = epoch - 1``); without a ``scorer``, the first scored sample's first scorer
    is used; each carries its score, and ``is_correct`` where every score is 0 or 1 (:func:`with_correctness`)."""
    rows: list[dict] = []
    chosen = scorer
    seen: dict[tuple[str, int], str] = {}  # (id, epoch) -> where, to name the first of a duplicate
    for idx, (where, s) in enumerate(samples, start=1):
        sid, epoch, ident = _sample_ident(where, s, seen=seen, epochs=epochs, path=path)
        seen[(str(sid), epoch)] = where
        scores = _sample_scores(s, ident, path=path)
        if scores and chosen is None:
            chosen = next(iter(scores))
            if len(scores) > 1:
                notes.append(
                    choice_note(path, field="scores", noun="scorers", options=scores, chosen=chosen, option="scorer")
                )
        value, answer = _sample_score(s, scores, ident, chosen, path=path)
        domain = _sample_domain(s, ident, domain_field=domain_field, task=task, path=path)
        missing = value is None
        row = trial_row(
            item_id=str(sid),
            domain=str(domain),
            k=epoch - 1,
            response=_output_text(s),
            extracted=None if missing or answer is None else str(answer),
            correct_answer=as_text(s.get("target")),
            is_correct=None,
            is_missing=missing,
            line=idx,
        )
        rows.append(row | {"score": value})
    return with_correctness(rows)


def with_correctness(rows: list[dict]) -> list[dict]:
    """``rows`` with ``is_correct`` set from their ``score`` where every score is 0 or 1 (a right / wrong log);
    otherwise left null (a graded log).

    Examples
    --------
    >>> [r["is_correct"] for r in with_correctness([{"score": 1.0}, {"score": 0.0}, {"score": None}])]
    [True, False, None]
    >>> [r["is_correct"] for r in with_correctness([{"score": 0.5}, {"score": 1.0}])]
    [None, None]
    """
    if not all(r["score"] in (None, 0.0, 1.0) for r in rows):
        return [r | {"is_correct": None} for r in rows]
    return [r | {"is_correct": None if r["score"] is None else r["score"] == 1.0} for r in rows]


def read_inspect(
    path: str | Path,
    *,
    model: str | None = None,
    scorer: str | None = None,
    domain_field: str | None = None,
    allow_partial: bool = False,
    notes: list[str] | None = None,
) -> pd.DataFrame:
    """Import an Inspect AI eval log as canonical trials (``k = epoch - 1``).

    Parameters
    ----------
    path : ``.json`` or ``.eval`` log.
    model : version label (default: the log's ``eval.model``).
    scorer : which entry of ``sample.scores`` gives correctness (default: the only
        one, else the first; the choice goes to ``notes``).
    domain_field : dotted path in the sample (e.g. ``metadata.subject``); default
        the first of ``metadata.domain / category / subject``, else the task name.
    allow_partial : import a log whose status is not ``success`` (an interrupted run).

    Examples
    --------
    >>> import tempfile
    >>> from bayesrc.importers import write_examples
    >>> logs = write_examples(tempfile.mkdtemp(), n_items=24, k=5)["inspect"]  # generated Inspect logs
    >>> trials = read_inspect(logs[0])
    >>> trials["item_id"].nunique(), int(trials.groupby("item_id").size().max())
    (24, 5)
    """
    path = Path(path)
    notes = notes if notes is not None else []
    if not path.exists():
        raise InputError("file not found", path=path)
    log, samples = _load_eval_zip(path) if path.suffix == ".eval" else _load_json_log(path)
    spec = log.get("eval") or {}
    if not isinstance(spec, dict):
        raise InputError(f"expected an object (the eval spec), got {json.dumps(spec)}", path=path, field="eval")
    _check_finished(log.get("status"), n_samples=len(samples), allow_partial=allow_partial, path=path)
    task = str(spec.get("task") or path.stem).split("/")[-1]
    label = model or spec.get("model")
    if not label:
        raise InputError("no model name in the log; pass --model", path=path, field="eval.model")
    epochs = lookup(spec, "config.epochs", None)
    if epochs is not None and (not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1):
        raise InputError(
            f"expected a number of epochs >= 1, got {json.dumps(epochs)}", path=path, field="eval.config.epochs"
        )
    rows = _sample_rows(
        samples, path=path, task=task, epochs=epochs, scorer=scorer, domain_field=domain_field, notes=notes
    )
    n_err = sum(1 for _, s in samples if isinstance(s, dict) and s.get("error") is not None)
    if n_err:
        notes.append(f"{path}: {n_err} sample(s) ended in an error; counted as missing responses")
    return finish(rows, path=path, model=str(label))
