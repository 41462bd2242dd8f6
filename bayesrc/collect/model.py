"""The loaded model: llama-cpp-python loaded and checked, a prompt's two token blocks and how they are evaluated.

Prompts are evaluated as two canonical blocks (:class:`Prompt`): the *shared* block (BOS,
system text, worked examples: the same for every item) and the item's *own* block,
tokenised separately and always decoded as two batches. :meth:`Model.eval_prompt` keeps the
shared block's KV state once per loaded model and, for each item, drops the cache back to
it and decodes only the item's own tokens. The shared KV cells are computed once by the
same decode, whatever came before, so an item's logits do not depend on which items came
before, on item order, or on where a run was resumed; and every engine (naive, fast, exact)
evaluates exactly the same blocks, so they agree trial by trial. That is the default evaluation
scheme, ``blocks``; under ``scheme="whole"`` (:data:`~bayesrc.data.provenance.SCHEMES`) every engine evaluates the
concatenated prompt in one piece from an emptied cache instead, as ``create_completion`` does on
a fresh context (the same tokens, another batch split: other logits in their last bits).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from bayesrc.collect.card import sha256_file
from bayesrc.data.provenance import SCHEMES
from bayesrc.errors import BayesrcError, InputError

#: llama-cpp-python versions whose private internals the engines use (``Llama._model.vocab``,
#: ``Llama._ctx``, ``Llama._init_sampler`` and the ``llama_vocab_*`` C functions); the same
#: range as pyproject.toml. Checked when a model loads (:func:`check_llama_cpp`).
LLAMA_CPP_SUPPORTED = ">=0.3.8,<0.4"


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
    """Validate an evaluation scheme name (a key of :data:`~bayesrc.data.provenance.SCHEMES`).

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
