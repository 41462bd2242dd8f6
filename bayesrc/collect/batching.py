"""Several items per decode: the multi-sequence llama context, and the chunks of K that fit its sequence limit."""

from __future__ import annotations

from bayesrc.collect.model import Model, Prompt, _quiet_stderr
from bayesrc.errors import InputError


class SeqContext:
    """A second llama context on the loaded weights holding several KV sequences: several items per decode.

    Made with the :class:`Model` context's own parameters (so a one-sequence decode gives the
    logits ``Model.eval_prompt`` gives) but ``n_seq`` sequences of ``n_per_seq`` cells, each
    in a KV stream of its own (``kv_unified = false``): a sequence's cells sit where a
    one-item context puts them and its tokens attend over its own cells only (in a unified
    cache every token attends over all sequences' cells, which made batches slower than one
    item at a time on long prompts). ``llama_memory_seq_cp`` copies a stream. Sequence 0
    holds the shared block, decoded once; every item and every branch of an item's prefix
    tree is a sequence of its own, a copy of its parent. KV memory is ``n_seq * n_per_seq``
    cells. Used by :meth:`~bayesrc.collect.engines.FastEngine.sample_items`.
    """

    def __init__(self, model: Model, *, n_seq: int, n_per_seq: int, n_batch: int):
        import llama_cpp as lc  # deferred: llama.cpp's library, only to collect (collect extra)

        self.lc, self.model = lc, model
        p = lc.llama_context_params.from_buffer_copy(model.llm.context_params)
        p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max, p.kv_unified = n_seq * n_per_seq, n_batch, n_batch, n_seq, False
        with _quiet_stderr():
            self.ctx = lc.llama_init_from_model(model.llm._model.model, p)  # noqa: SLF001
        if not self.ctx:
            raise InputError(
                f"llama.cpp could not make a context of {n_seq} sequences x {n_per_seq} cells", field="items_per_batch"
            )
        self.mem = lc.llama_get_memory(self.ctx)
        self.batch = lc.llama_batch_init(n_batch, 0, 1)
        self.n_seq, self.n_per_seq, self.n_batch = n_seq, n_per_seq, n_batch
        self.shared: tuple[int, ...] | None = None
        self.n_decodes = 0

    def decode(self, runs: list[tuple[int, int, list[int] | tuple[int, ...]]]) -> list[int]:
        """One ``llama_decode`` of ``(seq_id, first_pos, tokens)`` runs, in the order given;
        logits are kept for each run's last token. Returns their batch indices (for
        ``llama_get_logits_ith``)."""
        b, i, out = self.batch, 0, []
        for seq, pos0, toks in runs:
            for j, t in enumerate(toks):
                b.token[i], b.pos[i], b.n_seq_id[i] = t, pos0 + j, 1
                b.seq_id[i][0] = seq
                b.logits[i] = j == len(toks) - 1
                i += 1
            out.append(i - 1)
        b.n_tokens = i
        if self.lc.llama_decode(self.ctx, b) != 0:
            raise RuntimeError(f"llama_decode failed on a batch of {i} tokens in {len(runs)} sequences")
        self.n_decodes += 1
        return out

    def start(self, shared: tuple[int, ...]) -> None:
        """Drop every sequence but the shared block's (decoding it into sequence 0 if not held yet).

        Removing sequences frees their cells and moves the cache's search head back to the
        first freed cell, so the next decodes find the same cells whatever came before.
        """
        if self.shared != shared:
            self.lc.llama_memory_clear(self.mem, True)
            self.shared = None
            if shared:
                self.decode([(0, 0, shared)])
            self.shared = shared
        for seq in range(1, self.n_seq):
            self.lc.llama_memory_seq_rm(self.mem, seq, -1, -1)

    def eval_item(self, seq: int, prompt: Prompt, *, whole: bool, n_batch: int) -> int:
        """Decode an item's prompt into the empty sequence ``seq``; the batch index of its last logits.

        ``whole=False``: ``seq`` becomes a copy of the shared block's sequence 0 and the own
        block is decoded after it (one decode). ``whole=True``: the whole prompt is decoded
        from position 0 in ``n_batch`` pieces, as ``Llama.eval`` splits it.
        """
        if not whole:
            self.fork(0, seq)
            return self.decode([(seq, len(prompt.shared), prompt.own)])[0]
        toks = prompt.tokens
        for a in range(0, len(toks), n_batch):
            (out,) = self.decode([(seq, a, toks[a : a + n_batch])])
        return out

    def fork(self, src: int, dst: int) -> None:
        """Sequence ``dst`` := sequence ``src`` (its stream's cells copied)."""
        self.lc.llama_memory_seq_cp(self.mem, src, dst, -1, -1)

    def drop(self, seq: int) -> None:
        self.lc.llama_memory_seq_rm(self.mem, seq, -1, -1)

    def close(self) -> None:
        if self.ctx:
            self.lc.llama_batch_free(self.batch)
            self.lc.llama_free(self.ctx)
            self.ctx = None


#: Most sequences one llama.cpp context holds (LLAMA_MAX_SEQ); a batch needs 1 + items x K
#: (:func:`sample_chunks` cuts K to fit).
MAX_SEQ = 256


def check_items_per_batch(n: int) -> int:
    """Validate ``items_per_batch``: a whole number from 1 to ``MAX_SEQ - 1`` (each item needs a KV sequence
    of its own beside the shared one).

    Examples
    --------
    >>> check_items_per_batch(4)
    4
    """
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise InputError(f"must be a whole number >= 1, got {n!r}", field="items_per_batch") from None
    if n < 1:
        raise InputError(f"must be >= 1, got {n}", field="items_per_batch")
    if n > MAX_SEQ - 1:
        raise InputError(
            f"must be <= {MAX_SEQ - 1}, got {n}: "
            f"each item of a decode needs a KV sequence and llama.cpp holds at most {MAX_SEQ}",
            field="items_per_batch",
        )
    return n


def sample_chunks(n_items: int, k: int, max_seq: int | None = None) -> list[range]:
    """The ranges of ``k`` that one batched decode tree of ``n_items`` items draws together.

    Every open branch of a batch is a KV sequence, beside the shared block's: at most
    ``1 + n_items * len(chunk)`` of them, which must fit llama.cpp's ``max_seq`` (default :data:`MAX_SEQ`). The chunks
    depend on ``n_items`` and ``k`` only, so a trial never depends on what else is collected;
    a single chunk (all K) whenever it fits.

    Examples
    --------
    >>> sample_chunks(4, 10)
    [range(0, 10)]
    >>> sample_chunks(2, 400)
    [range(0, 127), range(127, 254), range(254, 381), range(381, 400)]
    """
    per = ((max_seq or MAX_SEQ) - 1) // check_items_per_batch(n_items)
    return [range(a, min(a + per, k)) for a in range(0, k, per)]
