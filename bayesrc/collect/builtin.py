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

import itertools
import json
import random
from pathlib import Path

from bayesrc.io import atomic_write_text

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


def _candidates(domain: str) -> list[dict]:
    """All distinct items of one domain (question, options, answer), in a fixed order."""
    seen, out = set(), []
    for letters in ALPHABETS:
        for seq, nxt in _DOMAINS[domain](letters):
            question = f"What comes next: {seq} ?"
            if question not in seen:  # the 2-letter pattern may also appear among the 3-letter ones
                seen.add(question)
                out.append({"domain": domain, "question": question, "options": list(letters), "answer": nxt})
    return out


def builtin_items(n_items: int = 60, seed: int = 0) -> list[dict]:
    """``n_items`` distinct pattern items, domains taken in turn (a domain that runs out is skipped)."""
    from bayesrc.errors import InputError

    rng = random.Random(seed)
    pools = {}
    for domain in _DOMAINS:
        pool = _candidates(domain)
        rng.shuffle(pool)
        pools[domain] = pool
    if n_items > sum(map(len, pools.values())):
        raise InputError(f"the built-in bank has {sum(map(len, pools.values()))} distinct items, asked for {n_items}", field="n_items")
    items: list[dict] = []
    for domain in itertools.cycle(_DOMAINS):
        if len(items) == n_items:
            break
        if pools[domain]:
            items.append({"item_id": f"demo-{len(items):04d}", **pools[domain].pop()})
    return items


def builtin_bank(path: str | Path, n_items: int = 60, seed: int = 0) -> Path:
    """Write the built-in bank as JSONL (the ``mmlu_pro_2000.jsonl`` layout) and return its path."""
    path = Path(path)
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in builtin_items(n_items, seed)))
    return path


def requantize(src: str | Path, dst: str | Path, ftype: str = "Q3_K_M", n_threads: int = 2) -> Path:
    """Re-quantise a GGUF with llama.cpp's quantiser (deterministic; skipped if ``dst`` exists)."""
    import ctypes
    import os
    import tempfile

    import llama_cpp

    from bayesrc.collect.engines import _quiet_stderr
    from bayesrc.errors import InputError

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
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
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


DEMO_CARD = Path(__file__).resolve().parents[2] / "models" / "gemma-3-270m-q4_k_m.toml"


def collect_demo_runs(out_dir: str | Path, n_items: int = 40, k: int = 10, *, temperature: float = 0.7, seed: int = 0, engine: str = "fast", card: str | Path | None = None, progress: bool = False) -> dict[str, Path]:
    """Collect the demo's two versions on the built-in bank; return their run directories.

    Layout under ``out_dir``::

        bank.jsonl                 the built-in bank (``builtin_bank(n_items, seed)``)
        models/gemma-3-270m-q3_k_m.gguf + .toml   the re-quantised weights and their card
        v1/   run: Gemma-3-270M Q4_K_M  (label "gemma-3-270m-Q4_K_M")
        v2/   run: the same weights re-quantised to Q3_K_M (label "gemma-3-270m-Q3_K_M")

    Each run directory holds ``trials.parquet`` (read by ``bayesrc.data.load_trials``) and
    ``run.json``; the two runs' pins differ only in ``model.*``. Re-running resumes (a
    complete run is left as is), so the call is idempotent.
    """
    from bayesrc.collect.card import load_card, resolve_model
    from bayesrc.collect.run import collect

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bank = builtin_bank(out_dir / "bank.jsonl", n_items=n_items, seed=seed)
    base_card = load_card(card or DEMO_CARD)
    src = resolve_model(base_card)
    qdir = out_dir / "models"
    q3 = requantize(src, qdir / "gemma-3-270m-q3_k_m.gguf", "Q3_K_M")
    text = Path(base_card.card_path).read_text(encoding="utf-8")
    text = text.replace(f'label = "{base_card.label}"', 'label = "gemma-3-270m-Q3_K_M"')
    text = "\n".join(line for line in text.splitlines() if not line.strip().startswith(("path =", "package =", "module =", "sha256 =")))
    text = text.replace("[model]", f'[model]\npath = "{q3.name}"', 1)
    atomic_write_text(qdir / "gemma-3-270m-q3_k_m.toml", text + "\n")
    runs = {}
    for name, c in (("v1", base_card.card_path), ("v2", qdir / "gemma-3-270m-q3_k_m.toml")):
        collect(c, bank, out_dir / name, k=k, temperature=temperature, engine=engine, resume=True, progress=progress)
        runs[name] = out_dir / name
    return runs
