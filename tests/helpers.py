"""Process helpers shared by the tests that start real servers, clusters and browsers (tests/conftest.py puts
this folder on ``sys.path``): a free local port, stopping what a test started, by process id, llama-cpp-python's
server, and headless chromium."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOCS_HTML = DOCS / "_build" / "html"
DOCS_GENERATED = ("_build", "jupyter_execute", "api/generated", "notebooks")  # written by the docs build

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]  # the browser tests' headless chromium (report, docs)


def docs_sources() -> list[Path]:
    """What the documentation site is built from: the pages in docs/, the notebooks and the package's docstrings."""
    docs = [
        p
        for p in DOCS.rglob("*")
        if p.is_file() and not any(p.relative_to(DOCS).as_posix().startswith(g) for g in DOCS_GENERATED)
    ]
    return docs + sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "bayesrc").rglob("*.py"))


def docs_build_is_fresh(html: Path = DOCS_HTML) -> bool:
    """A build that passed with -W (``make docs`` touches ``.built-with-W`` after it) newer than every source."""
    done = html / ".built-with-W"
    return (
        (html / "index.html").is_file()
        and done.is_file()
        and done.stat().st_mtime >= max(p.stat().st_mtime for p in docs_sources())
    )


def cli_in_process(*args, capfd=None) -> subprocess.CompletedProcess:
    """``python -m bayesrc ARGS`` run by :func:`bayesrc.cli.main` in this process, without an interpreter start
    (~2 s): for the runs beside at least one real process of the same behaviour. Its output is captured at the file
    descriptors with pytest's ``capfd`` (a native library's writes too), else from Python's streams."""
    from bayesrc.cli import main  # deferred: helpers is imported by tests that never run the CLI

    argv = list(map(str, args))
    with contextlib.ExitStack() as stack:
        if capfd is None:
            out = stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
            err = stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
        else:
            capfd.readouterr()
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code
    got = capfd.readouterr() if capfd is not None else (out.getvalue(), err.getvalue())
    return subprocess.CompletedProcess(argv, code, *got)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(*procs: subprocess.Popen, group: bool = False, grace: float = 15) -> None:
    """Stop processes this session started: SIGTERM to all at once, SIGKILL to what is left after ``grace`` s.

    ``group=True`` for processes started with ``start_new_session=True`` (e.g. ``ray start --block``):
    their whole process group is signalled, and SIGKILLed at the end in any case so that nothing
    they spawned outlives them.
    """

    def send(p: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(p.pid, sig) if group else p.send_signal(sig)
        except ProcessLookupError:
            pass

    for p in procs:
        send(p, signal.SIGTERM)
    deadline = time.monotonic() + grace  # one grace period for all of them, not one each
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        if group or p.poll() is None:
            send(p, signal.SIGKILL)
            p.wait(5)


@contextmanager
def llama_server(
    gguf: Path,
    log: Path,
    *,
    alias: str = "gemma-3-270m",
    n_threads: int = 2,
    wait_s: float = 180,
    chat_format: str | None = None,
) -> Iterator[str]:
    """``python -m llama_cpp.server`` on ``gguf`` at a free port of 127.0.0.1, its output in ``log``; yields its base
    URL once ``GET /v1/models`` answers, and stops it (by process id) on exit. ``chat_format``: the template its chat
    endpoint renders messages with (llama-cpp-python's name; default: the GGUF's, else its fallback)."""
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf),
                "--model_alias",
                alias,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "1024",
                "--n_threads",
                str(n_threads),
                *(["--chat_format", chat_format] if chat_format else []),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + wait_s
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}; see {log}")
                try:
                    urllib.request.urlopen(url + "/v1/models", timeout=2).read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"llama_cpp.server did not answer within {wait_s:.0f} s; see {log}"
                        ) from None
                    time.sleep(0.5)
            yield url
        finally:
            stop(proc, grace=30)


def assert_one_log_density(numpyro_model, args: dict, pymc_model, *, points: int = 4, seed: int = 1) -> None:
    """The NumPyro and PyMC twins of a model are one density: at random points of the unconstrained
    space (each site's support mapped as NumPyro maps it: log, logit, zero-sum, as PyMC's transforms
    do) their log densities, priors and Jacobians included, agree to 1e-5. Nothing is sampled."""
    import numpy as np
    from numpyro.distributions.transforms import biject_to
    from numpyro.handlers import seed as seeded
    from numpyro.handlers import trace
    from numpyro.infer.util import potential_energy

    from bayesrc.config import precision, prepare_jax

    prepare_jax()
    with precision():
        sites = trace(seeded(numpyro_model, 0)).get_trace(**args).items()
        shapes = {
            k: biject_to(s["fn"].support).inv(s["value"]).shape
            for k, s in sites
            if s["type"] == "sample" and not s["is_observed"]
        }
    logp = pymc_model.compile_logp(jacobian=True)
    # PyMC names a transformed site's value "<site>_<transform>__" (sigma_theta_log__, pi_logodds__)
    site = {v.name: rv.name for rv, v in pymc_model.rvs_to_values.items()}
    assert sorted(site.values()) == sorted(shapes), (sorted(site.values()), sorted(shapes))
    rng = np.random.default_rng(seed)
    for _ in range(points):
        z = {k: rng.normal(0, 0.7, shape) for k, shape in shapes.items()}
        with precision():
            ours = -float(potential_energy(numpyro_model, (), args, z))
        theirs = float(logp({name: z[s] for name, s in site.items()}))
        assert abs(theirs - ours) <= 1e-5, (theirs, ours)
