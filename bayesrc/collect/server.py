"""The ``server`` engine: collect from an OpenAI-compatible completions endpoint (SPEC 9).

A model behind ``POST {base_url}/v1/completions`` (llama.cpp's server, llama-cpp-python's
``python -m llama_cpp.server``, vLLM, any compatible service) is collected like a local
GGUF, into the same run directory layout (:mod:`bayesrc.collect.run`): the card's prompt
(sent as text; the server adds BOS as ``Llama.create_completion`` does), one request per
trial with ``seed = seed(i, k)`` and the card's / CLI's sampling settings, ``concurrency``
requests in flight, retries with exponential back-off on connection errors, 408, 429 and
5xx, resume (the pins must match), the collector lock, and crash-safe per-item parts.

Pins: instead of file hashes the run records what the server reports — the model id
(``GET /v1/models``; ``--api-model`` chooses among several), its build where the server
exposes one (llama.cpp ``GET /props`` ``build_info``, vLLM ``GET /version``) and the
``system_fingerprint`` of the first completion — plus the prompt, item and sampling pins
of a local run.

Whether a server run reproduces a local run trial by trial depends on the server:
llama-cpp-python's server builds the same sampler chain from the same seed, but it reuses
the KV cache of the previous request's prompt prefix, so its logits can differ from a
fresh evaluation in the last bits, and so can an occasional draw. The tests therefore
compare answer *distributions* (and report the share of identical trials).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bayesrc.collect import rundir as R  # the run directory every engine writes (R.begin_run, R.part_path, ...)
from bayesrc.collect.bank import Bank, load_bank
from bayesrc.collect.card import (
    ModelCard,
    build_prompt,
    chat_template_text,
    load_card,
    sha256_text,
)
from bayesrc.collect.engines import Sample, Sampling
from bayesrc.collect.spec import RunSpec, items_pins, pinned_salt, prompt_pins, salt_pins, sampling_pins
from bayesrc.errors import InputError

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class ServerError(InputError):
    """The endpoint refused or never answered a request (after retries): exit 2, the run stays resumable."""


@dataclass
class ServerClient:
    """A small OpenAI-compatible completions client (stdlib only) with retries and back-off.

    ``retries`` further attempts after the first, sleeping ``backoff * 2**attempt`` seconds
    (capped at 30 s) between them.
    """

    base_url: str
    api_model: str | None = None
    timeout: float = 120.0
    retries: int = 5
    backoff: float = 0.5
    api_key: str | None = None

    def __post_init__(self) -> None:
        url = self.base_url.rstrip("/")
        for suffix in ("/v1/completions", "/completions", "/v1"):
            if url.endswith(suffix):
                url = url[: -len(suffix)]
                break
        if not url.startswith(("http://", "https://")):
            raise InputError(f"expected an http(s) URL, got {self.base_url!r}", field="--base-url")
        self.root = url

    def _request(self, method: str, path: str, body: dict | None = None, *, retry: bool = True) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})
        last = ""
        for attempt in range(self.retries + 1 if retry else 1):
            if attempt:
                time.sleep(min(30.0, self.backoff * 2 ** (attempt - 1)))
            req = urllib.request.Request(self.root + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:300].replace("\n", " ")
                if exc.code not in RETRY_STATUS:
                    raise ServerError(f"HTTP {exc.code} from {path}: {detail}", path=self.root, field="--base-url") from None
                last = f"HTTP {exc.code}: {detail}"
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as exc:
                last = str(getattr(exc, "reason", exc))
            except json.JSONDecodeError:
                raise ServerError(f"{path} did not return JSON (is this an OpenAI-compatible endpoint?)", path=self.root, field="--base-url") from None
        raise ServerError(f"no answer from {path} after {self.retries + 1 if retry else 1} attempt(s): {last}", path=self.root, field="--base-url")

    def _get_optional(self, path: str) -> dict | None:
        try:
            return self._request("GET", path, retry=False)
        except ServerError:
            return None

    def model_id(self) -> str:
        """The served model's id (``--api-model`` must be one of them when several are served)."""
        listing = self._request("GET", "/v1/models")
        ids = [m.get("id") for m in listing.get("data", []) if isinstance(m, dict) and m.get("id")]
        if self.api_model is not None:
            if ids and self.api_model not in ids:
                raise InputError(f"model {self.api_model!r} is not served here (served: {', '.join(ids)})", path=self.root, field="--api-model")
            return self.api_model
        if not ids:
            raise InputError("GET /v1/models lists no model; pass --api-model", path=self.root, field="--api-model")
        if len(ids) > 1:
            raise InputError(f"{len(ids)} models served ({', '.join(ids)}); choose one with --api-model", path=self.root, field="--api-model")
        return ids[0]

    def build_info(self) -> str | None:
        """What the server says about its build, where it says anything."""
        props = self._get_optional("/props")
        if props and props.get("build_info"):
            return str(props["build_info"])
        version = self._get_optional("/version")
        if version and version.get("version"):
            return f"version {version['version']}"
        return None

    def complete(self, model: str, prompt: str, seed: int, sampling: Sampling) -> dict:
        body = {
            "model": model,
            "prompt": prompt,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "min_p": sampling.min_p,
            "typical_p": sampling.typical_p,
            "repeat_penalty": sampling.repeat_penalty,
            "seed": seed,
            "n": 1,
        }
        res = self._request("POST", "/v1/completions", body)
        try:
            choice = res["choices"][0]
            text = choice["text"]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"completion without choices[0].text: {json.dumps(res)[:200]}", path=self.root, field="--base-url") from None
        return {"text": text, "finish": choice.get("finish_reason"), "n_tokens": (res.get("usage") or {}).get("completion_tokens"), "fingerprint": res.get("system_fingerprint")}


