"""What ``bayesrc collect``, ``pins``, ``merge``, ``quantize``, ``bank`` and ``collect-demo`` run:
:mod:`bayesrc.collect.commands` parses the options and names these functions
(``func="bayesrc.collect.handlers:NAME"``), imported only when the command runs."""

from __future__ import annotations

import argparse
import sys

from bayesrc.collect import collect_demo_runs, merge_runs
from bayesrc.collect.bank import load_bank
from bayesrc.collect.builtin import builtin_bank, quantize_card
from bayesrc.collect.run import collect
from bayesrc.collect.rundir import read_parts
from bayesrc.collect.spec import RunSpec
from bayesrc.data import compare_runs
from bayesrc.errors import InputError
from bayesrc.io import dumps_json


def run_spec(args: argparse.Namespace):
    """The :class:`~bayesrc.collect.spec.RunSpec` of ``bayesrc collect``'s options
    (checked: exit 2 before anything loads), one for a single-process run and for ``--ray``.

    Examples
    --------
    >>> from bayesrc.collect.commands import register
    >>> parser = argparse.ArgumentParser()
    >>> register(parser.add_subparsers())
    >>> run_spec(parser.parse_args(["collect", "--model", "m.toml", "--items", "b.jsonl", "--out", "r", "--k", "40"])).k
    40
    """
    exact = args.engine == "exact"
    return RunSpec(
        k=args.k,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        engine=args.engine,
        scheme=args.scheme,
        items_per_batch=args.items_per_batch,
        seed_stride=args.seed_stride,
        seed_rule=args.seed_rule,
        items_range=args.items_range,
        shard=args.shard,
        label=args.label,
        threads=args.threads,
        epsilon=args.epsilon if exact else 1e-6,
        max_expansions=args.max_expansions,
    )


def run_collect(args: argparse.Namespace) -> int:
    server = None
    if args.engine == "server":
        if not args.base_url:
            raise InputError("--engine server needs --base-url", field="--base-url")
        server = {
            "base_url": args.base_url,
            "api_model": args.api_model,
            "api": args.api or "completions",
            "concurrency": args.concurrency,
            "retries": args.retries,
            "timeout": args.timeout,
        }
    elif args.base_url or args.api_model or args.api:
        raise InputError("--base-url / --api-model / --api need --engine server", field="--engine")
    spec = run_spec(args)
    res = collect(
        args.model,
        args.items,
        args.out,
        spec,
        resume=args.resume,
        progress=not args.no_progress and sys.stderr.isatty(),
        server=server,
    )
    if spec.exact:
        _report_exact(res)
        return 0
    rate = res.n_new_items * args.k / res.sample_seconds if res.sample_seconds > 0 else float("nan")
    print(
        f"{res.run_dir}: {res.n_trials} trials over {res.n_items} items "
        f"({res.n_new_items} new items, {rate:.1f} trials/s)"
    )
    # the faults the run rode through, on stderr (stdout stays the one result line); run.json keeps them
    if res.server_retries:
        print(f"bayesrc: {retries_line(res.server_retries)} (run.json info.retries)", file=sys.stderr)
    return 0


def retries_line(retries: dict[str, int]) -> str:
    """The server engine's retried requests by fault kind on one line.

    Examples
    --------
    >>> retries_line({"timeout": 1, "HTTP 503": 2})
    'retried 3 requests: HTTP 503 2, timeout 1'
    """
    return f"retried {sum(retries.values())} requests: " + ", ".join(
        f"{kind} {n}" for kind, n in sorted(retries.items())
    )


def run_pins(args: argparse.Namespace) -> int:
    for r in (args.run_a, args.run_b):
        if not r.exists():
            raise InputError("run not found", path=r)
    comp = compare_runs(args.run_a, args.run_b, allow=args.allow)
    print(dumps_json(comp.to_dict()) if args.json else comp.summary(), end="\n" if not args.json else "")
    return 0 if comp.comparable else 1


def run_merge(args: argparse.Namespace) -> int:
    out = merge_runs(args.shards, args.out)
    print(f"merged {len(args.shards)} shards into {out}")
    return 0


def run_collect_demo(args: argparse.Namespace) -> int:
    runs = collect_demo_runs(args.out, n_items=args.items, k=args.k, progress=sys.stderr.isatty())
    for name, path in runs.items():
        print(f"{name}: {path / 'trials.parquet'}")
    return 0


def _report_exact(res) -> None:
    """One summary line; unresolved mass is reported, never hidden."""
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
            f"bayesrc: warning: {len(bad)} of {len(per_item)} items have p_unresolved > 0.01 "
            f"(max {bad['p_unresolved'].max():.3f}): "
            "their answers are not decided within max_tokens at this epsilon; "
            "lower --epsilon, raise --max-expansions or change the prompt",
            file=sys.stderr,
        )


def run_quantize(args: argparse.Namespace) -> int:
    gguf, toml = quantize_card(args.card, args.type, args.out, n_threads=args.threads)
    print(f"{gguf}\n{toml}")
    return 0


def run_bank_demo(args: argparse.Namespace) -> int:
    if args.out.exists():
        raise InputError("exists; choose another --out (nothing overwritten)", path=args.out)
    path = builtin_bank(args.out, n_items=args.n, seed=args.seed)
    bank = load_bank(path)
    by_opts = {}
    for it in bank.items:
        by_opts[len(it.letters)] = by_opts.get(len(it.letters), 0) + 1
    print(
        f"{path}: {len(bank)} items "
        f"({', '.join(f'{v} with {k} options' for k, v in sorted(by_opts.items()))}), seed {args.seed}"
    )
    return 0
