"""The ``server`` engine: collect from an OpenAI-compatible completions or chat endpoint (SPEC 9).

A model behind ``POST {base_url}/v1/completions`` (llama.cpp's server, llama-cpp-python's
``python -m llama_cpp.server``, vLLM, any compatible service) is collected like a local
GGUF, into the same run directory layout (:mod:`bayesrc.collect.run`): the card's prompt
(sent as text; the server adds BOS as ``Llama.create_completion`` does), one request per
trial with ``seed = seed(i, k)`` and the card's / CLI's sampling settings, ``concurrency``
requests in flight, bounded retries with exponential back-off (:class:`ServerClient`) on
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

import dataclasses
import email.utils
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
from bayesrc.collect.engines import Sample, Sampling
from bayesrc.collect.spec import RunSpec, as_spec, items_pins, pinned_salt, prompt_pins, salt_pins, sampling_pins
from bayesrc.errors import InputError

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
SERVER_APIS = ("completions", "chat")  # POST /v1/completions (the default) or /v1/chat/completions
# the fault kind of a JSON body that holds no answer (an error object, a foreign body)
NO_ANSWER = "body without an answer"
# seconds: the longest back-off, and the longest Retry-After honoured (a collection should not sleep for hours)
MAX_DELAY = 30.0


class ServerError(R.DrawStopped):
    """The endpoint refused or never answered a request (after retries): exit 2, the run stays resumable.

    ``status`` is the HTTP status of a refusal that is not worth retrying (404, 401, ...), None otherwise.
    """

    def __init__(self, message: str, *, status: int | None = None, **where) -> None:
        super().__init__(message, **where)
        self.status = status


class Retryable(Exception):
    """One failed attempt worth another: ``kind`` is what the run counts (``info.retries``), ``delay`` the wait
    the server asked for."""

    def __init__(self, kind: str, detail: str, delay: float | None = None) -> None:
        super().__init__(detail)
        self.kind, self.detail, self.delay = kind, detail, delay


def fault_kind(exc: BaseException) -> str:
    """The kind of a failed attempt's transport error, as counted in ``info.retries``.

    Examples
    --------
    >>> fault_kind(urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")))
    'connection refused'
    >>> fault_kind(http.client.IncompleteRead(b"{", 10))
    'truncated body'
    >>> fault_kind(TimeoutError("timed out"))
    'timeout'
    """
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, http.client.IncompleteRead):
        return "truncated body"
    # reset, aborted, broken pipe; RemoteDisconnected (closed before an answer) too
    if isinstance(exc, ConnectionError):
        return "connection reset"
    return "connection error"


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for (delta-seconds or an HTTP date), None when absent or unreadable.

    Examples
    --------
    >>> retry_after_seconds("3"), retry_after_seconds(None), retry_after_seconds("soon")
    (3.0, None, None)
    >>> retry_after_seconds("Thu, 01 Jan 1970 00:01:40 GMT", now=90.0)
    10.0
    """
    value = (value or "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, backoff: float, retry_after: float | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): ``backoff * 2**(attempt - 1)``, at least the
    server's ``Retry-After``, at most :data:`MAX_DELAY`.

    Examples
    --------
    >>> backoff_delay(1, 0.5), backoff_delay(3, 0.5), backoff_delay(1, 0.5, retry_after=2.0), backoff_delay(9, 0.5)
    (0.5, 2.0, 2.0, 30.0)
    """
    return min(MAX_DELAY, max(backoff * 2 ** (attempt - 1), retry_after or 0.0))


def completion_of(doc: object) -> dict:
    """The answer in a completions response: its text, finish reason, completion tokens and fingerprint.

    A body without ``choices[0].text`` (an error object sent with HTTP 200, a foreign
    response) is never an answer: :class:`Retryable`. Fields of the wrong type are dropped.

    Examples
    --------
    >>> completion_of({"choices": [{"text": " B", "finish_reason": "stop"}], "usage": {"completion_tokens": 1}})
    {'text': ' B', 'finish': 'stop', 'n_tokens': 1, 'fingerprint': None}
    >>> completion_of({"error": {"message": "busy"}})
    Traceback (most recent call last):
    ...
    bayesrc.collect.server.Retryable: an error in place of an answer: {"error": {"message": "busy"}}
    """
    choices = json_object(doc).get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("text"), str):
        raise Retryable(NO_ANSWER, f"completion without choices[0].text: {json.dumps(doc)[:200]}")
    usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
    n_tokens = usage.get("completion_tokens")
    finish, fingerprint = choice.get("finish_reason"), doc.get("system_fingerprint")
    return {
        "text": choice["text"],
        "finish": finish if isinstance(finish, str) else None,
        "n_tokens": n_tokens
        if isinstance(n_tokens, int) and not isinstance(n_tokens, bool) and n_tokens >= 0
        else None,
        "fingerprint": fingerprint if isinstance(fingerprint, str) else None,
    }


def chat_answers(doc: object) -> list[dict]:
    """The answers in a chat completions response, one per choice (``message.content``), each as
    :func:`completion_of` gives it.

    A body whose first choice has no ``message.content`` is no answer: :class:`Retryable`.

    Examples
    --------
    >>> chat_answers({"choices": [{"message": {"role": "assistant", "content": "B"}, "finish_reason": "stop"}]})
    [{'text': 'B', 'finish': 'stop', 'n_tokens': None, 'fingerprint': None}]
    >>> chat_answers({"choices": [{"message": {}}]})
    Traceback (most recent call last):
    ...
    bayesrc.collect.server.Retryable: chat completion without choices[0].message.content: {"choices": [{"message": {}}]}
    """
    choices = json_object(doc).get("choices")
    choices = choices if isinstance(choices, list) else []
    out = []
    for i, choice in enumerate(choices):
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise Retryable(NO_ANSWER, f"chat completion without choices[{i}].message.content: {json.dumps(doc)[:200]}")
        out.append(completion_of({**doc, "choices": [{**choice, "text": message["content"]}]}))
    if not out:
        raise Retryable(NO_ANSWER, f"chat completion without choices[0].message.content: {json.dumps(doc)[:200]}")
    return out


def model_listing(doc: object) -> list[dict]:
    """The entries of a ``GET /v1/models`` answer; a body without a ``data`` list is no listing: :class:`Retryable`.

    Examples
    --------
    >>> model_listing({"object": "list", "data": [{"id": "gemma-3-270m"}]})
    [{'id': 'gemma-3-270m'}]
    """
    data = json_object(doc).get("data")
    if not isinstance(data, list):
        raise Retryable(NO_ANSWER, f"model listing without a data list: {json.dumps(doc)[:200]}")
    return [m for m in data if isinstance(m, dict)]


def json_object(doc: object) -> dict:
    """``doc`` if it is a JSON object and no error object (some servers send one with HTTP 200);
    else :class:`Retryable`.

    Examples
    --------
    >>> json_object({"build_info": "b1"})
    {'build_info': 'b1'}
    """
    if not isinstance(doc, dict):
        raise Retryable(NO_ANSWER, f"expected a JSON object, got {json.dumps(doc)[:200]}")
    if "error" in doc:
        raise Retryable(NO_ANSWER, f"an error in place of an answer: {json.dumps(doc)[:200]}")
    return doc


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """An HTTP error's body on one short line; an error body cut off or reset is said so, never raised."""
    try:
        text = exc.read().decode("utf-8", "replace")
    except (http.client.HTTPException, OSError):
        text = "(error body cut off)"
    return " ".join(text.split())[:200]


@dataclass
class ServerClient:
    """A small OpenAI-compatible completions client (stdlib only) with bounded retries and back-off.

    ``retries`` further attempts after the first, sleeping :func:`backoff_delay` seconds
    between them, on connection errors (refused, reset), timeouts, HTTP 408 / 409 / 425 /
    429 / 5xx (honouring ``Retry-After``), bodies cut short or not JSON, and bodies without
    an answer. ``retried`` counts the retries by :func:`fault_kind` (thread-safe).
    """

    base_url: str
    api_model: str | None = None
    timeout: float = 120.0
    retries: int = 5
    backoff: float = 0.5
    api_key: str | None = None
    retried: Counter = field(default_factory=Counter, init=False)

    def __post_init__(self) -> None:
        url = self.base_url.rstrip("/")
        for suffix in ("/v1/completions", "/completions", "/v1"):
            if url.endswith(suffix):
                url = url[: -len(suffix)]
                break
        if not url.startswith(("http://", "https://")):
            raise InputError(f"expected an http(s) URL, got {self.base_url!r}", field="--base-url")
        if self.retries < 0:
            raise InputError(f"must be >= 0, got {self.retries}", field="--retries")
        self.root = url
        self._count_lock = threading.Lock()
        self._abandoned = threading.Event()

    def _request(self, method: str, path: str, body: dict | None = None, *, parse=json_object) -> dict:
        """``parse`` of the JSON answer to ``method path``, retried (bounded) while the failure is transient."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        last: Retryable | None = None
        tried = 0
        for attempt in range(self.retries + 1):
            if last is not None:
                if self._abandoned.wait(backoff_delay(attempt, self.backoff, last.delay)):
                    break
                with self._count_lock:
                    self.retried[last.kind] += 1
            tried += 1
            try:
                return parse(self._attempt(method, path, data))
            except Retryable as exc:
                last = exc
        raise ServerError(
            f"no answer from {path} after {tried} attempt(s): {last.detail}", path=self.root, field="--base-url"
        )

    def abandon(self) -> None:
        """Stop retrying (the run has failed): a request waiting to retry gives up at once."""
        self._abandoned.set()

    def _attempt(self, method: str, path: str, data: bytes | None) -> object:
        """One request: the decoded JSON body, :class:`Retryable` for a transient failure, :class:`ServerError`
        for a refusal."""
        headers = {"Content-Type": "application/json"} | (
            {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        )
        req = urllib.request.Request(self.root + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()  # a body shorter than its Content-Length raises IncompleteRead here
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            if exc.code not in RETRY_STATUS:
                raise ServerError(
                    f"HTTP {exc.code} from {path}: {detail}", status=exc.code, path=self.root, field="--base-url"
                ) from None
            raise Retryable(
                f"HTTP {exc.code}",
                f"HTTP {exc.code}: {detail}",
                retry_after_seconds((exc.headers or {}).get("Retry-After")),
            ) from None
        # URLError, refused, reset, timeout, IncompleteRead, a bad status line
        except (http.client.HTTPException, OSError) as exc:
            raise Retryable(fault_kind(exc), str(getattr(exc, "reason", exc)) or type(exc).__name__) from None
        try:
            return json.loads(raw)
        except ValueError:  # cut off, or not JSON at all (is this an OpenAI-compatible endpoint?); bad UTF-8 too
            raise Retryable(
                "invalid JSON",
                f"{path} did not return JSON ({len(raw)} bytes: {raw[:80]!r}; is this an OpenAI-compatible endpoint?)",
            ) from None

    def _get_optional(self, path: str) -> dict | None:
        """An endpoint only some servers have: None where the server refuses it (404, ...); transient faults are retried
        as for any request, so that a fault never changes what the run pins."""
        try:
            return self._request("GET", path)
        except ServerError as exc:
            if exc.status is None:
                raise
            return None

    def model_id(self) -> str:
        """The served model's id (``--api-model`` must be one of them when several are served)."""
        ids = [
            m["id"]
            for m in self._request("GET", "/v1/models", parse=model_listing)
            if isinstance(m.get("id"), str) and m["id"]
        ]
        if self.api_model is not None:
            if ids and self.api_model not in ids:
                raise InputError(
                    f"model {self.api_model!r} is not served here (served: {', '.join(ids)})",
                    path=self.root,
                    field="--api-model",
                )
            return self.api_model
        if not ids:
            raise InputError("GET /v1/models lists no model; pass --api-model", path=self.root, field="--api-model")
        if len(ids) > 1:
            raise InputError(
                f"{len(ids)} models served ({', '.join(ids)}); choose one with --api-model",
                path=self.root,
                field="--api-model",
            )
        return ids[0]

    def build_info(self) -> str | None:
        """What the server says about its build, where it says anything."""
        props = self._get_optional("/props")
        if props and props.get("build_info"):
            return str(props["build_info"])
        version = self._get_optional("/version")
        if version and version.get("version"):
            return f"version {version['version']}"
        return None

    def complete(self, model: str, prompt: str, seed: int, sampling: Sampling) -> dict:
        """One seeded completion: :func:`completion_of` its answer (retried until the body holds one, bounded)."""
        return self._request(
            "POST",
            "/v1/completions",
            {"model": model, "prompt": prompt, **sampling_body(sampling, seed)},
            parse=completion_of,
        )

    def chat(self, model: str, messages: list[dict], seed: int, sampling: Sampling, n: int = 1) -> list[dict]:
        """One seeded chat completion of ``n`` choices: :func:`chat_answers` (retried until the body holds ``n``,
        bounded)."""

        def parse(doc: object) -> list[dict]:
            answers = chat_answers(doc)
            if len(answers) < n:
                raise Retryable(NO_ANSWER, f"asked for {n} choices, got {len(answers)}")
            return answers[:n]

        return self._request(
            "POST",
            "/v1/chat/completions",
            {"model": model, "messages": messages, **sampling_body(sampling, seed, n)},
            parse=parse,
        )

    def honours_n(self, model: str, messages: list[dict], sampling: Sampling) -> bool:
        """Whether the chat endpoint answers a request for two choices with two (llama-cpp-python's server gives one;
        a server that refuses the request, HTTP 400 and the like, does not honour it either)."""
        probe = dataclasses.replace(sampling, max_tokens=1)
        try:
            answers = self._request(
                "POST",
                "/v1/chat/completions",
                {"model": model, "messages": messages, **sampling_body(probe, 0, 2)},
                parse=chat_answers,
            )
        except ServerError as exc:
            if exc.status is None:  # no answer at all: the run cannot start
                raise
            return False
        return len(answers) >= 2


def sampling_body(sampling: Sampling, seed: int, n: int = 1) -> dict:
    """The sampling fields of a (chat) completions request: the card's / CLI's settings, the seed, ``n`` choices.

    Examples
    --------
    >>> (
    ...     sampling_body(Sampling(temperature=0.7), 42)["seed"],
    ...     sampling_body(Sampling(), 1)["n"],
    ...     sampling_body(Sampling(), 1, 4)["n"],
    ... )
    (42, 1, 4)
    """
    return {
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "typical_p": sampling.typical_p,
        "repeat_penalty": sampling.repeat_penalty,
        "seed": seed,
        "n": n,
    }


class ServerEngine:
    """Draws an item's K samples as K seeded requests (or, ``per_request`` = K, one request of K choices),
    ``concurrency`` at a time."""

    name = "server"

    def __init__(
        self,
        client: ServerClient,
        model: str,
        sampling: Sampling,
        pool: ThreadPoolExecutor,
        api: str = "completions",
        per_request: int = 1,
    ):
        self.client, self.model, self.sampling, self.pool, self.api, self.per_request = (
            client,
            model,
            sampling,
            pool,
            api,
            per_request,
        )
        self.fingerprint: str | None = None

    def _requests(self, prompt: str | list[dict], seeds: list[int]) -> list:
        """An item's requests in flight, each a future of its ``(seed, answer)`` pairs: one request per seed, or
        (``per_request`` > 1) one request of K choices under the item's first seed."""
        if self.per_request > 1:
            return [self.pool.submit(self._choices, prompt, seeds)]
        return [self.pool.submit(self._one, prompt, s) for s in seeds]

    def _one(self, prompt: str | list[dict], seed: int) -> list[tuple[int, dict]]:
        r = (
            self.client.chat(self.model, prompt, seed, self.sampling)[0]
            if self.api == "chat"
            else self.client.complete(self.model, prompt, seed, self.sampling)
        )
        return [(seed, r)]

    def _choices(self, messages: list[dict], seeds: list[int]) -> list[tuple[int, dict]]:
        return [(seeds[0], r) for r in self.client.chat(self.model, messages, seeds[0], self.sampling, len(seeds))]

    def sample_items(self, prompts: dict[int, str | list[dict]], seeds: dict[int, list[int]]):
        """Yield ``(index, [Sample, ...])`` per item as its K requests complete (bank order).

        Only a few items are in flight at a time, so a failure loses little finished work.
        """
        order = list(prompts)
        ahead = max(2, 2 * self.pool._max_workers // max(1, len(next(iter(seeds.values()), [1]))) + 1)
        futures: dict[int, list] = {}

        def submit(i: int) -> None:
            futures[i] = self._requests(prompts[i], seeds[i])

        try:
            for j, i in enumerate(order):
                for nxt in order[j : j + ahead]:
                    if nxt not in futures:
                        submit(nxt)
                out = []
                for k, (seed, r) in enumerate(pair for fut in futures[i] for pair in fut.result()):
                    self.fingerprint = self.fingerprint or r["fingerprint"]
                    finish = "stop" if r["finish"] == "stop" else "length"
                    out.append(Sample(k, seed, r["text"], int(r["n_tokens"] or 0), finish))
                del futures[i]  # only now: a failure above must cancel this item's other requests too
                yield i, out
        except BaseException:
            self.client.abandon()  # the run stops: requests in flight give up instead of waiting out their retries
            raise
        finally:
            for futs in futures.values():
                for f in futs:
                    f.cancel()


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
        complete."""
        by_index, salt, k = {it.index: it for it in pending}, pinned_salt(self.pins), self.spec.k
        bar = R.progress_bar(len(pending) * k, progress)
        try:
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="bayesrc-server") as pool:
                eng = ServerEngine(self.client, self.model_id, self.sampling, pool, self.api, self.per_request)
                prompts, seeds = (
                    {i: self.prompts[i] for i in by_index},
                    {i: self.spec.seeds(it, salt) for i, it in by_index.items()},
                )
                for idx, samples in eng.sample_items(prompts, seeds):
                    write(
                        by_index[idx],
                        R.trial_rows(by_index[idx], samples, label=self.label, engine="server", answer=self.answer),
                    )
                    bar.update(k)
            self.info["system_fingerprint"] = eng.fingerprint
        finally:
            bar.close()
            self.info["retries"] = dict(self.earlier_retries + self.client.retried)


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
