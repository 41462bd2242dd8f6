"""lm-evaluation-harness ``--log_samples`` files -> canonical trials.

lm-eval writes one ``samples_<task>_<timestamp>.jsonl`` per task, one JSON object
per document (and per filter), as built in ``lm_eval/evaluator.py``::

    {"doc_id": 0, "doc": {...}, "target": "B",
     "arguments": {...} | [[prompt, gen_kwargs]],
     "resps": [[r_1, ..., r_K]],              # one request; K = its ``repeats``
     "filtered_resps": [[a_1, ..., a_K]] | [a],
     "filter": "strict-match", "metrics": ["exact_match"],
     "doc_hash": ..., "prompt_hash": ..., "target_hash": ...,
     "exact_match": 1.0}

Two layouts carry per-sample correctness:

* **repeats** (``repeats: K`` in the task config, with a filter that keeps each
  repeat): ``filtered_resps[0]`` is a list of K extracted answers; each is scored
  against ``target`` (case-folded, brackets and full stop stripped). lm-eval's
  regex fallback ``"[invalid]"`` and empty answers are missing responses.
* **one response per document** (``repeats: 1``): the record's metric
  (``exact_match``, ``acc``, ...; 0 or 1) is the trial's correctness.

Several files of the same task are independent runs (e.g. different
``--seed``); their responses are stacked as further samples ``k``. Files of
different tasks are different items (``item_id = "<task>/<doc_id>"``, domain = task
unless ``domain_field`` names a document field such as ``doc.category``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bayesrc.errors import InputError
from bayesrc.importers._common import as_text, choice_note, finish, lookup, normalise_answer, trial_row
from bayesrc.io import iter_jsonl

SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+?)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.:]+)\.jsonl$")
DEFAULT_METRICS = ("exact_match", "acc", "pass@1", "em", "correct")
INVALID_ANSWERS = frozenset({"", "[invalid]"})


def task_from_filename(path: str | Path) -> str:
    """``samples_mmlu_pro_law_2025-01-02T10-11-12.345.jsonl`` -> ``mmlu_pro_law``.

    Examples
    --------
    >>> task_from_filename("samples_mmlu_pro_law_2025-01-02T10-11-12.345.jsonl")
    'mmlu_pro_law'
    """
    name = Path(path).name
    m = SAMPLES_NAME.match(name)
    if m:
        return m.group("task")
    stem = Path(name).stem
    return stem[len("samples_") :] if stem.startswith("samples_") else stem


def find_sample_files(sources: Sequence[str | Path]) -> list[Path]:
    """Expand directories into their ``samples_*.jsonl`` files (sorted)."""
    files: list[Path] = []
    for src in map(Path, sources):
        if src.is_dir():
            found = sorted(src.rglob("samples_*.jsonl"))
            if not found:
                raise InputError(
                    "no samples_*.jsonl file in this folder (was lm-eval run with --log_samples?)", path=src
                )
            files += found
        elif not src.exists():
            raise InputError("file not found", path=src)
        else:
            files.append(src)
    return files


def _read_records(path: Path) -> list[tuple[int, dict]]:
    out = list(
        iter_jsonl(path, what="one JSON object per line (an lm-eval sample record)", hint="; truncated or partial log?")
    )
    if not out:
        raise InputError("file is empty (no sample records)", path=path)
    for line, rec in out:
        if not isinstance(rec.get("filter"), str | None):
            raise InputError(
                f"expected a filter name, got {json.dumps(rec['filter'])}", path=path, line=line, field="filter"
            )
    return out


def _require_fields(rec: dict, fields: Sequence[str], *, path: Path, line: int) -> None:
    """Refuse a record that lacks one of ``fields`` (the first missing is named)."""
    for field in fields:
        if field not in rec:
            raise InputError("missing required field; partial record?", path=path, line=line, field=field)


def _metric_correct(rec: dict, metric: str | None, *, path: Path, line: int) -> tuple[bool, str]:
    listed = rec.get("metrics") or []
    if not metric and (not isinstance(listed, list) or not all(isinstance(m, str) for m in listed)):
        raise InputError(
            f"expected a list of metric names, got {json.dumps(listed)}", path=path, line=line, field="metrics"
        )
    names = [metric] if metric else [*listed, *DEFAULT_METRICS]
    for name in names:
        if name in rec:
            val = rec[name]
            if isinstance(val, bool) or (isinstance(val, (int, float)) and val in (0, 1)):
                return bool(val), name
            raise InputError(
                f"expected 0 or 1 (one response's correctness), got {json.dumps(val)}; "
                "for a multi-sample metric log each repeat (repeats: K with a per-repeat filter)",
                path=path,
                line=line,
                field=name,
            )
    if metric:
        raise InputError("metric not in the record", path=path, line=line, field=metric)
    raise InputError(
        f"no correctness metric (looked for {', '.join(DEFAULT_METRICS)}); pass --metric",
        path=path,
        line=line,
        field="metrics",
    )


def _mc_choice(filtered: list, *, path: Path, line: int) -> str:
    """Multiple-choice (loglikelihood) records: ``[[ll, is_greedy], ...]`` -> index of the max ll."""
    for f in filtered:
        if not isinstance(f, list) or not f or isinstance(f[0], bool) or not isinstance(f[0], int | float):
            raise InputError(
                f"expected one [loglikelihood, is_greedy] pair per option, got {json.dumps(f)}",
                path=path,
                line=line,
                field="filtered_resps",
            )
    lls = [float(f[0]) for f in filtered]
    return str(max(range(len(lls)), key=lls.__getitem__))


def record_trials(
    rec: dict,
    *,
    path: Path,
    line: int,
    metric: str | None = None,
) -> list[dict]:
    """One lm-eval sample record -> a list of ``{k, response, extracted, is_correct, is_missing}``."""
    _require_fields(rec, ("doc_id", "resps", "filtered_resps"), path=path, line=line)
    resps, filtered = rec["resps"], rec["filtered_resps"]
    if not isinstance(resps, list) or not isinstance(filtered, list) or not resps or not filtered:
        raise InputError(
            "expected a non-empty list",
            path=path,
            line=line,
            field="resps" if not resps or not isinstance(resps, list) else "filtered_resps",
        )
    target = rec.get("target")
    first_resps = resps[0] if isinstance(resps[0], list) else [resps[0]]
    per_repeat = (
        len(resps) == 1 and isinstance(filtered[0], list) and all(isinstance(a, (str, type(None))) for a in filtered[0])
    )
    if per_repeat:
        answers = filtered[0]
        if len(answers) != len(first_resps):
            raise InputError(
                f"{len(first_resps)} responses but {len(answers)} filtered answers",
                path=path,
                line=line,
                field="filtered_resps",
            )
        if target is None:
            raise InputError(
                "missing required field (needed to score each repeat)", path=path, line=line, field="target"
            )
        key = normalise_answer(as_text(target))
        out = []
        for k, (raw, ans) in enumerate(zip(first_resps, answers)):
            missing = ans is None or str(ans).strip() in INVALID_ANSWERS
            out.append(
                {
                    "k": k,
                    "response": None if raw is None else str(raw),
                    "extracted": None if missing else str(ans),
                    "is_correct": None if missing else normalise_answer(ans) == key,
                    "is_missing": missing,
                }
            )
        return out
    if len(resps) == 1 and len(first_resps) > 1:
        raise InputError(
            f"{len(first_resps)} repeats but a single filtered answer "
            "(the filter aggregates repeats, e.g. majority vote); choose a filter that keeps each repeat with --filter",
            path=path,
            line=line,
            field="filtered_resps",
        )
    correct, _ = _metric_correct(rec, metric, path=path, line=line)
    if len(filtered) > 1:  # multiple-choice loglikelihood requests, one per option
        extracted = _mc_choice(filtered, path=path, line=line)
        response = None
    else:
        extracted = (
            as_text(filtered[0])
            if not isinstance(filtered[0], list)
            else as_text(filtered[0][0] if filtered[0] else None)
        )
        response = as_text(first_resps[0]) if first_resps and not isinstance(first_resps[0], list) else None
    return [{"k": 0, "response": response, "extracted": extracted, "is_correct": correct, "is_missing": False}]


def _files_by_task(files: list[Path]) -> dict[str, list[Path]]:
    """Sample files grouped by task (from the file name), in the order given."""
    by_task: dict[str, list[Path]] = {}
    for f in files:
        by_task.setdefault(task_from_filename(f), []).append(f)
    return by_task


def _chosen_filter(
    records: list[tuple[int, dict]], requested: str | None, *, path: Path, notes: list[str]
) -> str | None:
    """The filter whose records to keep: ``requested`` (must be in the file), else the first of several,
    else ``None`` (keep all)."""
    filters = list(dict.fromkeys(r.get("filter") for _, r in records if r.get("filter") is not None))
    if requested is not None and filters and requested not in filters:
        raise InputError(
            f"filter {requested!r} not in this file (it has {', '.join(filters)})", path=path, field="filter"
        )
    if requested is None and len(filters) > 1:
        notes.append(
            choice_note(path, field="filter", noun="filters", options=filters, chosen=filters[0], option="filter")
        )
        return filters[0]
    return requested


def _record_field(rec: dict, dotted: str, *, path: Path, line: int) -> str:
    """The record's value at a dotted path, as text; a missing one is an InputError naming the path."""
    try:
        return str(lookup(rec, dotted))
    except KeyError:
        raise InputError("not in the record", path=path, line=line, field=dotted) from None


