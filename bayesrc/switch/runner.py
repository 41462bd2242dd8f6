"""Episode runner: a switch matrix on local GGUF models (paper 004 section 2).

Built-in task ``kv-recall``: in the first ``n_turns − 1`` turns the user states facts
("Remember: the colour is red."), which the assistant acknowledges; the final turn asks
for one of them. Under the final-turn switch policy the prefix model writes the first
``n_turns − 1`` assistant turns and the suffix model the last one; the episode score is
1 if the last reply names the right value and no other value of the episode, else 0
(exact, automatic).
The diagonal a → a is the no-switch baseline.

Prefixes are cached on disk keyed by (task, episode, prefix model) --
``cache/<task>/<prefix model>/<episode>.json`` -- and reused by every suffix model and by
later runs. A "model" is a :class:`RunnerModel`: a model card plus a prompt style and a
temperature, so one GGUF under two styles gives two models whose prefixes differ in form
(the context mismatch the switch matrix measures). Models are loaded through
:mod:`bayesrc.collect` (``load_card`` / ``resolve_model`` / ``Model``); the bundled base
model has no chat template, so prompts are plain completions with a worked example.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrc.collect.card import load_card, resolve_model
from bayesrc.collect.model import Model
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_json

TASK = "kv-recall"

KEYS: tuple[str, ...] = ("colour", "animal", "city", "fruit", "metal", "planet")
VALUES: dict[str, tuple[str, ...]] = {
    "colour": ("red", "blue", "green", "yellow", "purple"),
    "animal": ("horse", "tiger", "rabbit", "eagle", "otter"),
    "city": ("Paris", "Tokyo", "Lima", "Oslo", "Cairo"),
    "fruit": ("apple", "mango", "cherry", "lemon", "plum"),
    "metal": ("iron", "copper", "silver", "zinc", "gold"),
    "planet": ("Mars", "Venus", "Saturn", "Jupiter", "Mercury"),
}

# How each style acknowledges a fact and answers the final question; the worked
# example is written in the model's own style, the episode history in whoever's.
STYLES: dict[str, dict[str, str]] = {
    "plain": {"ack": "OK.", "answer": "{value}"},
    "sentence": {"ack": "Noted: the {key} is {value}.", "answer": "The {key} is {value}."},
}


@dataclass(frozen=True)
class RunnerModel:
    """A switch-matrix "model": a GGUF card under a prompt style and temperature."""

    label: str
    card: str | Path
    style: str = "plain"
    temperature: float = 0.0
    max_tokens: int = 12

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise InputError(f"unknown style {self.style!r}; choose from {sorted(STYLES)}", field="style")


@dataclass(frozen=True)
class Episode:
    """``facts`` are told one per turn; the final turn asks for ``query``."""

    id: str
    facts: tuple[tuple[str, str], ...]
    query: str

    @property
    def target(self) -> str:
        return dict(self.facts)[self.query]

    @property
    def n_turns(self) -> int:
        return len(self.facts) + 1

    def user_turn(self, t: int) -> str:
        if t < len(self.facts):
            k, v = self.facts[t]
            return f"Remember: the {k} is {v}."
        return f"What is the {self.query}?"


def make_episodes(n: int, *, n_turns: int = 3, seed: int = 0) -> list[Episode]:
    """``n`` deterministic episodes: ``n_turns − 1`` facts, then one question."""
    if not 2 <= n_turns <= len(KEYS) + 1:
        raise InputError(f"n_turns must be in 2..{len(KEYS) + 1}, got {n_turns}", field="n_turns")
    rng = np.random.default_rng(seed)
    eps = []
    for i in range(n):
        keys = rng.choice(len(KEYS), n_turns - 1, replace=False)
        facts = tuple((KEYS[j], VALUES[KEYS[j]][int(rng.integers(len(VALUES[KEYS[j]])))]) for j in keys)
        eps.append(Episode(f"kv{i:04d}", facts, facts[int(rng.integers(len(facts)))][0]))
    return eps


_EXAMPLE = Episode("example", (("drink", "tea"), ("tool", "hammer")), "drink")


def _reply(style: str, ep: Episode, t: int) -> str:
    k, v = ep.facts[t] if t < len(ep.facts) else (ep.query, ep.target)
    return STYLES[style]["ack" if t < len(ep.facts) else "answer"].format(key=k, value=v)


def _render(ep: Episode, replies: list[str]) -> str:
    lines = []
    for t in range(len(replies) + 1):
        lines.append(f"User: {ep.user_turn(t)}")
        lines.append(f"Assistant: {replies[t]}" if t < len(replies) else "Assistant:")
    return "\n".join(lines)


def build_prompt(model: RunnerModel, ep: Episode, replies: list[str]) -> str:
    """Plain-completion prompt: a worked example in the model's own style, then the
    episode so far with earlier replies verbatim (whoever wrote them)."""
    example = _render(_EXAMPLE, [_reply(model.style, _EXAMPLE, t) for t in range(_EXAMPLE.n_turns)])
    head = "A conversation in which the assistant remembers what the user tells it.\n\n"
    return head + example + "\n\n" + _render(ep, replies)


def score_reply(ep: Episode, text: str) -> float:
    """1 if the reply names the right value and no other value of the episode, else 0."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
    others = {v.lower() for _, v in ep.facts if v != ep.target}
    return float(ep.target.lower() in words and not (words & others))


