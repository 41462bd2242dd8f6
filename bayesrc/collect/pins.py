"""Run shards: merging the disjoint item ranges of one run into one run directory (SPEC section 6).

Every shard must hold the same pins but ``items.range`` (and ``runtime``), be complete and hold
exactly the items of its range. Whether two runs are comparable, and their pins, is
:mod:`bayesrc.data.provenance`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path

import pandas as pd

from bayesrc.collect.exact import compact
from bayesrc.collect.rundir import RunLock, check_writable, frame_bytes, now_utc, read_parts, read_run_trials
from bayesrc.data.provenance import IGNORED, _short, pin_category, record_pins
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes, read_run_record, staged_output, write_run_record


def merge_runs(shards: Iterable[str | Path], out: str | Path, *, lock_output: bool = True) -> Path:
    """Merge shard runs (disjoint item ranges of one run) into one run directory.

    All pins must match except ``items.range`` (and ``runtime``); every shard must be
    complete, ranges must not overlap, and the merged record's range is their union (which
    must be contiguous). ``lock_output=False``: the caller already holds ``out``'s
    :class:`RunLock` (Ray's driver holds it for the whole run; a second lock from the same
    process would refuse it).

    Examples
    --------
    >>> merge_runs(["runs/v1_shard0", "runs/v1_shard1"], "runs/v1")  # doctest: +SKIP
    """
    shards = [Path(s) for s in shards]
    if not shards:
        raise InputError("no shards given", field="shards")
    out = Path(out)
    with ExitStack() as locks:
        for s in shards:  # a shard's collector is refused while its run is read, and the other way round
            if s.is_dir():
                locks.enter_context(RunLock(s, shared=True))
        records, order, trials = _read_shards(shards, out)
        if (out / "run.json").exists():
            raise InputError("output already holds a run", path=out)
        check_writable(out)
        if lock_output:
            locks.enter_context(RunLock(out))  # a collector on the output is refused, and waits for no swap
        if (out / "run.json").exists():
            raise InputError("output already holds a run", path=out)
        _write_merged(out, shards, records, order, trials)
    return out


def pinned_range(pins: dict, path: str | Path) -> tuple[int, int]:
    """A run's ``items.range`` pin as ``(start, stop)``: two integers with ``0 <= start <= stop``.

    Examples
    --------
    >>> pinned_range({"items.range": [0, 4]}, "s0/run.json")
    (0, 4)
    >>> pinned_range({"items.range": [4, 2]}, "run.json")
    Traceback (most recent call last):
    bayesrc.errors.InputError: run.json: field 'items.range': expected [start, stop] with 0 <= start <= stop, got [4, 2]
    """
    if "items.range" not in pins:
        raise InputError("missing from the run's pins", path=path, field="items.range")
    value = pins["items.range"]
    # bool is an int subclass, but true/false is no item index
    ints = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    )
    if not ints or value[0] > value[1]:
        raise InputError(
            f"expected [start, stop] with 0 <= start <= stop, got {_short(json.dumps(value))}",
            path=path,
            field="items.range",
        )
    return value[0], value[1]


def check_shard_record(record: dict, path: str | Path) -> None:
    """Refuse a shard's run record (``path``) lacking, or mistyping, a field that merging reads.

    Merging reads ``status``, the pins (``items.range``, ``runtime.engine``) and the
    ``info`` times; each is checked here, before anything is read or written, so a damaged
    record is one line naming its field rather than a traceback half-way through.

    Examples
    --------
    >>> rec = {
    ...     "status": "complete",
    ...     "pins": {"items.range": [0, 2], "runtime.engine": "fast"},
    ...     "info": {"started_at": "2025-01-01T00:00:00Z"},
    ... }
    >>> check_shard_record(rec, "s0/run.json")
    >>> check_shard_record(dict(rec, info=[]), "s0/run.json")
    Traceback (most recent call last):
    bayesrc.errors.InputError: s0/run.json: field 'info': expected an object, got []
    """
    if record.get("status") != "complete":
        raise InputError(
            f"shard is not complete ({_short(json.dumps(record.get('n_items_done', 0)))} items done); resume it first",
            path=path,
            field="status",
        )
    pins = record_pins(record, path)
    pinned_range(pins, path)
    if not isinstance(pins.get("runtime.engine", ""), str):
        raise InputError(
            f"expected a string, got {_short(json.dumps(pins['runtime.engine']))}", path=path, field="runtime.engine"
        )
    info = record.get("info", {})
    if not isinstance(info, dict):
        raise InputError(f"expected an object, got {_short(json.dumps(info))}", path=path, field="info")
    for key in ("started_at", "finished_at"):  # compared across shards (min / max)
        if not isinstance(info.get(key, ""), str):
            raise InputError(f"expected a string, got {_short(json.dumps(info[key]))}", path=path, field=f"info.{key}")


def check_shard_items(
    trials: pd.DataFrame, rng: tuple[int, int], shard: str | Path, *, keys: tuple[str, ...] = ("item_index", "k")
) -> None:
    """Refuse a complete shard whose trials lack the ``keys`` merging reads, or do not hold exactly the items
    of its pinned range.

    A range edited into another valid one would otherwise be merged into a record whose
    ``items.range`` does not describe its trials (a complete shard holds every item of its range).

    Examples
    --------
    >>> check_shard_items(pd.DataFrame({"item_index": [0, 1], "k": [0, 0]}), (0, 2), "s0")
    >>> check_shard_items(pd.DataFrame({"item_index": [0, 3], "k": [0, 0]}), (0, 2), "s0")
    Traceback (most recent call last):
    bayesrc.errors.InputError: s0: field 'items.range': the trials hold items 0, 3, not the range 0:2
    """
    missing = [k for k in keys if k not in trials.columns]
    if missing:
        raise InputError(f"the shard's trials have no {', '.join(missing)} column", path=shard, field=missing[0])
    held = set(trials["item_index"].tolist())
    if held != set(range(*rng)):
        listed = ", ".join(str(v) for v in sorted(held, key=str)[:6]) + (", ..." if len(held) > 6 else "")
        raise InputError(
            f"the trials hold items {listed}, not the range {rng[0]}:{rng[1]}", path=shard, field="items.range"
        )


def _read_shards(shards: list[Path], out: Path) -> tuple[list[dict], list[int], pd.DataFrame]:
    """Check the shards (complete, same pins, contiguous disjoint ranges); their records, order by range and trials."""
    records = []
    for s in shards:
        rec = read_run_record(s) if s.is_dir() else None
        if rec is None:
            raise InputError("not a run directory (no run.json)", path=s)
        check_shard_record(rec, s / "run.json")
        records.append(rec)
    base = records[0]["pins"]
    for s, rec in zip(shards[1:], records[1:]):
        diff = [
            f
            for f in sorted(set(base) | set(rec["pins"]))
            if base.get(f) != rec["pins"].get(f) and f != "items.range" and pin_category(f) not in IGNORED
        ]
        if diff:
            raise InputError(f"shard pins differ from {shards[0]} in {', '.join(diff)}", path=s / "run.json")
        # exact parts and sampled trials do not mix
        if (rec["pins"].get("runtime.engine") == "exact") != (base.get("runtime.engine") == "exact"):
            raise InputError(
                "exact and sampled shards cannot be merged "
                f"({shards[0] / 'run.json'} has {base.get('runtime.engine')!r})",
                path=s / "run.json",
                field="runtime.engine",
            )
    order = sorted(range(len(shards)), key=lambda i: records[i]["pins"]["items.range"][0])
    ranges = [records[i]["pins"]["items.range"] for i in order]
    for (a0, b0), (a1, b1), i in zip(ranges, ranges[1:], order[1:]):
        if a1 < b0:
            raise InputError(f"item range {a1}:{b1} overlaps {a0}:{b0}", path=shards[i])
        if a1 > b0:
            raise InputError(f"gap between item ranges {a0}:{b0} and {a1}:{b1}", path=shards[i])
    exact = base.get("runtime.engine") == "exact"
    frames = [read_parts(shards[i]) if exact else read_run_trials(shards[i]) for i in order]
    for i, frame in zip(order, frames):
        check_shard_items(
            frame,
            pinned_range(records[i]["pins"], shards[i] / "run.json"),
            shards[i],
            keys=("item_index",) if exact else ("item_index", "k"),
        )
    trials = pd.concat(frames, ignore_index=True)
    if exact:  # exact shards: their per-item parts, compacted as one run
        if trials.drop_duplicates(["item_index", "answer"]).shape[0] != len(trials):
            raise InputError("duplicate items across shards", path=out)
    elif trials.duplicated(["item_index", "k"]).any():
        raise InputError("duplicate trials across shards", path=out)
    return records, order, trials


def _write_merged(out: Path, shards: list[Path], records: list[dict], order: list[int], trials: pd.DataFrame) -> None:
    """Commit the merged run (all its files or none) into ``out``."""
    base = records[0]["pins"]
    exact = base.get("runtime.engine") == "exact"
    ranges = [records[i]["pins"]["items.range"] for i in order]
    pins = dict(base, **{"items.range": [ranges[0][0], ranges[-1][1]]})
    with staged_output(out) as stage:
        if exact:
            dist, items_exact = compact(trials)
            atomic_write_bytes(stage / "dist.parquet", frame_bytes(dist))
            atomic_write_bytes(stage / "items_exact.parquet", frame_bytes(items_exact))
        else:
            atomic_write_bytes(stage / "trials.parquet", frame_bytes(trials))
        info = {
            "merged_from": [str(shards[i]) for i in order],
            "merged_at": now_utc(),
            "started_at": min(r.get("info", {}).get("started_at", "") for r in records),
            "finished_at": max(r.get("info", {}).get("finished_at", "") for r in records),
        }
        write_run_record(
            stage,
            "complete",
            pins,
            info,
            n_items_done=int(trials["item_index"].nunique()),
            n_trials=0 if exact else len(trials),
        )
