"""The built-in demo: an item bank the project writes itself, and two version conditions.

The bank holds easy 4-option questions (arithmetic, capitals, opposites, plurals,
sequences, animal sounds, colours) so that even a 270M base model lands between floor and
ceiling on many items. The two conditions are a version change a user would recognise:
the same Gemma-3-270M weights as shipped (Q4_K_M) and re-quantised to Q3_K_M with
llama.cpp's own quantiser (``llama_model_quantize``), with the prompt, bank and sampling
pinned identical, so ``bayesrc pins`` reports only ``model.*`` differences.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from bayesrc.io import atomic_write_text

_CAPITALS = {
    "France": "Paris", "Germany": "Berlin", "Italy": "Rome", "Spain": "Madrid", "Japan": "Tokyo",
    "Egypt": "Cairo", "Russia": "Moscow", "England": "London", "Greece": "Athens", "Canada": "Ottawa",
    "Australia": "Canberra", "China": "Beijing", "Portugal": "Lisbon", "Ireland": "Dublin", "Norway": "Oslo",
    "Sweden": "Stockholm", "Austria": "Vienna", "Poland": "Warsaw", "Kenya": "Nairobi", "Peru": "Lima",
    "Cuba": "Havana", "Turkey": "Ankara", "India": "New Delhi", "Mexico": "Mexico City", "Argentina": "Buenos Aires",
}
_OPPOSITES = {
    "hot": "cold", "big": "small", "up": "down", "fast": "slow", "happy": "sad", "light": "dark", "old": "young",
    "open": "closed", "early": "late", "full": "empty", "wet": "dry", "hard": "soft", "high": "low", "rich": "poor",
    "strong": "weak", "long": "short", "loud": "quiet", "clean": "dirty", "thick": "thin", "heavy": "light",
}
_PLURALS = {
    "mouse": "mice", "child": "children", "foot": "feet", "tooth": "teeth", "man": "men", "woman": "women",
    "goose": "geese", "cat": "cats", "box": "boxes", "city": "cities", "knife": "knives", "leaf": "leaves",
    "person": "people", "ox": "oxen", "baby": "babies", "dog": "dogs",
}
_SOUNDS = {"cow": "moo", "dog": "woof", "cat": "meow", "duck": "quack", "sheep": "baa", "lion": "roar", "owl": "hoot", "pig": "oink", "snake": "hiss", "horse": "neigh"}
_COLOURS = {"the sky on a clear day": "blue", "grass": "green", "snow": "white", "a ripe banana": "yellow", "coal": "black", "a ripe tomato": "red", "an orange": "orange", "chocolate": "brown"}

LETTERS = "ABCD"


def _mc(rng: random.Random, correct: str, pool: list[str]) -> tuple[list[str], str]:
    distract = rng.sample([p for p in pool if p != correct], 3)
    opts = distract + [correct]
    rng.shuffle(opts)
    return opts, LETTERS[opts.index(correct)]


def _pair_item(rng, table: dict, q: str, invert: bool = False):
    key = rng.choice(sorted(table))
    correct = table[key]
    pool = sorted(set(table.values()))
    if invert:  # ask for the key from the value
        correct, key = key, correct
        pool = sorted(table)
    return q.format(key), *_mc(rng, correct, pool)


def _arith(rng):
    a, b = rng.randint(1, 20), rng.randint(1, 20)
    op = rng.choice("+-") if a >= b else "+"
    ans = a + b if op == "+" else a - b
    pool = sorted({ans + d for d in (-3, -2, -1, 1, 2, 3, 10) if ans + d >= 0})
    opts, letter = _mc(rng, str(ans), [str(p) for p in pool])
    return f"What is {a} {op} {b}?", opts, letter


def _sequence(rng):
    start, step = rng.randint(1, 10), rng.randint(1, 5)
    seq = [start + i * step for i in range(4)]
    ans = start + 4 * step
    pool = sorted({ans + d for d in (-2, -1, 1, 2, step, -step) if ans + d > 0 and d != 0})
    opts, letter = _mc(rng, str(ans), [str(p) for p in pool])
    return f"What number comes next: {', '.join(map(str, seq))}, ...?", opts, letter


_KINDS = {
    "arithmetic": _arith,
    "sequence": _sequence,
    "capital": lambda rng: _pair_item(rng, _CAPITALS, "What is the capital of {}?"),
    "opposite": lambda rng: _pair_item(rng, _OPPOSITES, "What is the opposite of '{}'?"),
    "plural": lambda rng: _pair_item(rng, _PLURALS, "What is the plural of '{}'?"),
    "animal": lambda rng: _pair_item(rng, _SOUNDS, "Which animal says '{}'?", invert=True),
    "colour": lambda rng: _pair_item(rng, _COLOURS, "What colour is {}?"),
}


def builtin_items(n_items: int = 60, seed: int = 0) -> list[dict]:
    """``n_items`` distinct 4-option items, cycling through the kinds (domain = kind)."""
    rng = random.Random(seed)
    kinds = list(_KINDS)
    items, seen = [], set()
    tries = 0
    while len(items) < n_items:
        kind = kinds[len(items) % len(kinds)]
        question, opts, letter = _KINDS[kind](rng)
        tries += 1
        if question in seen and tries < 50 * n_items:
            continue
        seen.add(question)
        items.append({"item_id": f"demo-{len(items):04d}", "domain": kind, "question": question, "options": opts, "answer": letter})
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