class _Backend:
    """Loads each GGUF once (via bayesrc.collect) and generates greedy or seeded text."""

    def __init__(self) -> None:
        self._models: dict[Path, object] = {}
        self.calls = 0

    def _llm(self, card_path: str | Path):
        card = load_card(card_path)
        path = resolve_model(card)
        if path not in self._models:
            self._models[path] = Model(
                path,
                n_ctx=card.n_ctx,
                n_batch=card.n_batch,
                n_gpu_layers=card.n_gpu_layers,
                n_threads=card.n_threads,
                label=card.label,
            )
        return self._models[path].llm

    def generate(self, model: RunnerModel, prompt: str, seed: int) -> str:
        llm = self._llm(model.card)
        self.calls += 1
        out = llm.create_completion(
            prompt, max_tokens=model.max_tokens, temperature=model.temperature, seed=seed, stop=["\n"]
        )
        return out["choices"][0]["text"].strip()

    def close(self) -> None:
        for m in self._models.values():
            m.close()
        self._models.clear()


def _seed(ep_index: int, turn: int) -> int:
    return ep_index * 10 + turn


def run_switch_matrix(
    models: Iterable[RunnerModel],
    *,
    n_episodes: int = 20,
    n_turns: int = 3,
    cache_dir: str | Path,
    seed: int = 0,
    backend: _Backend | None = None,
) -> pd.DataFrame:
    """Run every ordered (prefix, suffix) pair on ``n_episodes`` episodes.

    Returns episode-level scores (benchmark, episode, prefix_model, suffix_model,
    score, response, target) ready for :func:`bayesrc.switch.load_switch` /
    :func:`bayesrc.switch.episodes_from_frame`.
    """
    models = list(models)
    labels = [m.label for m in models]
    if len(set(labels)) != len(labels) or len(models) < 2:
        raise InputError(f"need at least two models with distinct labels, got {labels}", field="label")
    own = backend is None
    backend = backend or _Backend()
    cache = Path(cache_dir) / TASK
    episodes = make_episodes(n_episodes, n_turns=n_turns, seed=seed)
    rows = []
    try:
        for pm in models:
            for i, ep in enumerate(episodes):
                replies = _prefix(backend, pm, ep, i, cache)
                for sm in models:
                    text = backend.generate(sm, build_prompt(sm, ep, replies), _seed(i, n_turns - 1))
                    rows.append(
                        {
                            "benchmark": TASK,
                            "episode": ep.id,
                            "prefix_model": pm.label,
                            "suffix_model": sm.label,
                            "score": score_reply(ep, text),
                            "response": text,
                            "target": ep.target,
                        }
                    )
    finally:
        if own:
            backend.close()
    return pd.DataFrame(rows)


def _prefix(backend: _Backend, model: RunnerModel, ep: Episode, i: int, cache: Path) -> list[str]:
    """The prefix model's first n_turns − 1 replies, from the disk cache when present."""
    path = cache / re.sub(r"[^A-Za-z0-9_.-]+", "_", model.label) / f"{ep.id}.json"
    # The key also records what the prefix depends on, so a changed model or episode is regenerated.
    key = {
        "task": TASK,
        "episode": ep.id,
        "prefix_model": model.label,
        "card": str(model.card),
        "style": model.style,
        "temperature": model.temperature,
        "facts": [list(f) for f in ep.facts],
    }
    if path.exists():
        rec = json.loads(path.read_text())
        if rec.get("key") == key:
            return list(rec["replies"])
    replies: list[str] = []
    for t in range(len(ep.facts)):
        replies.append(backend.generate(model, build_prompt(model, ep, replies), _seed(i, t)))
    atomic_write_json(path, {"key": key, "replies": replies})
    return replies
