"""The run directory: its layout, lock, journal, record and lifecycle, shared by every engine
(:mod:`bayesrc.collect.run`, :mod:`bayesrc.collect.exact`, :mod:`bayesrc.collect.server`,
:mod:`bayesrc.scale.collect`) and read by :mod:`bayesrc.collect.pins` (SPEC section 6; paper 003).

Layout of ``runs/NAME/``::

    run.json            the run record: pins (compared by ``bayesrc pins``) + info
    parts/item-NNNNNN.parquet
                        the journal: one part per completed item (all K trials), written
                        to a temporary file, fsynced and renamed into place, so a killed
                        run loses at most the item in flight and never leaves a torn part
    trials.parquet      all trials in bank order (TRIAL_COLUMNS + extras), compacted from
                        the parts when the run completes; ``bayesrc.data.load_trials`` reads it
    .lock               held (flock) by the collector; a second collector is refused

Seeds: sample ``k`` of the item at 0-based bank position ``i`` uses
``seed = salt + seed_offset + position(i, k)`` (:func:`bayesrc.data.seeds.sample_seeds`: the
reference study's ``i * 10 + k`` for ``k < 10``, then positions above them that depend on
``i`` and ``k`` alone, or ``i * seed_stride + k`` with an explicit stride), so shards, resumed
runs and a run at a larger K draw exactly the trials of an uninterrupted run. ``seed_rule="version"`` (default) derives
``salt`` from the version's pin (model file, chat template, prompt template and system
prompt hashes, label; pinned as ``model.seed_salt``), so two versions draw
independently; ``seed_rule="shared"`` uses salt 0, the reference study's
``i * 10 + k`` for every model (paper 001 section 2.1), which couples the versions'
draws (SPEC 2.1; :mod:`bayesrc.data.seeds`).
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from bayesrc.collect.bank import Item
from bayesrc.collect.engines import Engine, ItemJob
from bayesrc.collect.extract import extract_answer
from bayesrc.data.run import CollectedRun
from bayesrc.data.seeds import ITEM_SLOTS, MAX_K, SEED_RULES, sample_seeds
from bayesrc.data.trials import TRIAL_COLUMNS
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes, read_parquet, read_run_record, write_run_record

EXTRA_COLUMNS = ("item_index", "thinking", "n_tokens", "finish", "engine")
_PART = re.compile(r"^item-(\d{6,})\.parquet$")


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- locking ---------------------------------------------------------------------------
class RunLock:
    """An exclusive ``flock`` on ``run_dir/.lock`` (released by the OS if the process dies).

    ``shared=True`` is a reader's lock (``bayesrc merge`` reading a shard): it excludes a
    collector but not other readers, and needs no write access (a run directory that never had
    a collector, or cannot be opened, is read without one).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, RunLock(Path(tmp)):
    ...     RunLock(Path(tmp))
    Traceback (most recent call last):
    bayesrc.errors.InputError: ...: another collector (pid ...) is writing this run directory
    """

    def __init__(self, run_dir: Path, *, shared: bool = False):
        self.path = run_dir / ".lock"
        self.fd = None
        try:
            self.fd = os.open(self.path, os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if shared:
                return
            raise InputError(f"cannot write to the run directory ({exc.strerror})", path=run_dir) from None
        try:
            fcntl.flock(self.fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError:
            what = _holder(self.fd, shared)
            os.close(self.fd)
            raise InputError(f"{what} this run directory", path=run_dir) from None
        if not shared:
            try:
                os.ftruncate(self.fd, 0)
                os.pwrite(self.fd, str(os.getpid()).encode(), 0)
            except OSError as exc:  # a full disk
                self.release()
                raise InputError(f"cannot write to the run directory ({exc.strerror})", path=run_dir) from None

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _holder(fd: int, shared: bool) -> str:
    """Who holds a run's lock that ``fd`` could not take: readers (a shared lock is free) or a collector."""
    if not shared:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return "a merge is reading"  # only readers hold it (the shared lock dies with fd)
        except OSError:
            pass
    pid = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
    return f"another collector (pid {pid}) is writing"


