"""Engines: how the K samples of an item are drawn (SPEC section 6).

Both engines draw sample ``k`` of item ``i`` with its own sampler chain, built exactly as
``Llama.create_completion`` builds it (penalties, top-k, typical, top-p, min-p,
temperature, then ``dist`` seeded with ``seed(i, k)``), from logits computed after a full
re-evaluation of the item's prompt in an emptied KV cache. So an item's answers do not
depend on which items came before, on item order, or on where a run was resumed.

``naive``
    The reference study's protocol: one ``create_completion`` call per trial
    (``max_tokens`` from the card, 8 by default) on a fresh context.
``fast``
    Evaluates the prompt once per item, then draws the K first tokens from those logits
    with the K seeded samplers. A sample stops as soon as its answer is *decided* (see
    :func:`bayesrc.collect.extract.decided`), at end-of-generation or at ``max_tokens``.
    Samples that need more tokens are continued as a prefix tree: samples that drew the
    same tokens share one decode of that prefix in the KV cache (the cache is truncated
    back to the branch point between branches), so each distinct prefix costs one
    single-token decode instead of one per sample.

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
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bayesrc.collect.extract import decided
from bayesrc.errors import InputError


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


class Model:
    """A loaded GGUF plus what the pins need (file hash, tokenizer and template hashes)."""

    def __init__(self, path: str | Path, *, n_ctx: int = 1024, n_batch: int = 512, n_gpu_layers: int = 0, n_threads: int | None = None, label: str | None = None):
        path = Path(path)
        if not path.exists():
            raise InputError("model file not found", path=path)
        if path.is_dir():
            raise InputError("is a directory, expected a GGUF file", path=path)
        with path.open("rb") as fh:
            magic = fh.read(4)
        if magic != b"GGUF":
            raise InputError(f"not a GGUF file (magic bytes {magic!r})", path=path)
        from llama_cpp import Llama

        try:
            with _quiet_stderr():
                self.llm = Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_batch=n_batch,
                    n_gpu_layers=n_gpu_layers,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,  # None: llama-cpp-python's default; else as decoding (more threads than cores spin)
                    seed=0,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise InputError(f"llama.cpp could not load the GGUF ({exc})", path=path) from None
        self.path = path
        self.label = label or path.stem
        self.n_gpu_layers = n_gpu_layers
        self.kv_prefix: tuple[tuple[int, ...], int] | None = None  # (shared prefix, cells still valid) after FastEngine.eval_prompt
        self._sha256: str | None = None
        self._tokenizer_sha256: str | None = None

    # -- pins -------------------------------------------------------------------------
    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            from bayesrc.collect.card import sha256_file

            self._sha256 = sha256_file(self.path)
        return self._sha256

    @property
    def tokenizer_sha256(self) -> str:
        """Hash of the vocabulary (text, score, attributes of every token) and tokenizer metadata."""
        if self._tokenizer_sha256 is None:
            import llama_cpp

            vocab = self.llm._model.vocab  # noqa: SLF001
            h = hashlib.sha256()
            for key in sorted(self.llm.metadata):
                if key.startswith("tokenizer.") and key != "tokenizer.chat_template":
                    h.update(f"{key}={self.llm.metadata[key]}\n".encode())
            for tok in range(llama_cpp.llama_vocab_n_tokens(vocab)):
                h.update(llama_cpp.llama_vocab_get_text(vocab, tok) or b"")
                h.update(f"\x00{llama_cpp.llama_vocab_get_score(vocab, tok)!r}\x00{llama_cpp.llama_vocab_get_attr(vocab, tok)}\n".encode())
            self._tokenizer_sha256 = h.hexdigest()
        return self._tokenizer_sha256

    @property
    def gguf_chat_template(self) -> str | None:
        return self.llm.metadata.get("tokenizer.chat_template")

    def token_text(self, tok: int) -> str:
        return self.llm._model.token_get_text(tok)  # noqa: SLF001

    def tokenize(self, text: str) -> list[int]:
        """Prompt tokens: BOS (if the model adds one) + text, special tokens parsed."""
        return self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    def close(self) -> None:
        self.llm.close()


def runtime_info(model: Model) -> dict:
    """Versions, backend and device (pinned in run.json)."""
    import llama_cpp

    libdir = Path(llama_cpp.__file__).parent / "lib"
    libs = sorted(p.name for p in libdir.glob("lib*.so.*.*")) if libdir.exists() else []
    lib_hash = None
    for cand in ("libllama.so", "libllama.dylib", "llama.dll"):
        if (libdir / cand).exists():
            from bayesrc.collect.card import sha256_file

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


class Engine(Protocol):
    name: str

    def sample_item(self, prompt_tokens: list[int], seeds: list[int], letters: str) -> list[Sample]:
        """Draw one sample per seed for one item (sample ``k`` uses ``seeds[k]``)."""
        ...


class NaiveEngine:
    """One ``create_completion`` call per trial on an emptied context (the reference protocol)."""

    name = "naive"

    def __init__(self, model: Model, sampling: Sampling):
        self.model, self.sampling = model, sampling

    def sample_item(self, prompt_tokens: list[int], seeds: list[int], letters: str) -> list[Sample]:
        llm, s = self.model.llm, self.sampling
        out = []
        self.model.kv_prefix = None
        for k, seed in enumerate(seeds):
            llm.reset()  # fresh context: no prefix reuse from the previous trial
            res = llm.create_completion(
                list(prompt_tokens),
                max_tokens=s.max_tokens,
                temperature=s.temperature,
                top_k=s.top_k,
                top_p=s.top_p,
                min_p=s.min_p,
                typical_p=s.typical_p,
                repeat_penalty=s.repeat_penalty,
                seed=seed,
            )
            choice = res["choices"][0]
            finish = "stop" if choice["finish_reason"] == "stop" else "length"
            out.append(Sample(k, seed, choice["text"], int(res["usage"]["completion_tokens"]), finish))
        return out


class FastEngine:
    """Prompt evaluated once per item; K seeded samplers; undecided samples continued as a prefix tree."""

    name = "fast"

    def __init__(self, model: Model, sampling: Sampling, *, shared_prefix: list[int] | None = None):
        self.model, self.sampling = model, sampling
        # Optional: tokens every prompt of the run starts with (the card's text before the
        # item). Their KV cells are computed once, by one decode of exactly these tokens, and
        # reused (see eval_prompt); None re-evaluates every prompt in full.
        self.shared_prefix = tuple(shared_prefix) if shared_prefix else None

    def _sampler(self, seed: int):
        s, llm = self.sampling, self.model.llm
        # The exact chain create_completion(seed=...) builds, so both engines draw alike.
        llm.set_seed(seed)
        return llm._init_sampler(  # noqa: SLF001
            top_k=s.top_k, top_p=s.top_p, min_p=s.min_p, typical_p=s.typical_p, temp=s.temperature, repeat_penalty=s.repeat_penalty
        )

    def eval_prompt(self, prompt_tokens: list[int]) -> int:
        """Evaluate an item's prompt; the context then holds its logits. Returns the prompt length.

        The one place the fast and exact engines evaluate a prompt.
        """
        llm, toks = self.model.llm, list(prompt_tokens)
        ref = self.shared_prefix
        n = 0
        if ref:
            while n < min(len(ref), len(toks) - 1) and ref[n] == toks[n]:
                n += 1
        if n == 0:
            self.model.kv_prefix = None
            llm.reset()
            llm.eval(toks)  # fresh context, same batch split as create_completion
            return len(toks)
        # Reuse the first n cells only if they are still those of the one decode of `ref`
        # (an item with a shorter common part overwrote later cells): the item's logits then
        # depend on (ref, its tokens) alone, never on which items came before.
        if self.model.kv_prefix is None or self.model.kv_prefix[0] != ref or self.model.kv_prefix[1] < n:
            llm.reset()
            llm.eval(list(ref))
        llm.n_tokens = n  # eval() drops the cache from here
        llm.eval(toks[n:])
        self.model.kv_prefix = (ref, n)
        return len(toks)

    def sample_item(self, prompt_tokens: list[int], seeds: list[int], letters: str) -> list[Sample]:
        import llama_cpp

        llm, max_tokens = self.model.llm, self.sampling.max_tokens
        vocab = llm._model.vocab  # noqa: SLF001
        n0 = self.eval_prompt(prompt_tokens)
        samplers = [self._sampler(seed) for seed in seeds]
        results: dict[int, Sample] = {}

        def text_of(toks: list[int]) -> str:
            return llm.detokenize(toks, prev_tokens=list(prompt_tokens)).decode("utf-8", errors="ignore")

        # Depth-first over distinct prefixes; the context holds the logits of prompt+prefix.
        stack: list[tuple[list[int], list[int]]] = [([], list(range(len(seeds))))]
        first = True
        while stack:
            prefix, ks = stack.pop()
            if not first:
                llm.n_tokens = n0 + len(prefix) - 1  # eval() truncates the KV cache here
                llm.eval([prefix[-1]])
            first = False
            groups: dict[int, list[int]] = {}
            for k in ks:
                tok = samplers[k].sample(llm._ctx, -1)  # noqa: SLF001 - also accepts tok into the chain
                if llama_cpp.llama_vocab_is_eog(vocab, tok):
                    results[k] = Sample(k, seeds[k], text_of(prefix), len(prefix), "stop")
                    continue
                toks = prefix + [tok]
                if len(toks) >= max_tokens:
                    results[k] = Sample(k, seeds[k], text_of(toks), len(toks), "length")
                elif decided(text_of(toks), letters):
                    results[k] = Sample(k, seeds[k], text_of(toks), len(toks), "decided")
                else:
                    groups.setdefault(tok, []).append(k)
            for tok, group in groups.items():
                stack.append((prefix + [tok], group))
        return [results[k] for k in range(len(seeds))]


ENGINES = {"naive": NaiveEngine, "fast": FastEngine}


def make_engine(name: str, model: Model, sampling: Sampling) -> Engine:
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r}; expected one of {sorted(ENGINES)}", field="engine")
    return ENGINES[name](model, sampling)