def _item_id(rec: dict, *, task: str, item_id_field: str | None, path: Path, line: int) -> str:
    """The record's ``item_id_field`` value, else ``<task>/<doc_id>``."""
    _require_fields(rec, ("doc_id",), path=path, line=line)
    return _record_field(rec, item_id_field, path=path, line=line) if item_id_field else f"{task}/{rec['doc_id']}"


def _file_rows(
    path: Path,
    *,
    task: str,
    offset: int,
    metric: str | None,
    filter_name: str | None,
    domain_field: str | None,
    item_id_field: str | None,
    notes: list[str],
) -> list[dict]:
    """Trial rows of one samples file (one filter's records), their ``k`` counted from ``offset``."""
    records = _read_records(path)
    chosen = _chosen_filter(records, filter_name, path=path, notes=notes)
    rows: list[dict] = []
    seen: dict[str, int] = {}  # item id -> line, to name both lines of a duplicate
    for line, rec in records:
        if chosen is not None and rec.get("filter", chosen) != chosen:
            continue
        item_id = _item_id(rec, task=task, item_id_field=item_id_field, path=path, line=line)
        if item_id in seen:
            raise InputError(
                f"duplicate record for item {item_id} (also line {seen[item_id]})", path=path, line=line, field="doc_id"
            )
        seen[item_id] = line
        domain = _record_field(rec, domain_field, path=path, line=line) if domain_field else task
        target = as_text(rec.get("target"))
        for t in record_trials(rec, path=path, line=line, metric=metric):
            rows.append(
                trial_row(
                    item_id=item_id,
                    domain=domain,
                    k=offset + t["k"],
                    response=t["response"],
                    extracted=t["extracted"],
                    correct_answer=target,
                    is_correct=t["is_correct"],
                    is_missing=t["is_missing"],
                    line=line,
                )
            )
    if not seen:
        raise InputError(f"no records for filter {chosen!r}", path=path, field="filter")
    return rows


