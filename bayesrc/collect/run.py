"""Collection: seeded, resumable, crash-safe, pinned draws of a bank's trials into a run
directory (SPEC section 6; paper 003). The directory's layout, lock, journal and record are
:mod:`bayesrc.collect.rundir`'s; this module pins a run and runs an engine over its items.

Seeds: :func:`bayesrc.collect.rundir.item_seeds` (shards and resumed runs draw exactly the trials
of an uninterrupted run; the seed rules: :mod:`bayesrc.data.seeds`).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pandas as pd

from bayesrc.collect import exact as exact_mod
from bayesrc.collect.bank import Bank, load_bank
from bayesrc.collect.card import ModelCard, chat_template_text, load_card, prompt_blocks, resolve_model, sha256_text, shared_block
from bayesrc.collect.engines import SCHEMES, Model, Prompt, Sampling, check_items_per_batch, check_scheme, make_engine, runtime_info
from bayesrc.collect.rundir import (
    RunLock,
    RunResult,
    begin_run,
    check_resume_pins,
    check_sampling_args,
    check_writable,
    done_items,
    end_run,
    existing_record,
    frame_bytes,
    item_seeds,
    part_path,
    progress_bar,
    run_times,
    seed_stride_for,
    select_range,
    trial_rows,
    version_pin,
)
from bayesrc.collect.server import collect_server
from bayesrc.data.seeds import seed_salt
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes

PROMPT_BLOCKS = SCHEMES["blocks"]  # the default scheme's pin (runs from before the scheme option carry it)


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
    scheme: str = "blocks",
) -> dict:
    """The run's pins. An exact run (``epsilon`` given) has no K and no seeds, but its
    pruning threshold and expansion budget. The evaluation ``scheme`` is pinned as
    ``prompt.blocks`` (:data:`~bayesrc.collect.engines.SCHEMES`: the default's text is the
    one runs carried before the option, so they stay comparable).

    Examples
    --------
    >>> make_pins(card, model, bank, (0, 40), Sampling(), k=10, seed_stride=10, seed_offset=0, engine="fast", label="v1", scheme="whole")["prompt.blocks"]  # doctest: +SKIP
    'whole/1: ...'
    """
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
        "prompt.blocks": SCHEMES[scheme],
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
    seed_stride: int | None = None,
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
    scheme: str = "blocks",
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
    ``scheme`` is how each prompt is evaluated (local engines: fast, naive, exact):
    ``"blocks"`` (shared block's KV kept, own block decoded after it) or ``"whole"`` (the
    prompt in one piece on an emptied cache, as ``create_completion``); pinned as
    ``prompt.blocks``, since llama.cpp's logits depend on the batch split.
    Any K runs: the batched path draws K in chunks that fit llama.cpp's sequence limit.
    ``engine = "server"`` collects from an OpenAI-compatible endpoint instead of a local
    GGUF; ``server`` holds :func:`bayesrc.collect.server.collect_server`'s options
    (``base_url``, ``api_model``, ``concurrency``, ...).

    Examples
    --------
    >>> res = collect("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10, temperature=0.7)  # doctest: +SKIP
    >>> collect("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/v1", k=10, resume=True)  # after a crash  # doctest: +SKIP
    """
    items_per_batch = check_items_per_batch(items_per_batch)
    scheme = check_scheme(scheme)
    if items_per_batch != 1 and engine != "fast":
        raise InputError(f"several items per decode needs the fast engine, not {engine!r}", field="items_per_batch")
    if engine == "server":  # SPEC 9: same run directory, seeds, resume and lock; pins from the server
        if scheme != "blocks":
            raise InputError("the server evaluates prompts its own way; --scheme applies to the local engines (fast, naive, exact)", field="scheme")
        return collect_server(card, items, out, **(server or {}), k=k, temperature=temperature, resume=resume, items_range=items_range, shard=shard,
                              seed_stride=seed_stride, seed_offset=seed_offset, seed_rule=seed_rule, top_k=top_k, top_p=top_p, min_p=min_p,
                              label=label, progress=progress, max_items=max_items)  # fmt: skip
    t0 = time.monotonic()
    card = card if isinstance(card, ModelCard) else load_card(card)
    bank = items if isinstance(items, Bank) else load_bank(items)
    exact = engine == "exact"
    if exact:
        epsilon, max_expansions = _exact_args(epsilon, max_expansions)
        k = 1  # unused: no samples are drawn
    if threads is not None and threads < 1:
        raise InputError(f"must be >= 1, got {threads}", field="threads")
    seed_stride = seed_stride_for(k, seed_stride)
    check_sampling_args(k=k, seed_stride=seed_stride, temperature=temperature, seed_rule=seed_rule, items_range=items_range, shard=shard)
    rng = select_range(len(bank), items_range, shard)
    sampling = Sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, max_tokens=card.max_tokens)
    label = label or card.label

    run_dir = Path(out)
    check_writable(run_dir)
    with RunLock(run_dir):
        record = existing_record(run_dir, resume)
        model = _card_model(card, model, threads=threads, label=label)
        # Render and tokenize every prompt first: a bad template or an over-long item fails before any trial.
        selected = bank.items[rng[0] : rng[1]]
        shared, prompts = render_prompts(card, model, selected, max_tokens=sampling.max_tokens, bank_path=bank.path)
        pins = make_pins(card, model, bank, rng, sampling, k=k, seed_stride=seed_stride, seed_offset=seed_offset, engine=engine, label=label, shared=shared, seed_rule=seed_rule,
                         epsilon=epsilon if exact else None, max_expansions=max_expansions, items_per_batch=items_per_batch, scheme=scheme)  # fmt: skip
        salt = int(pins.get("model.seed_salt", 0))
        check_resume_pins(record, pins, run_dir)
        if exact:
            eng = exact_mod.ExactEngine(model, sampling, epsilon=epsilon, max_expansions=max_expansions, scheme=scheme)
        else:
            eng = make_engine(engine, model, sampling, items_per_batch=items_per_batch, scheme=scheme)
        info = _run_info(card, model, bank, record, prompts)
        begin_run(run_dir, pins, info)
        done = done_items(run_dir)
        pending = [it for it in selected if it.index not in done]
        if max_items is not None:
            pending = pending[:max_items]
        per_item = 1 if exact else k  # progress: items (exact) or trials
        bar = progress_bar(len(pending) * per_item, progress, unit="item" if exact else "trial")
        seeds_of = lambda it: item_seeds(it, k, stride=seed_stride, offset=seed_offset, salt=salt)  # noqa: E731

        def write(it, frame: pd.DataFrame) -> None:  # one item's part, then the progress bar
            atomic_write_bytes(part_path(run_dir, it.index), frame_bytes(frame))
            bar.update(per_item)

        t_sample = time.monotonic()
        try:
            if items_per_batch > 1:
                render = lambda extra: render_prompts(card, model, extra, max_tokens=sampling.max_tokens, bank_path=bank.path)[1]  # noqa: E731
                _sample_in_batches(eng, bank, pending, prompts, items_per_batch, seeds_of, render, lambda it, samples: write(it, trial_rows(it, samples, label=label, engine=engine)))
            for it in pending if items_per_batch == 1 else ():
                if exact:
                    write(it, exact_mod.item_frame(it, eng.item_distribution(prompts[it.index], it.letters)))
                else:
                    write(it, trial_rows(it, eng.sample_item(prompts[it.index], seeds_of(it), it.letters), label=label, engine=engine))
        finally:
            bar.close()
            if hasattr(eng, "close"):
                eng.close()  # the multi-sequence context, if any (the model stays loaded)
        t_sample = time.monotonic() - t_sample
        n_done = end_run(run_dir, selected, pins, info, per_item=0 if exact else k, outputs=_exact_outputs if exact else _trials_outputs)
    return RunResult(run_dir, n_done, 0 if exact else n_done * k, len(pending), time.monotonic() - t0, t_sample)


