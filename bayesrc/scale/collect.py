"""``collect --ray``: item shards as tasks on actors that hold a loaded model (SPEC section 8).

Layout: the run directory ``OUT`` holds ``ray.json`` (the shard plan, fixed by the first
run so ``--resume`` cuts the items the same way), one ordinary shard run per shard under
``OUT/shards/NNNN/`` (run.json + crash-safe parts, written by
:func:`bayesrc.collect.collect` on the actor, exactly as ``collect --shard`` writes them),
and, once every shard is complete, the merged ``run.json`` + ``trials.parquet`` written by
:func:`bayesrc.collect.merge_runs` (which checks that the shards' pins match).

Fault tolerance: each actor loads the model once and runs shard after shard. If an actor
dies (killed, node lost), its shard goes back to the queue and a new actor resumes it from
its parts: finished items are kept, the item in flight is redrawn with the same seeds, so
nothing is lost or duplicated. A run interrupted as a whole (driver killed, cluster gone)
continues with ``--resume``. Shard directories must be reachable by every worker (one
machine, or a shared filesystem on a multi-node cluster).
"""

from __future__ import annotations

import collections
import fcntl
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bayesrc.collect.bank import Bank, load_bank
from bayesrc.collect.card import ModelCard, load_card, resolve_model
from bayesrc.collect.model import Model, require_gpu_offload
from bayesrc.collect.pins import merge_runs
from bayesrc.collect.run import collect
from bayesrc.collect.rundir import RunLock, RunResult, check_writable, done_items, progress_bar, read_run_record
from bayesrc.collect.spec import RunSpec
from bayesrc.errors import BayesrcError, InputError
from bayesrc.io import atomic_write_json
from bayesrc.scale.cluster import import_ray, ray_session, unwrap

PLAN_FORMAT = "bayesrc-ray-plan/1"


@dataclass
class RayRunResult(RunResult):
    """:class:`RunResult` plus what the Ray run did (for trials/s and the benchmark).

    Examples
    --------
    >>> res = collect_ray("models/gemma.toml", "bank.jsonl", "runs/v1", workers=2, k=10)  # doctest: +SKIP
    >>> res.n_trials / res.seconds, res.retries  # doctest: +SKIP
    """

    n_shards: int = 0
    workers: int = 0
    retries: int = 0  # shard attempts lost with their actor and resubmitted
    actor_start_seconds: float = 0.0  # actors up, model loaded (not part of sample_seconds)
    cluster_seconds: float = 0.0  # connecting to / starting the cluster
    lost: list = field(default_factory=list)  # (shard, error) of each lost attempt


class ShardCollector:
    """Actor body: load the card's model once, then collect shard after shard with it."""

    def __init__(self, card: ModelCard, label: str | None, threads: int):
        self.pid, self.model, self.error = os.getpid(), None, None
        try:
            require_gpu_offload(card.n_gpu_layers, card.card_path)  # checked where the model runs
            # the actor reserves num_cpus = threads (_actor_options): its llama.cpp threads match that share
            self.model = Model(
                resolve_model(card),
                n_ctx=card.n_ctx,
                n_batch=card.n_batch,
                n_gpu_layers=card.n_gpu_layers,
                n_threads=threads,
                label=label or card.label,
            )
        except BayesrcError as exc:  # kept for ready(): a task error carries it to the driver intact
            self.error = exc

    def ready(self) -> int:
        if self.error is not None:
            raise self.error
        return self.pid

    def run(self, card: ModelCard, bank: Bank, shard_dir: str, spec: RunSpec) -> int:
        """Collect (resuming) the shard's items (``spec.items_range``) into ``shard_dir``: the same
        pipeline as a single-process run (:func:`~bayesrc.collect.run.collect`), so every engine works here."""
        _wait_for_lock(Path(shard_dir))
        return collect(card, bank, shard_dir, spec, resume=True, model=self.model).n_new_items


def _wait_for_lock(run_dir: Path, timeout: float = 120.0) -> None:
    """Wait while a collector of an interrupted driver still holds the shard (Ray is killing it)."""
    lock = run_dir / ".lock"
    deadline = time.monotonic() + timeout
    while lock.exists() and time.monotonic() < deadline:
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
        except OSError:
            time.sleep(0.2)
        finally:
            os.close(fd)


