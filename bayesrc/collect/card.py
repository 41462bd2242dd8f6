"""Model cards (``models/*.toml``): where the GGUF comes from and how to prompt it.

A card names the weights (a ``path``, optionally provided by a PyPI ``package`` that
assembles them), the runtime settings (``n_ctx``, ``n_gpu_layers``, ...) and the prompt:
``format = "completion"`` (plain text with a worked example, for base models) or
``format = "chat"`` (messages rendered by a chat template: the GGUF's own
``tokenizer.chat_template`` with ``chat_format = "gguf"``, a card-supplied
``chat_template``, or a llama-cpp-python format name such as ``"gemma"``).

Chat templates are Jinja2 and can come from an untrusted GGUF. They are rendered only
through :func:`render_chat_template`, which uses llama-cpp-python's
``Jinja2ChatFormatter`` (an ``ImmutableSandboxedEnvironment``): a template that reaches for
Python internals raises ``jinja2.exceptions.SecurityError`` and is reported as bad input.
"""

from __future__ import annotations

import hashlib
import importlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayesrc.collect.bank import Item
from bayesrc.collect.extract import ANSWER_RULES
from bayesrc.errors import InputError

DEFAULT_TEMPLATE = "Question: {question}\n{options}\nAnswer:"


@dataclass(frozen=True)
class ModelCard:
    """A parsed model card. ``path`` is absolute once :func:`resolve_model` has run.

    Examples
    --------
    >>> card = load_card("models/gemma-3-270m-q4_k_m.toml")  # a card of this repository
    >>> card.label, card.n_ctx
    ('gemma-3-270m-Q4_K_M', 1024)
    """

    card_path: Path
    label: str
    path: Path
    package: str | None = None
    module: str | None = None
    sha256: str | None = None
    n_ctx: int = 1024
    n_batch: int = 512
    n_gpu_layers: int = 0
    n_threads: int | None = None
    format: str = "completion"
    chat_format: str | None = None
    chat_template: str | None = None
    system: str = ""
    template: str = DEFAULT_TEMPLATE
    max_tokens: int = 8
    # the extraction rule (bayesrc.collect.extract.ANSWER_RULES): first valid letter, or the final answer
    answer: str = "first"
    extra: dict[str, Any] = field(default_factory=dict)


def _get(tbl: dict, key: str, typ: type | tuple, default: Any, *, path: Path, section: str) -> Any:
    if key not in tbl:
        return default
    val = tbl[key]
    if not isinstance(val, typ) or (typ is int and isinstance(val, bool)):
        want = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise InputError(f"expected {want}, got {val!r}", path=path, field=f"{section}.{key}" if section else key)
    return val


def load_card(path: str | Path) -> ModelCard:
    """Parse and check a model card (TOML).

    Examples
    --------
    >>> card = load_card("models/gemma-3-270m-q4_k_m.toml")  # a card of this repository
    >>> card.label
    'gemma-3-270m-Q4_K_M'
    """
    path = Path(path)
    if not path.exists():
        raise InputError("model card not found", path=path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"malformed TOML ({exc})", path=path) from None
    model = doc.get("model", {})
    runtime = doc.get("runtime", {})
    prompt = doc.get("prompt", {})
    for name, tbl in (("model", model), ("runtime", runtime), ("prompt", prompt)):
        if not isinstance(tbl, dict):
            raise InputError("expected a table", path=path, field=name)
    g = lambda tbl, sec, key, typ, default: _get(tbl, key, typ, default, path=path, section=sec)  # noqa: E731
    file = g(model, "model", "path", str, None)
    if not file:
        raise InputError("missing GGUF path", path=path, field="model.path")
    fmt = g(prompt, "prompt", "format", str, "completion")
    if fmt not in ("completion", "chat"):
        raise InputError(f"expected 'completion' or 'chat', got {fmt!r}", path=path, field="prompt.format")
    template = g(prompt, "prompt", "template", str, DEFAULT_TEMPLATE)
    if "{question}" not in template:
        raise InputError("template must contain {question}", path=path, field="prompt.template")
    gguf = Path(file).expanduser()
    if not gguf.is_absolute():
        gguf = (path.parent / gguf).resolve()
    card = ModelCard(
        card_path=path.resolve(),
        label=g(doc, "", "label", str, path.stem),
        path=gguf,
        package=g(model, "model", "package", str, None),
        module=g(model, "model", "module", str, None),
        sha256=g(model, "model", "sha256", str, None),
        n_ctx=g(runtime, "runtime", "n_ctx", int, 1024),
        n_batch=g(runtime, "runtime", "n_batch", int, 512),
        n_gpu_layers=g(runtime, "runtime", "n_gpu_layers", int, 0),
        n_threads=g(runtime, "runtime", "n_threads", int, None),
        format=fmt,
        chat_format=g(prompt, "prompt", "chat_format", str, None),
        chat_template=g(prompt, "prompt", "chat_template", str, None),
        system=g(prompt, "prompt", "system", str, ""),
        template=template,
        max_tokens=g(prompt, "prompt", "max_tokens", int, 8),
        answer=g(prompt, "prompt", "answer", str, "first"),
    )
    if card.answer not in ANSWER_RULES:
        raise InputError(
            f"expected one of {', '.join(map(repr, ANSWER_RULES))}, got {card.answer!r}",
            path=path,
            field="prompt.answer",
        )
    if card.format == "chat" and not (card.chat_format or card.chat_template):
        raise InputError(
            "chat format needs 'chat_format' (\"gguf\" or a llama-cpp-python name) or 'chat_template'",
            path=path,
            field="prompt.chat_format",
        )
    if card.max_tokens < 1:
        raise InputError("must be >= 1", path=path, field="prompt.max_tokens")
    return card


