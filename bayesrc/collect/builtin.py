"""The built-in demo: an item bank the project writes itself, and two version conditions.

The bank holds letter-pattern questions ("What comes next: A B A B A ?") with 2 or 3
options whose texts are the letters themselves, in three domains: ``repeat`` (a motif of
2-3 letters repeated), ``forward`` (A, B, C, each letter 1-3 times) and ``backward``
(the same, from the last letter down). Why patterns: Gemma-3-270M is a base model that
cannot bind content to option letters (on capitals, opposites, plurals, copying a word
shown in the question ... its P(correct letter) sits at chance, 0.25 +- 0.05 on 4 options,
measured from the logits), whereas here the letter to output *is* the content, so items
land between floor and ceiling (Q4_K_M: mean 0.38, SD 0.15 across 105 candidates; the Q3_K_M
re-quantisation moves many items by >= 0.3). Few options keep chance high enough that
the demo's items are not all at the floor.

The two conditions are a version change a user would recognise: the same Gemma-3-270M
weights as shipped (Q4_K_M) and re-quantised to Q3_K_M with llama.cpp's own quantiser
(``llama_model_quantize``), with the prompt, bank and sampling pinned identical, so
``bayesrc pins`` reports only ``model.*`` differences.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import json
import os
import random
import re
import shutil
from pathlib import Path

from bayesrc.collect.card import load_card, resolve_model
from bayesrc.collect.model import _quiet_stderr
from bayesrc.collect.run import collect
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_text, temp_file_beside

ALPHABETS = ("AB", "ABC")  # option sets: 2 or 3 options, each option text is its letter


def _repeat_items(letters: str) -> list[tuple[str, str]]:
    """Every non-constant motif of 2-3 letters, shown 1-3 times over (cut anywhere after one motif)."""
    out = []
    for p in (2, 3):
        for motif in itertools.product(letters, repeat=p):
            if len(set(motif)) == 1:
                continue
            for n in range(p + 1, 3 * p + 2):
                seq = [motif[i % p] for i in range(n + 1)]
                out.append((" ".join(seq[:-1]), seq[-1]))
    return out


def _run_items(letters: str) -> list[tuple[str, str]]:
    """Runs through ``letters`` in order, each letter repeated 1-3 times, cut after the first change."""
    out = []
    for r in (1, 2, 3):
        seq = [c for c in letters for _ in range(r)]
        for cut in range(r + 1, len(seq)):  # the run length is visible: one letter change shown
            out.append((" ".join(seq[:cut]), seq[cut]))
    return out


_DOMAINS = {
    "repeat": _repeat_items,
    "forward": _run_items,
    "backward": lambda letters: _run_items(letters[::-1]),
}
# Drawn only once the domains above are used up (so smaller banks are unchanged): the
# same motifs over four options (A-D), for banks of several hundred items.
_EXTRA_DOMAINS = {"repeat4": _repeat_items}
_EXTRA_ALPHABETS = {"repeat4": ("ABCD",)}


def _candidates(domain: str) -> list[dict]:
    """All distinct items of one domain (question, options, answer), in a fixed order."""
    seen, out = set(), []
    make = _DOMAINS.get(domain) or _EXTRA_DOMAINS[domain]
    for letters in _EXTRA_ALPHABETS.get(domain, ALPHABETS):
        for seq, nxt in make(letters):
            question = f"What comes next: {seq} ?"
            if question not in seen:  # the 2-letter pattern may also appear among the 3-letter ones
                seen.add(question)
                out.append({"domain": domain, "question": question, "options": list(letters), "answer": nxt})
    return out


def builtin_capacity() -> int:
    """How many distinct items the built-in bank can hold.

    Examples
    --------
    >>> builtin_capacity()
    699
    """
    return sum(len(_candidates(d)) for d in (*_DOMAINS, *_EXTRA_DOMAINS))


def builtin_items(n_items: int = 60, seed: int = 0) -> list[dict]:
    """``n_items`` distinct pattern items, domains taken in turn (a domain that runs out is skipped).

    The 2-3-option domains (``repeat``, ``forward``, ``backward``) come first; the
    4-option ``repeat4`` items only once they are used up (about 220 items), so a bank of
    a given size and seed is the same whatever the full capacity (:func:`builtin_capacity`).

    Examples
    --------
    >>> builtin_items(2)[0]["item_id"], builtin_items(2)[0]["options"]
    ('demo-0000', ['A', 'B', 'C'])
    """
    if n_items < 1:
        raise InputError(f"must be >= 1, got {n_items}", field="n")
    rng = random.Random(seed)
    pools = {}
    # base pools are shuffled first: their order does not depend on the extras
    for domain in (*_DOMAINS, *_EXTRA_DOMAINS):
        pool = _candidates(domain)
        rng.shuffle(pool)
        pools[domain] = pool
    if n_items > sum(map(len, pools.values())):
        raise InputError(
            f"the built-in bank has {sum(map(len, pools.values()))} distinct items, asked for {n_items}", field="n"
        )
    items: list[dict] = []
    for group in (tuple(_DOMAINS), tuple(_EXTRA_DOMAINS)):
        while len(items) < n_items and any(pools[d] for d in group):
            for domain in group:
                if len(items) < n_items and pools[domain]:
                    items.append({"item_id": f"demo-{len(items):04d}", **pools[domain].pop()})
    return items


def builtin_bank(path: str | Path, n_items: int = 60, seed: int = 0) -> Path:
    """Write the built-in bank as JSONL (the ``mmlu_pro_2000.jsonl`` layout) and return its path.

    Examples
    --------
    >>> import tempfile
    >>> bank = builtin_bank(tempfile.mkdtemp() + "/bank.jsonl", n_items=40)
    >>> sum(1 for _ in open(bank))
    40
    """
    path = Path(path)
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in builtin_items(n_items, seed)))
    return path


def requantize(src: str | Path, dst: str | Path, ftype: str = "Q3_K_M", n_threads: int = 2) -> Path:
    """Re-quantise a GGUF with llama.cpp's quantiser (deterministic; skipped if ``dst`` exists).

    Examples
    --------
    >>> requantize("gemma-q4_k_m.gguf", "gemma-q3_k_m.gguf", "Q3_K_M")  # doctest: +SKIP
    """
    import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

    dst = Path(dst)
    if dst.exists():
        return dst
    code = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}", None)
    if code is None:
        raise InputError(f"unknown quantisation type {ftype!r}", field="ftype")
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = n_threads
    params.ftype = code
    params.allow_requantize = True
    dst.parent.mkdir(parents=True, exist_ok=True)
    need = Path(src).stat().st_size  # the re-quantised weights are at most the source's size
    if shutil.disk_usage(dst.parent).free < need:  # the quantiser only says "code 1" when the disk fills
        raise OSError(
            errno.ENOSPC,
            f"{os.strerror(errno.ENOSPC)} for the re-quantised weights (up to {need / 1e6:.0f} MB)",
            str(dst),
        )
    fd, tmp = temp_file_beside(dst)
    os.close(fd)
    try:
        with _quiet_stderr():
            rc = llama_cpp.llama_model_quantize(str(src).encode(), tmp.encode(), ctypes.byref(params))
        if rc != 0:
            raise InputError(f"llama.cpp quantiser failed (code {rc})", path=src)
        os.replace(tmp, dst)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return dst


_QUANT = re.compile(r"(?i)(?<![A-Za-z0-9])(?:i?q\d(?:_[a-z0-9]+)*|f16|bf16|f32)(?![A-Za-z0-9])")


def quantized_name(name: str, ftype: str) -> str:
    """``gemma-3-270m-q4_k_m`` + ``Q3_K_M`` -> ``gemma-3-270m-q3_k_m`` (appended if no quantisation tag)."""
    if _QUANT.search(name):
        return _QUANT.sub(lambda m: ftype.lower() if m.group(0).islower() else ftype, name, count=1)
    return f"{name}-{ftype.lower()}"


def requantized_card_text(card_path: str | Path, gguf_name: str, label: str) -> str:
    """The card at ``card_path`` with its model swapped: ``label`` and ``[model]`` (path only) change, nothing else.

    The ``[model]`` table's ``package``/``module``/``sha256`` lines describe the source
    weights and are dropped; every other line is kept byte for byte.
    """
    lines = Path(card_path).read_text(encoding="utf-8").splitlines()
    out, section, label_done = [], "", False
    for line in lines:
        head = line.strip()
        if head.startswith("[") and not head.startswith("[["):
            section = head.strip("[] ")
            out.append(line)
            if section == "model":
                out.append(f"path = {json.dumps(gguf_name)}")
            continue
        key = head.split("=", 1)[0].strip() if "=" in head and not head.startswith("#") else None
        if section == "" and key == "label":
            out.append(f"label = {json.dumps(label)}")
            label_done = True
        elif section == "model" and key in ("path", "package", "module", "sha256"):
            continue
        else:
            out.append(line)
    if not label_done:
        out.insert(0, f"label = {json.dumps(label)}")
    return "\n".join(out) + "\n"


def quantize_card(card: str | Path, ftype: str, out_dir: str | Path, *, n_threads: int = 2) -> tuple[Path, Path]:
    """Re-quantise a card's GGUF (``allow_requantize``) into ``out_dir`` and write its card.

    Writes ``out_dir/<name>.gguf`` and ``out_dir/<name>.toml`` (name: the source card's
    with its quantisation tag replaced, :func:`quantized_name`); the new card differs from
    the source only in ``label`` and ``[model]``. Refuses to overwrite either file.

    Examples
    --------
    >>> quantize_card("models/gemma-3-270m-q4_k_m.toml", "Q3_K_M", "models/q3")  # doctest: +SKIP
    (PosixPath('models/q3/gemma-3-270m-q3_k_m.gguf'), PosixPath('models/q3/gemma-3-270m-q3_k_m.toml'))
    """
    import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

    src_card = load_card(card)
    if getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}", None) is None:
        known = sorted(
            n.removeprefix("LLAMA_FTYPE_MOSTLY_") for n in dir(llama_cpp) if n.startswith("LLAMA_FTYPE_MOSTLY_")
        )
        raise InputError(f"unknown quantisation type {ftype!r}; one of {', '.join(known)}", field="type")
    out_dir = Path(out_dir)
    name = quantized_name(Path(src_card.card_path).stem, ftype)
    gguf, toml = out_dir / f"{name}.gguf", out_dir / f"{name}.toml"
    for f in (gguf, toml):
        if f.exists():
            raise InputError("exists; choose another --out (nothing overwritten)", path=f)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output directory ({exc.strerror})", path=out_dir) from None
    requantize(resolve_model(src_card), gguf, ftype, n_threads=n_threads)
    atomic_write_text(toml, requantized_card_text(src_card.card_path, gguf.name, quantized_name(src_card.label, ftype)))
    return gguf, toml


DEMO_CARD = Path(__file__).resolve().parents[2] / "models" / "gemma-3-270m-q4_k_m.toml"


def collect_demo_runs(
    out_dir: str | Path,
    n_items: int = 40,
    k: int = 10,
    *,
    temperature: float = 0.7,
    seed: int = 0,
    engine: str = "fast",
    card: str | Path | None = None,
    progress: bool = False,
) -> dict[str, Path]:
    """Collect the demo's two versions on the built-in bank; return their run directories.

    Layout under ``out_dir``::

        bank.jsonl                 the built-in bank (``builtin_bank(n_items, seed)``)
        models/gemma-3-270m-q3_k_m.gguf + .toml   the re-quantised weights and their card
        v1/   run: Gemma-3-270M Q4_K_M  (label "gemma-3-270m-Q4_K_M")
        v2/   run: the same weights re-quantised to Q3_K_M (label "gemma-3-270m-Q3_K_M")

    Each run directory holds ``trials.parquet`` (read by ``bayesrc.data.load_trials``) and
    ``run.json``; the two runs' pins differ only in ``model.*``. Re-running resumes (a
    complete run is left as is), so the call is idempotent.

    Examples
    --------
    >>> runs = collect_demo_runs("runs/demo", n_items=40, k=10)  # {'v1': ..., 'v2': ...}  # doctest: +SKIP
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bank = builtin_bank(out_dir / "bank.jsonl", n_items=n_items, seed=seed)
    base_card = load_card(card or DEMO_CARD)
    src = resolve_model(base_card)
    qdir = out_dir / "models"
    q3 = requantize(src, qdir / "gemma-3-270m-q3_k_m.gguf", "Q3_K_M")
    atomic_write_text(
        qdir / "gemma-3-270m-q3_k_m.toml", requantized_card_text(base_card.card_path, q3.name, "gemma-3-270m-Q3_K_M")
    )
    runs = {}
    for name, c in (("v1", base_card.card_path), ("v2", qdir / "gemma-3-270m-q3_k_m.toml")):
        collect(c, bank, out_dir / name, k=k, temperature=temperature, engine=engine, resume=True, progress=progress)
        runs[name] = out_dir / name
    return runs
