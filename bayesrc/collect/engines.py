"""Engines: how the K samples of an item are drawn (SPEC section 6).

Every engine evaluates an item's prompt alike, as its two canonical token blocks or whole, as the
run's evaluation scheme says (:mod:`bayesrc.collect.model`: :meth:`~bayesrc.collect.model.Model.eval_prompt`,
:data:`~bayesrc.data.provenance.SCHEMES`).

All engines draw sample ``k`` of item ``i`` with its own sampler chain, built exactly as
``Llama.create_completion`` builds it (penalties, top-k, typical, top-p, min-p,
temperature, then ``dist`` seeded with ``seed(i, k)``).

``naive``
    The per-trial protocol: every trial from an emptied KV cache (both blocks re-evaluated),
    then a full completion of ``max_tokens`` tokens (8 by default) or up to end of generation.
``fast``
    Evaluates the item's own block once per item (shared block from the cache), then draws
    the K first tokens from those logits with the K seeded samplers (the chain's
    deterministic filters run once per distinct prefix: :class:`~bayesrc.collect.sampling.SharedDraws`). A sample
    stops as soon as its answer is *decided* (see :func:`bayesrc.collect.extract.decided`), at
    end-of-generation or at ``max_tokens``. Samples that need more tokens are continued as a
    prefix tree: samples that drew the same tokens share one decode of that prefix in the KV
    cache (the cache is truncated back to the branch point between branches), so each
    distinct prefix costs one single-token decode instead of one per sample.

What "the same" means between engines: for each trial (item, k, seed) the fast engine
evaluates exactly the token sequence the naive engine evaluates, with the same batch
shapes and the same sampler state, up to the point where the answer is decided. Hence the
*extracted answer of every trial is identical* (checked trial by trial in the tests and
the benchmark); only ``response`` differs, being the prefix of the naive response up to
the decision point. Distribution-level agreement (a G-test on per-item answer counts) is
reported as well, for engines or builds where bitwise-equal logits cannot be assumed
(e.g. GPU kernels that are not batch-invariant).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from bayesrc.collect.batching import SeqContext, check_items_per_batch, sample_chunks
from bayesrc.collect.extract import decided
from bayesrc.collect.model import Model, Prompt, as_prompt, check_scheme
from bayesrc.collect.sampling import Sample, Sampling, SharedDraws, make_sampler
from bayesrc.errors import InputError


def _text(model: Model, prompt: Prompt, toks: list[int]) -> str:
    return model.llm.detokenize(toks, prev_tokens=prompt.tokens).decode("utf-8", errors="ignore")


def _settle(
    model: Model,
    prompt: Prompt,
    prefix: list[int],
    ks: list[int],
    drawn: list[int],
    seeds,
    letters: str,
    max_tokens: int,
    vocab,
    results: dict,
) -> dict[int, list[int]]:
    """Record the samples ``ks`` that end with the token each drew after ``prefix`` (end of
    generation, ``max_tokens``, answer decided) in ``results``; return the others grouped by
    their token (in order of first draw), each group one child prefix to continue."""
    import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

    groups: dict[int, list[int]] = {}
    for k, tok in zip(ks, drawn):
        if llama_cpp.llama_vocab_is_eog(vocab, tok):
            results[k] = Sample(k, seeds[k], _text(model, prompt, prefix), len(prefix), "stop")
            continue
        toks = prefix + [tok]
        text = _text(model, prompt, toks)
        if len(toks) >= max_tokens:
            results[k] = Sample(k, seeds[k], text, len(toks), "length")
        elif decided(text, letters):
            results[k] = Sample(k, seeds[k], text, len(toks), "decided")
        else:
            groups.setdefault(tok, []).append(k)
    return groups


@dataclasses.dataclass(frozen=True)
class ItemJob:
    """One item for an engine to draw: its bank ``index``, its ``prompt`` (a local engine's
    :class:`~bayesrc.collect.model.Prompt`, the server's text or chat messages), the ``seeds`` of its
    K samples (sample ``k`` uses ``seeds[k]``; the exact engine needs none) and its option ``letters``.

    Examples
    --------
    >>> ItemJob(3, [1, 2, 3], [30, 31], "ABCD").seeds
    [30, 31]
    """

    index: int
    prompt: Any
    seeds: list[int]
    letters: str = ""


class Engine(Protocol):
    """What every engine implements (naive, fast, exact, server; Ray's shards run these same engines).

    ``draw_items(jobs)`` takes the items to draw, in order (:class:`ItemJob`), and yields
    ``(index, result)`` for each item as soon as it is complete, in the jobs' order: ``result`` is
    the item's samples, one :class:`~bayesrc.collect.sampling.Sample` per seed, or (the exact
    engine) its :class:`~bayesrc.collect.exact.ItemDistribution`. An engine that evaluates several
    items together takes them as they come (the run hands it whole batches). ``close()`` frees
    what drawing held (the model stays loaded). One loop drives every engine:
    :func:`bayesrc.collect.rundir.draw_jobs`, which turns each result into the item's part.
    """

    name: str

    def draw_items(self, jobs: Iterable[ItemJob]) -> Iterator[tuple[int, Any]]: ...

    def close(self) -> None: ...


def _batches(jobs: Iterable[ItemJob], n: int) -> Iterator[list[ItemJob]]:
    """The jobs in batches of the same ``index // n``, each yielded once it holds ``n`` jobs or the next
    job starts another batch (so a batch is drawn before the next one's job is asked for).

    Examples
    --------
    >>> [[j.index for j in b] for b in _batches([ItemJob(i, None, []) for i in (2, 3, 4, 6, 7)], 2)]
    [[2, 3], [4], [6, 7]]
    """
    batch: list[ItemJob] = []
    for job in jobs:
        if batch and job.index // n != batch[0].index // n:
            yield batch
            batch = []
        batch.append(job)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


class NaiveEngine:
    """Every trial from scratch: emptied KV cache, the prompt decoded (under ``scheme``), full completion."""

    name = "naive"

    def __init__(self, model: Model, sampling: Sampling, *, scheme: str = "blocks"):
        self.model, self.sampling, self.scheme = model, sampling, check_scheme(scheme)

    def draw_items(self, jobs: Iterable[ItemJob]) -> Iterator[tuple[int, list[Sample]]]:
        """:meth:`sample_item` of each job in turn (the :class:`Engine` protocol)."""
        for job in jobs:
            yield job.index, self.sample_item(job.prompt, job.seeds, job.letters)

    def close(self) -> None:
        """Nothing to free: every trial starts from an emptied cache of the model's own context."""

    def sample_item(self, prompt: Prompt | list[int], seeds: list[int], letters: str) -> list[Sample]:
        import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

        prompt, model, max_tokens = as_prompt(prompt), self.model, self.sampling.max_tokens
        vocab = model.llm._model.vocab  # noqa: SLF001
        out = []
        self.model.kv_prefix = None
        for k, seed in enumerate(seeds):
            model.eval_prompt(prompt, fresh=True, scheme=self.scheme)
            sampler = make_sampler(model, self.sampling, seed)
            toks: list[int] = []
            finish = "length"
            while len(toks) < max_tokens:  # create_completion's loop: sample, stop at EOG, decode
                tok = sampler.sample(model.llm._ctx, -1)  # noqa: SLF001
                if llama_cpp.llama_vocab_is_eog(vocab, tok):
                    finish = "stop"
                    break
                toks.append(tok)
                if len(toks) < max_tokens:
                    model.llm.eval([tok])
            out.append(Sample(k, seed, _text(model, prompt, toks), len(toks), finish))
        return out


class FastEngine:
    """Own block evaluated once per item; K seeded samplers; undecided samples continued as a prefix tree."""

    name = "fast"

    def __init__(self, model: Model, sampling: Sampling, *, items_per_batch: int = 1, scheme: str = "blocks"):
        self.model, self.sampling, self.scheme = model, sampling, check_scheme(scheme)
        self.n_decodes = 0  # single-token decodes so far (prefix-tree nodes past the prompt), for benchmarks
        self.items_per_batch = check_items_per_batch(items_per_batch)
        self._seq: SeqContext | None = None

    def draw_items(self, jobs: Iterable[ItemJob]) -> Iterator[tuple[int, list[Sample]]]:
        """The :class:`Engine` protocol: the jobs ``items_per_batch`` at a time (those with the same
        ``index // items_per_batch``, :meth:`sample_items`), each batch's items yielded once it is drawn."""
        for batch in _batches(jobs, self.items_per_batch):
            drawn = self.sample_items([j.prompt for j in batch], [j.seeds for j in batch], [j.letters for j in batch])
            yield from zip([j.index for j in batch], drawn)

    def sample_items(self, prompts: list[Prompt], seeds: list[list[int]], letters: list[str]) -> list[list[Sample]]:
        """Samples of several items evaluated together: :meth:`sample_item` of each, batched.

        With ``items_per_batch = 1`` this is :meth:`sample_item` item by item. Otherwise each
        item's own block is decoded into a sequence of its own on the shared block's KV (one
        decode per item: decoded together, every token would attend over all the items'
        cells, which costs more than it saves), then the prefix trees of all the items are
        continued breadth first: every distinct prefix one level deeper is one sequence, all
        of them in one decode (a branch's sequence shares its parent's cells). The batch's
        composition and the order of its sequences are fixed by the caller's item order and
        by the samples' order (``k``), so the same items give the same samples whatever was
        evaluated before. Batching changes the shapes llama.cpp computes in, hence the
        logits in their last bits: samples agree in distribution, not trial by trial, with
        one-item evaluation (the batch size is pinned, :func:`bayesrc.collect.run.make_pins`).

        A batch needs one KV sequence per open branch, up to ``1 + N * K``; when that exceeds
        llama.cpp's :data:`~bayesrc.collect.batching.MAX_SEQ`, the samples are drawn in chunks of ``k``
        (:func:`~bayesrc.collect.batching.sample_chunks`, fixed by N and K alone), each chunk one batched tree.
        """
        if self.items_per_batch == 1:
            return [self.sample_item(p, s, ltr) for p, s, ltr in zip(prompts, seeds, letters)]
        out: list[list[Sample]] = [[] for _ in prompts]
        for chunk in sample_chunks(self.items_per_batch, max(map(len, seeds))):
            part = self._sample_batch(prompts, [s[chunk.start : chunk.stop] for s in seeds], letters)
            for samples, new in zip(out, part):
                samples += [dataclasses.replace(x, k=x.k + chunk.start) for x in new]
        return out

    def _sample_batch(self, prompts: list[Prompt], seeds: list[list[int]], letters: list[str]) -> list[list[Sample]]:
        """:meth:`sample_items` for one chunk of samples (at most :data:`~bayesrc.collect.batching.MAX_SEQ`
        sequences)."""
        if len(prompts) > self.items_per_batch:
            raise ValueError(f"{len(prompts)} items in a batch of {self.items_per_batch}")
        prompts = [as_prompt(p) for p in prompts]
        if len({p.shared for p in prompts}) != 1:
            raise ValueError("items of one batch must share their shared block")
        seq = self._seq_context(prompts, max(map(len, seeds)))
        model, vocab, max_tokens = self.model, self.model.llm._model.vocab, self.sampling.max_tokens  # noqa: SLF001
        shared = () if self.scheme == "whole" else prompts[0].shared
        seq.start(shared)
        use_shared = SharedDraws.applies(self.sampling)
        draws = [SharedDraws(model, self.sampling, s) if use_shared else None for s in seeds]
        samplers = [None if use_shared else [make_sampler(model, self.sampling, x) for x in s] for s in seeds]
        results: list[dict[int, Sample]] = [{} for _ in prompts]
        free = list(range(seq.n_seq - 1, 0, -1))  # sequence ids, smallest popped first
        try:

            def expand(node, out: int) -> list:
                """Draw the node's samples from output ``out``; its children (the first keeps its sequence)."""
                i, sid, prefix, ks = node
                if use_shared:
                    drawn = draws[i].draw(ks, ctx=seq.ctx, index=out)
                else:
                    drawn = [samplers[i][k].sample(_SeqCtx(seq.ctx), out) for k in ks]
                groups = _settle(
                    model, prompts[i], prefix, ks, drawn, seeds[i], letters[i], max_tokens, vocab, results[i]
                )
                kids = []
                for tok, group in groups.items():
                    child = sid if not kids else free.pop()
                    if kids:
                        seq.fork(sid, child)  # before anything is added to the parent's sequence
                    kids.append((i, child, prefix + [tok], group))
                if not kids:  # the branch is done
                    seq.drop(sid)
                    free.append(sid)
                    free.sort(reverse=True)
                return kids

            # Level 0: each item's own block in a sequence of its own, one decode per item (the
            # own blocks together in one decode would make attention cost grow with the batch).
            nodes = []  # (item, seq_id, prefix, ks)
            for i, p in enumerate(prompts):
                sid = free.pop()
                out = seq.eval_item(sid, p, whole=self.scheme == "whole", n_batch=model.llm.n_batch)
                nodes += expand((i, sid, [], list(range(len(seeds[i])))), out)
            # Deeper levels: every open branch of every item, one token each, all in one decode.
            while nodes:
                outs = seq.decode(
                    [(sid, len(prompts[i]) + len(prefix) - 1, [prefix[-1]]) for i, sid, prefix, _ in nodes]
                )
                self.n_decodes += 1
                nodes = [kid for node, out in zip(nodes, outs) for kid in expand(node, out)]
        finally:
            for d in draws:
                if d is not None:
                    d.close()
        return [[r[k] for k in range(len(s))] for r, s in zip(results, seeds)]

    def _seq_context(self, prompts: list[Prompt], k: int) -> SeqContext:
        """The multi-sequence context, (re)made when these items need more cells or sequences."""
        n_seq = 1 + self.items_per_batch * k
        own = max(len(p.own) for p in prompts)
        per_seq = -(-(len(prompts[0].shared) + own + self.sampling.max_tokens) // 256) * 256
        # an own block (a whole prompt's n_batch piece), or one token of every open branch
        n_batch = max(512, own, n_seq, self.model.llm.n_batch)
        s = self._seq
        if s is None or s.n_seq < n_seq or s.n_per_seq < per_seq or s.n_batch < n_batch:
            if s is not None:
                s.close()
            self._seq = SeqContext(self.model, n_seq=n_seq, n_per_seq=per_seq, n_batch=n_batch)
        return self._seq

    def close(self) -> None:
        if self._seq is not None:
            self._seq.close()
            self._seq = None

    def sample_item(self, prompt: Prompt | list[int], seeds: list[int], letters: str) -> list[Sample]:
        prompt, model = as_prompt(prompt), self.model
        vocab = model.llm._model.vocab  # noqa: SLF001
        model.eval_prompt(prompt, scheme=self.scheme)
        n0 = len(prompt)
        shared = SharedDraws(model, self.sampling, seeds) if SharedDraws.applies(self.sampling) else None
        samplers = None if shared else [make_sampler(model, self.sampling, seed) for seed in seeds]
        try:
            return self._tree(prompt, seeds, letters, n0, shared, samplers, vocab)
        finally:
            if shared is not None:
                shared.close()

    def _tree(self, prompt, seeds, letters, n0, shared, samplers, vocab) -> list[Sample]:
        model, llm, max_tokens = self.model, self.model.llm, self.sampling.max_tokens
        results: dict[int, Sample] = {}

        # Depth-first over distinct prefixes; the context holds the logits of prompt+prefix.
        stack: list[tuple[list[int], list[int]]] = [([], list(range(len(seeds))))]
        first = True
        while stack:
            prefix, ks = stack.pop()
            if not first:
                llm.n_tokens = n0 + len(prefix) - 1  # eval() truncates the KV cache here
                llm.eval([prefix[-1]])
                self.n_decodes += 1
            first = False
            if shared is not None:
                drawn = shared.draw(ks)
            else:
                drawn = [samplers[k].sample(llm._ctx, -1) for k in ks]  # noqa: SLF001 - also accepts tok into the chain
            groups = _settle(model, prompt, prefix, ks, drawn, seeds, letters, max_tokens, vocab, results)
            for tok, group in groups.items():
                stack.append((prefix + [tok], group))
        return [results[k] for k in range(len(seeds))]


class _SeqCtx:
    """What ``LlamaSampler.sample`` reads of a context (its ``ctx`` pointer)."""

    def __init__(self, ctx):
        self.ctx = ctx


ENGINES = {"naive": NaiveEngine, "fast": FastEngine}


def make_engine(
    name: str, model: Model, sampling: Sampling, *, items_per_batch: int = 1, scheme: str = "blocks"
) -> Engine:
    """The sampling engine ``name`` (:data:`ENGINES`) on ``model``, under the evaluation ``scheme``.

    Examples
    --------
    >>> eng = make_engine("fast", model, Sampling(temperature=0.7), scheme="whole")  # doctest: +SKIP
    """
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r}; expected one of {sorted(ENGINES)}", field="engine")
    if items_per_batch != 1:
        if name != "fast":
            raise InputError(f"several items per decode needs the fast engine, not {name!r}", field="items_per_batch")
        return FastEngine(model, sampling, items_per_batch=items_per_batch, scheme=scheme)
    return ENGINES[name](model, sampling, scheme=scheme)
