"""The ``server`` engine: collect from an OpenAI-compatible completions or chat endpoint (SPEC 9).

A model behind ``POST {base_url}/v1/completions`` (llama.cpp's server, llama-cpp-python's
``python -m llama_cpp.server``, vLLM, any compatible service) is collected like a local
GGUF, into the same run directory layout (:mod:`bayesrc.collect.run`): the card's prompt
(sent as text; the server adds BOS as ``Llama.create_completion`` does), one request per
trial with ``seed = seed(i, k)`` and the card's / CLI's sampling settings, ``concurrency``
requests in flight, bounded retries with exponential back-off (:class:`~bayesrc.collect.server_client.ServerClient`) on
connection errors and timeouts, 408, 429 (honouring ``Retry-After``) and 5xx, bodies cut
short or not JSON and bodies without an answer (never taken for one), resume (the pins must
match), the collector lock, and crash-safe per-item parts. The run record counts the retries
by kind (``info.retries``, over every session of the run); a request still failing after its
retries stops the run with one line (exit 2) naming the endpoint, and ``--resume`` continues it.

Pins: instead of file hashes the run records what the server reports — the model id
(``GET /v1/models``; ``--api-model`` chooses among several), its build where the server
exposes one (llama.cpp ``GET /props`` ``build_info``, vLLM ``GET /version``) and the
``system_fingerprint`` of the first completion — plus the prompt, item and sampling pins
of a local run.

``api = "chat"`` (``--api chat``) speaks ``POST {base_url}/v1/chat/completions`` instead, as
hosted and chat-tuned servers expect: the card's system text and its rendered template become a
system and a user message, and the server applies its own chat template (pinned as
``runtime.server_api``; the card's ``chat_template`` is the server's business then, so it is not
pinned). Where the endpoint honours ``n`` (a probe for two choices at the run's start: vLLM and
hosted APIs do, llama-cpp-python's server does not) an item's K samples are one request of K
choices under the item's first seed, else one seeded request per sample, as with completions;
which is pinned (``runtime.server_samples_per_request``: K or 1), so a run resumes only as it began.

Whether a server run reproduces a local run trial by trial depends on the server:
llama-cpp-python's server builds the same sampler chain from the same seed, but it reuses
the KV cache of the previous request's prompt prefix, so its logits can differ from a
fresh evaluation in the last bits, and so can an occasional draw. The tests therefore
compare answer *distributions* (and report the share of identical trials).
"""

from __future__ import annotations

import socket
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bayesrc.collect import rundir as R  # the run directory every engine writes (R.begin_run, R.part_path, ...)
from bayesrc.collect.bank import Bank, load_bank
from bayesrc.collect.card import (
    ModelCard,
    build_prompt,
    chat_messages,
    chat_template_text,
    load_card,
    sha256_text,
)
from bayesrc.collect.sampling import Sampling
from bayesrc.collect.server_client import ServerClient
from bayesrc.collect.server_engine import ServerEngine
from bayesrc.collect.spec import RunSpec, as_spec, items_pins, pinned_salt, prompt_pins, salt_pins, sampling_pins
from bayesrc.errors import InputError

SERVER_APIS = ("completions", "chat")  # POST /v1/completions (the default) or /v1/chat/completions