def resolve_model(card: ModelCard) -> Path:
    """Return the GGUF path, assembling it from the card's PyPI package if it is missing.

    Examples
    --------
    >>> resolve_model(load_card("models/gemma-3-270m-q4_k_m.toml"))  # doctest: +SKIP
    PosixPath('.../gemma-3-270m-q4_k_m.gguf')
    """
    if card.path.exists():
        return card.path
    if card.module:
        try:
            mod = importlib.import_module(card.module)
        except ImportError:
            raise InputError(
                f"model file {card.path} not found and its package is not installed "
                f"(pip install {card.package or card.module})",
                path=card.card_path,
                field="model.package",
            ) from None
        return Path(mod.assemble(card.path))
    raise InputError(f"model file not found: {card.path}", path=card.card_path, field="model.path")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def user_message(card: ModelCard, item: Item) -> str:
    """The item rendered into the card's template (plain ``str.replace``: no code runs)."""
    return (
        card.template.replace("{question}", item.question)
        .replace("{options}", item.options_formatted)
        .replace("{letters}", ", ".join(item.letters))
    )


def render_chat_template(
    template: str,
    messages: list[dict],
    *,
    bos_token: str = "",
    eos_token: str = "",
    source: str | Path = "<chat template>",
) -> str:
    """Render a (possibly untrusted) Jinja2 chat template in llama-cpp-python's sandbox.

    This is the only place a chat template is rendered. ``Jinja2ChatFormatter`` builds an
    ``ImmutableSandboxedEnvironment``; attribute access to Python internals raises
    ``SecurityError``, turned here into an :class:`InputError`.

    Examples
    --------
    >>> render_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}", [{"role": "user", "content": "hi"}])
    'hi'
    """
    import jinja2  # deferred: llama.cpp's library, only to collect (collect extra)
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    try:
        formatter = Jinja2ChatFormatter(template=template, eos_token=eos_token, bos_token=bos_token)
        # Defence in depth: refuse to render if the library ever stops sandboxing.
        env = formatter._environment.environment
        if not isinstance(env, ImmutableSandboxedEnvironment):
            raise InputError(
                "chat template environment is not sandboxed; refusing to render", path=source, field="chat_template"
            )
        return formatter(messages=messages).prompt
    except jinja2.exceptions.SecurityError as exc:
        raise InputError(
            f"chat template tried an unsafe operation ({exc})", path=source, field="chat_template"
        ) from None
    except jinja2.exceptions.TemplateError as exc:
        raise InputError(
            f"chat template failed to render ({type(exc).__name__}: {exc})", path=source, field="chat_template"
        ) from None


def chat_messages(card: ModelCard, item: Item) -> list[dict]:
    """The messages of one item for a chat endpoint: the card's system text (if any) and the rendered template
    as the user's.

    Examples
    --------
    >>> [m["role"] for m in chat_messages(card, bank.items[0])]  # doctest: +SKIP
    ['system', 'user']
    """
    return _messages(card, user_message(card, item))


def _messages(card: ModelCard, user: str) -> list[dict]:
    return ([{"role": "system", "content": card.system}] if card.system else []) + [{"role": "user", "content": user}]


def build_prompt(card: ModelCard, item: Item, *, gguf_template: str | None = None, bos: str = "", eos: str = "") -> str:
    """The full prompt text for one item: ``"".join(prompt_blocks(...))``.

    Examples
    --------
    >>> print(build_prompt(card, bank.items[0]))  # doctest: +SKIP
    """
    return _render(card, user_message(card, item), gguf_template=gguf_template, bos=bos, eos=eos)


