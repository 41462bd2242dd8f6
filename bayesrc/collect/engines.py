"""Engines: how the K samples of an item are drawn (SPEC section 6).

Prompts are evaluated as two canonical blocks (:class:`Prompt`): the *shared* block (BOS,
system text, worked examples: the same for every item) and the item's *own* block,
tokenised separately and always decoded as two batches. :meth:`Model.eval_prompt` keeps the
shared block's KV state once per loaded model and, for each item, drops the cache back to
it and decodes only the item's own tokens. The shared KV cells are computed once by the
same decode, whatever came before, so an item's logits do not depend on which items came
before, on item order, or on where a run was resumed; and every engine (naive, fast, exact)
evaluates exactly the same blocks, so they agree trial by trial. That is the default evaluation
scheme, ``blocks``; under ``scheme="whole"`` (:data:`SCHEMES`) every engine evaluates the
concatenated prompt in one piece from an emptied cache instead, as ``create_completion`` does on
a fresh context (the same tokens, another batch split: other logits in their last bits).

All engines draw sample ``k`` of item ``i`` with its own sampler chain, built exactly as
``Llama.create_completion`` builds it (penalties, top-k, typical, top-p, min-p,
temperature, then ``dist`` seeded with ``seed(i, k)``).

``naive``
    The per-trial protocol: every trial from an emptied KV cache (both blocks re-evaluated),
    then a full completion of ``max_tokens`` tokens (8 by default) or up to end of generation.
``fast``
    Evaluates the item's own block once per item (shared block from the cache), then draws
    the K first tokens from those logits with the K seeded samplers (the chain's
    deterministic filters run once per distinct prefix: :class:`SharedDraws`). A sample stops as soon
    as its answer is *decided* (see :func:`bayesrc.collect.extract.decided`), at
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

import contextlib
import ctypes
import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from bayesrc.collect.card import sha256_file
from bayesrc.collect.extract import decided
from bayesrc.errors import BayesrcError, InputError

#: llama-cpp-python versions whose private internals the engines use (``Llama._model.vocab``,
#: ``Llama._ctx``, ``Llama._init_sampler`` and the ``llama_vocab_*`` C functions); the same
#: range as pyproject.toml. Checked when a model loads (:func:`check_llama_cpp`).
LLAMA_CPP_SUPPORTED = ">=0.3.8,<0.4"

#: Evaluation schemes: how a prompt's tokens are decoded (pinned as ``prompt.blocks``, the text
#: below). llama.cpp's CPU kernels give other logits for other batch splits, so two runs of one
#: model under different schemes differ in distribution (``benchmarks/scheme_drift.py``).
#: ``blocks`` (default): shared block, then the item's own block, two batches, the shared KV kept
#: once per model. ``whole``: the concatenated prompt decoded from an emptied cache in ``n_batch``
#: pieces, as ``Llama.create_completion`` evaluates it on a fresh context.
SCHEMES = {
    "blocks": (
        "shared+own/1: shared = rendered prompt up to the line break before the first item field, tokenised with BOS; "
        "own = the rest, tokenised without BOS; decoded as two batches, shared KV kept once per run"
    ),
    "whole": (
        "whole/1: shared + own tokens (tokenised as for blocks) decoded as one prompt from an emptied KV cache "
        "in n_batch pieces, as create_completion on a fresh context"
    ),
}


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


@contextlib.contextmanager
def _quiet_stderr():
    """Silence llama.cpp's C-level logging (verbose=False does not catch all of it)."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


@dataclass(frozen=True)
class Prompt:
    """An item's prompt as its two canonical token blocks (see the module docstring).

    ``shared`` (BOS + system text + worked examples, identical for every item of a run) and
    ``own`` (the item's question and options) are tokenised separately; the prompt *is*
    their concatenation, for every engine. Build one with :meth:`Model.prompt`.
    """

    shared: tuple[int, ...]
    own: tuple[int, ...]

    @property
    def tokens(self) -> list[int]:
        return [*self.shared, *self.own]

    def __len__(self) -> int:
        return len(self.shared) + len(self.own)


