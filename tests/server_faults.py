"""Server faults, counted: ``bayesrc collect --engine server`` through a :class:`~fault_proxy.FaultProxy`
in front of llama-cpp-python's real server, compared trial for trial with a clean run.

Used by tests/test_faults_server.py (a few seeded fault points) and benchmarks/faults.py (more).
Every collection is a real CLI process (``python -m bayesrc collect``), so an exit status, its
stderr and any traceback are what a user would see.

*lost*: a trial of the clean run missing or different after the faulted run (and its resume);
*duplicated*: a trial there twice, or one the clean run does not have; *tracebacks*: a CLI
process whose stderr holds a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from fault_proxy import FaultProxy, fault_schedule

from bayesrc.collect import read_run_trials
from bayesrc.collect.rundir import read_parts

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
# The client's --timeout in the faulted runs: above the slowest real answer on 2 loaded cores (a new item's prompt,
# about 6 s at worst, one request in flight), so that a timeout is the injected one (a "timeout" fault stalls 2 s
# longer).
TIMEOUT_S = 10.0
DOWN_S = 3.0  # a restart refuses connections this long: within the default back-off's 5 retries (0.5 + 1 + 2 s)
KEY = ["item_index", "k"]

#: the retry each injected fault should cost the client, by the kind the run record counts
CLIENT_KIND = {
    "reset": "connection reset",
    "500": "HTTP 500",
    "503": "HTTP 503",
    "429": "HTTP 429",
    "429+retry-after": "HTTP 429",
    "truncated-503": "HTTP 503",
    "timeout": "timeout",
    "truncated": "truncated body",
    "cut-json": "invalid JSON",
    "error-200": "body without an answer",
    "restart": "connection reset",
}


def collect_command(
    bank: Path,
    out: Path,
    url: str,
    *,
    k: int,
    retries: int = 5,
    concurrency: int = 1,
    timeout: float = TIMEOUT_S,
    api: str = "completions",
) -> list[str]:
    """``bayesrc collect --engine server`` of ``bank`` into ``out`` (always ``--resume``: the same command starts and
    continues a run)."""
    return [
        sys.executable,
        "-m",
        "bayesrc",
        "collect",
        "--model",
        str(CARD),
        "--items",
        str(bank),
        "--out",
        str(out),
        "--k",
        str(k),
        "--engine",
        "server",
        "--base-url",
        url,
        "--api",
        api,
        "--concurrency",
        str(concurrency),
        "--retries",
        str(retries),
        "--timeout",
        str(timeout),
        "--seed-rule",
        "shared",
        "--resume",
        "--no-progress",
    ]


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV, cwd=ROOT)


def sorted_trials(run_dir: Path) -> pd.DataFrame:
    """A run's trials (the compacted file, or its journal parts) sorted by item and sample."""
    return read_run_trials(run_dir).sort_values(KEY, kind="stable").reset_index(drop=True)


def lost_and_duplicated(reference: pd.DataFrame, trials: pd.DataFrame) -> tuple[int, int]:
    """Trials of ``reference`` missing from ``trials`` or different there, and trials there twice or not in
    ``reference``.

    Examples
    --------
    >>> ref = pd.DataFrame({"item_index": [0, 0, 1], "k": [0, 1, 0], "response": ["A", "B", "C"]})
    >>> lost_and_duplicated(ref, pd.concat([ref.iloc[[0, 0, 1]], ref.iloc[[2]].assign(response="D")]))
    (1, 1)
    """
    dup = int(trials.duplicated(KEY).sum())
    once = trials.drop_duplicates(KEY)
    merged = reference.merge(once, on=KEY, how="outer", suffixes=("", "_run"), indicator=True)
    extra = int((merged["_merge"] == "right_only").sum())
    both = merged[merged["_merge"] == "both"]
    cols = [c for c in reference.columns if c not in KEY]
    differs = pd.Series(False, index=both.index)
    for c in cols:
        a, b = both[c].astype(object), both[f"{c}_run"].astype(object)
        differs |= ~((a == b) | (a.isna() & b.isna()))
    return int((merged["_merge"] == "left_only").sum()) + int(differs.sum()), dup + extra


