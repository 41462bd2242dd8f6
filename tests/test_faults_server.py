"""Server faults: ``bayesrc collect --engine server`` through a fault proxy (tests/fault_proxy.py) in
front of llama-cpp-python's real server on the Gemma GGUF, against a clean run on the same server.

Connection resets, HTTP 500 / 503 / 429 (with and without Retry-After, one with its error body cut
short), a timeout, bodies cut short or cut JSON, an error object sent with HTTP 200 and a restart,
each once at a seeded request of a 2-item, K = 10 run (one request in flight): the run completes with the clean run's
trials, its retries counted by kind in run.json and on stderr. A server that stays down
stops the run with one line (exit 2) and a whole journal; the same command completes it
once the server is back. The chat endpoint (``--api chat``) rides through the same faults. benchmarks/faults.py
runs the same harness (tests/server_faults.py) with more fault points.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import server_faults as sf
from fault_proxy import FAULTS, FaultProxy
from helpers import cli_in_process, llama_server

from bayesrc.collect import builtin_bank, load_card, resolve_model
from bayesrc.collect.server_client import ServerClient

K = 10  # 21 requests: room for the 11 faults, 2 requests apart
N_ITEMS = 2  # few items: on 2 loaded cores a new item's prompt costs seconds, a further sample half a second
SEED = 33
# The client's --timeout in the faulted runs (the proxy's injected stall lasts 2 s longer): every real answer here comes
# from a server that the clean run has warmed (about 0.2-0.5 s a sample, 1-1.5 s a new item's prompt on 2 loaded
# cores), so 5 s still marks only the injected stall as a timeout (a slow answer past it would only add a retry, and
# the timeout kind is counted "at least"); the harness's 10 s (sf.TIMEOUT_S) covers a cold server's first prompt too.
FAULT_TIMEOUT_S = 5.0


def _in_process(cmd: list[str]) -> subprocess.CompletedProcess:
    """``cmd`` (``python -m bayesrc ...``) run in this process: for the clean reference runs, whose trials are what
    matters; the faulted runs stay real processes (their exit status, stderr and any traceback are what a user sees)."""
    return cli_in_process(*cmd[cmd.index("bayesrc") + 1 :])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One llama-cpp-python server for the module (one thread: on a shared machine more only spin)."""
    pytest.importorskip("llama_cpp")
    with llama_server(
        resolve_model(load_card(sf.CARD)),
        tmp_path_factory.mktemp("server") / "server.log",
        n_threads=1,
        chat_format="gemma",
    ) as url:
        yield url


@pytest.fixture(scope="module")
def bank(tmp_path_factory) -> Path:
    return Path(builtin_bank(tmp_path_factory.mktemp("bank") / "bank.jsonl", n_items=N_ITEMS, seed=3))


@pytest.fixture(scope="module")
def reference(server, bank, tmp_path_factory):
    """The clean run: the same command straight to the server (the client's default timeout), its trials sorted by item
    and sample."""
    out = tmp_path_factory.mktemp("clean") / "run"
    res = _in_process(sf.collect_command(bank, out, server, k=K, timeout=120))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    trials = sf.sorted_trials(out)
    assert len(trials) == N_ITEMS * K and not sf.retries_of(out)
    return trials


def _each_fault_once(server, bank, out: Path, reference, api: str = "completions") -> dict:
    """Each fault of tests/fault_proxy.py once, at seeded requests, in a real collector process."""
    counts = dict.fromkeys(FAULTS, 1)
    return sf.transient_faults(
        server, bank, out, reference, k=K, counts=counts, seed=SEED, timeout=FAULT_TIMEOUT_S, api=api
    )