def check_writable(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the run directory ({exc.strerror})", path=run_dir) from None
    if not run_dir.is_dir():
        raise InputError("exists and is not a directory", path=run_dir)
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise InputError("run directory is not writable", path=run_dir)


# -- item selection --------------------------------------------------------------------
def parse_range(text: str, n_items: int) -> tuple[int, int]:
    """``"a:b"`` (0-based, end exclusive; either side may be empty) -> (a, b)."""
    m = re.fullmatch(r"\s*(\d*)\s*:\s*(\d*)\s*", text or "")
    if m is None:
        raise InputError(f"expected A:B, got {text!r}", field="items-range")
    a = int(m.group(1)) if m.group(1) else 0
    b = int(m.group(2)) if m.group(2) else n_items
    if not 0 <= a < b <= n_items:
        raise InputError(f"range {a}:{b} is outside the bank's {n_items} items", field="items-range")
    return a, b


def shard_range(shard: str, n_items: int) -> tuple[int, int]:
    """``"i/n"`` -> the i-th of n contiguous item ranges (0-based i)."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", shard or "")
    if m is None or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise InputError(f"expected I/N with 0 <= I < N, got {shard!r}", field="shard")
    i, n = int(m.group(1)), int(m.group(2))
    if n > n_items:
        raise InputError(f"{n} shards for {n_items} items", field="shard")
    return i * n_items // n, (i + 1) * n_items // n


def item_seeds(item: Item, k: int, *, stride: int | None = None, offset: int = 0, salt: int = 0) -> list[int]:
    """The K sampling seeds of an item (SPEC 6; :func:`bayesrc.data.seeds.sample_seeds`).

    Examples
    --------
    >>> from bayesrc.collect.bank import Item
    >>> item_seeds(Item(3, "q4", "math", "?", ("a", "b"), "A"), 4)
    [30, 31, 32, 33]
    """
    if stride is None and item.index >= ITEM_SLOTS:
        raise InputError(
            f"item {item.item_id!r} is number {item.index + 1:,} of its bank; "
            f"past {ITEM_SLOTS:,} items give --seed-stride",
            field="items",
        )
    return sample_seeds(item.index, k, stride=stride, offset=offset, salt=salt)


def version_pin(pins: dict) -> str:
    """What identifies a version for its seed salt: model file, templates, system prompt, label."""
    keys = (
        "model.label",
        "model.file_sha256",
        "model.chat_template_sha256",
        "prompt.template_sha256",
        "prompt.system_sha256",
    )
    return "|".join(f"{k}={pins.get(k)}" for k in keys)


# -- collection --------------------------------------------------------------------------
@dataclass
class RunResult:
    """What :func:`collect` did: the run directory, items and trials in it, items drawn by this call, wall and
    sampling seconds.

    Examples
    --------
    >>> res = collect("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10)  # doctest: +SKIP
    >>> res.n_trials / res.sample_seconds  # trials per second of this call  # doctest: +SKIP
    >>> res.run.tables["trials"].groupby("item_id")["is_correct"].mean()  # the whole run, validated  # doctest: +SKIP
    """

    run_dir: Path
    n_items: int
    n_trials: int
    n_new_items: int
    seconds: float  # whole call, including model load and hashing
    sample_seconds: float = 0.0  # drawing the new trials only (for trials/s)
    # server engine: this call's retried requests by fault kind
    server_retries: dict[str, int] = field(default_factory=dict)

    @property
    def trials_path(self) -> Path:
        return self.run_dir / "trials.parquet"

    @property
    def run(self) -> CollectedRun:
        """The run directory as one validated object (:func:`bayesrc.load` of it: record, pins, tables)."""
        return CollectedRun.load(self.run_dir)

    def trials(self) -> pd.DataFrame:
        return read_run_trials(self.run_dir)


def part_path(run_dir: Path, index: int) -> Path:
    return run_dir / "parts" / f"item-{index:06d}.parquet"


def frame_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), buf)
    return buf.getvalue()


def trial_rows(item: Item, samples, *, label: str, engine: str, answer: str = "first") -> pd.DataFrame:
    """An item's samples as trial rows, each response's answer read under the card's rule
    (``answer``: :func:`extract_answer`)."""
    recs = []
    for s in samples:
        ex = extract_answer(s.response, item.letters, answer)
        recs.append(
            {
                "item_id": item.item_id,
                "domain": item.domain,
                "model": label,
                "k": s.k,
                "seed": s.seed,
                "response": s.response,
                "extracted": ex.answer,
                "correct_answer": item.answer,
                "is_correct": None if ex.answer is None else ex.answer == item.answer,
                "is_missing": ex.answer is None,
                "item_index": item.index,
                "thinking": ex.thinking,
                "n_tokens": s.n_tokens,
                "finish": s.finish,
                "engine": engine,
            }
        )
    df = pd.DataFrame.from_records(recs, columns=list(TRIAL_COLUMNS) + list(EXTRA_COLUMNS))
    df["is_correct"] = df["is_correct"].astype("boolean")
    df["seed"] = df["seed"].astype("int64")
    return df


def done_items(run_dir: Path) -> set[int]:
    """Item indices whose part file is complete (temporary files are ignored)."""
    parts = Path(run_dir) / "parts"
    if not parts.is_dir():
        return set()
    return {int(m.group(1)) for p in parts.iterdir() if (m := _PART.match(p.name))}


def pending_items(run_dir: Path, selected, max_items: int | None = None) -> list:
    """The selected items without a complete part, in bank order; the first ``max_items`` of them if given."""
    done = done_items(run_dir)
    pending = [it for it in selected if it.index not in done]
    return pending if max_items is None else pending[:max_items]


def write_part(run_dir: Path, index: int, frame: pd.DataFrame) -> None:
    """Journal one finished item: its part, written whole or not at all (:func:`~bayesrc.io.atomic_write_bytes`)."""
    atomic_write_bytes(part_path(run_dir, index), frame_bytes(frame))


def read_parts(run_dir: Path, indices=None) -> pd.DataFrame:
    parts = Path(run_dir) / "parts"
    want = sorted(done_items(run_dir) if indices is None else indices)
    frames = [read_parquet(part_path(Path(run_dir), i)) for i in want]  # a damaged part is one InputError naming it
    if not frames:
        return pd.DataFrame(columns=list(TRIAL_COLUMNS) + list(EXTRA_COLUMNS))
    del parts
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values([c for c in ("item_index", "k") if c in df], kind="stable").reset_index(drop=True)


def read_run_trials(run_dir: str | Path) -> pd.DataFrame:
    """All trials of a run: ``trials.parquet`` if the run completed, else the journal parts.

    Examples
    --------
    >>> read_run_trials("runs/v1").groupby("item_id")["is_correct"].mean()  # doctest: +SKIP
    """
    run_dir = Path(run_dir)
    if (run_dir / "trials.parquet").exists():
        return read_parquet(run_dir / "trials.parquet")
    return read_parts(run_dir)


def progress_bar(total: int, enabled: bool, unit: str = "trial"):
    return tqdm(total=total, unit=unit, disable=not enabled, dynamic_ncols=True, file=sys.stderr, smoothing=0.1)


def check_sampling_args(
    *, k: int, seed_stride: int | None, temperature: float, seed_rule: str, items_range=None, shard: str | None = None
) -> None:
    """The checks every engine makes before touching a run directory (:class:`InputError`, exit 2)."""
    if k < 1:
        raise InputError(f"must be >= 1, got {k}", field="k")
    if seed_rule not in SEED_RULES:
        raise InputError(f"must be one of {', '.join(SEED_RULES)}, got {seed_rule!r}", field="seed_rule")
    if seed_stride is not None and k > seed_stride:
        raise InputError(
            f"K = {k} exceeds the seed stride {seed_stride}: "
            "seeds of neighbouring items would collide (raise --seed-stride)",
            field="k",
        )
    if seed_stride is None and k > MAX_K:
        raise InputError(
            f"K = {k} is above the {MAX_K:,} the default seed rule lays out; give --seed-stride (at least K)", field="k"
        )
    if not 0.0 <= temperature <= 5.0:
        raise InputError(f"must be in [0, 5], got {temperature}", field="temperature")
    if items_range is not None and shard is not None:
        raise InputError("give --items-range or --shard, not both", field="shard")


def select_range(n_items: int, items_range=None, shard: str | None = None) -> tuple[int, int]:
    """The bank slice ``[start, stop)`` a run collects: a shard ``i/n``, a range ``a:b`` (text or pair), or all."""
    if shard:
        return shard_range(shard, n_items)
    if isinstance(items_range, str):
        return parse_range(items_range, n_items)
    return tuple(items_range) if items_range else (0, n_items)


def existing_record(run_dir: Path, resume: bool) -> dict | None:
    """The run record to resume (None for a new run); refuses a used folder without ``resume``.
    Call under :class:`RunLock`."""
    record = read_run_record(run_dir) if (run_dir / "run.json").exists() else None
    if record is not None and not resume:
        raise InputError(
            "run directory already holds a run; pass --resume to continue it or choose another --out", path=run_dir
        )
    if record is None and not resume and done_items(run_dir):
        raise InputError("run directory holds trial parts but no run.json; choose another --out", path=run_dir)
    return record


def check_resume_pins(record: dict | None, pins: dict, run_dir: Path) -> None:
    """A resumed run must have the pins it started with (SPEC 6)."""
    if record is None:
        return
    old = record.get("pins", {})
    diff = [f for f in sorted(set(pins) | set(old)) if pins.get(f) != old.get(f)]
    if diff:
        raise InputError(
            f"cannot resume: settings differ from the run's pins in {', '.join(diff)}", path=run_dir / "run.json"
        )


def finished(run_dir: Path, record: dict | None, selected, outputs: tuple[str, ...]) -> bool:
    """Whether a resumed run is already complete: its record says so, every selected item has
    its part and its ``outputs`` are written. Such a run is left exactly as it is (nothing to
    draw, nothing rewritten, not even its record), so re-running a finished command changes no byte."""
    if record is None or record.get("status") != "complete" or not all((run_dir / name).is_file() for name in outputs):
        return False
    return {it.index for it in selected} <= done_items(run_dir)


def run_times(record: dict | None) -> dict:
    """``started_at`` (kept from the first start) and ``resumed_at`` (one stamp per resume) for a run's ``info``."""
    old = (record or {}).get("info", {})
    return {
        "started_at": old.get("started_at", now_utc()),
        "resumed_at": (old.get("resumed_at", []) + [now_utc()]) if record is not None else [],
    }


def begin_run(run_dir: Path, pins: dict, info: dict) -> None:
    """Mark the run running, make ``parts/`` and remove temp files a killed writer left."""
    write_run_record(run_dir, "running", pins, info)
    (run_dir / "parts").mkdir(exist_ok=True)
    for pattern in (
        "parts/.*.tmp",
        ".run.json.*.tmp",
        ".trials.parquet.*.tmp",
        ".dist.parquet.*.tmp",
        ".items_exact.parquet.*.tmp",
    ):
        for stale in run_dir.glob(pattern):
            stale.unlink(missing_ok=True)


def end_run(run_dir: Path, selected, pins: dict, info: dict, *, per_item: int, outputs) -> int:
    """Write the run's outputs once every selected item has its part, and the final record; returns items done.

    ``outputs(parts) -> {file name: frame}``: what a complete run writes (``trials.parquet``, or the
    exact engine's tables); ``per_item`` trials per item (0 for the exact engine).
    """
    n_done = len(done_items(run_dir) & {it.index for it in selected})
    complete = n_done == len(selected)
    if complete:
        for name, frame in outputs(read_parts(run_dir, [it.index for it in selected])).items():
            atomic_write_bytes(run_dir / name, frame_bytes(frame))
        info["finished_at"] = now_utc()
        status = "complete"
    else:
        status = "running"
    write_run_record(run_dir, status, pins, info, n_items_done=n_done, n_trials=n_done * per_item)
    return n_done


# -- the lifecycle, one for every engine ---------------------------------------------------
class DrawStopped(InputError):
    """An engine that cannot go on mid-run (a server that stays down): :func:`run_collection`
    records how far the run got, then raises it again saying so (exit 2, resumable)."""


class OpenedRun(Protocol):
    """A run opened under its lock, ready to draw: all :func:`run_collection` needs of an engine.

    ``pins`` and ``info`` make the run record; ``selected`` are the run's items; ``outputs`` the
    files a complete run writes, made from its parts by ``compact``; ``per_item`` trials per item
    (0: answer distributions); ``retries`` requests retried by fault kind (a server's; else empty).
    ``draw(pending, write, progress)`` draws the pending items and calls ``write(item, frame)``
    as each is complete.
    """

    pins: dict
    info: dict
    selected: list
    outputs: tuple[str, ...]
    per_item: int
    retries: dict[str, int]

    def draw(self, pending: list, write: Callable[[Item, pd.DataFrame], None], progress: bool) -> None: ...

    def compact(self, parts: pd.DataFrame) -> dict[str, pd.DataFrame]: ...


def draw_jobs(
    engine: Engine,
    jobs: Iterable[ItemJob],
    pending: list,
    write: Callable[[Item, pd.DataFrame], None],
    frame: Callable[[Item, object], pd.DataFrame],
    *,
    per_item: int,
    progress: bool,
    unit: str = "trial",
) -> None:
    """The one drawing loop of every run (an :class:`OpenedRun`'s ``draw``): ``engine.draw_items(jobs)``
    (the :class:`~bayesrc.collect.engines.Engine` protocol), each ``pending`` item's result stored as
    ``write(item, frame(item, result))`` as soon as it is complete, then the engine closed.

    ``jobs`` may hold items beyond ``pending`` (a batch's members outside the range or already
    done): they are drawn, not written. The progress bar counts ``per_item`` ``unit`` per item.

    Examples
    --------
    >>> draw_jobs(engine, jobs, pending, write, trial_frame, per_item=10, progress=False)  # doctest: +SKIP
    """
    by_index = {it.index: it for it in pending}
    bar = progress_bar(len(pending) * per_item, progress, unit=unit)
    try:
        for index, result in engine.draw_items(jobs):
            if index in by_index:
                write(by_index[index], frame(by_index[index], result))
                bar.update(per_item)
    finally:
        bar.close()
        engine.close()


def run_collection(
    run_dir: Path,
    open_run: Callable[[dict | None], OpenedRun],
    *,
    resume: bool,
    progress: bool = False,
    max_items: int | None = None,
) -> RunResult:
    """Collect into ``run_dir`` with the run ``open_run(record)`` opens (``record``: the one resumed, or None).

    The same steps for every engine: refuse an unwritable folder, take the lock, check a resumed
    run's pins, leave a finished run as it is, mark the run running, draw the pending items
    into the journal (``max_items`` at most), then write the outputs and the final record.
    Validation happens before the record is written, so a refused run leaves nothing behind.

    Examples
    --------
    >>> run_collection(Path("runs/v1"), lambda record: my_opened_run, resume=False)  # doctest: +SKIP
    """
    t0 = time.monotonic()
    check_writable(run_dir)
    with RunLock(run_dir):
        record = existing_record(run_dir, resume)
        run = open_run(record)
        check_resume_pins(record, run.pins, run_dir)
        n_items = len(run.selected)
        if finished(run_dir, record, run.selected, run.outputs):
            return RunResult(run_dir, n_items, n_items * run.per_item, 0, time.monotonic() - t0)
        begin_run(run_dir, run.pins, run.info)
        pending = pending_items(run_dir, run.selected, max_items)
        end = lambda: end_run(run_dir, run.selected, run.pins, run.info, per_item=run.per_item, outputs=run.compact)  # noqa: E731
        t_sample = time.monotonic()
        try:
            run.draw(pending, lambda it, frame: write_part(run_dir, it.index, frame), progress)
        except DrawStopped as exc:  # the items finished so far are journalled; the record says how far the run got
            raise type(exc)(
                f"{exc.message}; the run stopped with {end()} of {n_items} items done, --resume continues it",
                path=exc.path,
                field=exc.field,
            ) from None
        t_sample = time.monotonic() - t_sample
        n_done = end()
    return RunResult(
        run_dir,
        n_done,
        n_done * run.per_item,
        len(pending),
        time.monotonic() - t0,
        t_sample,
        server_retries=dict(run.retries),
    )
