"""Connecting to a Ray cluster, and mapping a function over argument tuples on it (or serially)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from bayesrc.errors import BayesrcError, InputError


def import_ray():
    """``ray``, or one clear line saying how to install it."""
    try:
        import ray  # deferred: Ray loads in ~1 s (scale extra)
    except ImportError:
        raise InputError(
            "Ray is not installed: pip install 'bayesrc[scale]' (or 'ray[default]')", field="--ray"
        ) from None
    return ray


@dataclass
class Session:
    """A connection to a Ray cluster: its address, whether we started it, and how long that took."""

    address: str
    started_here: bool
    startup_seconds: float


@contextlib.contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[Session]:
    """Use a Ray cluster for the duration of the block.

    Order: a driver already connected (``ray.is_initialized()``, e.g. a notebook or a test
    fixture) is reused and left connected; else ``address`` or ``$RAY_ADDRESS`` is joined;
    else a local cluster with ``num_cpus`` CPUs is started and shut down at the end.

    Examples
    --------
    >>> with ray_session(num_cpus=2) as s:  # doctest: +SKIP
    ...     print(s.started_here, round(s.startup_seconds, 1))
    """
    ray = import_ray()
    t0 = time.monotonic()
    if ray.is_initialized():
        yield Session(ray.get_runtime_context().gcs_address, False, 0.0)
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    kw = {"logging_level": logging.WARNING, "log_to_driver": False}
    saved = {v: os.environ.get(v) for v in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            if saved["RAY_AUTH_MODE"] is None and saved["RAY_AUTH_TOKEN"] is None:
                use_private_token()
            ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1", **kw)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        _restore(saved)
        where = f"cluster at {address}" if address else "a local cluster"
        raise InputError(
            f"cannot start or reach {where} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
            field="--ray-address",
        ) from None
    try:
        yield Session(ray.get_runtime_context().gcs_address, not address, time.monotonic() - t0)
    finally:
        ray.shutdown()
        _restore(saved)


def _restore(saved: dict) -> None:
    for var, value in saved.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    _reload_ray_auth()


def use_private_token() -> str:
    """Token auth with a one-off token in this process's environment (inherited by the clusters and
    CLI runs it starts) instead of Ray's default ``~/.ray/auth_token`` file; returns the token."""
    token = secrets.token_hex(32)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    _reload_ray_auth()
    return token


def _reload_ray_auth() -> None:
    # Ray caches its config and token when imported; make it see the environment again.
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # deferred: Ray loads in ~1 s (scale extra)
    except ImportError:  # a Ray without token auth: nothing cached
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def unwrap(exc: BaseException) -> BaseException:
    """The bayesrc error inside a Ray task error (so the CLI prints its one line), else ``exc``."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BayesrcError) else exc


def serial_map(fn: Callable, arg_tuples: Sequence[tuple]) -> list:
    """``[fn(*a) for a in arg_tuples]``: the reference a Ray map must equal.

    Examples
    --------
    >>> serial_map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """
    return [fn(*a) for a in arg_tuples]


def ray_map(fn: Callable, arg_tuples: Sequence[tuple], *, num_cpus: float = 1, max_retries: int = 3) -> list:
    """``fn(*a)`` for every tuple as Ray tasks (needs a connected driver, see :func:`ray_session`).

    Results come back in input order. A task whose worker dies is retried up to
    ``max_retries`` times; a :class:`BayesrcError` raised by ``fn`` is re-raised as is.
    ``fn`` must be importable (module level) so workers resolve it by name.

    Examples
    --------
    >>> with ray_session(num_cpus=2):  # doctest: +SKIP
    ...     ray_map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """
    ray = import_ray()
    remote = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(fn)
    refs = [remote.remote(*a) for a in arg_tuples]
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as exc:
        for r in refs:  # the other fits are of no use now
            with contextlib.suppress(Exception):
                ray.cancel(r, force=True)
        raise unwrap(exc) from None