def test_every_transient_fault_once_then_the_clean_trials(server, bank, reference, tmp_path):
    """Each fault of tests/fault_proxy.py once, at seeded requests: exit 0, the clean trials, retries counted by
    kind."""
    s = _each_fault_once(server, bank, tmp_path / "run", reference)
    assert s["exit"] == 0, s["stderr"]
    assert s["injected"] == dict.fromkeys(FAULTS, 1)
    assert (s["lost"], s["duplicated"], s["tracebacks"]) == (0, 0, 0)
    retries, expected = s["retries"], s["expected"]
    # each injected fault cost at least its retry; HTTP errors and bad bodies exactly one (a restart also refuses and
    # resets requests in flight, and a loaded machine may time out a slow answer: those kinds are "at least")
    assert all(retries[kind] >= n for kind, n in expected.items()), (retries, expected)
    exact = ("HTTP 500", "HTTP 503", "HTTP 429", "invalid JSON", "body without an answer")
    assert {kind: retries[kind] for kind in exact} == {kind: expected[kind] for kind in exact}
    assert retries["connection refused"] >= 1  # the restart: nothing listened for a while
    # reported: run.json info.retries (asserted above) and one line on stderr with the same counts
    total = sum(retries.values())
    assert (
        s["stderr"].strip()
        == f"bayesrc: retried {total} requests: "
        + ", ".join(f"{k} {n}" for k, n in sorted(retries.items()))
        + " (run.json info.retries)"
    )
    assert total <= s["requests"]  # bounded: no request retried past --retries, or the run would have stopped


def test_chat_endpoint_rides_through_the_same_faults(server, bank, tmp_path):
    """--api chat: the same faults once each on /v1/chat/completions (the probe for n among the requests), against a
    clean chat run on the same server: exit 0, the clean trials, retries counted by kind."""
    clean = tmp_path / "clean"
    res = _in_process(sf.collect_command(bank, clean, server, k=K, timeout=120, api="chat"))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    reference = sf.sorted_trials(clean)
    s = _each_fault_once(server, bank, tmp_path / "run", reference, api="chat")
    assert s["exit"] == 0, s["stderr"]
    assert s["injected"] == dict.fromkeys(FAULTS, 1) and (s["lost"], s["duplicated"], s["tracebacks"]) == (0, 0, 0)
    exact = ("HTTP 500", "HTTP 503", "HTTP 429", "invalid JSON", "body without an answer")
    assert {kind: s["retries"][kind] for kind in exact} == {kind: s["expected"][kind] for kind in exact}


def test_a_server_that_stays_down_stops_cleanly_and_resumes(server, bank, reference, tmp_path):
    """After the first item and two more requests nothing listens any more: one line naming the URL, exit 2, a whole
    journal, no traceback; the same command once the server is back completes with the clean trials.
    (benchmarks/faults.py also runs a server that keeps answering HTTP 500.)"""
    out = tmp_path / "run"
    s = sf.stays_broken(server, bank, out, reference, k=K, fault="down", after=1 + K + 2)
    first = s["first"]
    assert s["one_line"], (first.returncode, first.stderr)
    assert "after 3 attempt(s)" in first.stderr and "--resume continues it" in first.stderr
    assert s["journal_whole"] and s["record"]["status"] == "running" and 0 < s["record"]["n_items_done"] < N_ITEMS
    assert s["second"].returncode == 0, s["second"].stderr
    assert (s["lost"], s["duplicated"], s["tracebacks"]) == (0, 0, 0)
    # the failing request's two retries (after the reset that took the server down, then after a refusal), kept in the
    # record across the resume
    assert s["retries"]["connection reset"] >= 1 and s["retries"]["connection refused"] >= 1


def test_retry_after_is_honoured(server):
    """A 429 with ``Retry-After: 2`` waits 2 s before the retry, one without waits the client's own back-off."""
    for fault, at_least, below in (("429+retry-after", 2.0, 10.0), ("429", 0.0, 1.5)):
        with FaultProxy(server, {0: fault}) as proxy:
            client = ServerClient(proxy.url, retries=1, backoff=0.05, timeout=30)
            start = time.monotonic()
            assert client.model_id() == "gemma-3-270m"
            took = time.monotonic() - start
        assert at_least <= took < below and client.retried == {"HTTP 429": 1}, (fault, took)
