"""Collection: seeded, resumable, crash-safe, pinned draws of a bank's trials into a run
directory (SPEC section 6; paper 003). The directory's layout, lock, journal and record are
:mod:`bayesrc.collect.rundir`'s; this module pins a run and runs an engine over its items.
A run's settings are one :class:`~bayesrc.collect.spec.RunSpec`, checked before anything
loads: :func:`collect` runs it, given as one object or as its fields (the server engine and
Ray's shards take the same object).

Seeds: :func:`bayesrc.collect.rundir.item_seeds` (shards and resumed runs draw exactly the trials
of an uninterrupted run; the seed rules: :mod:`bayesrc.data.seeds`).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bayesrc.collect import exact as exact_mod
from bayesrc.collect.bank import Bank, load_bank
from bayesrc.collect.card import (
    ModelCard,
    chat_template_text,
    load_card,
    prompt_blocks,
    resolve_model,
    sha256_text,
    shared_block,
)
from bayesrc.collect.engines import Engine, make_engine
from bayesrc.collect.model import Model, Prompt, runtime_info
from bayesrc.collect.rundir import RunResult, draw_jobs, run_collection, run_times, trial_rows
from bayesrc.collect.sampling import Sampling
from bayesrc.collect.server import collect_server
from bayesrc.collect.spec import RunSpec, as_spec, items_pins, pinned_salt, prompt_pins, salt_pins, sampling_pins
from bayesrc.data.provenance import SCHEMES
from bayesrc.errors import InputError

#: what a complete exact run writes (a sampling run: ``trials.parquet``)
EXACT_OUTPUTS = ("dist.parquet", "items_exact.parquet")
PROMPT_BLOCKS = SCHEMES["blocks"]  # the default scheme's pin (runs from before the scheme option carry it)


def make_pins(
    card: ModelCard,
    model: Model,
    bank: Bank,
    rng: tuple[int, int],
    sampling: Sampling,
    spec: RunSpec,
    *,
    label: str,
    shared: str = "",
) -> dict:
    """The run's pins. An exact run has no K and no seeds, but its pruning threshold and
    expansion budget. The evaluation ``scheme`` is pinned as ``prompt.blocks``
    (:data:`~bayesrc.data.provenance.SCHEMES`: the default's text is the one runs carried
    before the option, so they stay comparable).

    Examples
    --------
    >>> make_pins(  # doctest: +SKIP
    ...     card, model, bank, (0, 40), Sampling(), RunSpec(k=10, scheme="whole"), label="v1"
    ... )["prompt.blocks"]
    'whole/1: ...'
    """
    pins = {
        "model.label": label,
        "model.file_name": model.path.name,
        "model.file_sha256": model.sha256,
        "model.tokenizer_sha256": model.tokenizer_sha256,
        "model.chat_template_sha256": sha256_text(chat_template_text(card, model.gguf_chat_template)),
        **items_pins(bank, rng),
        **prompt_pins(card),
        "prompt.blocks": SCHEMES[spec.scheme],
        "prompt.shared_sha256": sha256_text(shared),
        **sampling_pins(spec, sampling),
        **_runtime_pins(card, model, spec.engine),
    }
    pins |= salt_pins(spec, pins)
    # batch shapes change the logits (like prompt.blocks); absent at 1, as before the option
    if spec.items_per_batch != 1:
        n = spec.items_per_batch
        pins["prompt.items_per_batch"] = (
            f"{n}: items i with the same i // {n} evaluated together "
            "(own blocks one decode each, continuations one decode per tree level), by index"
        )
    if spec.exact:
        pins |= {
            "sampling.k": None,
            "sampling.seed_rule": None,
            "sampling.epsilon": spec.epsilon,
            "sampling.max_expansions": spec.max_expansions,
        }
    return pins


def _runtime_pins(card: ModelCard, model: Model, engine: str) -> dict:
    """The llama.cpp build (tooling: changes what is measured) and how it ran (runtime: must match to resume)."""
    rt = runtime_info(model)
    return {
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


def render_prompts(
    card: ModelCard, model: Model, items, *, max_tokens: int, bank_path=None
) -> tuple[str, dict[int, Prompt]]:
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
            raise InputError(
                f"prompt is {len(prompt)} tokens; with max_tokens {max_tokens} it exceeds n_ctx {card.n_ctx} "
                "(raise runtime.n_ctx in the card)",
                path=bank_path,
                item=it.item_id,
            )
        prompts[it.index] = prompt
    return shared, prompts


def collect(
    card: str | Path | ModelCard,
    items: str | Path | Bank,
    out: str | Path,
    spec: RunSpec | None = None,
    *,
    resume: bool = False,
    model: Model | None = None,
    progress: bool = False,
    max_items: int | None = None,
    server: dict | None = None,
    **settings,
) -> RunResult:
    """Collect K samples per item (or, with the exact engine, each item's answer distribution) into the run
    directory ``out``.

    What is drawn is ``spec``, a :class:`~bayesrc.collect.spec.RunSpec` (every setting and its
    meaning is there), or its fields given here as keywords (``k=40, temperature=0.7``); not both.
    The settings are checked before anything is loaded. How this call runs: ``resume`` continues
    a run whose pins match; ``model`` reuses a loaded :class:`Model` (it must be the card's
    file); ``progress`` shows a bar; ``max_items`` stops after that many new items (to simulate
    interruptions); ``server`` holds :func:`bayesrc.collect.server.collect_server`'s endpoint
    options (``base_url``, ``api_model``, ``concurrency``, ...) for ``engine = "server"``.

    Every engine runs the same lifecycle (:func:`bayesrc.collect.rundir.run_collection`): lock
    the directory, load the model (or ask the server for its), render every prompt (a bad
    template or an over-long item fails before any trial), pin, draw the pending items into the
    journal and write the run's outputs once every item is done. Errors are
    :class:`InputError` (CLI exit 2). A sampling run writes ``trials.parquet``, an exact run
    ``dist.parquet`` and ``items_exact.parquet``.

    Examples
    --------
    >>> res = collect(  # doctest: +SKIP
    ...     "models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10, temperature=0.7
    ... )
    >>> collect(  # after a crash  # doctest: +SKIP
    ...     "models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10, resume=True
    ... )
    >>> collect(  # doctest: +SKIP
    ...     "models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v2", RunSpec(k=40, scheme="whole")
    ... )
    """
    spec = as_spec(spec, settings)
    if spec.engine == "server":  # SPEC 9: same run directory, seeds, resume and lock; pins from the server
        return collect_server(
            card, items, out, spec=spec, resume=resume, progress=progress, max_items=max_items, **(server or {})
        )
    card = card if isinstance(card, ModelCard) else load_card(card)
    if card.answer != "first":  # the local engines stop a sample once its first valid letter is decided
        raise InputError(
            f"answer = {card.answer!r} is read by the server engine only; "
            f"the {spec.engine} engine takes the first valid letter",
            path=card.card_path,
            field="prompt.answer",
        )
    bank = items if isinstance(items, Bank) else load_bank(items)
    rng = spec.item_range(len(bank))
    return run_collection(
        Path(out),
        lambda record: _open_local_run(card, bank, rng, spec, record, model),
        resume=resume,
        progress=progress,
        max_items=max_items,
    )


@dataclass
class _LocalRun:
    """A local run opened under its lock (an :class:`~bayesrc.collect.rundir.OpenedRun`): its spec,
    model, engine, card, items, rendered prompts, pins and record ``info``."""

    spec: RunSpec
    card: ModelCard
    bank: Bank
    model: Model
    engine: Engine
    sampling: Sampling
    label: str
    selected: list
    prompts: dict[int, Prompt]
    pins: dict
    info: dict
    retries: dict = field(default_factory=dict)  # a local engine sends no requests

    @property
    def outputs(self) -> tuple[str, ...]:
        return EXACT_OUTPUTS if self.spec.exact else ("trials.parquet",)

    @property
    def per_item(self) -> int:
        return self.spec.per_item

    def compact(self, parts: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """What a complete run writes: ``trials.parquet``, or the exact engine's two tables."""
        return dict(zip(EXACT_OUTPUTS, exact_mod.compact(parts))) if self.spec.exact else {"trials.parquet": parts}

    def render(self, items) -> dict[int, Prompt]:
        """More items' prompts (a batch's members outside the range)."""
        return render_prompts(
            self.card, self.model, items, max_tokens=self.sampling.max_tokens, bank_path=self.bank.path
        )[1]

    def draw(self, pending: list, write, progress: bool = False) -> None:
        """Draw the ``pending`` items with the run's engine (closed at the end); ``write(item, frame)`` stores
        each item's part: its trials (:func:`~bayesrc.collect.rundir.trial_rows`), or the exact engine's
        answer distribution (:func:`~bayesrc.collect.exact.item_frame`)."""
        unit, per_item = self.spec.progress_unit
        jobs = self.spec.jobs(_evaluated(self, pending), self.prompts, pinned_salt(self.pins))
        draw_jobs(self.engine, jobs, pending, write, self._frame, per_item=per_item, progress=progress, unit=unit)

    def _frame(self, item, result) -> pd.DataFrame:
        """An item's part from the engine's result for it."""
        if self.spec.exact:
            return exact_mod.item_frame(item, result)
        return trial_rows(item, result, label=self.label, engine=self.spec.engine)


def _open_local_run(
    card: ModelCard, bank: Bank, rng: tuple[int, int], spec: RunSpec, record: dict | None, model: Model | None
) -> _LocalRun:
    """Load (or check) the model, render the selected items' prompts, pin the run and make its engine."""
    label = spec.label or card.label
    sampling = spec.sampling(card.max_tokens)
    model = _card_model(card, model, threads=spec.threads, label=label)
    selected = bank.items[rng[0] : rng[1]]
    shared, prompts = render_prompts(card, model, selected, max_tokens=sampling.max_tokens, bank_path=bank.path)
    pins = make_pins(card, model, bank, rng, sampling, spec, label=label, shared=shared)
    # made before the record is written (holds no llama.cpp memory until it draws)
    engine = _local_engine(spec, model, sampling)
    return _LocalRun(
        spec,
        card,
        bank,
        model,
        engine,
        sampling,
        label,
        selected,
        prompts,
        pins,
        _run_info(card, model, bank, record, prompts),
    )


def _local_engine(spec: RunSpec, model: Model, sampling: Sampling):
    """The run's engine on its model: exact, or a sampling engine from :func:`make_engine`."""
    if spec.exact:
        return exact_mod.ExactEngine(
            model, sampling, epsilon=spec.epsilon, max_expansions=spec.max_expansions, scheme=spec.scheme
        )
    return make_engine(spec.engine, model, sampling, items_per_batch=spec.items_per_batch, scheme=spec.scheme)


def _card_model(card: ModelCard, model: Model | None, *, threads: int | None, label: str) -> Model:
    """The card's model: loaded here, or the caller's preloaded one once it is checked to be the card's file."""
    if model is None:
        return Model(
            resolve_model(card),
            n_ctx=card.n_ctx,
            n_batch=card.n_batch,
            n_gpu_layers=card.n_gpu_layers,
            n_threads=threads or card.n_threads,
            label=label,
        )
    if model.path.resolve() != resolve_model(card).resolve():
        raise InputError(f"preloaded model {model.path} is not the card's {card.path}", path=card.card_path)
    return model


def _run_info(card: ModelCard, model: Model, bank: Bank, record: dict | None, prompts: dict[int, Prompt]) -> dict:
    """The run record's ``info``: where the card, model and bank came from, host, times, threads (not pins)."""
    return {
        "card": str(card.card_path),
        "model_path": str(model.path),
        "bank_path": str(bank.path),
        "host": socket.gethostname(),
        **run_times(record),
        "n_threads": model.n_threads,
        "n_shared_tokens": len(next(iter(prompts.values())).shared) if prompts else None,
    }


def _evaluated(run: _LocalRun, pending: list):
    """The items the engine evaluates: the pending ones, or with ``items_per_batch`` N > 1 the whole batch
    (bank index // N) of each, in bank order.

    Batch-mates outside the range or already done are rendered (just before their batch) and
    evaluated but not written, so a batch's composition, and with it every trial, never depends
    on the range, shards or resume points.
    """
    n = run.spec.items_per_batch
    if n == 1:
        yield from pending
        return
    by_batch: dict[int, list] = {}
    for it in run.bank.items:  # fixed composition: bank index // N, whatever is selected or done
        by_batch.setdefault(it.index // n, []).append(it)
    for key in sorted({it.index // n for it in pending}):
        extra = [m for m in by_batch[key] if m.index not in run.prompts]
        if extra:  # batch-mates outside the range: evaluated, not written
            run.prompts.update(run.render(extra))
        yield from by_batch[key]
