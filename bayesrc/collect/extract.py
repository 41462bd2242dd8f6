"""Answer extraction (SPEC section 6; paper 001 section 2.1).

The extracted answer is the **first valid option letter** of the response: the first
capital letter that stands alone (no letter or digit on either side) and is one of the
item's option letters. ``<think>...</think>`` blocks are removed first; an empty block
(``<think></think>``, as Qwen3 in non-thinking mode emits) is stripped silently, a
non-empty one is a *thinking trace* and is flagged. Text after an unclosed ``<think>``
is not an answer.

:func:`decided` says whether a response *prefix* already fixes the extracted answer
whatever tokens follow. The fast engine stops a sample there, which is what makes its
answers identical to a full ``max_tokens`` completion (see ``engines.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_OPEN_THINK = "<think>"
# A capital letter with no letter/digit on either side; the letter set is checked after.
_LETTER = re.compile(r"(?<![A-Za-z0-9])([A-Z])(?![A-Za-z0-9])")


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract` read from a reply: the option letter (None: no valid answer), whether a
    ``<think>`` block was present, and whether the answer is final for any continuation.

    Examples
    --------
    >>> extract("The answer is (B).", "ABCD")
    Extraction(answer='B', thinking=False, decided=True)
    """

    answer: str | None
    thinking: bool  # a non-empty <think> block was present
    decided: bool  # no continuation of this text can change ``answer``


def strip_think(text: str) -> tuple[str, bool]:
    """Remove ``<think>`` blocks; return the remaining text and the thinking flag.

    A closed block is removed (flag set if it had non-whitespace content); an unclosed
    ``<think>`` cuts the text there (the flag is set: a trace was started).

    Examples
    --------
    >>> strip_think("<think>hmm</think> B")
    (' B', True)
    """
    thinking = any(m.group(1).strip() for m in _THINK_BLOCK.finditer(text))
    rest = _THINK_BLOCK.sub("", text)
    cut = rest.find(_OPEN_THINK)
    if cut >= 0:
        thinking = thinking or bool(rest[cut + len(_OPEN_THINK) :].strip())
        rest = rest[:cut]
    return rest, thinking


def extract(text: str, letters: str, *, final: bool = True) -> Extraction:
    """Extract the first valid option letter of ``text``.

    ``letters`` is the item's option letters (e.g. ``"ABCD"``). With ``final=False``
    ``text`` is a prefix of a longer response: ``decided`` is true only when the answer
    cannot change (a valid letter followed by at least one more character, before any
    ``<think>`` that is still open).

    Examples
    --------
    >>> extract("The answer is (B).", "ABCD").answer
    'B'
    >>> extract("<think>maybe A</think> C", "ABCD").answer, extract("none of these", "ABCD").answer
    ('C', None)
    """
    rest, thinking = strip_think(text)
    for m in _LETTER.finditer(rest):
        if m.group(1) not in letters:
            continue
        # The look-ahead is only settled once a character follows the letter.
        # (A following "<" that may still grow into "<think>" is not settled: the block
        # would be removed and the letter joined to what follows it.)
        tail = rest[m.end() :]
        if final or (tail and not _OPEN_THINK.startswith(tail[: len(_OPEN_THINK)])):
            return Extraction(m.group(1), thinking, True)
        # A trailing letter might still become a word ("B" -> "But").
        return Extraction(None, thinking, False)
    # No answer yet. Further text may still bring one unless the response has ended.
    return Extraction(None, thinking, final)


def decided(text: str, letters: str) -> bool:
    """True when no continuation of the prefix ``text`` can change the extracted answer.

    Examples
    --------
    >>> decided("The answer is (B).", "ABCD"), decided("The answer is", "ABCD")
    (True, False)
    """
    return extract(text, letters, final=False).decided
