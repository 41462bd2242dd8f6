"""Sampling settings, the sample record, and the llama.cpp sampler chains every engine draws with."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from bayesrc.collect.model import Model


@dataclass(frozen=True)
class Sampling:
    """Sampling settings (pinned in run.json). Defaults are llama-cpp-python's, T from the CLI."""

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    max_tokens: int = 8

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Sample:
    k: int
    seed: int
    response: str
    n_tokens: int
    finish: str  # "decided" (fast engine stopped early), "length", "stop" (end of generation)


def make_sampler(model: Model, sampling: Sampling, seed: int):
    """The sampler chain ``create_completion(seed=seed)`` builds, so all engines draw alike."""
    s, llm = sampling, model.llm
    llm.set_seed(seed)
    return llm._init_sampler(  # noqa: SLF001
        top_k=s.top_k,
        top_p=s.top_p,
        min_p=s.min_p,
        typical_p=s.typical_p,
        temp=s.temperature,
        repeat_penalty=s.repeat_penalty,
    )


class SharedDraws:
    """Seeded draws of several samples from one set of logits, the chain's deterministic part run once.

    ``create_completion``'s chain is penalties, top-k, typical, top-p, min-p, temperature,
    then ``dist`` seeded per sample. With the penalties off (``repeat_penalty = 1``, the
    default) everything before ``dist`` is a pure function of the logits, so for samples
    that share a prefix (hence logits) it is applied once to the full-vocabulary candidate
    array (the costly part: Gemma-3 has 262,144 tokens), and each sample's own ``dist``
    sampler (seeded like the chain's, its RNG advancing once per draw as in the chain) runs
    on a copy of the few surviving candidates. Bitwise the draws of the full chains
    (llama.cpp's ``llama_sampler_sample``: the same candidate array, the same applies);
    checked trial by trial against the naive engine in the tests.
    """

    def __init__(self, model: Model, sampling: Sampling, seeds: list[int]):
        import llama_cpp as lc  # deferred: llama.cpp's library, only to collect (collect extra)

        s = sampling
        self.lc, self.np = lc, np
        self.filter = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        for smp in (
            lc.llama_sampler_init_top_k(s.top_k),
            lc.llama_sampler_init_typical(s.typical_p, 1),
            lc.llama_sampler_init_top_p(s.top_p, 1),
            lc.llama_sampler_init_min_p(s.min_p, 1),
            lc.llama_sampler_init_temp(s.temperature),
        ):
            lc.llama_sampler_chain_add(self.filter, smp)  # the chain owns and frees them
        self.dists = [lc.llama_sampler_init_dist(seed) for seed in seeds]
        self.ctx = model.llm._ctx.ctx  # noqa: SLF001
        self.n_vocab = lc.llama_vocab_n_tokens(model.llm._model.vocab)  # noqa: SLF001
        self.buf = (lc.llama_token_data * self.n_vocab)()
        self.arr = np.ctypeslib.as_array(self.buf)
        self.ids = np.arange(self.n_vocab, dtype=self.arr["id"].dtype)

    @staticmethod
    def applies(sampling: Sampling) -> bool:
        """Whether the shared path reproduces the chain: temperature > 0 and penalties off."""
        return sampling.temperature > 0 and sampling.repeat_penalty == 1.0

    def draw(self, ks: list[int], *, ctx=None, index: int = -1) -> list[int]:
        """One token for each sample in ``ks`` from the logits of output ``index`` of ``ctx``
        (default: the model's context, its last output)."""
        lc, np = self.lc, self.np
        logits = np.ctypeslib.as_array(
            lc.llama_get_logits_ith(self.ctx if ctx is None else ctx, index), shape=(self.n_vocab,)
        )
        self.arr["id"] = self.ids
        self.arr["logit"] = logits
        self.arr["p"] = 0.0
        cur = lc.llama_token_data_array(self.buf, self.n_vocab, -1, False)
        lc.llama_sampler_apply(self.filter, ctypes.byref(cur))
        m, size = cur.size, ctypes.sizeof(lc.llama_token_data)
        out = []
        for k in ks:
            cand = (lc.llama_token_data * m)()
            ctypes.memmove(cand, cur.data, m * size)
            arr = lc.llama_token_data_array(cand, m, cur.selected, cur.sorted)
            lc.llama_sampler_apply(self.dists[k], ctypes.byref(arr))
            out.append(int(cand[arr.selected].id))
        return out

    def close(self) -> None:
        self.lc.llama_sampler_free(self.filter)
        for d in self.dists:
            self.lc.llama_sampler_free(d)
        self.dists = []
