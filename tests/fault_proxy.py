"""A fault-injecting HTTP proxy in front of a real server (standard library only).

:class:`FaultProxy` listens on 127.0.0.1 and forwards each HTTP/1.1 request to the upstream
server (one request per connection: it asks the upstream to close after the answer, as
urllib's client does), except at the request ordinals of its ``schedule``, where it injects
one fault instead (:data:`FAULTS`):

``reset``
    the request is read, then the connection is reset (TCP RST); the server never sees it.
``500``, ``503``, ``429``
    an HTTP error with a JSON error body, the server never sees the request.
``429+retry-after``
    429 with ``Retry-After: RETRY_AFTER_S``.
``truncated-503``
    503 whose error body is cut short (a short read of an error).
``timeout``
    the proxy holds the connection ``stall_s`` seconds (longer than the client's timeout)
    without answering, then closes it.
``truncated``
    the server's real answer cut in half: headers with the full ``Content-Length``, half
    the body, then the connection closes (a short read).
``cut-json``
    the same half body, but with a ``Content-Length`` that matches it: a complete HTTP
    response whose JSON is cut off.
``error-200``
    HTTP 200 with a JSON error object instead of an answer.
``restart``
    a server restart: the listening socket closes and every open connection (this one and
    any in flight) is reset; for ``down_s`` seconds connections are refused, then the proxy
    listens on the same port again.

Only requests whose path starts with one of ``paths`` (default: all) are counted and may be
faulted; the others are forwarded as they are. Besides the schedule, ``broken_from`` (from a request on, every
request gets one fault, or ``"down"``: nothing listens) models a server that stays broken or down until
:meth:`FaultProxy.repair`. Request ordinals count requests the proxy read (refused
connections are not requests), so a retried request has its own ordinal.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Mapping

FAULTS = (
    "reset",
    "500",
    "503",
    "429",
    "429+retry-after",
    "truncated-503",
    "timeout",
    "truncated",
    "cut-json",
    "error-200",
    "restart",
)
RETRY_AFTER_S = 2  # what ``429+retry-after`` asks for: longer than the client's first back-off, so honouring it shows
_STATUS_TEXT = {200: "OK", 429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def fault_schedule(seed: int, n_requests: int, counts: Mapping[str, int], *, gap: int = 2) -> dict[int, str]:
    """Seeded fault points: request ordinal -> fault, ``counts[kind]`` of each among the first ``n_requests``,
    at least ``gap`` ordinals apart.

    ``n_requests`` should not exceed the requests of a clean run, so every point is reached
    (a faulted run makes more requests, never fewer). With one request in flight a retry is
    the next request, so ``gap >= 2`` never faults a request twice in a row; with more in
    flight it makes that rare.

    Examples
    --------
    >>> s = fault_schedule(33, 20, {"reset": 2, "503": 1})
    >>> (sorted(Counter(s.values()).items()), all(0 <= n < 20 for n in s),
    ...  min(b - a for a, b in zip(sorted(s), sorted(s)[1:])) >= 2)
    ([('503', 1), ('reset', 2)], True, True)
    """
    kinds = [kind for kind in FAULTS for _ in range(counts.get(kind, 0))]
    unknown = set(counts) - set(FAULTS)
    slots = n_requests - (gap - 1) * (len(kinds) - 1)  # the points minus the gaps they need
    if unknown or (kinds and slots < len(kinds)):
        raise ValueError(f"cannot place {counts} {gap} apart in {n_requests} requests (faults: {', '.join(FAULTS)})")
    rng = random.Random(seed)
    rng.shuffle(kinds)
    points = [p + (gap - 1) * i for i, p in enumerate(sorted(rng.sample(range(slots), len(kinds))))] if kinds else []
    return dict(zip(points, kinds, strict=True))


def split_message(data: bytes) -> tuple[bytes, bytes]:
    """An HTTP message's head (through the blank line) and body."""
    head, sep, body = data.partition(b"\r\n\r\n")
    return head + sep, body


