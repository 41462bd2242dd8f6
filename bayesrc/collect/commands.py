"""CLI: ``bayesrc collect``, ``bayesrc pins``, ``bayesrc merge`` (thin shell over bayesrc.collect)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    _add_collect_command(sub)

    q = sub.add_parser("pins", help="say whether two runs are comparable and list differing pins")
    q.add_argument("run_a", type=Path)
    q.add_argument("run_b", type=Path)
    q.add_argument("--allow", action="append", default=[], help="field or category that may differ (repeatable)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func="bayesrc.collect.handlers:run_pins")

    m = sub.add_parser("merge", help="merge shard runs (disjoint item ranges) into one run directory")
    m.add_argument("shards", type=Path, nargs="+")
    m.add_argument("--out", type=Path, required=True)
    m.set_defaults(func="bayesrc.collect.handlers:run_merge")

    qz = sub.add_parser("quantize", help="re-quantise a card's GGUF with llama.cpp's quantiser and write a card for it")
    qz.add_argument("card", type=Path, help="source model card (models/*.toml)")
    qz.add_argument("--type", required=True, help="llama.cpp quantisation type, e.g. Q3_K_M, Q5_K_M, Q8_0")
    qz.add_argument("--out", type=Path, required=True, help="folder for <name>.gguf and <name>.toml")
    qz.add_argument("--threads", type=int, default=2)
    qz.set_defaults(func="bayesrc.collect.handlers:run_quantize")

    b = sub.add_parser("bank", help="item banks the project writes itself")
    bsub = b.add_subparsers(dest="bank_command", metavar="BANK_COMMAND", required=True)
    bd = bsub.add_parser("demo", help="write the built-in letter-pattern bank (JSONL)")
    bd.add_argument("--n", type=int, default=60, help="number of items")
    bd.add_argument("--seed", type=int, default=0)
    bd.add_argument("--out", type=Path, required=True, help="bank file (JSONL)")
    bd.set_defaults(func="bayesrc.collect.handlers:run_bank_demo")

    d = sub.add_parser(
        "collect-demo", help="collect the built-in demo bank under two versions (Q4_K_M vs re-quantised Q3_K_M)"
    )
    d.add_argument("--out", type=Path, default=Path("runs/demo-collect"))
    d.add_argument("--items", type=int, default=40)
    d.add_argument("--k", type=int, default=10)
    d.set_defaults(func="bayesrc.collect.handlers:run_collect_demo")


def _add_collect_command(sub: argparse._SubParsersAction) -> None:
    """``bayesrc collect``; the option groups are added in the order ``--help`` lists them."""
    p = sub.add_parser("collect", help="collect K samples per item from a GGUF model into a run directory")
    _add_collect_paths(p)
    _add_sampling_arguments(p)
    _add_engine_arguments(p)
    _add_items_and_seeds_arguments(p)
    _add_execution_arguments(p)
    # bayesrc.scale.commands adds --ray (item shards on Ray) to this parser
    p.set_defaults(func="bayesrc.collect.handlers:run_collect")


def _add_collect_paths(p: argparse.ArgumentParser) -> None:
    """The model card, the item bank and the run directory."""
    p.add_argument("--model", type=Path, required=True, help="model card (models/*.toml)")
    p.add_argument("--items", type=Path, required=True, help="item bank (JSONL)")
    p.add_argument("--out", type=Path, required=True, help="run directory (runs/NAME)")


def _add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    """Samples per item and the sampler's settings."""
    p.add_argument("--k", type=int, default=10, help="samples per item (not used by --engine exact)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--min-p", type=float, default=0.05)


def _add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """The engine, with the server engine's and the exact engine's own options."""
    p.add_argument(
        "--engine",
        choices=("fast", "naive", "exact", "server"),
        default="fast",
        help="exact: compute each item's answer distribution (dist.parquet, items_exact.parquet) instead of sampling; "
        "server: an OpenAI-compatible completions endpoint (--base-url)",
    )
    p.add_argument(
        "--base-url", help="server engine: the endpoint, e.g. http://127.0.0.1:8080 (llama.cpp server, vLLM, ...)"
    )
    p.add_argument("--api-model", help="server engine: model name to request (default: the one the server lists)")
    p.add_argument(
        "--api",
        choices=("completions", "chat"),
        default=None,
        help="server engine: /v1/completions (default; the card's prompt as text) "
        "or /v1/chat/completions (its system text and template as messages)",
    )
    p.add_argument("--concurrency", type=int, default=4, help="server engine: requests in flight (default 4)")
    p.add_argument(
        "--retries",
        type=int,
        default=5,
        help="server engine: retries per request, with exponential back-off (default 5)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="server engine: seconds to wait for an answer before retrying (default 120)",
    )
    p.add_argument(
        "--epsilon",
        default="1e-6",
        help="exact engine: expand every token prefix with probability >= EPSILON, in (0, 0.1) (default 1e-6)",
    )
    p.add_argument(
        "--max-expansions",
        type=int,
        default=None,
        help="exact engine: decode budget per item (default 20000); mass left over is p_unresolved",
    )


def _add_items_and_seeds_arguments(p: argparse.ArgumentParser) -> None:
    """Which items this call collects (resume, shard, range) and how their samples are seeded."""
    p.add_argument("--resume", action="store_true", help="continue a run directory (its pins must match)")
    p.add_argument("--shard", help="I/N: collect the I-th (0-based) of N contiguous item ranges")
    p.add_argument("--items-range", help="A:B: collect bank items A..B-1 (0-based)")
    p.add_argument(
        "--seed-stride",
        type=int,
        default=None,
        help="seed = salt + item_index * STRIDE + k for every k (K <= STRIDE); "
        "by default the reference study's item_index * 10 + k for k < 10 and seeds of the item and k alone beyond, "
        "so any K up to 4096 runs and a larger K draws a smaller K's trials first",
    )
    p.add_argument(
        "--seed-rule",
        choices=("version", "shared"),
        default="version",
        help="version (default): salt the seeds with the version's pin, so versions draw independently; "
        "shared: salt 0 for every model, the reference study's rule (couples the versions' draws)",
    )


def _add_execution_arguments(p: argparse.ArgumentParser) -> None:
    """How the collection runs: the version label, threads, batching, the evaluation scheme, progress."""
    p.add_argument("--label", help="version label for the trials' model column (default: the card's)")
    p.add_argument("--threads", type=int, help="CPU threads (default: the card's n_threads, else all physical cores)")
    p.add_argument(
        "--items-per-batch",
        type=int,
        default=1,
        help="fast engine: continue the answers of N items as separate sequences of one decode per token position; "
        "batches are fixed by item index (items i with the same i // N), so order and resume do not change a trial; "
        "N > 1 changes the logits in their last bits, so trials agree with N = 1 in distribution, "
        "not one by one (pinned). Default 1",
    )
    p.add_argument(
        "--scheme",
        choices=("blocks", "whole"),
        default="blocks",
        help="how a prompt is evaluated (fast, naive, exact): "
        "blocks (default) = shared block kept, the item's own block decoded after it; "
        "whole = the prompt in one piece on an emptied cache, as llama-cpp-python's create_completion. "
        "llama.cpp's logits depend on the split, so it is pinned",
    )
    p.add_argument("--no-progress", action="store_true")