def check_scheme(scheme: str) -> str:
    """Validate an evaluation scheme name (a key of :data:`SCHEMES`).

    Examples
    --------
    >>> check_scheme("whole")
    'whole'
    >>> check_scheme("halves")
    Traceback (most recent call last):
    bayesrc.errors.InputError: ...unknown evaluation scheme 'halves'; expected one of blocks, whole
    """
    if scheme not in SCHEMES:
        raise InputError(f"unknown evaluation scheme {scheme!r}; expected one of {', '.join(SCHEMES)}", field="scheme")
    return scheme


def physical_cores() -> int:
    """Physical CPU cores this process may run on (SMT siblings counted once).

    The default thread count of a collector: llama.cpp's matrix kernels gain nothing from
    a core's second hardware thread, and llama-cpp-python's own default (half the logical
    CPUs) leaves cores idle where SMT is off.
    """
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        try:
            import psutil  # deferred: psutil is optional (not a dependency)

            return max(1, psutil.cpu_count(logical=False) or 1)
        except ImportError:
            return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in allowed:
        try:
            cores.add(Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip())
        except OSError:
            cores.add(str(cpu))
    return max(1, len(cores))


class Model:
    """A loaded GGUF plus what the pins need (file hash, tokenizer and template hashes)."""

    def __init__(
        self,
        path: str | Path,
        *,
        n_ctx: int = 1024,
        n_batch: int = 512,
        n_gpu_layers: int = 0,
        n_threads: int | None = None,
        label: str | None = None,
    ):
        path = Path(path)
        if not path.exists():
            raise InputError("model file not found", path=path)
        if path.is_dir():
            raise InputError("is a directory, expected a GGUF file", path=path)
        with path.open("rb") as fh:
            magic = fh.read(4)
        if magic != b"GGUF":
            raise InputError(f"not a GGUF file (magic bytes {magic!r})", path=path)
        from llama_cpp import Llama  # deferred: llama.cpp's library, only to collect (collect extra)

        require_gpu_offload(n_gpu_layers, path)
        n_threads = n_threads or physical_cores()
        try:
            with _quiet_stderr():
                self.llm = Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_batch=n_batch,
                    n_gpu_layers=n_gpu_layers,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,
                    seed=0,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise InputError(f"llama.cpp could not load the GGUF ({exc})", path=path) from None
        check_llama_cpp(self.llm)
        self.path = path
        self.label = label or path.stem
        self.n_gpu_layers = n_gpu_layers
        self.n_threads = n_threads
        self._shared: tuple[int, ...] | None = None  # the shared block whose KV cells the cache holds
        self._shared_tokens: dict[str, tuple[int, ...]] = {}
        self._sha256: str | None = None
        self._tokenizer_sha256: str | None = None

    # -- pins -------------------------------------------------------------------------
    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            self._sha256 = sha256_file(self.path)
        return self._sha256

    @property
    def tokenizer_sha256(self) -> str:
        """Hash of the vocabulary (text, score, attributes of every token) and tokenizer metadata."""
        if self._tokenizer_sha256 is None:
            import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

            vocab = self.llm._model.vocab  # noqa: SLF001
            h = hashlib.sha256()
            for key in sorted(self.llm.metadata):
                if key.startswith("tokenizer.") and key != "tokenizer.chat_template":
                    h.update(f"{key}={self.llm.metadata[key]}\n".encode())
            for tok in range(llama_cpp.llama_vocab_n_tokens(vocab)):
                h.update(llama_cpp.llama_vocab_get_text(vocab, tok) or b"")
                h.update(
                    (
                        f"\x00{llama_cpp.llama_vocab_get_score(vocab, tok)!r}"
                        f"\x00{llama_cpp.llama_vocab_get_attr(vocab, tok)}\n"
                    ).encode()
                )
            self._tokenizer_sha256 = h.hexdigest()
        return self._tokenizer_sha256

    @property
    def gguf_chat_template(self) -> str | None:
        return self.llm.metadata.get("tokenizer.chat_template")

    def token_text(self, tok: int) -> str:
        return self.llm._model.token_get_text(tok)  # noqa: SLF001

    def tokenize(self, text: str, *, add_bos: bool = True) -> list[int]:
        """Tokens of ``text``, special tokens parsed; BOS first (if the model adds one) unless ``add_bos=False``."""
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def prompt(self, shared: str, own: str) -> Prompt:
        """The canonical tokens of a prompt given as its two blocks (see :func:`bayesrc.collect.card.prompt_blocks`).

        ``shared`` is tokenised with BOS, ``own`` without; the prompt is their concatenation.
        """
        if shared not in self._shared_tokens:
            self._shared_tokens[shared] = tuple(self.tokenize(shared))
        return Prompt(self._shared_tokens[shared], tuple(self.tokenize(own, add_bos=not shared)))

    def eval_prompt(self, prompt: Prompt, *, fresh: bool = False, scheme: str = "blocks") -> int:
        """Evaluate a prompt; afterwards the context holds the logits of its last token.

        ``scheme="whole"`` decodes the whole prompt from an emptied cache (split at
        ``n_batch`` by ``Llama.eval``), exactly as ``create_completion`` evaluates it on a
        fresh context; the rest of this describes the default ``"blocks"`` scheme.

        The shared block is decoded (as one batch, from an emptied KV cache) only when the
        cache does not already hold it from an earlier call; otherwise the cache is cut
        back to the end of the shared block (``llama_memory_seq_rm``), which restores the
        state right after that decode. Then the item's own tokens are decoded (as one
        batch, split at ``n_batch`` like ``Llama.eval``). ``fresh=True`` always starts from
        an emptied cache (the naive engine). Returns the number of tokens decoded.

        Both paths give bitwise the same logits: the shared KV cells are the output of the
        same decode, and the own block goes into the same cells with the same batch shape.
        Anything else that evaluates on ``self.llm`` must call :meth:`forget_prefix`.

        Examples
        --------
        >>> p = model.prompt(shared_text, own_text)  # doctest: +SKIP
        >>> model.eval_prompt(p)  # doctest: +SKIP
        >>> tok = sampler.sample(model.llm._ctx, -1)  # doctest: +SKIP
        """
        llm, n_shared = self.llm, len(prompt.shared)
        if check_scheme(scheme) == "whole":
            llm.reset()
            self._shared = None
            llm.eval(prompt.tokens)
            return len(prompt)
        cached = (
            not fresh
            and self._shared == prompt.shared
            and llm.n_tokens >= n_shared
            and list(llm.input_ids[:n_shared]) == list(prompt.shared)
        )
        n = 0
        if cached:
            llm.n_tokens = n_shared  # eval() drops the KV cells from here on
        else:
            llm.reset()
            self._shared = None
            if n_shared:
                llm.eval(list(prompt.shared))
                n += n_shared
            self._shared = prompt.shared
        if prompt.own:
            llm.eval(list(prompt.own))
            n += len(prompt.own)
        return n

    def forget_prefix(self) -> None:
        """Mark the cached shared block invalid (the next :meth:`eval_prompt` re-evaluates it)."""
        self._shared = None

    def close(self) -> None:
        self.llm.close()