def content_length(head: bytes) -> int:
    """The ``Content-Length`` of a message head (0 when absent)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def with_header(head: bytes, name: str, value: str) -> bytes:
    """``head`` with header ``name`` set to ``value`` (replacing any it had)."""
    lines = [
        ln
        for ln in head.rstrip(b"\r\n").split(b"\r\n")
        if ln.partition(b":")[0].strip().lower() != name.lower().encode()
    ]
    return b"\r\n".join([*lines, f"{name}: {value}".encode()]) + b"\r\n\r\n"


def response(status: int, body: dict, headers: Mapping[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 response with a JSON body that closes its connection."""
    data = json.dumps(body).encode()
    lines = [
        f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        "Connection: close",
    ]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def injected_response(fault: str) -> bytes | None:
    """The canned answer of an HTTP-level fault (None for the others)."""
    error = {"error": {"message": f"injected fault: {fault}", "type": "server_error"}}
    if fault in ("500", "503", "429"):
        return response(int(fault), error)
    if fault == "429+retry-after":
        return response(429, error, {"Retry-After": str(RETRY_AFTER_S)})
    if fault == "error-200":
        return response(200, error)
    if fault == "truncated-503":
        return cut(response(503, error), keep_length=True)
    return None


def cut(answer: bytes, *, keep_length: bool) -> bytes:
    """The upstream ``answer`` with half its body: the header's ``Content-Length`` kept (a short read) or made to
    match."""
    head, body = split_message(answer)
    half = body[: len(body) // 2]
    return (head if keep_length else with_header(head, "Content-Length", str(len(half)))) + half


def reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP RST (SO_LINGER 0) instead of an orderly FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def read_message(sock: socket.socket, *, until_eof: bool) -> bytes:
    """One HTTP message from ``sock``: head and ``Content-Length`` body, or everything until EOF (``until_eof``)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    if until_eof:
        while chunk := sock.recv(65536):
            data += chunk
        return data
    head, body = split_message(data)
    need = content_length(head)
    while len(body) < need and (chunk := sock.recv(65536)):
        body += chunk
    return head + body


class FaultProxy:
    """A threaded TCP proxy that forwards HTTP requests to ``upstream`` and injects ``schedule``'s faults.

    Parameters
    ----------
    upstream : str
        The real server, ``http://HOST:PORT``.
    schedule : mapping of int to str
        Request ordinal (0 = the first request read) -> fault (:data:`FAULTS`).
    stall_s : float
        How long a ``timeout`` fault holds its connection (longer than the client's timeout).
    down_s : float
        How long a ``restart`` refuses connections.
    paths : tuple of str, optional
        Only requests whose path starts with one of these are counted and faulted (default: all).
    broken_from : (int, str), optional
        From this request ordinal on every counted request gets this fault, or, for ``"down"``,
        nothing listens any more (a server that stays broken or down) until :meth:`repair`.

    Examples
    --------
    >>> with FaultProxy("http://127.0.0.1:8080", {0: "503", 3: "restart"}) as proxy:  # doctest: +SKIP
    ...     collect_server(card, bank, "runs/x", base_url=proxy.url, k=3)
    ...     proxy.injected
    Counter({'503': 1, 'restart': 1})
    """

    def __init__(
        self,
        upstream: str,
        schedule: Mapping[int, str] | None = None,
        *,
        stall_s: float = 6.0,
        down_s: float = 3.0,
        paths: tuple[str, ...] | None = None,
        broken_from: tuple[int, str] | None = None,
    ):
        host, _, port = upstream.removeprefix("http://").rstrip("/").partition(":")
        self.upstream = (host, int(port))
        self.schedule = dict(schedule or {})
        self.stall_s, self.down_s, self.paths, self.broken_from = stall_s, down_s, paths, broken_from
        self.requests = 0  # requests read
        self.forwarded = 0  # answered by the upstream server, whole or cut
        self.injected: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()  # open client and upstream sockets (a restart resets them)
        self._stop = threading.Event()
        self._down_until = 0.0  # monotonic time until which nothing listens
        self._held_down = False
        self._listener: socket.socket | None = None
        self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, reset every open connection and wait for the accept loop."""
        self._stop.set()
        self._drop_all()
        self._thread.join(5)
        if self._listener is not None:
            self._listener.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def repair(self) -> None:
        """The server is back: no more ``broken_from`` faults, and the proxy listens again (same port) if it was
        down."""
        with self._lock:
            self.broken_from, self._held_down = None, False

    # -- inside -----------------------------------------------------------------------
    def _listen(self, port: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the same port again right after a restart
        sock.bind(("127.0.0.1", port))
        sock.listen(64)
        sock.settimeout(0.05)  # the accept loop notices a restart or stop within this
        self._listener = sock

    def _is_down(self) -> bool:
        return self._held_down or time.monotonic() < self._down_until

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            down = self._is_down()
            if down or self._listener is None:
                if down and self._listener is not None:
                    self._listener.close()  # connections are refused from now on (and queued ones reset)
                    self._listener = None
                if not down:
                    self._listen(self.port)
                time.sleep(0.02)
                continue
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(None)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _track(self, sock: socket.socket, live: bool) -> None:
        with self._lock:
            (self._live.add if live else self._live.discard)(sock)

    def _drop_all(self) -> None:
        with self._lock:
            live, self._live = list(self._live), set()
        for sock in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _next_fault(self, request: bytes) -> str | None:
        """The fault for ``request`` (None: forward it), counting it when its path is one of ``paths``."""
        path = request.split(b" ", 2)[1].decode("latin-1") if request.count(b" ") >= 2 else ""
        if self.paths is not None and not path.startswith(self.paths):
            return None
        with self._lock:
            n, self.requests = self.requests, self.requests + 1
            broken = self.broken_from is not None and n >= self.broken_from[0]
            fault = self.broken_from[1] if broken else self.schedule.get(n)
            if fault is not None:
                self.injected[fault] += 1
            if fault == "down":
                self._held_down = True
            return fault

    def _serve(self, conn: socket.socket) -> None:
        self._track(conn, True)
        try:
            request = read_message(conn, until_eof=False)
            if not request or self._is_down():
                reset(conn)
                return
            self._answer(conn, request, self._next_fault(request))
        except OSError:  # the client went away, or a restart reset the connection
            pass
        finally:
            self._track(conn, False)
            conn.close()

    def _answer(self, conn: socket.socket, request: bytes, fault: str | None) -> None:
        canned = None if fault is None else injected_response(fault)
        if canned is not None:
            conn.sendall(canned)
        elif fault == "reset":
            reset(conn)
        elif fault == "timeout":
            self._stop.wait(self.stall_s)
        # "down" was marked held down in _next_fault; a restart comes back after down_s
        elif fault in ("restart", "down"):
            with self._lock:
                self._down_until = (
                    max(self._down_until, time.monotonic() + self.down_s) if fault == "restart" else self._down_until
                )
            self._drop_all()
            reset(conn)
        else:
            answer = self._forward(request)
            if fault in ("truncated", "cut-json"):
                answer = cut(answer, keep_length=fault == "truncated")
            conn.sendall(answer)

    def _forward(self, request: bytes) -> bytes:
        """The upstream server's whole answer to ``request`` (asked to close the connection after it)."""
        head, body = split_message(request)
        up = socket.create_connection(self.upstream, timeout=300)
        self._track(up, True)
        try:
            up.sendall(with_header(head, "Connection", "close") + body)
            answer = read_message(up, until_eof=True)
        finally:
            self._track(up, False)
            up.close()
        with self._lock:
            self.forwarded += 1
        return answer
