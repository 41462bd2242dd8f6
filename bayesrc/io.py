"""Atomic output: a command's files appear all together or not at all.

Results are computed first, then written into a staging folder beside the target
and moved into place with ``os.replace`` (atomic on one filesystem), so a failure
part-way never leaves a torn or partial file behind and never overwrites the old
output with half of the new one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite(obj: Any) -> Any:
    """Replace NaN / inf floats by None so the JSON is strict (RFC 8259)."""
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, np.floating) and not np.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps_json(obj: Any) -> str:
    """Strict JSON (no NaN), numpy-aware, stable key order."""
    return json.dumps(_finite(obj), default=_json_default, indent=2, allow_nan=False) + "\n"


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, dumps_json(obj))


@contextmanager
def staged_output(out_dir: str | Path) -> Iterator[Path]:
    """Yield a staging folder; on success move every file in it into ``out_dir``.

    On an exception nothing in ``out_dir`` changes (the staging folder is removed).
    Sub-folders are moved whole.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=out_dir))
    try:
        yield stage
        for entry in sorted(stage.iterdir()):
            target = out_dir / entry.name
            if entry.is_dir() and target.exists():
                shutil.rmtree(target)
            os.replace(entry, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