def server_pins(
    card: ModelCard,
    bank: Bank,
    rng: tuple[int, int],
    sampling: Sampling,
    spec: RunSpec,
    *,
    label: str,
    model_id: str,
    build: str | None,
    api: str = "completions",
    per_request: int = 1,
) -> dict:
    """The run record's pins for a server run (same names as :func:`bayesrc.collect.run.make_pins` where they
    mean the same).

    ``seed_rule = "version"`` (default) salts the seeds with the version's pin (the server's
    model id standing in for the file hash), as local runs do, so two versions draw independently.

    Examples
    --------
    >>> server_pins(  # doctest: +SKIP
    ...     card, bank, (0, 4), Sampling(), RunSpec(k=6, engine="server"), label="srv", model_id="gemma", build=None
    ... )["runtime.engine"]
    'server'
    """
    pins = {
        "model.label": label,
        "model.server_model_id": model_id,
        "model.chat_template_sha256": None
        if api == "chat"
        else sha256_text(chat_template_text(card, None)),  # chat: the server's template
        **items_pins(bank, rng),
        **prompt_pins(card),
        **sampling_pins(spec, sampling),
        "tooling.server_build": build,
        "runtime.engine": "server",
    } | (
        {"runtime.server_api": "chat", "runtime.server_samples_per_request": per_request} if api == "chat" else {}
    )  # a completions run's pins stay as before
    return pins | salt_pins(spec, pins, f"|model.server_model_id={model_id}")


def collect_server(
    card: str | Path | ModelCard,
    items: str | Path | Bank,
    out: str | Path,
    *,
    base_url: str,
    api_model: str | None = None,
    api: str = "completions",
    concurrency: int = 4,
    retries: int = 5,
    backoff: float = 0.5,
    timeout: float = 120.0,
    resume: bool = False,
    progress: bool = False,
    max_items: int | None = None,
    spec: RunSpec | None = None,
    **settings,
):
    """Collect K samples per item from a completions endpoint into the run directory ``out``.

    Same layout, seeds, resume and lock as :func:`bayesrc.collect.collect`; the card's
    ``[model]`` file is not needed. The run's settings are ``spec``, or
    :class:`~bayesrc.collect.spec.RunSpec` fields as keywords (``k``, ``temperature``,
    ``seed_rule``, ...). ``api``: ``"completions"`` or ``"chat"`` (module docstring). Returns a
    :class:`bayesrc.collect.run.RunResult`.

    Examples
    --------
    >>> collect_server("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/srv",
    ...                base_url="http://127.0.0.1:8080", k=5)  # doctest: +SKIP
    """
    spec = as_spec(spec, settings if spec is not None else {"engine": "server", **settings})
    card = card if isinstance(card, ModelCard) else load_card(card)
    bank = items if isinstance(items, Bank) else load_bank(items)
    _check_server_args(card, concurrency, api, retries=retries, backoff=backoff, timeout=timeout)
    rng = spec.item_range(len(bank))
    client = ServerClient(base_url, api_model, timeout=timeout, retries=retries, backoff=backoff)
    open_run = lambda record: _ServerRun.open(client, card, bank, rng, spec, record, concurrency, api)  # noqa: E731
    return R.run_collection(Path(out), open_run, resume=resume, progress=progress, max_items=max_items)