# Stands in for every item field when the shared block is located (a private-use code point
# no template or item text contains).
_FIELD = "\ue000"


def shared_block(card: ModelCard, *, gguf_template: str | None = None, bos: str = "", eos: str = "") -> str:
    """The prompt text every item shares: the rendered prompt up to the line break before the first item field.

    The card's template is rendered (system text, chat template, worked examples) with every
    item field (``{question}``, ``{options}``, ``{letters}``) replaced by a marker; the shared
    block is the text before the marker, cut back to just after its last ``"\\n"`` so that the
    block boundary falls at a line start (a natural token boundary). Empty if the first item
    field sits on the first line.

    Examples
    --------
    >>> card = load_card("models/gemma-3-270m-q4_k_m.toml")
    >>> shared_block(card)[:40]  # the system prompt and template head every item starts with
    'Answer each multiple-choice question wit'
    """
    probe = card.template.replace("{question}", _FIELD).replace("{options}", _FIELD).replace("{letters}", _FIELD)
    text = _render(card, probe, gguf_template=gguf_template, bos=bos, eos=eos)
    head = text[: text.find(_FIELD)] if _FIELD in text else ""
    return head[: head.rfind("\n") + 1]


def prompt_blocks(
    card: ModelCard,
    item: Item,
    *,
    gguf_template: str | None = None,
    bos: str = "",
    eos: str = "",
    shared: str | None = None,
) -> tuple[str, str]:
    """The prompt of one item as its two canonical blocks ``(shared, own)`` (SPEC section 6).

    ``shared`` (from :func:`shared_block`; pass it to avoid re-rendering) is the same for
    every item; ``own`` is the rest of the item's prompt, so ``shared + own ==
    build_prompt(card, item)``. Engines tokenise the blocks separately (the shared one
    with BOS) and evaluate them as two batches, so an item's logits do not depend on
    which items were evaluated before it.

    Examples
    --------
    >>> import tempfile
    >>> from bayesrc.collect import builtin_bank, load_bank
    >>> item = load_bank(builtin_bank(tempfile.mkdtemp() + "/bank.jsonl", n_items=1)).items[0]
    >>> card = load_card("models/gemma-3-270m-q4_k_m.toml")
    >>> shared, own = prompt_blocks(card, item)
    >>> own.startswith("Question: ")
    True
    """
    full = build_prompt(card, item, gguf_template=gguf_template, bos=bos, eos=eos)
    if shared is None:
        shared = shared_block(card, gguf_template=gguf_template, bos=bos, eos=eos)
    if not full.startswith(shared):  # a chat template that renders the system text from item data
        raise InputError(
            "the rendered prompt does not start with the card's shared block (system text, worked examples)",
            path=card.card_path,
            item=item.item_id,
        )
    return shared, full[len(shared) :]


def _render(card: ModelCard, user: str, *, gguf_template: str | None = None, bos: str = "", eos: str = "") -> str:
    """The prompt text around one user message (system text, chat template)."""
    if card.format == "completion":
        return (card.system + "\n\n" if card.system else "") + user
    messages = _messages(card, user)
    if card.chat_template is not None:
        return render_chat_template(card.chat_template, messages, bos_token=bos, eos_token=eos, source=card.card_path)
    if card.chat_format == "gguf":
        if not gguf_template:
            raise InputError(
                'chat_format = "gguf" but the GGUF has no tokenizer.chat_template (a base model?): '
                'use format = "completion"',
                path=card.card_path,
                field="prompt.chat_format",
            )
        return render_chat_template(gguf_template, messages, bos_token=bos, eos_token=eos, source=card.path)
    from llama_cpp import llama_chat_format  # deferred: llama.cpp's library, only to collect (collect extra)

    # Named formats are the module's ``format_<name>`` functions (e.g. "gemma", "chatml").
    fmt = getattr(llama_chat_format, "format_" + card.chat_format.replace("-", "_").replace(".", "_"), None)
    if fmt is None:
        raise InputError(f"unknown chat format {card.chat_format!r}", path=card.card_path, field="prompt.chat_format")
    return fmt(messages=messages).prompt


def chat_template_text(card: ModelCard, gguf_template: str | None) -> str | None:
    """The template text that shapes the prompt (for the chat-template pin)."""
    if card.format == "completion":
        return None
    if card.chat_template is not None:
        return card.chat_template
    if card.chat_format == "gguf":
        return gguf_template
    return f"llama-cpp-python chat_format={card.chat_format}"
