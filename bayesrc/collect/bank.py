"""Item banks: JSONL, one multiple-choice item per line.

Layout of ``mmlu_pro_2000.jsonl`` (bundled: ``bayesrc.datasets``): ``item_id``, ``domain``, ``question``,
the options as a list (``options`` or ``options_raw``) and/or as text
(``options_formatted``: one ``"A. text"`` per line), and ``answer`` (the correct letter).
Every problem is an :class:`~bayesrc.errors.InputError` naming file, line and field.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path

from bayesrc.errors import InputError

LETTERS = string.ascii_uppercase
_OPTION_LINE = re.compile(r"^\s*\(?([A-Z])[\.\):]\s?(.*)$")


@dataclass(frozen=True)
class Item:
    """One multiple-choice item; ``index`` is its 0-based position in the bank (seeds use it).

    Examples
    --------
    >>> it = Item(0, "q1", "math", "2 + 2?", ("3", "4", "5"), "B")
    >>> it.letters
    'ABC'
    """

    index: int
    item_id: str
    domain: str
    question: str
    options: tuple[str, ...]
    answer: str

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    @property
    def options_formatted(self) -> str:
        return "\n".join(f"{ltr}. {opt}" for ltr, opt in zip(self.letters, self.options))


@dataclass(frozen=True)
class Bank:
    """An item bank read by :func:`load_bank`: its items in file order and the SHA-256 of its bytes
    (the ``items.bank_sha256`` pin).

    Examples
    --------
    >>> from bayesrc.datasets import path
    >>> bank = load_bank(path("mmlu_pro_2000.jsonl"))
    >>> len(bank.items), len(bank.sha256)
    (2000, 64)
    """

    path: Path
    items: tuple[Item, ...]
    sha256: str  # of the file's bytes: the item-bank pin

    def __len__(self) -> int:
        return len(self.items)


def _parse_formatted(text: str, *, path: Path, line: int, item: object) -> tuple[str, ...]:
    opts: list[str] = []
    for row in text.splitlines():
        if not row.strip():
            continue
        m = _OPTION_LINE.match(row)
        if m is None:
            if not opts:
                raise InputError(
                    f"option line {row[:40]!r} does not start with a letter",
                    path=path,
                    line=line,
                    item=item,
                    field="options_formatted",
                )
            opts[-1] += "\n" + row  # continuation of a multi-line option
            continue
        if m.group(1) != LETTERS[len(opts)]:
            raise InputError(
                f"options out of order: expected {LETTERS[len(opts)]}, got {m.group(1)}",
                path=path,
                line=line,
                item=item,
                field="options_formatted",
            )
        opts.append(m.group(2).strip())
    return tuple(opts)


def parse_item(rec: object, *, index: int, path: Path, line: int) -> Item:
    """Validate one decoded JSON line into an :class:`Item`."""
    if not isinstance(rec, dict):
        raise InputError("expected a JSON object per line", path=path, line=line)
    item_id = rec.get("item_id", rec.get("item_index", index))
    if item_id is None or str(item_id).strip() == "":
        raise InputError("empty value", path=path, line=line, field="item_id")
    item_id = str(item_id).strip()
    question = rec.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InputError("missing or empty question", path=path, line=line, item=item_id, field="question")
    options: tuple[str, ...] | None = None
    for field in ("options", "options_raw"):
        if field in rec and rec[field] is not None:
            raw = rec[field]
            if not isinstance(raw, list) or not all(isinstance(o, (str, int, float)) for o in raw):
                raise InputError("expected a list of option strings", path=path, line=line, item=item_id, field=field)
            options = tuple(str(o) for o in raw)
            break
    if options is None and isinstance(rec.get("options_formatted"), str):
        options = _parse_formatted(rec["options_formatted"], path=path, line=line, item=item_id)
    if options is None:
        raise InputError(
            "missing options (need 'options', 'options_raw' or 'options_formatted')",
            path=path,
            line=line,
            item=item_id,
            field="options",
        )
    if not 2 <= len(options) <= len(LETTERS):
        raise InputError(
            f"expected 2 to 26 options, got {len(options)}", path=path, line=line, item=item_id, field="options"
        )
    answer = rec.get("answer")
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        raise InputError("missing answer letter", path=path, line=line, item=item_id, field="answer")
    if not isinstance(answer, str) or len(answer.strip()) != 1 or answer.strip().upper() not in LETTERS:
        raise InputError(
            f"expected one option letter, got {json.dumps(answer)}", path=path, line=line, item=item_id, field="answer"
        )
    answer = answer.strip().upper()
    letters = LETTERS[: len(options)]
    if answer not in letters:
        raise InputError(
            f"answer {answer} is outside the options {letters[0]}-{letters[-1]}",
            path=path,
            line=line,
            item=item_id,
            field="answer",
        )
    domain = rec.get("domain") or "all"
    return Item(index=index, item_id=item_id, domain=str(domain), question=question, options=options, answer=answer)


def load_bank(path: str | Path) -> Bank:
    """Read and validate an item bank (JSONL). Items keep their file order (``index``).

    Examples
    --------
    >>> from bayesrc.datasets import path
    >>> bank = load_bank(path("mmlu_pro_2000.jsonl"))
    >>> len(bank), bank.items[0].letters
    (2000, 'ABCDEFGHIJ')
    """
    path = Path(path)
    if not path.exists():
        raise InputError("item bank not found", path=path)
    if path.is_dir():
        raise InputError("is a directory, expected an item bank (.jsonl)", path=path)
    data = path.read_bytes()
    items: list[Item] = []
    seen: dict[str, int] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", path=path) from None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg})", path=path, line=lineno) from None
        item = parse_item(rec, index=len(items), path=path, line=lineno)
        if item.item_id in seen:
            raise InputError(
                f"duplicate item_id (first on line {seen[item.item_id]})",
                path=path,
                line=lineno,
                item=item.item_id,
                field="item_id",
            )
        seen[item.item_id] = lineno
        items.append(item)
    if not items:
        raise InputError("item bank is empty", path=path)
    return Bank(path=path, items=tuple(items), sha256=hashlib.sha256(data).hexdigest())