def require_gpu_offload(n_gpu_layers: int, where: str | Path | None = None) -> None:
    """Refuse GPU layers (``runtime.n_gpu_layers != 0``) on a llama.cpp build that cannot offload.

    llama.cpp would silently run such a card on the CPU, at a fraction of the expected speed.
    """
    import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

    if n_gpu_layers != 0 and not llama_cpp.llama_supports_gpu_offload():
        raise InputError(
            f"n_gpu_layers = {n_gpu_layers} asks for GPU layers "
            f"but the installed llama-cpp-python {llama_cpp.__version__} "
            "cannot offload (CPU-only build); build the CUDA wheel with `make gpu` or set n_gpu_layers = 0",
            path=where,
            field="runtime.n_gpu_layers",
        )


def runtime_info(model: Model) -> dict:
    """Versions, backend and device (pinned in run.json)."""
    import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

    libdir = Path(llama_cpp.__file__).parent / "lib"
    libs = sorted(p.name for p in libdir.glob("lib*.so.*.*")) if libdir.exists() else []
    lib_hash = None
    for cand in ("libllama.so", "libllama.dylib", "llama.dll"):
        if (libdir / cand).exists():
            lib_hash = sha256_file(libdir / cand)
            break
    system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    gpu = bool(llama_cpp.llama_supports_gpu_offload())
    return {
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_libs": libs,
        "llama_cpp_lib_sha256": lib_hash,
        "backend": "gpu" if gpu and model.n_gpu_layers != 0 else "cpu",
        "gpu_offload_supported": gpu,
        "n_gpu_layers": model.n_gpu_layers,
        "system_info": system_info,
    }