class ServerEngine:
    """Draws an item's K samples as K seeded requests, ``concurrency`` at a time."""

    name = "server"

    def __init__(self, client: ServerClient, model: str, sampling: Sampling, pool: ThreadPoolExecutor):
        self.client, self.model, self.sampling, self.pool = client, model, sampling, pool
        self.fingerprint: str | None = None

    def sample_items(self, prompts: dict[int, str], seeds: dict[int, list[int]]):
        """Yield ``(index, [Sample, ...])`` per item as its K requests complete (bank order).

        Only a few items are in flight at a time, so a failure loses little finished work.
        """
        order = list(prompts)
        ahead = max(2, 2 * self.pool._max_workers // max(1, len(next(iter(seeds.values()), [1]))) + 1)
        futures: dict[int, list] = {}

        def submit(i: int) -> None:
            futures[i] = [self.pool.submit(self.client.complete, self.model, prompts[i], s, self.sampling) for s in seeds[i]]

        try:
            for j, i in enumerate(order):
                for nxt in order[j : j + ahead]:
                    if nxt not in futures:
                        submit(nxt)
                out = []
                for k, (seed, fut) in enumerate(zip(seeds[i], futures.pop(i))):
                    r = fut.result()
                    self.fingerprint = self.fingerprint or r["fingerprint"]
                    finish = "stop" if r["finish"] == "stop" else "length"
                    out.append(Sample(k, seed, r["text"], int(r["n_tokens"] or 0), finish))
                yield i, out
        finally:
            for futs in futures.values():
                for f in futs:
                    f.cancel()


def server_pins(card: ModelCard, bank: Bank, rng: tuple[int, int], sampling: Sampling, spec: RunSpec, *, label: str, model_id: str, build: str | None) -> dict:
    """The run record's pins for a server run (same names as :func:`bayesrc.collect.run.make_pins` where they mean the same).

    ``seed_rule = "version"`` (default) salts the seeds with the version's pin (the server's
    model id standing in for the file hash), as local runs do, so two versions draw independently.

    Examples
    --------
    >>> server_pins(card, bank, (0, 4), Sampling(), RunSpec(k=6, engine="server"), label="srv", model_id="gemma", build=None)["runtime.engine"]  # doctest: +SKIP
    'server'
    """
    pins = {
        "model.label": label,
        "model.server_model_id": model_id,
        "model.chat_template_sha256": sha256_text(chat_template_text(card, None)),
        **items_pins(bank, rng),
        **prompt_pins(card),
        **sampling_pins(spec, sampling),
        "tooling.server_build": build,
        "runtime.engine": "server",
    }
    return pins | salt_pins(spec, pins, f"|model.server_model_id={model_id}")


def collect_server(
    card: str | Path | ModelCard,
    items: str | Path | Bank,
    out: str | Path,
    *,
    base_url: str,
    api_model: str | None = None,
    concurrency: int = 4,
    retries: int = 5,
    backoff: float = 0.5,
    timeout: float = 120.0,
    resume: bool = False,
    progress: bool = False,
    max_items: int | None = None,
    spec: RunSpec | None = None,
    **settings,
):
    """Collect K samples per item from a completions endpoint into the run directory ``out``.

    Same layout, seeds, resume and lock as :func:`bayesrc.collect.collect`; the card's
    ``[model]`` file is not needed. The run's settings are ``spec``, or
    :class:`~bayesrc.collect.spec.RunSpec` fields as keywords (``k``, ``temperature``,
    ``seed_rule``, ...). Returns a :class:`bayesrc.collect.run.RunResult`.

    Examples
    --------
    >>> collect_server("models/gemma-3-270m-q4_k_m.toml", "bank.jsonl", "runs/srv",
    ...                base_url="http://127.0.0.1:8080", k=5)  # doctest: +SKIP
    """
    t0 = time.monotonic()
    spec = spec if spec is not None else RunSpec(engine="server", **settings)
    card = card if isinstance(card, ModelCard) else load_card(card)
    bank = items if isinstance(items, Bank) else load_bank(items)
    _check_server_args(card, concurrency)
    rng = spec.item_range(len(bank))
    client = ServerClient(base_url, api_model, timeout=timeout, retries=retries, backoff=backoff)
    run_dir = Path(out)
    R.check_writable(run_dir)
    with R.RunLock(run_dir):
        record = R.existing_record(run_dir, resume)
        sampling, label, model_id = spec.sampling(card.max_tokens), spec.label or card.label, client.model_id()
        pins = server_pins(card, bank, rng, sampling, spec, label=label, model_id=model_id, build=client.build_info())
        R.check_resume_pins(record, pins, run_dir)
        selected = bank.items[rng[0] : rng[1]]
        prompts = {it.index: build_prompt(card, it) for it in selected}  # a template that fails to render fails before the run starts
        info = {"card": str(card.card_path), "bank_path": str(bank.path), "host": socket.gethostname(), "base_url": client.root, "concurrency": concurrency, **R.run_times(record)}
        R.begin_run(run_dir, pins, info)
        pending = R.pending_items(run_dir, selected, max_items)
        salt = pinned_salt(pins)
        write = lambda it, samples: R.write_part(run_dir, it.index, R.trial_rows(it, samples, label=label, engine="server"))  # noqa: E731
        t_sample = time.monotonic()
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bayesrc-server") as pool:
            eng = ServerEngine(client, model_id, sampling, pool)
            _draw_from_server(eng, prompts, spec, pending, salt, write, progress)
        t_sample = time.monotonic() - t_sample
        info["system_fingerprint"] = eng.fingerprint
        n_done = R.end_run(run_dir, selected, pins, info, per_item=spec.k, outputs=lambda parts: {"trials.parquet": parts})
    return R.RunResult(run_dir, n_done, n_done * spec.k, len(pending), time.monotonic() - t0, t_sample)


def _check_server_args(card: ModelCard, concurrency: int) -> None:
    """What a server run needs beyond the spec: requests in flight, and a chat template it can render without the GGUF."""
    if concurrency < 1:
        raise InputError(f"must be >= 1, got {concurrency}", field="--concurrency")
    if card.format == "chat" and card.chat_template is None and card.chat_format == "gguf":
        raise InputError("the server engine cannot read the GGUF's chat template: give the card a chat_template or a named chat_format",
                         path=card.card_path, field="prompt.chat_format")  # fmt: skip


def _draw_from_server(eng: ServerEngine, prompts: dict[int, str], spec: RunSpec, pending: list, salt: int, write, progress: bool) -> None:
    """Request the pending items' K samples each; ``write(item, samples)`` stores an item as soon as it is complete."""
    by_index = {it.index: it for it in pending}
    bar = R.progress_bar(len(pending) * spec.k, progress)
    try:
        for idx, samples in eng.sample_items({i: prompts[i] for i in by_index}, {i: spec.seeds(it, salt) for i, it in by_index.items()}):
            write(by_index[idx], samples)
            bar.update(spec.k)
    finally:
        bar.close()
