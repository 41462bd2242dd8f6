"""One writer per output: an exclusive ``flock`` on a lock file beside the output path.

``bayesrc X --out DIR`` (and every :func:`bayesrc.io.staged_output` commit) holds
``.DIR.lock`` in DIR's parent folder while it writes, so a second process writing the same
output is refused with one line (exit 2) instead of interleaving its files with the first's.
The OS releases the lock when its holder dies (SIGKILL included); the file itself is
removed on a clean release. The lock is per process and re-entrant: a command that holds
it may commit staged folders to the same output.

Only the standard library is imported here, so the CLI can take the lock before any
heavy import.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bayesrc.errors import InputError

_HELD: dict[Path, list[int]] = {}  # resolved output path -> [lock file descriptor, depth]
_GUARD = threading.Lock()


def swappable(target: Path) -> bool:
    """Whether a folder can be replaced by renaming: not a mount point, its parent writable.

    Examples
    --------
    >>> swappable(Path("/")), swappable(Path("/no/such/folder"))
    (False, True)
    """
    return not target.is_dir() or (not os.path.ismount(target) and os.access(target.parent, os.W_OK))


def lock_path(out: str | Path) -> Path:
    """The lock file of an output path: ``.NAME.lock`` beside it (inside it, ``.bayesrc.lock``,
    for a folder that cannot be swapped by renaming, such as a mount point).

    Examples
    --------
    >>> lock_path("/runs/rci").as_posix()
    '/runs/.rci.lock'
    """
    target = Path(out).resolve()
    return target.parent / f".{target.name}.lock" if swappable(target) else target / ".bayesrc.lock"


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (a releasing holder may have unlinked it)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _acquire(target: Path) -> int:
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise InputError(
                f"another bayesrc process (pid {holder}) is writing this output; wait for it or choose another --out",
                path=target,
            ) from None
        if _same_file(fd, path):
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
            except OSError as exc:  # a full disk: leave no lock file behind (removed while still locked)
                _release(target, fd)
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            return fd
        os.close(fd)  # locked a file its holder had just removed: take the new one


def _release(target: Path, fd: int) -> None:
    try:
        lock_path(target).unlink(missing_ok=True)  # while still locked, so no one else holds this inode
    finally:
        os.close(fd)


@contextmanager
def output_lock(out: str | Path) -> Iterator[Path]:
    """Hold the writer lock of an output path for the block; yield the resolved path.

    Parameters
    ----------
    out : the output folder or file (it need not exist yet).

    Raises
    ------
    InputError
        Another process holds the lock (the CLI prints one line and exits 2).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, output_lock(f"{tmp}/out") as target:
    ...     lock_path(target).exists()
    True
    """
    target = Path(out).resolve()
    with _GUARD:
        held = _HELD.get(target)
        if held is None:
            held = _HELD[target] = [_acquire(target), 0]
        held[1] += 1
    try:
        yield target
    finally:
        with _GUARD:
            held[1] -= 1
            if held[1] == 0:
                del _HELD[target]
                _release(target, held[0])