def as_prompt(prompt: Prompt | list[int]) -> Prompt:
    """A :class:`Prompt`; a plain token list is one block (no shared prefix to reuse)."""
    return prompt if isinstance(prompt, Prompt) else Prompt((), tuple(prompt))


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


def _text(model: Model, prompt: Prompt, toks: list[int]) -> str:
    return model.llm.detokenize(toks, prev_tokens=prompt.tokens).decode("utf-8", errors="ignore")


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


class Engine(Protocol):
    name: str

    def sample_item(self, prompt: Prompt, seeds: list[int], letters: str) -> list[Sample]:
        """Draw one sample per seed for one item (sample ``k`` uses ``seeds[k]``)."""
        ...


class NaiveEngine:
    """Every trial from scratch: emptied KV cache, the prompt decoded (under ``scheme``), full completion."""

    name = "naive"

    def __init__(self, model: Model, sampling: Sampling, *, scheme: str = "blocks"):
        self.model, self.sampling, self.scheme = model, sampling, check_scheme(scheme)

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
        llama.cpp's :data:`MAX_SEQ`, the samples are drawn in chunks of ``k``
        (:func:`sample_chunks`, fixed by N and K alone), each chunk one batched tree.
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
        """:meth:`sample_items` for one chunk of samples (at most :data:`MAX_SEQ` sequences)."""
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
    cells. Used by :meth:`FastEngine.sample_items`.
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


class _SeqCtx:
    """What ``LlamaSampler.sample`` reads of a context (its ``ctx`` pointer)."""

    def __init__(self, ctx):
        self.ctx = ctx


ENGINES = {"naive": NaiveEngine, "fast": FastEngine}


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


def check_llama_cpp(llm) -> None:
    """Refuse a llama-cpp-python whose private internals differ from the ones the engines use."""
    import llama_cpp  # deferred: llama.cpp's library, only to collect (collect extra)

    missing = [
        name
        for name, ok in (
            ("Llama._model.vocab", hasattr(getattr(llm, "_model", None), "vocab")),
            ("Llama._ctx", hasattr(llm, "_ctx")),
            ("Llama._init_sampler", hasattr(llm, "_init_sampler")),
            ("llama_vocab_n_tokens", hasattr(llama_cpp, "llama_vocab_n_tokens")),
            ("llama_vocab_is_eog", hasattr(llama_cpp, "llama_vocab_is_eog")),
        )
        if not ok
    ]
    if missing:
        raise BayesrcError(
            f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')} lacks {', '.join(missing)}; "
            f"bayesrc supports llama-cpp-python {LLAMA_CPP_SUPPORTED} "
            f"(pip install 'llama-cpp-python{LLAMA_CPP_SUPPORTED}')"
        )