def is_one_clean_line(res: subprocess.CompletedProcess, url: str) -> bool:
    """Exit 2 with one ``bayesrc: error:`` line on stderr that names ``url``, and no traceback."""
    lines = res.stderr.strip().splitlines()
    return res.returncode == 2 and len(lines) == 1 and lines[0].startswith("bayesrc: error:") and url in lines[0]


def retries_of(run_dir: Path) -> Counter:
    """The retries the run record counts by fault kind (``info.retries``; none without a record)."""
    if not (run_dir / "run.json").exists():
        return Counter()
    return Counter(json.loads((run_dir / "run.json").read_text())["info"].get("retries") or {})


def journal_is_whole(run_dir: Path) -> bool:
    """Every journal part readable, and no temporary file left."""
    try:
        read_parts(run_dir)
    except Exception:  # a torn part (InputError) or anything else a reader raises: not whole
        return False
    return not list(run_dir.glob("**/.*.tmp"))


def transient_faults(
    upstream: str,
    bank: Path,
    out: Path,
    reference: pd.DataFrame,
    *,
    k: int,
    counts: Mapping[str, int],
    seed: int,
    concurrency: int = 1,
    timeout: float = TIMEOUT_S,
    gap: int = 2,
    api: str = "completions",
) -> dict:
    """One collection through a proxy that injects ``counts`` faults at seeded points of the ``/v1/`` requests
    (``concurrency`` requests in flight; :func:`fault_schedule` keeps the points ``gap`` requests apart).

    Returns the faults injected, the retries the run record and stderr report, and lost / duplicated /
    tracebacks against ``reference`` (the clean run's sorted trials).
    """
    # GET /v1/models (chat: the probe for n), then one request per trial
    n_requests = 1 + (api == "chat") + len(reference)
    schedule = fault_schedule(seed, n_requests, counts, gap=gap)
    with FaultProxy(upstream, schedule, stall_s=timeout + 2, down_s=DOWN_S, paths=("/v1/",)) as proxy:
        res = run(collect_command(bank, out, proxy.url, k=k, concurrency=concurrency, timeout=timeout, api=api))
    lost, dup = (
        lost_and_duplicated(reference, sorted_trials(out)) if (out / "trials.parquet").exists() else (len(reference), 0)
    )
    expected = Counter(CLIENT_KIND[f] for f in schedule.values())
    return {
        "exit": res.returncode,
        "stderr": res.stderr,
        "injected": dict(proxy.injected),
        "expected": expected,
        "retries": retries_of(out),
        "requests": proxy.requests,
        "lost": lost,
        "duplicated": dup,
        "tracebacks": int("Traceback" in res.stderr),
    }


def stays_broken(
    upstream: str,
    bank: Path,
    out: Path,
    reference: pd.DataFrame,
    *,
    k: int,
    fault: str,
    after: int,
    retries: int = 2,
    concurrency: int = 1,
) -> dict:
    """A server that breaks for good after ``after`` ``/v1/`` requests (``fault``: ``"500"``, or ``"down"``: refused);
    the run must stop with one clean line, exit 2 and a whole journal, and the same command, once the server is back,
    must complete it with the clean run's trials."""
    with FaultProxy(upstream, down_s=DOWN_S, paths=("/v1/",), broken_from=(after, fault)) as proxy:
        cmd = collect_command(bank, out, proxy.url, k=k, retries=retries, concurrency=concurrency)
        first = run(cmd)
        record = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
        whole = journal_is_whole(out)
        proxy.repair()
        second = run(cmd)
    lost, dup = (
        lost_and_duplicated(reference, sorted_trials(out)) if (out / "trials.parquet").exists() else (len(reference), 0)
    )
    return {
        "first": first,
        "second": second,
        "one_line": is_one_clean_line(first, proxy.url),
        "record": record,
        "journal_whole": whole,
        "injected": dict(proxy.injected),
        "retries": retries_of(out),
        "lost": lost,
        "duplicated": dup,
        "tracebacks": int("Traceback" in first.stderr) + int("Traceback" in second.stderr),
    }