@dataclass
class _ServerRun:
    """A server run opened under its lock (an :class:`~bayesrc.collect.rundir.OpenedRun`): the
    client, spec, selected items, their prompts, pins and record ``info``."""

    client: ServerClient
    spec: RunSpec
    sampling: Sampling
    model_id: str
    label: str
    concurrency: int
    api: str
    per_request: int  # samples per request: K where a chat endpoint honours n, else 1
    answer: str  # the card's extraction rule
    selected: list
    prompts: dict[int, str | list[dict]]
    pins: dict
    info: dict
    earlier_retries: Counter  # a resumed run's, from its record
    outputs: tuple[str, ...] = ("trials.parquet",)

    @classmethod
    def open(
        cls,
        client: ServerClient,
        card: ModelCard,
        bank: Bank,
        rng: tuple[int, int],
        spec: RunSpec,
        record: dict | None,
        concurrency: int,
        api: str,
    ) -> _ServerRun:
        """Ask the server for its model, pin the run and render the selected items' prompts or messages
        (a template that fails, fails here)."""
        sampling, label, model_id = spec.sampling(card.max_tokens), spec.label or card.label, client.model_id()
        selected = bank.items[rng[0] : rng[1]]
        prompts = {it.index: chat_messages(card, it) if api == "chat" else build_prompt(card, it) for it in selected}
        per_request = (
            spec.k
            if api == "chat"
            and spec.k > 1
            and selected
            and client.honours_n(model_id, prompts[selected[0].index], sampling)
            else 1
        )
        pins = server_pins(
            card,
            bank,
            rng,
            sampling,
            spec,
            label=label,
            model_id=model_id,
            build=client.build_info(),
            api=api,
            per_request=per_request,
        )
        info = {
            "card": str(card.card_path),
            "bank_path": str(bank.path),
            "host": socket.gethostname(),
            "base_url": client.root,
            "concurrency": concurrency,
            **R.run_times(record),
        }
        return cls(
            client,
            spec,
            sampling,
            model_id,
            label,
            concurrency,
            api,
            per_request,
            card.answer,
            selected,
            prompts,
            pins,
            info,
            recorded_retries(record),
        )

    @property
    def per_item(self) -> int:
        return self.spec.k

    @property
    def retries(self) -> dict[str, int]:
        """This call's retried requests by fault kind (the record's ``info.retries`` adds a resumed run's
        earlier ones)."""
        return dict(self.client.retried)

    def compact(self, parts):
        return {"trials.parquet": parts}

    def draw(self, pending: list, write, progress: bool = False) -> None:
        """Request the pending items' K samples each; ``write(item, frame)`` stores an item as soon as it is
        complete (:func:`~bayesrc.collect.rundir.draw_jobs`, the loop every run shares)."""
        unit, per_item = self.spec.progress_unit
        jobs = list(self.spec.jobs(pending, self.prompts, pinned_salt(self.pins)))
        try:
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="bayesrc-server") as pool:
                eng = ServerEngine(self.client, self.model_id, self.sampling, pool, self.api, self.per_request)
                R.draw_jobs(eng, jobs, pending, write, self._frame, per_item=per_item, progress=progress, unit=unit)
            self.info["system_fingerprint"] = eng.fingerprint
        finally:
            self.info["retries"] = dict(self.earlier_retries + self.client.retried)

    def _frame(self, item, samples):
        """An item's part: its trials, answers read by the card's rule."""
        return R.trial_rows(item, samples, label=self.label, engine="server", answer=self.answer)


def recorded_retries(record: dict | None) -> Counter:
    """The retries by fault kind that a resumed run's record holds (``info.retries``; kinds with a count that is
    not an integer dropped).

    Examples
    --------
    >>> recorded_retries({"info": {"retries": {"timeout": 2, "HTTP 503": "x"}}}), recorded_retries(None)
    (Counter({'timeout': 2}), Counter())
    """
    info = (record or {}).get("info")
    retries = info.get("retries") if isinstance(info, dict) else None
    return Counter(
        {k: v for k, v in retries.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
        if isinstance(retries, dict)
        else {}
    )


def _check_server_args(
    card: ModelCard, concurrency: int, api: str, *, retries: int, backoff: float, timeout: float
) -> None:
    """What a server run needs beyond the spec: the API, requests in flight, retries and waits, and a chat template
    it can render without the GGUF."""
    if api not in SERVER_APIS:
        raise InputError(f"expected one of {', '.join(SERVER_APIS)}, got {api!r}", field="--api")
    if concurrency < 1:
        raise InputError(f"must be >= 1, got {concurrency}", field="--concurrency")
    if retries < 0:  # the client checks it too; here it fails before the run directory is locked
        raise InputError(f"must be >= 0, got {retries}", field="--retries")
    if not timeout > 0 or not backoff >= 0:  # also refuses NaN
        raise InputError(f"expected a timeout > 0 and a back-off >= 0, got {timeout} and {backoff}", field="--timeout")
    if api == "completions" and card.format == "chat" and card.chat_template is None and card.chat_format == "gguf":
        raise InputError(
            "the server engine cannot read the GGUF's chat template: "
            "give the card a chat_template or a named chat_format",
            path=card.card_path,
            field="prompt.chat_format",
        )