def plan_shards(rng: tuple[int, int], n_shards: int) -> list[tuple[int, int]]:
    """``n_shards`` contiguous, near-equal sub-ranges of ``rng`` (as ``--shard I/N`` cuts a bank)."""
    a, b = rng
    n = b - a
    return [(a + i * n // n_shards, a + (i + 1) * n // n_shards) for i in range(n_shards)]


def _shard_dir(out: Path, i: int) -> Path:
    return out / "shards" / f"{i:04d}"


def _shard_complete(path: Path, rng: tuple[int, int]) -> bool:
    rec = read_run_record(path) if (path / "run.json").exists() else None
    return rec is not None and rec.get("status") == "complete" and rec.get("pins", {}).get("items.range") == list(rng)


def _load_plan(out: Path, rng: tuple[int, int], n_shards: int, resume: bool) -> list[tuple[int, int]]:
    plan_path = out / "ray.json"
    if plan_path.exists():
        if not resume:
            raise InputError(
                "run directory already holds a Ray run; pass --resume to continue it or choose another --out", path=out
            )
        try:
            plan = json.loads(plan_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed shard plan ({exc.msg})", path=plan_path, line=exc.lineno) from None
        if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
            raise InputError(f"not a Ray shard plan (expected format {PLAN_FORMAT})", path=plan_path)
        if list(plan.get("items_range", [])) != list(rng):
            raise InputError(
                f"cannot resume: items range {rng[0]}:{rng[1]} differs from the run's {plan.get('items_range')}",
                path=plan_path,
            )
        return [tuple(r) for r in plan["shards"]]
    if (out / "run.json").exists():
        raise InputError(
            "run directory holds a single-process run; resume it without --ray or choose another --out", path=out
        )
    if done_items(out):
        raise InputError("run directory holds trial parts but no run.json; choose another --out", path=out)
    shards = plan_shards(rng, n_shards)
    atomic_write_json(plan_path, {"format": PLAN_FORMAT, "items_range": list(rng), "shards": [list(r) for r in shards]})
    return shards


def collect_ray(
    card: str | Path | ModelCard,
    items: str | Path | Bank,
    out: str | Path,
    *,
    workers: int = 2,
    address: str | None = None,
    shards: int | None = None,
    resume: bool = False,
    items_range: tuple[int, int] | str | None = None,
    progress: bool = False,
    max_retries: int = 3,
    label: str | None = None,
    spec: RunSpec | None = None,
    **settings,
) -> RayRunResult:
    """Collect like :func:`bayesrc.collect.collect`, with item shards on ``workers`` Ray actors.

    The run's settings are ``spec``, or :class:`~bayesrc.collect.spec.RunSpec` fields as
    keywords (``k``, ``temperature``, ``engine``, ``seed_rule``, ...), checked here before Ray
    starts; each shard runs the same spec on its items, so the merged run holds exactly the
    trials of a single-process run (same items, k, seeds, answers). ``shards`` (default
    ``4 * workers``, at most one per item) is fixed by the first run of ``out``. Actors ask
    for ``num_gpus=1`` when the card offloads layers (``runtime.n_gpu_layers != 0``), else
    ``num_cpus`` = the threads its model runs with (:func:`actor_threads`: ``threads`` of the
    spec, else ``runtime.n_threads``, else 1). An actor lost mid-run has its shard
    resumed on a new one (at most ``max_retries`` times per shard).

    Examples
    --------
    >>> res = collect_ray(  # doctest: +SKIP
    ...     "models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/big", k=10, workers=4
    ... )
    >>> res.n_trials, res.retries  # doctest: +SKIP
    """
    t0 = time.monotonic()
    if "shard" in settings or (spec is not None and spec.shard):
        raise InputError(
            "--ray cuts the items into shards itself; give --items-range instead of --shard", field="shard"
        )
    if workers < 1:
        raise InputError(f"must be >= 1, got {workers}", field="workers")
    spec = spec if spec is not None else RunSpec(items_range=items_range, label=label, **settings)
    card = card if isinstance(card, ModelCard) else load_card(card)
    bank = items if isinstance(items, Bank) else load_bank(items)
    rng = spec.item_range(len(bank))
    n_shards = max(1, min(rng[1] - rng[0], shards or 4 * workers))
    out = Path(out)
    check_writable(out)
    ray = import_ray()
    with RunLock(out):
        record = read_run_record(out) if (out / "run.json").exists() else None
        new_plan = not (out / "ray.json").exists()
        plan = _load_plan(out, rng, n_shards, resume)
        job = _ShardJob(card, bank, spec, [_shard_dir(out, i) for i in range(len(plan))], plan)
        done0 = job.items_done()
        res = RayRunResult(out, 0, 0, 0, 0.0, n_shards=len(plan), workers=workers)
        if record is not None and record.get("status") == "complete":  # resumed a finished run: nothing to do
            res.n_items, res.n_trials, res.seconds = record["n_items_done"], record["n_trials"], time.monotonic() - t0
            return res
        try:
            _run_shards(ray, job, res, address=address, max_retries=max_retries, progress=progress)
        except BayesrcError:
            if new_plan and job.items_done() == 0:  # refused before any trial: leave OUT as it was
                shutil.rmtree(out / "shards", ignore_errors=True)
                (out / "ray.json").unlink(missing_ok=True)
            raise
        # checks every shard's pins against the first; the lock is ours
        rec = read_run_record(merge_runs(job.dirs, out, lock_output=False))
    res.n_items, res.n_trials = rec["n_items_done"], rec["n_trials"]
    res.n_new_items = res.n_items - done0
    res.seconds = time.monotonic() - t0
    return res


@dataclass
class _ShardJob:
    """A Ray run's shards: what every actor collects (card, bank, spec) and each shard's directory and items."""

    card: ModelCard
    bank: Bank
    spec: RunSpec
    dirs: list[Path]
    plan: list[tuple[int, int]]

    def items_done(self) -> int:
        return sum(len(done_items(d) & set(range(*r))) for d, r in zip(self.dirs, self.plan))

    def todo(self) -> collections.deque:
        """Shards not yet complete, in plan order."""
        return collections.deque(i for i, (d, r) in enumerate(zip(self.dirs, self.plan)) if not _shard_complete(d, r))

    def submit(self, actor, i: int):
        """Shard ``i`` on ``actor``: the run's spec restricted to the shard's items."""
        return actor.run.remote(self.card, self.bank, str(self.dirs[i]), self.spec.for_range(self.plan[i]))


def actor_threads(card: ModelCard, spec: RunSpec) -> int:
    """An actor's llama.cpp threads: the run's ``threads`` (``--threads``), else the card's ``n_threads``, else 1.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> (
    ...     actor_threads(SimpleNamespace(n_threads=None), RunSpec()),
    ...     actor_threads(SimpleNamespace(n_threads=4), RunSpec(threads=2)),
    ... )
    (1, 2)
    """
    return spec.threads or card.n_threads or 1


def _actor_options(card: ModelCard, threads: int) -> dict:
    """An actor's resources: a GPU when the card offloads layers, else its threads as CPUs."""
    return {"num_gpus": 1, "num_cpus": 1} if card.n_gpu_layers != 0 else {"num_cpus": threads}


def _run_shards(
    ray, job: _ShardJob, res: RayRunResult, *, address: str | None, max_retries: int, progress: bool
) -> None:
    """Start the actors (each loads the model once) and run the pending shards on them; fills ``res``'s times
    and retries."""
    threads = actor_threads(job.card, job.spec)
    queue, opts = job.todo(), _actor_options(job.card, threads)
    unit, per_item = job.spec.progress_unit
    with ray_session(address, num_cpus=None if address else res.workers * opts["num_cpus"]) as session:
        res.cluster_seconds = session.startup_seconds
        actor_cls = ray.remote(max_restarts=0, **opts)(ShardCollector)
        bar = progress_bar(sum(b - a for a, b in job.plan) * per_item, progress, unit=unit)
        actors: list = []
        try:
            t_start = time.monotonic()
            actors += [actor_cls.remote(job.card, job.spec.label, threads) for _ in range(min(res.workers, len(queue)))]
            try:
                ray.get([a.ready.remote() for a in actors])
            except ray.exceptions.RayTaskError as exc:  # the model failed to load (bad card, no GPU build, ...)
                raise unwrap(exc) from None
            res.actor_start_seconds = time.monotonic() - t_start
            t_sample = time.monotonic()
            _drain(
                ray,
                job,
                queue,
                actors,
                lambda: actor_cls.remote(job.card, job.spec.label, threads),
                res,
                max_retries,
                lambda: _show(bar, job.items_done() * per_item),
            )
            res.sample_seconds = time.monotonic() - t_sample
        finally:
            bar.close()
            for a in actors:
                ray.kill(a)


def _show(bar, n: int) -> None:
    bar.n = n
    bar.refresh()


def _drain(
    ray, job: _ShardJob, queue: collections.deque, actors: list, new_actor, res: RayRunResult, max_retries: int, tick
) -> None:
    """Give each idle actor the next shard until every shard is done; a shard whose actor died goes
    back to the front of the queue on a new actor (appended to ``actors``), at most ``max_retries`` times."""
    attempts: collections.Counter = collections.Counter()
    idle, inflight = list(actors), {}
    while queue or inflight:
        while idle and queue:
            i, actor = queue.popleft(), idle.pop()
            inflight[job.submit(actor, i)] = (i, actor)
        ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.5)
        tick()
        for ref in ready:
            i, actor = inflight.pop(ref)
            try:
                ray.get(ref)
                idle.append(actor)
            except ray.exceptions.RayActorError as exc:  # actor or its node died: resume the shard elsewhere
                attempts[i] += 1
                res.retries += 1
                res.lost.append((i, type(exc).__name__))
                if attempts[i] > max_retries:
                    a, b = job.plan[i]
                    raise InputError(
                        f"shard {i} ({a}:{b}) lost its worker {attempts[i]} times; "
                        "its parts are kept, rerun with --resume",
                        path=job.dirs[i],
                    ) from None
                queue.appendleft(i)
                actors.append(new_actor())
                idle.append(actors[-1])
            except ray.exceptions.RayTaskError as exc:
                raise unwrap(exc) from None


def print_summary(res: RayRunResult, k: int, file=sys.stdout) -> None:
    rate = res.n_new_items * k / res.sample_seconds if res.sample_seconds > 0 else float("nan")
    print(
        f"{res.run_dir}: {res.n_trials} trials over {res.n_items} items "
        f"({res.n_new_items} new items, {rate:.1f} trials/s "
        f"on {res.workers} Ray workers, {res.n_shards} shards, {res.retries} retried; "
        f"cluster {res.cluster_seconds:.1f} s, "
        f"model load {res.actor_start_seconds:.1f} s)",
        file=file,
    )
