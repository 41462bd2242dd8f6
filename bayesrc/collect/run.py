"""Run directories: seeded, resumable, crash-safe, pinned collection (SPEC section 6; paper 003).

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
``seed = salt + seed_offset + i * seed_stride + k``, so shards and resumed runs draw
exactly the trials of an uninterrupted run. ``seed_rule="version"`` (default) derives
``salt`` from the version's pin (model file, chat template, prompt template and system
prompt hashes, label; pinned as ``model.seed_salt``), so two versions draw
independently; ``seed_rule="shared"`` uses salt 0, the reference study's
``i * 10 + k`` for every model (paper 001 section 2.1), which couples the versions'
draws (SPEC 2.1; :mod:`bayesrc.data.seeds`).
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from bayesrc.collect.bank import Bank, Item, load_bank
from bayesrc.collect.card import ModelCard, chat_template_text, load_card, prompt_blocks, resolve_model, sha256_text, shared_block
from bayesrc.collect.engines import Model, Prompt, Sampling, make_engine, runtime_info
from bayesrc.collect.extract import extract
from bayesrc.data.trials import TRIAL_COLUMNS
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes, atomic_write_json

RUN_FORMAT = "bayesrc-run/1"
EXTRA_COLUMNS = ("item_index", "thinking", "n_tokens", "finish", "engine")
_PART = re.compile(r"^item-(\d{6,})\.parquet$")


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- locking ---------------------------------------------------------------------------
class RunLock:
    """An exclusive ``flock`` on ``run_dir/.lock`` (released by the OS if the process dies)."""

    def __init__(self, run_dir: Path):
        import fcntl

        self.path = run_dir / ".lock"
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"cannot write to the run directory ({exc.strerror})", path=run_dir) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            raise InputError(f"another collector (pid {holder}) is writing this run directory", path=run_dir) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        import fcntl

        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _check_writable(run_dir: Path) -> None:
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


def item_seeds(item: Item, k: int, *, stride: int = 10, offset: int = 0, salt: int = 0) -> list[int]:
    """The K sampling seeds of an item: ``salt + offset + index * stride + k`` (SPEC 6; :func:`bayesrc.data.seeds.sample_seeds`).

    Examples
    --------
    >>> from bayesrc.collect.bank import Item
    >>> item_seeds(Item(3, "q4", "math", "?", ("a", "b"), "A"), 4)
    [30, 31, 32, 33]
    """
    from bayesrc.data.seeds import sample_seeds

    return sample_seeds(item.index, k, stride=stride, offset=offset, salt=salt)


def version_pin(pins: dict) -> str:
    """What identifies a version for its seed salt: model file, templates, system prompt, label."""
    keys = ("model.label", "model.file_sha256", "model.chat_template_sha256", "prompt.template_sha256", "prompt.system_sha256")
    return "|".join(f"{k}={pins.get(k)}" for k in keys)


# -- pins --------------------------------------------------------------------------------
# Category of each pin: "model" fields define a comparison and may differ; "items",
# "prompt", "sampling", "tooling" must match for two runs to be comparable; "runtime"
# must match to resume a run but does not change what is measured.
PIN_CATEGORIES = ("model", "items", "prompt", "sampling", "tooling", "runtime")


# How a prompt is cut and evaluated (engines.Prompt, card.prompt_blocks): changing it changes
# the tokens or the batch shapes, hence the logits, so it is a prompt pin.
PROMPT_BLOCKS = "shared+own/1: shared = rendered prompt up to the line break before the first item field, tokenised with BOS; own = the rest, tokenised without BOS; decoded as two batches, shared KV kept once per run"


def make_pins(
    card: ModelCard,
    model: Model,
    bank: Bank,
    rng: tuple[int, int],
    sampling: Sampling,
    *,
    k: int,
    seed_stride: int,
    seed_offset: int,
    engine: str,
    label: str,
    shared: str = "",
    seed_rule: str = "version",
    epsilon: float | None = None,
    max_expansions: int | None = None,
    items_per_batch: int = 1,
) -> dict:
    """The run's pins. An exact run (``epsilon`` given) has no K and no seeds, but its
    pruning threshold and expansion budget."""
    from bayesrc.data.seeds import seed_salt

    tmpl = chat_template_text(card, model.gguf_chat_template)
    rt = runtime_info(model)
    pins = {
        "model.label": label,
        "model.file_name": model.path.name,
        "model.file_sha256": model.sha256,
        "model.tokenizer_sha256": model.tokenizer_sha256,
        "model.chat_template_sha256": sha256_text(tmpl),
        "items.bank_sha256": bank.sha256,
        "items.n_bank": len(bank),
        "items.range": [rng[0], rng[1]],
        "prompt.format": card.format,
        "prompt.chat_format": card.chat_format,
        "prompt.template_sha256": sha256_text(card.template),
        "prompt.system_sha256": sha256_text(card.system),
        "prompt.blocks": PROMPT_BLOCKS,
        "prompt.shared_sha256": sha256_text(shared),
        "sampling.k": k,
        "sampling.temperature": sampling.temperature,
        "sampling.top_k": sampling.top_k,
        "sampling.top_p": sampling.top_p,
        "sampling.min_p": sampling.min_p,
        "sampling.typical_p": sampling.typical_p,
        "sampling.repeat_penalty": sampling.repeat_penalty,
        "sampling.max_tokens": sampling.max_tokens,
        "sampling.seed_rule": f"{seed_offset} + item_index * {seed_stride} + k",
        "tooling.llama_cpp_python": rt["llama_cpp_python"],
        "tooling.llama_cpp_lib_sha256": rt["llama_cpp_lib_sha256"],
        "tooling.backend": rt["backend"],
        "runtime.engine": engine,
        "runtime.n_ctx": card.n_ctx,
        "runtime.n_batch": card.n_batch,
        "runtime.n_gpu_layers": card.n_gpu_layers,
        "runtime.n_threads": model.n_threads,
        "runtime.llama_cpp_libs": rt["llama_cpp_libs"],
        "runtime.system_info": rt["system_info"],
    }
    if seed_rule == "version":
        pins["sampling.seed_rule"] = f"version: salt(model pin) + {seed_offset} + item_index * {seed_stride} + k"
        pins["model.seed_salt"] = seed_salt(version_pin(pins))
    if items_per_batch != 1:  # batch shapes change the logits (like prompt.blocks); absent at 1, as before the option
        pins["prompt.items_per_batch"] = (
            f"{items_per_batch}: items i with the same i // {items_per_batch} evaluated together (own blocks one decode each, continuations one decode per tree level), by index"
        )
    if epsilon is not None:
        pins.update({"sampling.k": None, "sampling.seed_rule": None, "sampling.epsilon": epsilon, "sampling.max_expansions": max_expansions})
    return pins


def _category(field: str) -> str:
    return field.split(".", 1)[0]


# -- collection --------------------------------------------------------------------------
@dataclass
class RunResult:
    """What :func:`collect` did: the run directory, items and trials in it, items drawn by this call, wall and sampling seconds.

    Examples
    --------
    >>> res = collect("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10)  # doctest: +SKIP
    >>> res.n_trials / res.sample_seconds  # trials per second of this call  # doctest: +SKIP
    """

    run_dir: Path
    n_items: int
    n_trials: int
    n_new_items: int
    seconds: float  # whole call, including model load and hashing
    sample_seconds: float = 0.0  # drawing the new trials only (for trials/s)

    @property
    def trials_path(self) -> Path:
        return self.run_dir / "trials.parquet"

    def trials(self) -> pd.DataFrame:
        return read_run_trials(self.run_dir)


def _part_path(run_dir: Path, index: int) -> Path:
    return run_dir / "parts" / f"item-{index:06d}.parquet"


def _frame_bytes(df: pd.DataFrame) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), buf)
    return buf.getvalue()


def _rows(item: Item, samples, *, label: str, engine: str) -> pd.DataFrame:
    recs = []
    for s in samples:
        ex = extract(s.response, item.letters)
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


def read_parts(run_dir: Path, indices=None) -> pd.DataFrame:
    parts = Path(run_dir) / "parts"
    want = sorted(done_items(run_dir) if indices is None else indices)
    frames = [pd.read_parquet(_part_path(Path(run_dir), i)) for i in want]
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
        return pd.read_parquet(run_dir / "trials.parquet")
    return read_parts(run_dir)


def read_run_record(run: str | Path) -> dict | None:
    """The run.json of a run directory (or of the directory holding a trials file); None if absent.

    Examples
    --------
    >>> read_run_record("runs/v1")["pins"]["sampling.k"]  # doctest: +SKIP
    10
    """
    run = Path(run)
    candidates = [run / "run.json"] if run.is_dir() else [run.parent / "run.json"] if run.name != "run.json" else [run]
    for c in candidates:
        if c.exists():
            try:
                return json.loads(c.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed run record ({exc.msg})", path=c, line=exc.lineno) from None
    return None


def render_prompts(card: ModelCard, model: Model, items, *, max_tokens: int, bank_path=None) -> tuple[str, dict[int, Prompt]]:
    """The shared block's text and each item's canonical :class:`Prompt`, by item index.

    Raises :class:`InputError` for a template that fails to render or a prompt that does not
    fit the context with ``max_tokens``.
    """
    bos = model.token_text(model.llm.token_bos()) if model.llm.token_bos() >= 0 else ""
    eos = model.token_text(model.llm.token_eos()) if model.llm.token_eos() >= 0 else ""
    kw = {"gguf_template": model.gguf_chat_template, "bos": bos, "eos": eos}
    shared = shared_block(card, **kw)
    prompts: dict[int, Prompt] = {}
    for it in items:
        prompt = model.prompt(*prompt_blocks(card, it, shared=shared, **kw))
        if len(prompt) + max_tokens > card.n_ctx:
            raise InputError(f"prompt is {len(prompt)} tokens; with max_tokens {max_tokens} it exceeds n_ctx {card.n_ctx} (raise runtime.n_ctx in the card)", path=bank_path, item=it.item_id)
        prompts[it.index] = prompt
    return shared, prompts


def _progress(total: int, enabled: bool, unit: str = "trial"):
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, disable=not enabled, dynamic_ncols=True, file=sys.stderr, smoothing=0.1)


def check_sampling_args(*, k: int, seed_stride: int, temperature: float, seed_rule: str, items_range=None, shard: str | None = None) -> None:
    """The checks every engine makes before touching a run directory (:class:`InputError`, exit 2)."""
    from bayesrc.data.seeds import SEED_RULES

    if k < 1:
        raise InputError(f"must be >= 1, got {k}", field="k")
    if seed_rule not in SEED_RULES:
        raise InputError(f"must be one of {', '.join(SEED_RULES)}, got {seed_rule!r}", field="seed_rule")
    if k > seed_stride:
        raise InputError(f"K = {k} exceeds the seed stride {seed_stride}: seeds of neighbouring items would collide (raise --seed-stride)", field="k")
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
    """The run record to resume (None for a new run); refuses a used folder without ``resume``. Call under :class:`RunLock`."""
    record = read_run_record(run_dir) if (run_dir / "run.json").exists() else None
    if record is not None and not resume:
        raise InputError("run directory already holds a run; pass --resume to continue it or choose another --out", path=run_dir)
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
        raise InputError(f"cannot resume: settings differ from the run's pins in {', '.join(diff)}", path=run_dir / "run.json")


def run_times(record: dict | None) -> dict:
    """``started_at`` (kept from the first start) and ``resumed_at`` (one stamp per resume) for a run's ``info``."""
    old = (record or {}).get("info", {})
    return {"started_at": old.get("started_at", now_utc()), "resumed_at": (old.get("resumed_at", []) + [now_utc()]) if record is not None else []}


def begin_run(run_dir: Path, pins: dict, info: dict) -> None:
    """Mark the run running, make ``parts/`` and remove temp files a killed writer left."""
    atomic_write_json(run_dir / "run.json", {"format": RUN_FORMAT, "status": "running", "pins": pins, "info": info})
    (run_dir / "parts").mkdir(exist_ok=True)
    for pattern in ("parts/.*.tmp", ".run.json.*.tmp", ".trials.parquet.*.tmp", ".dist.parquet.*.tmp", ".items_exact.parquet.*.tmp"):
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
            atomic_write_bytes(run_dir / name, _frame_bytes(frame))
        info["finished_at"] = now_utc()
        status = "complete"
    else:
        status = "running"
    atomic_write_json(run_dir / "run.json", {"format": RUN_FORMAT, "status": status, "pins": pins, "info": info, "n_items_done": n_done, "n_trials": n_done * per_item})
    return n_done


def collect(
    card: str | Path | ModelCard,
    items: str | Path | Bank,
    out: str | Path,
    *,
    k: int = 10,
    temperature: float = 0.7,
    engine: str = "fast",
    resume: bool = False,
    items_range: tuple[int, int] | str | None = None,
    shard: str | None = None,
    seed_stride: int = 10,
    seed_offset: int = 0,
    seed_rule: str = "version",
    top_k: int = 40,
    top_p: float = 0.95,
    min_p: float = 0.05,
    label: str | None = None,
    model: Model | None = None,
    progress: bool = False,
    max_items: int | None = None,
    threads: int | None = None,
    server: dict | None = None,
    epsilon: float = 1e-6,
    max_expansions: int | None = None,
    items_per_batch: int = 1,
) -> RunResult:
    """Collect K samples per item into the run directory ``out`` (see module docstring).

    ``engine="exact"`` computes each item's answer distribution instead
    (:mod:`bayesrc.collect.exact`; ``k`` is ignored, ``epsilon`` in (0, 0.1) is the pruning
    threshold, ``max_expansions`` the per-item decode budget) and writes ``dist.parquet``
    and ``items_exact.parquet`` instead of ``trials.parquet``.

    Validation (card, bank, sampling, run directory, lock, model load, pins on resume)
    happens before any trial is drawn; errors are :class:`InputError` (CLI exit 2).
    ``model`` lets callers reuse a loaded :class:`Model` (it must be the card's file).
    ``max_items`` stops after that many new items (used to simulate interruptions).
    ``threads`` overrides the card's ``n_threads`` (default: all physical cores; a worker
    that shares the machine with others passes its share). It is a runtime pin: it does
    not change the trials, but a resumed run must use the same.
    ``items_per_batch = N > 1`` (fast engine) evaluates the items whose bank index has the
    same ``index // N`` together, as separate sequences of one decode
    (:meth:`~bayesrc.collect.engines.FastEngine.sample_items`); a batch is always evaluated
    whole (members outside the range or already done are evaluated, not written), so item
    order, shards and resume points do not change a trial. It is a prompt pin.
    ``engine = "server"`` collects from an OpenAI-compatible endpoint instead of a local
    GGUF; ``server`` holds :func:`bayesrc.collect.server.collect_server`'s options
    (``base_url``, ``api_model``, ``concurrency``, ...).

    Examples
    --------
    >>> res = collect("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10, temperature=0.7)  # doctest: +SKIP
    >>> collect("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10, resume=True)  # after a crash  # doctest: +SKIP
    """
    from bayesrc.collect.engines import check_items_per_batch

    items_per_batch = check_items_per_batch(items_per_batch)
    if items_per_batch != 1 and engine != "fast":
        raise InputError(f"several items per decode needs the fast engine, not {engine!r}", field="items_per_batch")
    if engine == "server":  # SPEC 9: same run directory, seeds, resume and lock; pins from the server
        from bayesrc.collect.server import collect_server

        return collect_server(card, items, out, **(server or {}), k=k, temperature=temperature, resume=resume, items_range=items_range, shard=shard,
                              seed_stride=seed_stride, seed_offset=seed_offset, seed_rule=seed_rule, top_k=top_k, top_p=top_p, min_p=min_p,
                              label=label, progress=progress, max_items=max_items)  # fmt: skip
    t0 = time.monotonic()
    card = card if isinstance(card, ModelCard) else load_card(card)
    bank = items if isinstance(items, Bank) else load_bank(items)
    exact = engine == "exact"
    if exact:
        from bayesrc.collect import exact as exact_mod

        epsilon = exact_mod.check_epsilon(epsilon)
        max_expansions = exact_mod.DEFAULT_MAX_EXPANSIONS if max_expansions is None else int(max_expansions)
        if max_expansions < 1:
            raise InputError(f"must be >= 1, got {max_expansions}", field="max-expansions")
        k = 1  # unused: no samples are drawn
    if threads is not None and threads < 1:
        raise InputError(f"must be >= 1, got {threads}", field="threads")
    check_sampling_args(k=k, seed_stride=seed_stride, temperature=temperature, seed_rule=seed_rule, items_range=items_range, shard=shard)
    rng = select_range(len(bank), items_range, shard)
    from bayesrc.collect.engines import MAX_SEQ

    if 1 + items_per_batch * k > MAX_SEQ:
        raise InputError(f"{items_per_batch} items x K = {k} needs {1 + items_per_batch * k} KV sequences; llama.cpp holds at most {MAX_SEQ}", field="items_per_batch")
    sampling = Sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, max_tokens=card.max_tokens)
    label = label or card.label

    run_dir = Path(out)
    _check_writable(run_dir)
    with RunLock(run_dir):
        record = existing_record(run_dir, resume)
        if model is None:
            gguf = resolve_model(card)
            model = Model(gguf, n_ctx=card.n_ctx, n_batch=card.n_batch, n_gpu_layers=card.n_gpu_layers, n_threads=threads or card.n_threads, label=label)
        elif model.path.resolve() != resolve_model(card).resolve():
            raise InputError(f"preloaded model {model.path} is not the card's {card.path}", path=card.card_path)
        # Render and tokenize every prompt first: a bad template or an over-long item fails before any trial.
        selected = bank.items[rng[0] : rng[1]]
        shared, prompts = render_prompts(card, model, selected, max_tokens=sampling.max_tokens, bank_path=bank.path)
        pins = make_pins(card, model, bank, rng, sampling, k=k, seed_stride=seed_stride, seed_offset=seed_offset, engine=engine, label=label, shared=shared, seed_rule=seed_rule,
                         epsilon=epsilon if exact else None, max_expansions=max_expansions, items_per_batch=items_per_batch)  # fmt: skip
        salt = int(pins.get("model.seed_salt", 0))
        check_resume_pins(record, pins, run_dir)
        if exact:
            eng = exact_mod.ExactEngine(model, sampling, epsilon=epsilon, max_expansions=max_expansions)
        else:
            eng = make_engine(engine, model, sampling, items_per_batch=items_per_batch)
        info = {
            "card": str(card.card_path),
            "model_path": str(model.path),
            "bank_path": str(bank.path),
            "host": socket.gethostname(),
            **run_times(record),
            "n_threads": model.n_threads,
            "n_shared_tokens": len(next(iter(prompts.values())).shared) if prompts else None,
        }
        begin_run(run_dir, pins, info)
        done = done_items(run_dir)
        pending = [it for it in selected if it.index not in done]
        if max_items is not None:
            pending = pending[:max_items]
        per_item = 1 if exact else k  # progress: items (exact) or trials
        bar = _progress(len(pending) * per_item, progress, unit="item" if exact else "trial")
        t_sample = time.monotonic()
        try:
            if items_per_batch > 1:
                by_batch: dict[int, list] = {}
                for it in bank.items:  # fixed composition: bank index // N, whatever is selected or done
                    by_batch.setdefault(it.index // items_per_batch, []).append(it)
                todo = {it.index for it in pending}
                for key in sorted({it.index // items_per_batch for it in pending}):
                    members = by_batch[key]
                    extra = [m for m in members if m.index not in prompts]
                    if extra:  # batch-mates outside the range: evaluated, not written
                        prompts.update(render_prompts(card, model, extra, max_tokens=sampling.max_tokens, bank_path=bank.path)[1])
                    seeds = [item_seeds(m, k, stride=seed_stride, offset=seed_offset, salt=salt) for m in members]
                    batch = eng.sample_items([prompts[m.index] for m in members], seeds, [m.letters for m in members])
                    for m, samples in zip(members, batch):
                        if m.index in todo:
                            atomic_write_bytes(_part_path(run_dir, m.index), _frame_bytes(_rows(m, samples, label=label, engine=engine)))
                            bar.update(per_item)
            for it in pending if items_per_batch == 1 else ():
                if exact:
                    frame = exact_mod.item_frame(it, eng.item_distribution(prompts[it.index], it.letters))
                else:
                    samples = eng.sample_item(prompts[it.index], item_seeds(it, k, stride=seed_stride, offset=seed_offset, salt=salt), it.letters)
                    frame = _rows(it, samples, label=label, engine=engine)
                atomic_write_bytes(_part_path(run_dir, it.index), _frame_bytes(frame))
                bar.update(per_item)
        finally:
            bar.close()
            if hasattr(eng, "close"):
                eng.close()  # the multi-sequence context, if any (the model stays loaded)
        t_sample = time.monotonic() - t_sample
        if exact:
            outputs = lambda parts: dict(zip(("dist.parquet", "items_exact.parquet"), exact_mod.compact(parts)))  # noqa: E731
        else:
            outputs = lambda parts: {"trials.parquet": parts}  # noqa: E731
        n_done = end_run(run_dir, selected, pins, info, per_item=0 if exact else k, outputs=outputs)
    return RunResult(run_dir, n_done, 0 if exact else n_done * k, len(pending), time.monotonic() - t0, t_sample)
