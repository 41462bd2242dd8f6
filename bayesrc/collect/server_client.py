"""The server engine's HTTP side: a small OpenAI-compatible client (stdlib only) with bounded retries and
back-off, and the readers that tell an answer from a fault in what an endpoint sends back."""

from __future__ import annotations

import dataclasses
import email.utils
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

from bayesrc.collect.rundir import DrawStopped
from bayesrc.collect.sampling import Sampling
from bayesrc.errors import InputError

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# the fault kind of a JSON body that holds no answer (an error object, a foreign body)
NO_ANSWER = "body without an answer"
# seconds: the longest back-off, and the longest Retry-After honoured (a collection should not sleep for hours)
MAX_DELAY = 30.0


class ServerError(DrawStopped):
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
    bayesrc.collect.server_client.Retryable: an error in place of an answer: {"error": {"message": "busy"}}
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
    bayesrc.collect.server_client.Retryable: chat completion without choices[0].message.content: {"choices": ...}
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
