"""What a collection run is asked to do, validated once: :class:`RunSpec`.

Every way of running a collection reads the same object: the local engines
(:func:`bayesrc.collect.run.collect`), the server engine
(:func:`bayesrc.collect.server.collect_server`) and Ray's shards
(:func:`bayesrc.scale.collect.collect_ray`, one copy of the spec per shard with its item
range). It holds the settings that decide which trials are drawn (K, sampling, seeds, the
item selection, the engine and its evaluation scheme), not how a call runs (resume, progress,
a preloaded model), and refuses a bad setting before anything is loaded or written
(:class:`~bayesrc.errors.InputError`, CLI exit 2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bayesrc.collect.bank import Bank, Item
from bayesrc.collect.batching import check_items_per_batch
from bayesrc.collect.card import ModelCard, sha256_text
from bayesrc.collect.engines import ENGINES, ItemJob
from bayesrc.collect.exact import DEFAULT_MAX_EXPANSIONS, check_epsilon
from bayesrc.collect.model import check_scheme
from bayesrc.collect.rundir import check_sampling_args, item_seeds, select_range, version_pin
from bayesrc.collect.sampling import Sampling
from bayesrc.data.seeds import seed_rule_text, seed_salt
from bayesrc.errors import InputError

#: every engine a run can name: the sampling engines, the exact distribution, a server
ENGINE_NAMES = (*ENGINES, "exact", "server")


@dataclass(frozen=True)
class RunSpec:
    """A collection run's settings, checked and completed when made (:func:`bayesrc.collect.collect` runs it).

    Parameters
    ----------
    k, temperature, top_k, top_p, min_p
        Samples per item (any K up to 4,096) and the sampling settings.
    engine
        ``"fast"`` (own block evaluated once, K samplers continued as a prefix tree), ``"naive"``
        (every trial from scratch), ``"exact"`` (each item's answer distribution instead of
        samples: :mod:`bayesrc.collect.exact`; ``k`` becomes 1, ``epsilon`` in (0, 0.1) is the
        pruning threshold, ``max_expansions`` the per-item decode budget, ``None`` the default)
        or ``"server"`` (a completions endpoint: :func:`bayesrc.collect.server.collect_server`).
    scheme
        How a local engine evaluates a prompt: ``"blocks"`` (shared block's KV kept, own block
        decoded after it) or ``"whole"`` (in one piece on an emptied cache, as
        ``create_completion``); pinned as ``prompt.blocks``, since llama.cpp's logits depend on
        the batch split.
    items_per_batch
        ``N > 1`` (fast engine): the items with the same ``index // N`` evaluated together, as
        sequences of one decode (:meth:`~bayesrc.collect.engines.FastEngine.sample_items`),
        always whole, so item order, shards and resume points change no trial. A prompt pin.
    seed_stride, seed_offset, seed_rule
        ``seed_stride`` ``None`` is the default seed rule (:func:`bayesrc.data.seeds.sample_seeds`:
        a seed depends on the item and k alone, so K does not move one); ``seed_rule``
        ``"version"`` salts the seeds with the version's pin, ``"shared"`` is the reference
        study's (:mod:`bayesrc.data.seeds`).
    items_range, shard
        The items to draw: ``(start, stop)`` or ``"start:stop"``, or ``"i/n"``.
    label
        The version's name (default: the card's).
    threads
        Overrides the card's ``n_threads`` (default: all physical cores; a worker sharing the
        machine passes its share). A runtime pin: it does not change the trials, but a resumed
        run must use the same.

    Examples
    --------
    >>> spec = RunSpec(k=40)
    >>> spec.seed_stride, spec.per_item, spec.seeds(Item(3, "q3", "math", "?", ("a", "b"), "A"))[9:11]
    (None, 40, [39, 5242883])
    >>> RunSpec(k=0)
    Traceback (most recent call last):
    bayesrc.errors.InputError: <input>: field 'k': must be >= 1, got 0
    """

    k: int = 10
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    engine: str = "fast"
    scheme: str = "blocks"
    items_per_batch: int = 1
    seed_stride: int | None = None
    seed_offset: int = 0
    seed_rule: str = "version"
    items_range: tuple[int, int] | str | None = None
    shard: str | None = None
    label: str | None = None
    threads: int | None = None
    epsilon: float = 1e-6
    max_expansions: int | None = None

    def __post_init__(self) -> None:
        # Frozen: completed fields are set through object.__setattr__, once, here.
        for name, value in _completed(self).items():
            object.__setattr__(self, name, value)

    @property
    def exact(self) -> bool:
        """Whether the run computes answer distributions (no samples, no seeds)."""
        return self.engine == "exact"

    @property
    def per_item(self) -> int:
        """Trials each item adds to the run: K, or 0 for an exact run."""
        return 0 if self.exact else self.k

    @property
    def progress_unit(self) -> tuple[str, int]:
        """What a progress bar counts and how many of it each item adds: trials (K), or items for an exact run."""
        return ("item", 1) if self.exact else ("trial", self.k)

    def sampling(self, max_tokens: int) -> Sampling:
        """The engines' sampling settings; ``max_tokens`` is the card's."""
        return Sampling(
            temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, min_p=self.min_p, max_tokens=max_tokens
        )

    def item_range(self, n_items: int) -> tuple[int, int]:
        """The bank slice ``[start, stop)`` the run collects from a bank of ``n_items``."""
        return select_range(n_items, self.items_range, self.shard)

    def seeds(self, item: Item, salt: int = 0) -> list[int]:
        """The K sampling seeds of ``item`` (``salt``: the run's ``model.seed_salt`` pin, 0 under the shared rule)."""
        return item_seeds(item, self.k, stride=self.seed_stride, offset=self.seed_offset, salt=salt)

    def jobs(self, items, prompts: dict, salt: int = 0):
        """The engine's jobs (:class:`~bayesrc.collect.engines.ItemJob`) for ``items``, in order: each item's
        prompt from ``prompts`` (by bank index), its :meth:`seeds` and its option letters."""
        return (ItemJob(it.index, prompts[it.index], self.seeds(it, salt), it.letters) for it in items)

    def for_range(self, rng: tuple[int, int]) -> RunSpec:
        """This spec restricted to the items ``rng`` (a Ray shard's)."""
        return dataclasses.replace(self, items_range=tuple(rng), shard=None)


def as_spec(spec: RunSpec | None, settings: dict) -> RunSpec:
    """A run's settings given either way: the ``spec`` itself, or one made from its fields as keywords.

    Examples
    --------
    >>> as_spec(None, {"k": 40}) == as_spec(RunSpec(k=40), {})
    True
    >>> as_spec(RunSpec(), {"k": 40})
    Traceback (most recent call last):
    TypeError: give a run's settings as a RunSpec or as keywords, not both (got k beside a RunSpec)
    """
    if spec is None:
        return RunSpec(**settings)
    if settings:
        raise TypeError(
            f"give a run's settings as a RunSpec or as keywords, not both "
            f"(got {', '.join(sorted(settings))} beside a RunSpec)"
        )
    return spec


def _completed(spec: RunSpec) -> dict:
    """The spec's checked fields with their defaults filled in (:class:`InputError` for a bad one)."""
    engine = _check_engine(spec.engine)
    out = {"scheme": check_scheme(spec.scheme), "items_per_batch": check_items_per_batch(spec.items_per_batch)}
    if out["items_per_batch"] != 1 and engine != "fast":
        raise InputError(f"several items per decode needs the fast engine, not {engine!r}", field="items_per_batch")
    if engine == "server" and out["scheme"] != "blocks":
        raise InputError(
            "the server evaluates prompts its own way; --scheme applies to the local engines (fast, naive, exact)",
            field="scheme",
        )
    if spec.threads is not None and spec.threads < 1:
        raise InputError(f"must be >= 1, got {spec.threads}", field="threads")
    if engine == "exact":
        out |= {"k": 1, **_exact_args(spec.epsilon, spec.max_expansions)}  # k unused: no samples are drawn
    k = out.get("k", spec.k)
    check_sampling_args(
        k=k,
        seed_stride=spec.seed_stride,
        temperature=spec.temperature,
        seed_rule=spec.seed_rule,
        items_range=spec.items_range,
        shard=spec.shard,
    )
    return out


def _check_engine(engine: str) -> str:
    if engine not in ENGINE_NAMES:
        raise InputError(f"unknown engine {engine!r}; expected one of {sorted(ENGINE_NAMES)}", field="engine")
    return engine


def _exact_args(epsilon: float, max_expansions: int | None) -> dict:
    """The exact engine's checked pruning threshold and per-item decode budget
    (default :data:`~bayesrc.collect.exact.DEFAULT_MAX_EXPANSIONS`)."""
    budget = DEFAULT_MAX_EXPANSIONS if max_expansions is None else int(max_expansions)
    if budget < 1:
        raise InputError(f"must be >= 1, got {budget}", field="max-expansions")
    return {"epsilon": check_epsilon(epsilon), "max_expansions": budget}


# -- pins every engine records alike (bayesrc.collect.run.make_pins, bayesrc.collect.server.server_pins) --
def items_pins(bank: Bank, rng: tuple[int, int]) -> dict:
    """Which items a run draws: the bank's hash and size, the range."""
    return {"items.bank_sha256": bank.sha256, "items.n_bank": len(bank), "items.range": [rng[0], rng[1]]}


def prompt_pins(card: ModelCard) -> dict:
    """How the card renders a prompt (format, chat format, template and system prompt hashes) and reads
    the answer (``prompt.answer``, pinned where it is not the default first valid letter, so runs pinned
    before the rule existed still resume)."""
    return {
        "prompt.format": card.format,
        "prompt.chat_format": card.chat_format,
        "prompt.template_sha256": sha256_text(card.template),
        "prompt.system_sha256": sha256_text(card.system),
    } | ({"prompt.answer": card.answer} if card.answer != "first" else {})


def sampling_pins(spec: RunSpec, sampling: Sampling) -> dict:
    """K, the sampler settings and the seed rule's text (see :func:`salt_pins` for the version rule).

    Examples
    --------
    >>> sampling_pins(RunSpec(k=4), Sampling())["sampling.seed_rule"]
    '0 + item_index * 10 + k'
    """
    s = sampling
    return {
        "sampling.k": spec.k,
        "sampling.temperature": s.temperature,
        "sampling.top_k": s.top_k,
        "sampling.top_p": s.top_p,
        "sampling.min_p": s.min_p,
        "sampling.typical_p": s.typical_p,
        "sampling.repeat_penalty": s.repeat_penalty,
        "sampling.max_tokens": s.max_tokens,
        "sampling.seed_rule": seed_rule_text(spec.k, stride=spec.seed_stride, offset=spec.seed_offset),
    }


def salt_pins(spec: RunSpec, pins: dict, identity: str = "") -> dict:
    """The seed rule's pins under ``seed_rule = "version"``: the rule's text and ``model.seed_salt``,
    the salt drawn from the version's pin (plus ``identity``, what else names the version:
    a server's model id); nothing under the shared rule (salt 0, the plain rule's text)."""
    if spec.seed_rule != "version":
        return {}
    rule = "version: salt(model pin) + " + seed_rule_text(spec.k, stride=spec.seed_stride, offset=spec.seed_offset)
    return {"sampling.seed_rule": rule, "model.seed_salt": seed_salt(version_pin(pins) + identity)}


def pinned_salt(pins: dict) -> int:
    """The seed salt a run's ``pins`` hold (``model.seed_salt``; 0 under the shared rule: :func:`salt_pins`).

    Examples
    --------
    >>> pinned_salt({"model.seed_salt": 12345}), pinned_salt({})
    (12345, 0)
    """
    return int(pins.get("model.seed_salt", 0))
