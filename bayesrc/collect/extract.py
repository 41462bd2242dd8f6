r"""Answer extraction (SPEC section 6; paper 001 section 2.1).

The extracted answer is the **first valid option letter** of the response: the first
capital letter that stands alone (no letter or digit on either side) and is one of the
item's option letters. A card's ``answer = "final"`` (``[prompt]``; the server engine, for chat
models that reason before they answer) takes the **final answer** instead: the last answer
statement ("The answer is (C)", "Answer: C", "final answer: **C**", ``\boxed{C}``) with a valid
letter, else the last valid letter that stands alone (:func:`extract_final`).
``<think>...</think>`` blocks are removed first; an empty block (``<think></think>``, as
Qwen3 in non-thinking mode emits) is stripped silently, a non-empty one is a *thinking
trace* and is flagged. Text after an unclosed ``<think>`` is not an answer.

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
# An answer statement: "answer" (any case; "final answer", "the answer is", "Answer:"), then the letter, bracketed,
# in bold or not; or a LaTeX \boxed{X}.
_STATEMENT = re.compile(
    r"(?i:answer)(?:\s+(?i:is))?\s*[:=]?\s*(?:\*\*)?\s*[(\[]?([A-Z])(?![A-Za-z0-9])|\\boxed\{\s*([A-Z])\s*\}"
)
ANSWER_RULES = ("first", "final")  # the card's [prompt] answer: extract's and extract_final's rules


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


def extract_final(text: str, letters: str) -> Extraction:
    """The final answer of a complete response (``answer = "final"``): the last answer statement with a valid
    option letter, else the last valid letter that stands alone; ``<think>`` blocks removed first.

    Examples
    --------
    >>> extract_final("A is wrong, and B too. The answer is (C).", "ABCD").answer
    'C'
    >>> extract_final("Answer: B. On reflection, the final answer is **D**", "ABCD").answer
    'D'
    >>> extract_final("Between A and B I pick B", "ABCD").answer, extract_final("no idea", "ABCD").answer
    ('B', None)
    """
    rest, thinking = strip_think(text)
    stated = [m.group(1) or m.group(2) for m in _STATEMENT.finditer(rest)]
    stated = [x for x in stated if x in letters]
    if stated:
        return Extraction(stated[-1], thinking, True)
    alone = [m.group(1) for m in _LETTER.finditer(rest) if m.group(1) in letters]
    return Extraction(alone[-1] if alone else None, thinking, True)


def extract_answer(text: str, letters: str, rule: str = "first") -> Extraction:
    """The answer of a complete response under the card's rule: :func:`extract` (``"first"``) or :func:`extract_final`.

    Examples
    --------
    >>> (
    ...     extract_answer("B, no: the answer is C", "ABCD").answer,
    ...     extract_answer("B, no: the answer is C", "ABCD", "final").answer,
    ... )
    ('B', 'C')
    """
    return extract_final(text, letters) if rule == "final" else extract(text, letters)


def decided(text: str, letters: str) -> bool:
    """True when no continuation of the prefix ``text`` can change the extracted answer.

    Examples
    --------
    >>> decided("The answer is (B).", "ABCD"), decided("The answer is", "ABCD")
    (True, False)
    """
    return extract(text, letters, final=False).decided
