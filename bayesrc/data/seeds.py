"""Seed rules for the K samples of an item (SPEC sections 2.1 and 6).

Where a seed comes from (:func:`sample_seeds`): by default the seed of sample ``k`` of the
item at bank position ``i`` is a function of ``(i, k)`` alone, never of K, so a run at K = 40
draws the K = 10 run's trials first and then more, and any K runs without a flag:

- ``k < 10``: the reference study's ``offset + i * 10 + k`` (paper 001 section 2.1), so every
  run of K <= 10 keeps its trials;
- ``k >= 10``: ``offset + 10 * 2**19 + (k - 10) * 2**19 + i``, above every reference seed of
  a bank of up to 2**19 (524,288) items, so no two samples of a run share a seed.

An explicit ``stride`` gives ``offset + i * stride + k`` for every k (K <= stride).

Whose draws are coupled (``seed_rule``): ``shared`` is the reference study's rule, the same
seeds for every model: sample k of an item under v1 and under v2 then share one random draw,
and since llama.cpp draws over candidates sorted by probability, two versions that rank the
answer letters differently answer alike *less* often than independent draws would.
``version`` (the default) adds a salt derived from the version's pin, so the versions'
draws are independent, as every analysis here assumes.
"""

from __future__ import annotations

import hashlib

SEED_RULES = ("version", "shared")
_SALT_MOD = 1 << 30  # seeds stay below 2**32 - 1 (llama.cpp's "random seed") with the layout below
#: samples k < REFERENCE_K of an item keep the reference study's ``i * 10 + k``
REFERENCE_K = 10
#: items a bank may hold under the default rule; samples k >= 10 are laid out k-major over them
ITEM_SLOTS = 1 << 19
_EXTRA_BASE = REFERENCE_K * ITEM_SLOTS  # > 10 * (ITEM_SLOTS - 1) + 9: after every reference seed
#: the largest K the default rule lays out below 2**32 - 1 (salt, offset and all); above it, give a stride
MAX_K = 4096


def seed_salt(pin: str) -> int:
    """A salt in [0, 2**30) from a version's pin (e.g. model file and prompt hashes).

    Examples
    --------
    >>> seed_salt("abc") == seed_salt("abc") != seed_salt("abd")
    True
    """
    return int(hashlib.sha256(pin.encode("utf-8")).hexdigest()[:12], 16) % _SALT_MOD


def sample_seeds(item_index: int, k: int, *, stride: int | None = None, offset: int = 0, salt: int = 0) -> list[int]:
    """Seeds of the first ``k`` samples of the item at ``item_index`` (module docstring).

    Examples
    --------
    >>> sample_seeds(3, 12)
    [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 5242883, 5767171]
    >>> sample_seeds(3, 12)[:10] == sample_seeds(3, 10)  # K does not move a seed
    True
    >>> sample_seeds(3, 2, stride=40, salt=7)
    [127, 128]
    """
    if stride is not None:
        return [salt + offset + item_index * stride + j for j in range(k)]
    return [salt + offset + _default_position(item_index, j) for j in range(k)]


def _default_position(item_index: int, j: int) -> int:
    if j < REFERENCE_K:
        return item_index * REFERENCE_K + j
    return _EXTRA_BASE + (j - REFERENCE_K) * ITEM_SLOTS + item_index


def seed_rule_text(k: int, *, stride: int | None = None, offset: int = 0) -> str:
    """The rule's text a run pins (``sampling.seed_rule``); K <= 10 reads as the reference study's.

    Examples
    --------
    >>> seed_rule_text(10)
    '0 + item_index * 10 + k'
    >>> seed_rule_text(40)
    '0 + item_index * 10 + k for k < 10, 0 + 10 * 2**19 + (k - 10) * 2**19 + item_index for k >= 10'
    """
    if stride is not None or k <= REFERENCE_K:
        return f"{offset} + item_index * {REFERENCE_K if stride is None else stride} + k"
    return (
        f"{offset} + item_index * 10 + k for k < 10, {offset} + 10 * 2**19 + (k - 10) * 2**19 + item_index for k >= 10"
    )
