"""Seed rules for the K samples of an item (SPEC sections 2.1 and 6).

``shared`` is the reference study's rule, ``seed = offset + item_index * stride + k`` for
every model: sample k of an item under v1 and under v2 then share one random draw, and
since llama.cpp draws over candidates sorted by probability, two versions that rank the
answer letters differently answer alike *less* often than independent draws would.
``version`` (the default) adds a salt derived from the version's pin, so the versions'
draws are independent, as every analysis here assumes.
"""

from __future__ import annotations

import hashlib

SEED_RULES = ("version", "shared")
_SALT_MOD = 1 << 30  # seeds stay below 2**31 for banks of up to ~10^8 samples


def seed_salt(pin: str) -> int:
    """A salt in [0, 2**30) from a version's pin (e.g. model file and prompt hashes).

    Examples
    --------
    >>> seed_salt("abc") == seed_salt("abc") != seed_salt("abd")
    True
    """
    return int(hashlib.sha256(pin.encode("utf-8")).hexdigest()[:12], 16) % _SALT_MOD


def sample_seeds(item_index: int, k: int, *, stride: int = 10, offset: int = 0, salt: int = 0) -> list[int]:
    """Seeds of the k samples of the item at ``item_index``: ``salt + offset + item_index * stride + j``."""
    return [salt + offset + item_index * stride + j for j in range(k)]
