"""CLI: ``bayesrc collect``, ``bayesrc pins``, ``bayesrc merge`` (thin shell over bayesrc.collect)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    _add_collect_command(sub)

    q = sub.add_parser("pins", help="say whether two runs are comparable and list differing pins")
    q.add_argument("run_a", type=Path)
    q.add_argument("run_b", type=Path)
    q.add_argument("--allow", action="append", default=[], help="field or category that may differ (repeatable)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_pins)

    m = sub.add_parser("merge", help="merge shard runs (disjoint item ranges) into one run directory")
    m.add_argument("shards", type=Path, nargs="+")
    m.add_argument("--out", type=Path, required=True)
    m.set_defaults(func=run_merge)

    qz = sub.add_parser("quantize", help="re-quantise a card's GGUF with llama.cpp's quantiser and write a card for it")
    qz.add_argument("card", type=Path, help="source model card (models/*.toml)")
    qz.add_argument("--type", required=True, help="llama.cpp quantisation type, e.g. Q3_K_M, Q5_K_M, Q8_0")
    qz.add_argument("--out", type=Path, required=True, help="folder for <name>.gguf and <name>.toml")
    qz.add_argument("--threads", type=int, default=2)
    qz.set_defaults(func=run_quantize)

    b = sub.add_parser("bank", help="item banks the project writes itself")
    bsub = b.add_subparsers(dest="bank_command", metavar="BANK_COMMAND", required=True)
    bd = bsub.add_parser("demo", help="write the built-in letter-pattern bank (JSONL)")
    bd.add_argument("--n", type=int, default=60, help="number of items")
    bd.add_argument("--seed", type=int, default=0)
    bd.add_argument("--out", type=Path, required=True, help="bank file (JSONL)")
    bd.set_defaults(func=run_bank_demo)

    d = sub.add_parser("collect-demo", help="collect the built-in demo bank under two versions (Q4_K_M vs re-quantised Q3_K_M)")
    d.add_argument("--out", type=Path, default=Path("runs/demo-collect"))
    d.add_argument("--items", type=int, default=40)
    d.add_argument("--k", type=int, default=10)
    d.set_defaults(func=run_collect_demo)


def _add_collect_command(sub: argparse._SubParsersAction) -> None:
    """``bayesrc collect``; the option groups are added in the order ``--help`` lists them."""
    p = sub.add_parser("collect", help="collect K samples per item from a GGUF model into a run directory")
    _add_collect_paths(p)
    _add_sampling_arguments(p)
    _add_engine_arguments(p)
    _add_items_and_seeds_arguments(p)
    _add_execution_arguments(p)
    p.set_defaults(func=run_collect)  # bayesrc.scale.commands adds --ray (item shards on Ray) to this parser


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
        help="exact: compute each item's answer distribution (dist.parquet, items_exact.parquet) instead of sampling; server: an OpenAI-compatible completions endpoint (--base-url)",
    )
    p.add_argument("--base-url", help="server engine: the endpoint, e.g. http://127.0.0.1:8080 (llama.cpp server, vLLM, ...)")
    p.add_argument("--api-model", help="server engine: model name to request (default: the one the server lists)")
    p.add_argument("--concurrency", type=int, default=4, help="server engine: requests in flight (default 4)")
    p.add_argument("--retries", type=int, default=5, help="server engine: retries per request, with exponential back-off (default 5)")
    p.add_argument("--timeout", type=float, default=120.0, help="server engine: seconds to wait for an answer before retrying (default 120)")
    p.add_argument("--epsilon", default="1e-6", help="exact engine: expand every token prefix with probability >= EPSILON, in (0, 0.1) (default 1e-6)")
    p.add_argument("--max-expansions", type=int, default=None, help="exact engine: decode budget per item (default 20000); mass left over is p_unresolved")


def _add_items_and_seeds_arguments(p: argparse.ArgumentParser) -> None:
    """Which items this call collects (resume, shard, range) and how their samples are seeded."""
    p.add_argument("--resume", action="store_true", help="continue a run directory (its pins must match)")
    p.add_argument("--shard", help="I/N: collect the I-th (0-based) of N contiguous item ranges")
    p.add_argument("--items-range", help="A:B: collect bank items A..B-1 (0-based)")
    p.add_argument("--seed-stride", type=int, default=None, help="seed = salt + item_index * STRIDE + k (default max(10, K): the reference study's 10 up to K = 10)")
    p.add_argument(
        "--seed-rule",
        choices=("version", "shared"),
        default="version",
        help="version (default): salt the seeds with the version's pin, so versions draw independently; shared: salt 0 for every model, the reference study's rule (couples the versions' draws)",
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
        "N > 1 changes the logits in their last bits, so trials agree with N = 1 in distribution, not one by one (pinned). Default 1",
    )
    p.add_argument(
        "--scheme",
        choices=("blocks", "whole"),
        default="blocks",
        help="how a prompt is evaluated (fast, naive, exact): blocks (default) = shared block kept, the item's own block decoded after it; "
        "whole = the prompt in one piece on an emptied cache, as llama-cpp-python's create_completion. llama.cpp's logits depend on the split, so it is pinned",
    )
    p.add_argument("--no-progress", action="store_true")


def add_pin_arguments(p: argparse.ArgumentParser, what: str = "analyse") -> None:
    """``--allow-pin`` and ``--force``: an analysis of runs whose pins differ (:func:`bayesrc.collect.pins.check_comparable`).

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> add_pin_arguments(parser)
    >>> parser.parse_args(["--allow-pin", "prompt", "--force"])
    Namespace(allow_pin=['prompt'], force=True)
    """
    p.add_argument("--allow-pin", action="append", default=[], metavar="FIELD", help="a run pin (or category, e.g. prompt) that may differ between the runs (repeatable)")
    p.add_argument("--force", action="store_true", help=f"{what} runs whose pins differ (item bank, sampling, evaluation scheme, ...), with a warning")


def family_counts(runs: list[Path], args: argparse.Namespace):
    """The item counts of a family's trials files (``bayesrc fit V1 V2 V3 ...``, ``bayesrc rci --family``):
    every run checked against the first (only the model may differ, SPEC 6: ``--allow-pin``, ``--force``),
    version names from the trials' ``model`` field, items missing from a version an error unless
    ``--allow-unmatched`` (then only the items every version has). A file given twice is refused.

    Examples
    --------
    >>> args = argparse.Namespace(allow_pin=[], force=False, allow_unmatched=False)
    >>> family_counts([Path("v1.parquet"), Path("v2.parquet"), Path("v3.parquet")], args)  # doctest: +SKIP
    """
    from bayesrc.collect.pins import check_all_comparable
    from bayesrc.data import load_counts
    from bayesrc.errors import InputError

    seen: set[Path] = set()
    for run in map(Path, runs):
        if run.resolve() in seen:
            raise InputError("given twice in one family (one trials file per version)", path=run)
        seen.add(run.resolve())
    check_all_comparable(runs, allow=args.allow_pin, force=args.force)
    return load_counts(runs, on_unmatched="drop" if args.allow_unmatched else "raise")


def run_spec(args: argparse.Namespace):
    """The :class:`~bayesrc.collect.spec.RunSpec` of ``bayesrc collect``'s options (checked: exit 2 before anything loads),
    one for a single-process run and for ``--ray``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> register(parser.add_subparsers())
    >>> run_spec(parser.parse_args(["collect", "--model", "m.toml", "--items", "b.jsonl", "--out", "r", "--k", "40"])).seed_stride
    40
    """
    from bayesrc.collect.spec import RunSpec

    exact = args.engine == "exact"
    return RunSpec(
        k=args.k, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, engine=args.engine, scheme=args.scheme,
        items_per_batch=args.items_per_batch, seed_stride=args.seed_stride, seed_rule=args.seed_rule, items_range=args.items_range, shard=args.shard,
        label=args.label, threads=args.threads, epsilon=args.epsilon if exact else 1e-6, max_expansions=args.max_expansions,
    )  # fmt: skip


def run_collect(args: argparse.Namespace) -> int:
    from bayesrc.collect.run import collect_run
    from bayesrc.errors import InputError

    server = None
    if args.engine == "server":
        if not args.base_url:
            raise InputError("--engine server needs --base-url", field="--base-url")
        server = {"base_url": args.base_url, "api_model": args.api_model, "concurrency": args.concurrency, "retries": args.retries, "timeout": args.timeout}
    elif args.base_url or args.api_model:
        raise InputError("--base-url / --api-model need --engine server", field="--engine")
    spec = run_spec(args)
    res = collect_run(args.model, args.items, args.out, spec, resume=args.resume, progress=not args.no_progress and sys.stderr.isatty(), server=server)
    if spec.exact:
        _report_exact(res)
        return 0
    rate = res.n_new_items * args.k / res.sample_seconds if res.sample_seconds > 0 else float("nan")
    print(f"{res.run_dir}: {res.n_trials} trials over {res.n_items} items ({res.n_new_items} new items, {rate:.1f} trials/s)")
    if res.server_retries:  # the faults the run rode through, on stderr (stdout stays the one result line); run.json keeps them
        print(f"bayesrc: {retries_line(res.server_retries)} (run.json info.retries)", file=sys.stderr)
    return 0


def retries_line(retries: dict[str, int]) -> str:
    """The server engine's retried requests by fault kind on one line.

    Examples
    --------
    >>> retries_line({"timeout": 1, "HTTP 503": 2})
    'retried 3 requests: HTTP 503 2, timeout 1'
    """
    return f"retried {sum(retries.values())} requests: " + ", ".join(f"{kind} {n}" for kind, n in sorted(retries.items()))


def run_pins(args: argparse.Namespace) -> int:
    from bayesrc.collect import compare_runs
    from bayesrc.errors import InputError
    from bayesrc.io import dumps_json

    for r in (args.run_a, args.run_b):
        if not r.exists():
            raise InputError("run not found", path=r)
    comp = compare_runs(args.run_a, args.run_b, allow=args.allow)
    print(dumps_json(comp.to_dict()) if args.json else comp.summary(), end="\n" if not args.json else "")
    return 0 if comp.comparable else 1


def run_merge(args: argparse.Namespace) -> int:
    from bayesrc.collect import merge_runs

    out = merge_runs(args.shards, args.out)
    print(f"merged {len(args.shards)} shards into {out}")
    return 0


def run_collect_demo(args: argparse.Namespace) -> int:
    from bayesrc.collect import collect_demo_runs

    runs = collect_demo_runs(args.out, n_items=args.items, k=args.k, progress=sys.stderr.isatty())
    for name, path in runs.items():
        print(f"{name}: {path / 'trials.parquet'}")
    return 0


def _report_exact(res) -> None:
    """One summary line; unresolved mass is reported, never hidden."""
    from bayesrc.collect.rundir import read_parts

    parts = read_parts(res.run_dir)
    rate = res.n_new_items / res.sample_seconds if res.sample_seconds > 0 else float("nan")
    if len(parts) == 0:
        print(f"{res.run_dir}: 0 items")
        return
    per_item = parts.groupby("item_index")[["p_unresolved", "n_expanded"]].first()
    done = "dist.parquet, items_exact.parquet" if (res.run_dir / "dist.parquet").exists() else "parts only (incomplete)"
    print(
        f"{res.run_dir}: exact distributions of {res.n_items} items ({res.n_new_items} new, {rate:.2f} items/s, "
        f"{per_item['n_expanded'].mean():.1f} decodes/item); p_unresolved mean {per_item['p_unresolved'].mean():.2e}, "
        f"max {per_item['p_unresolved'].max():.2e}; {done}"
    )
    bad = per_item[per_item["p_unresolved"] > 0.01]
    if len(bad):
        print(
            f"bayesrc: warning: {len(bad)} of {len(per_item)} items have p_unresolved > 0.01 (max {bad['p_unresolved'].max():.3f}): "
            "their answers are not decided within max_tokens at this epsilon; lower --epsilon, raise --max-expansions or change the prompt",
            file=sys.stderr,
        )


def run_quantize(args: argparse.Namespace) -> int:
    from bayesrc.collect.builtin import quantize_card

    gguf, toml = quantize_card(args.card, args.type, args.out, n_threads=args.threads)
    print(f"{gguf}\n{toml}")
    return 0


def run_bank_demo(args: argparse.Namespace) -> int:
    from bayesrc.collect.bank import load_bank
    from bayesrc.collect.builtin import builtin_bank
    from bayesrc.errors import InputError

    if args.out.exists():
        raise InputError("exists; choose another --out (nothing overwritten)", path=args.out)
    path = builtin_bank(args.out, n_items=args.n, seed=args.seed)
    bank = load_bank(path)
    by_opts = {}
    for it in bank.items:
        by_opts[len(it.letters)] = by_opts.get(len(it.letters), 0) + 1
    print(f"{path}: {len(bank)} items ({', '.join(f'{v} with {k} options' for k, v in sorted(by_opts.items()))}), seed {args.seed}")
    return 0