def read_lm_eval(
    sources: Sequence[str | Path] | str | Path,
    *,
    model: str,
    metric: str | None = None,
    filter: str | None = None,
    domain_field: str | None = None,
    item_id_field: str | None = None,
    notes: list[str] | None = None,
) -> pd.DataFrame:
    """Import lm-eval ``samples_*.jsonl`` files (or folders of them) as canonical trials.

    Parameters
    ----------
    sources : files or folders; files of one task are stacked as repeated runs.
    model : version label for the trials.
    metric : per-record 0/1 metric for single-response records (default: the
        record's first listed metric, else ``exact_match`` / ``acc`` / ...).
    filter : lm-eval filter name to keep when a file holds several (default: the
        first one seen; the choice is appended to ``notes``).
    domain_field : dotted path in the record giving the domain (e.g. ``doc.category``);
        default: the task name.
    item_id_field : dotted path giving a stable item id (e.g. ``doc.question_id``);
        default ``<task>/<doc_id>``.
    notes : a list that receives one-line notes (filter chosen, files stacked).

    Examples
    --------
    >>> import tempfile
    >>> from bayesrc.importers import write_examples
    >>> out = tempfile.mkdtemp()
    >>> _ = write_examples(out, n_items=24, k=5)  # generated lm-eval --log_samples files
    >>> trials = read_lm_eval(out + "/lm-eval/example-v1", model="v1")
    >>> trials["item_id"].nunique(), int(trials.groupby("item_id").size().max())
    (24, 5)
    """
    if isinstance(sources, (str, Path)):
        sources = [sources]
    files = find_sample_files(sources)
    notes = notes if notes is not None else []
    rows: list[dict] = []
    for task, task_files in _files_by_task(files).items():
        offset = 0  # a task's later files are later runs: their samples follow the earlier files'
        for path in task_files:
            file_rows = _file_rows(
                path,
                task=task,
                offset=offset,
                metric=metric,
                filter_name=filter,
                domain_field=domain_field,
                item_id_field=item_id_field,
                notes=notes,
            )
            rows += file_rows
            offset = max((r["k"] + 1 for r in file_rows), default=offset)
        if len(task_files) > 1:
            notes.append(f"task {task}: {len(task_files)} files stacked as repeated runs ({offset} samples per item)")
    label = files[0] if len(files) == 1 else Path(files[0]).parent
    return finish(rows, path=label, model=model)
