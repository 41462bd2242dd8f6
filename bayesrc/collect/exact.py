"""The exact engine: an item's answer distribution computed, not sampled (SPEC section 7).

For a fixed model file, prompt and sampling settings, the answer a seeded
``create_completion`` call returns is a deterministic function of the logits and the
seed, so the *distribution* of the answer over seeds is a function of the logits alone.
The exact engine computes it by walking the tree of token prefixes:

1. The item's prompt is evaluated as the other engines evaluate it,
   :meth:`Model.eval_prompt` on its two canonical blocks (the same logits), or under
   ``scheme="whole"`` in one piece from an emptied cache (the logits ``create_completion``
   computes on a fresh context; :data:`~bayesrc.data.provenance.SCHEMES`).
2. At each prefix, the next-token distribution is what ``create_completion``'s sampler
   chain draws from. The chain is *llama.cpp's own*: the engine builds it with the very
   call the fast engine uses (``Llama._init_sampler``: penalties, top-k, typical-p, top-p,
   min-p, temperature, dist; ``min_keep = 1``), replays the prefix into it
   (``llama_sampler_accept``, which is all the repeat-penalty state there is), and applies
   it with ``llama_sampler_apply`` to the candidate array ``llama_sampler_sample`` would
   build (every token id in order, its logit from ``llama_get_logits_ith(ctx, -1)``). The
   ``dist`` sampler leaves on each surviving candidate its normalised probability
   ``expf(l_i - l_max) / sum_j expf(l_j - l_max)`` (after truncation and temperature),
   which is the probability that its uniform draw selects that candidate. So truncation
   rules, ``min_keep``, float32 arithmetic and tie handling are those of the library, not
   a re-implementation; only the final random draw is replaced by its probabilities.
   At temperature 0 the chain ends in ``greedy`` and the selected token has probability 1.
3. A child prefix ends when the fast engine's sample would end: end-of-generation (the
   answer is extracted from the text so far), ``max_tokens`` reached, or its answer
   decided (:func:`bayesrc.collect.extract.decided`: " B", "B" and "B." all decide B once a
   character follows the letter). Otherwise it is expanded (one single-token decode; the
   KV cache is truncated back to the branch point, depth first) if its probability is at
   least ``epsilon``; its mass is *unresolved* if not (or if the item's expansion budget
   ``max_expansions`` is spent).

Per item the result is P(answer = letter) for each option letter, P(no valid answer)
(``p_missing``: the response ends or reaches ``max_tokens`` without a valid letter) and
``p_unresolved`` (mass left unexpanded: an upper bound on the error of every other
probability). They sum to 1. Each item is computed from a freshly evaluated prompt, so
neither item order nor resuming changes a single probability.

Example
-------
>>> from bayesrc.collect import collect
>>> collect("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/exact-q4", engine="exact")  # doctest: +SKIP
>>> from bayesrc.data import load_exact
>>> run = load_exact("runs/exact-q4")  # run.dist, run.items  # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesrc.collect.engines import FastEngine, ItemJob
from bayesrc.collect.extract import decided, extract
from bayesrc.collect.model import Model, Prompt, as_prompt
from bayesrc.collect.sampling import Sampling, make_sampler
from bayesrc.errors import InputError

DEFAULT_EPSILON = 1e-6
DEFAULT_MAX_EXPANSIONS = 20_000
DIST_COLUMNS = ("item_id", "domain", "answer", "prob", "is_correct")
ITEM_COLUMNS = ("item_id", "domain", "p_correct", "p_missing", "p_unresolved", "n_expanded")
PART_EXTRA = ("item_index", "correct_answer", "p_unresolved", "n_expanded")


def check_epsilon(epsilon: float) -> float:
    """Validate the pruning threshold: ``0 < epsilon < 0.1`` (else :class:`InputError`)."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise InputError(f"must be a number in (0, 0.1), got {epsilon!r}", field="epsilon") from None
    if not 0.0 < eps < 0.1:  # also refuses NaN
        raise InputError(f"must be in (0, 0.1), got {epsilon}", field="epsilon")
    return eps