def _exact_args(epsilon: float, max_expansions: int | None) -> tuple[float, int]:
    """The exact engine's checked pruning threshold and per-item decode budget (default :data:`~bayesrc.collect.exact.DEFAULT_MAX_EXPANSIONS`)."""
    epsilon = exact_mod.check_epsilon(epsilon)
    max_expansions = exact_mod.DEFAULT_MAX_EXPANSIONS if max_expansions is None else int(max_expansions)
    if max_expansions < 1:
        raise InputError(f"must be >= 1, got {max_expansions}", field="max-expansions")
    return epsilon, max_expansions


def _card_model(card: ModelCard, model: Model | None, *, threads: int | None, label: str) -> Model:
    """The card's model: loaded here, or the caller's preloaded one once it is checked to be the card's file."""
    if model is None:
        return Model(resolve_model(card), n_ctx=card.n_ctx, n_batch=card.n_batch, n_gpu_layers=card.n_gpu_layers, n_threads=threads or card.n_threads, label=label)
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


def _sample_in_batches(eng, bank: Bank, pending: list, prompts: dict[int, Prompt], items_per_batch: int, seeds_of, render, write) -> None:
    """Sample the pending items ``items_per_batch`` at a time: the batch of bank index // N, whole.

    Batch-mates outside the range or already done are rendered (``render``) and evaluated but
    not written, so a batch's composition, and with it every trial, never depends on the range,
    shards or resume points. ``write(item, samples)`` stores one pending item's samples.
    """
    by_batch: dict[int, list] = {}
    for it in bank.items:  # fixed composition: bank index // N, whatever is selected or done
        by_batch.setdefault(it.index // items_per_batch, []).append(it)
    todo = {it.index for it in pending}
    for key in sorted({it.index // items_per_batch for it in pending}):
        members = by_batch[key]
        extra = [m for m in members if m.index not in prompts]
        if extra:  # batch-mates outside the range: evaluated, not written
            prompts.update(render(extra))
        batch = eng.sample_items([prompts[m.index] for m in members], [seeds_of(m) for m in members], [m.letters for m in members])
        for m, samples in zip(members, batch):
            if m.index in todo:
                write(m, samples)


def _trials_outputs(parts: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {"trials.parquet": parts}


def _exact_outputs(parts: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return dict(zip(("dist.parquet", "items_exact.parquet"), exact_mod.compact(parts)))