@dataclass
class ItemDistribution:
    """The exact answer distribution of one item.

    ``probs`` maps each option letter (and ``None``: no valid answer) to its probability;
    ``p_unresolved`` is the unexpanded mass; ``n_expanded`` the number of decodes
    (prefixes expanded, the prompt's own logits counting as the first).
    """

    probs: dict[str | None, float]
    p_unresolved: float
    n_expanded: int
    letters: str = ""
    n_leaves: int = 0
    truncated: bool = False  # the expansion budget ran out
    extra: dict = field(default_factory=dict)

    @property
    def p_missing(self) -> float:
        return self.probs.get(None, 0.0)

    def p(self, letter: str) -> float:
        return self.probs.get(letter, 0.0)


_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # llama_token_data


class ExactEngine(FastEngine):
    """Exact answer distributions (module docstring). Shares prompt evaluation and the
    sampler chain's construction with :class:`~bayesrc.collect.engines.FastEngine`."""

    name = "exact"

    def __init__(
        self,
        model: Model,
        sampling: Sampling,
        *,
        epsilon: float = DEFAULT_EPSILON,
        max_expansions: int = DEFAULT_MAX_EXPANSIONS,
        scheme: str = "blocks",
    ):
        super().__init__(model, sampling, scheme=scheme)
        self.epsilon = check_epsilon(epsilon)
        if int(max_expansions) < 1:
            raise InputError(f"must be >= 1, got {max_expansions}", field="max_expansions")
        self.max_expansions = int(max_expansions)
        if sampling.temperature < 0:
            raise InputError(f"must be >= 0 for the exact engine, got {sampling.temperature}", field="temperature")
        import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

        self._n_vocab = llama_cpp.llama_vocab_n_tokens(model.llm._model.vocab)  # noqa: SLF001
        self._cand = np.zeros(self._n_vocab, dtype=_TOKEN_DATA)
        self._ids = np.arange(self._n_vocab, dtype=np.int32)

    def draw_items(self, jobs: Iterable[ItemJob]) -> Iterator[tuple[int, ItemDistribution]]:
        """The :class:`~bayesrc.collect.engines.Engine` protocol: each job's :meth:`item_distribution` in turn
        (its seeds unused)."""
        for job in jobs:
            yield job.index, self.item_distribution(job.prompt, job.letters)

    def next_token_probs(self, prefix: tuple[int, ...] | list[int]) -> list[tuple[int, float]]:
        """The next-token distribution create_completion's chain draws from, given the
        generated ``prefix`` (the context must hold the logits of prompt + prefix).

        Returns ``[(token, probability), ...]`` over the candidates that survive the chain,
        probabilities summing to 1 (the dist sampler's float32 values, renormalised in float64).
        """
        import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

        llm = self.model.llm
        # the chain create_completion builds; its seed is irrelevant here
        chain = make_sampler(self.model, self.sampling, 0)
        for tok in prefix:  # penalty state: the tokens generated so far
            chain.accept(tok)
        logits = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)  # noqa: SLF001 - what llama_sampler_sample reads
        cand = self._cand
        cand["id"] = self._ids
        cand["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        cand["p"] = 0.0
        arr = llama_cpp.llama_token_data_array(
            data=cand.ctypes.data_as(llama_cpp.llama_token_data_p), size=self._n_vocab, selected=-1, sorted=False
        )
        llama_cpp.llama_sampler_apply(chain.sampler, ctypes.byref(arr))
        n, sel = int(arr.size), int(arr.selected)
        chain.close()
        if not 0 <= sel < n:
            raise RuntimeError(f"sampler chain selected no token (size {n}, selected {sel})")
        if self.sampling.temperature == 0.0:  # greedy: its pick is certain
            return [(int(cand["id"][sel]), 1.0)]
        p = cand["p"][:n].astype(np.float64)
        p /= p.sum()
        ids = cand["id"][:n]
        return [(int(t), float(q)) for t, q in zip(ids, p) if q > 0.0]

    def item_distribution(self, prompt: Prompt | list[int], letters: str) -> ItemDistribution:
        """Expand the item's prefix tree (module docstring) and return its answer distribution."""
        import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

        llm, max_tokens, eps = self.model.llm, self.sampling.max_tokens, self.epsilon
        vocab = llm._model.vocab  # noqa: SLF001
        prompt = as_prompt(prompt)
        self.model.eval_prompt(prompt, scheme=self.scheme)  # evaluated as the fast and naive engines evaluate it
        n0 = len(prompt)

        def text_of(toks) -> str:  # as the fast engine decodes a response
            return llm.detokenize(list(toks), prev_tokens=prompt.tokens).decode("utf-8", errors="ignore")

        mass: dict[str | None, float] = {c: 0.0 for c in letters}
        mass[None] = 0.0
        unresolved, n_expanded, n_leaves = 0.0, 0, 0
        stack: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
        while stack:
            if n_expanded >= self.max_expansions:
                unresolved += sum(pr for _, pr in stack)
                return ItemDistribution(mass, unresolved, n_expanded, letters, n_leaves, truncated=True)
            prefix, prob = stack.pop()
            if prefix:  # depth first: the cache holds prompt + prefix[:-1] (later positions dropped)
                llm.n_tokens = n0 + len(prefix) - 1
                llm.eval([prefix[-1]])
            n_expanded += 1
            children = []
            for tok, q in self.next_token_probs(prefix):
                pc = prob * q
                if llama_cpp.llama_vocab_is_eog(vocab, tok):
                    mass[extract(text_of(prefix), letters).answer] += pc
                    n_leaves += 1
                    continue
                toks = prefix + (tok,)
                text = text_of(toks)
                if len(toks) >= max_tokens or decided(text, letters):
                    mass[extract(text, letters).answer] += pc
                    n_leaves += 1
                elif pc >= eps:
                    children.append((toks, pc))
                else:
                    unresolved += pc
            children.sort(key=lambda c: c[1])  # the most probable child is expanded first
            stack.extend(children)
        return ItemDistribution(mass, unresolved, n_expanded, letters, n_leaves)


# -- run-directory frames ----------------------------------------------------------------
def item_frame(item, dist: ItemDistribution) -> pd.DataFrame:
    """One item's part: a row per option letter and one for no valid answer (``answer`` null)."""
    answers = [*item.letters, None]
    df = pd.DataFrame(
        {
            "item_id": item.item_id,
            "domain": item.domain,
            "answer": pd.array(answers, dtype="string"),
            "prob": [float(dist.probs.get(a, 0.0)) for a in answers],
            "is_correct": pd.array([None if a is None else a == item.answer for a in answers], dtype="boolean"),
            "item_index": item.index,
            "correct_answer": item.answer,
            "p_unresolved": float(dist.p_unresolved),
            "n_expanded": int(dist.n_expanded),
        }
    )
    df["item_index"] = df["item_index"].astype("int64")
    df["n_expanded"] = df["n_expanded"].astype("int64")
    return df


def compact(parts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parts (bank order) -> ``(dist, items_exact)`` frames as written to the run directory."""
    parts = parts.sort_values(["item_index"], kind="stable").reset_index(drop=True)
    dist = parts[[*DIST_COLUMNS, "item_index"]].copy()
    g = parts.groupby("item_index", sort=True)
    first = g.first()
    items = pd.DataFrame(
        {
            "item_id": first["item_id"],
            "domain": first["domain"],
            "p_correct": g.apply(
                lambda d: float(d.loc[d["is_correct"].fillna(False).astype(bool), "prob"].sum()), include_groups=False
            ),
            "p_missing": g.apply(lambda d: float(d.loc[d["answer"].isna(), "prob"].sum()), include_groups=False),
            "p_unresolved": first["p_unresolved"].astype(float),
            "n_expanded": first["n_expanded"].astype("int64"),
            "correct_answer": first["correct_answer"],
        }
    ).reset_index()
    return dist, items[[*ITEM_COLUMNS, "item_index", "correct_answer"]]
