"""Collection engines against the reference loop as it really ran, and against the hardware floor.

    .venv/bin/python benchmarks/collect.py [--bank builtin|mmlu] [--items 12] [--k 10] [--temperature 0.7]
                                           [--threads N] [--engines reference,naive,fast] [--naive-items 4]
                                           [--items-per-batch 4,8]

The exact engine (SPEC section 7) computes each item's answer distribution instead of
sampling it: its items/s is printed beside the sampling engines' items/s at K, with the K
the fast engine would need for the same precision (the K at which the binomial SE of p
equals exact's error bound, the unresolved mass) and the K fast can draw in exact's time.

Side by side in one process, item by item (the engines' order rotating from item to item
so that load changes on a shared machine hit all alike), same card, items and seeds:

``reference``
    The reference study's loop as it ran: one ``Llama`` object of its own,
    ``create_completion(prompt_text, seed=seed)`` K times per item, llama-cpp-python's
    prefix reuse left on (so the shared system text and worked examples, and within an
    item the whole prompt, are not re-evaluated). Its prompt is the full text tokenised
    in one piece, as the study did. Every ratio below is against this loop.
``naive`` / ``fast`` (and any other engine registered in ``ENGINES``)
    ``bayesrc.collect`` engines on the canonical two-block prompts (``Model.eval_prompt``).
``fast/N`` (one per ``--items-per-batch`` value)
    The fast engine with N items per decode (``FastEngine.sample_items``: each own block
    in a sequence of its own, then the answer continuations of the N items as separate
    sequences of one decode per tree level),
    batches fixed by item index as ``collect(items_per_batch=N)`` forms them.

The floor, per item, measured in the same loop: ``own`` = one evaluation of the item's own
block with the shared block's KV cached (what any engine must at least do per item),
``full`` = one evaluation of the whole prompt from an emptied cache. And llama.cpp's own
prompt-processing throughput for this model, batch and thread count, measured as
llama-bench does (no llama-bench binary ships with llama-cpp-python): a batch of random
tokens (BOS first) decoded into an emptied cache of a fresh context, one warm-up, the median
of ``--reps`` timed runs; ``pp512`` (``n_batch`` tokens) and ``pp<own>`` (the mean own-block
length), and ``tg`` (single-token decodes). Finally the multi-item batch: B items' own
blocks as B sequences in one decode, against B single-item decodes (time per item).

Times are wall-clock unless ``--clock cpu`` (the process's CPU time: on a machine shared with
other jobs it leaves out the time spent waiting for a core, which otherwise swamps the ratios).

Prints: trials/s, time per item, speed-up over the reference loop, time per item as a
multiple of the ``own`` and ``full`` floors, own-block tokens/s as a share of pp throughput;
exact per-trial agreement of the extracted answers between bayesrc engines (same item, k,
seed) and a G-test of per-item answer distributions against the reference loop (its
prompt is tokenised in one piece and evaluated in other batches, so only distributions
can agree).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
clock = time.perf_counter  # --clock cpu: time.process_time


def g_test(a: dict[str, list], b: dict[str, list]) -> tuple[float, int, float]:
    """Pooled G-test of homogeneity of two engines' answer counts, item by item."""
    g_total, df_total = 0.0, 0
    for item in a:
        cats = sorted({str(x) for x in a[item]} | {str(x) for x in b[item]})
        if len(cats) < 2:
            continue
        table = np.array(
            [[sum(str(x) == c for x in a[item]) for c in cats], [sum(str(x) == c for x in b[item]) for c in cats]],
            float,
        )
        expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
        mask = table > 0
        g_total += 2 * float((table[mask] * np.log(table[mask] / expected[mask])).sum())
        df_total += len(cats) - 1
    p = float(stats.chi2.sf(g_total, df_total)) if df_total else 1.0
    return g_total, df_total, p


class ReferenceLoop:
    """The reference study's loop: one Llama, ``create_completion`` per trial, prefix reuse on."""

    name = "reference"

    def __init__(self, model, sampling):
        self.model, self.sampling = model, sampling

    def sample_item(self, text: str, seeds: list[int]):
        from bayesrc.collect.sampling import Sample

        s, out = self.sampling, []
        for k, seed in enumerate(seeds):
            res = self.model.llm.create_completion(
                text,
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
            out.append(
                Sample(
                    k,
                    seed,
                    choice["text"],
                    int(res["usage"]["completion_tokens"]),
                    "stop" if choice["finish_reason"] == "stop" else "length",
                )
            )
        return out


# -- llama-bench style throughput (low-level API, a context of its own) ---------------------
class BenchContext:
    """A fresh llama context on the loaded weights, for llama-bench style timings."""

    def __init__(self, model, *, n_ctx: int, n_batch: int, n_seq: int = 1):
        import llama_cpp

        self.lc = llama_cpp
        p = llama_cpp.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = n_ctx, n_batch, n_batch, n_seq
        p.n_threads = p.n_threads_batch = model.n_threads
        p.kv_unified = True
        from bayesrc.collect.model import _quiet_stderr

        with _quiet_stderr():
            self.ctx = llama_cpp.llama_init_from_model(model.llm._model.model, p)  # noqa: SLF001
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq)
        self.n_batch = n_batch

    def decode(self, seqs: list[tuple[int, int, list[int]]]) -> None:
        """One decode of ``(seq_id, first_pos, tokens)`` runs; logits for each run's last token."""
        b, i = self.batch, 0
        for seq, pos0, toks in seqs:
            for j, t in enumerate(toks):
                b.token[i], b.pos[i], b.n_seq_id[i] = t, pos0 + j, 1
                b.seq_id[i][0] = seq
                b.logits[i] = int(j == len(toks) - 1)
                i += 1
        b.n_tokens = i
        if self.lc.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")
        self.lc.llama_synchronize(self.ctx)

    def clear(self) -> None:
        self.lc.llama_memory_clear(self.mem, True)

    def close(self) -> None:
        self.lc.llama_batch_free(self.batch)
        self.lc.llama_free(self.ctx)


def pp_throughput(model, n: int, *, reps: int, n_batch: int) -> float:
    """Prompt-processing tokens/s as llama-bench's ``pp<n>``: random tokens, emptied cache, median of reps."""
    import llama_cpp

    vocab = model.llm._model.vocab  # noqa: SLF001
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    rng = random.Random(n)
    bc = BenchContext(model, n_ctx=max(n, 64) + 64, n_batch=n_batch)
    try:
        times = []
        for r in range(reps + 1):  # the first run warms up
            toks = [llama_cpp.llama_vocab_bos(vocab)] + [rng.randrange(n_vocab) for _ in range(n - 1)]
            bc.clear()
            t0 = clock()
            for i in range(0, n, n_batch):
                bc.decode([(0, i, toks[i : i + n_batch])])
            if r:
                times.append(clock() - t0)
        return n / statistics.median(times)
    finally:
        bc.close()


def tg_throughput(model, n: int, *, reps: int) -> float:
    """Single-token decode tokens/s as llama-bench's ``tg<n>``."""
    import llama_cpp

    vocab = model.llm._model.vocab  # noqa: SLF001
    bc = BenchContext(model, n_ctx=n + 64, n_batch=8)
    try:
        times = []
        for r in range(reps + 1):
            bc.clear()
            tok = llama_cpp.llama_vocab_bos(vocab)
            t0 = clock()
            for i in range(n):
                bc.decode([(0, i, [tok])])
            if r:
                times.append(clock() - t0)
        return n / statistics.median(times)
    finally:
        bc.close()


def multi_item_decode(model, prompts, *, group: int, reps: int) -> tuple[float, float]:
    """Seconds per item for the own blocks of ``group`` items: one decode of ``group`` sequences vs one decode each.

    Both from the shared block's KV (decoded once into sequence 0 and copied to the others
    with ``llama_memory_seq_cp``), in one context with ``group`` sequences, so the two
    differ only in batch composition.
    """
    import llama_cpp

    shared = list(prompts[0].shared)
    own = [list(p.own) for p in prompts[:group]]
    n_tok = sum(map(len, own))
    bc = BenchContext(model, n_ctx=len(shared) + n_tok + 64, n_batch=max(n_tok, len(shared), 8), n_seq=group)
    try:
        bc.decode([(0, 0, shared)])
        for s in range(1, group):
            llama_cpp.llama_memory_seq_cp(bc.mem, 0, s, 0, len(shared))

        def reset():
            for s in range(group):
                llama_cpp.llama_memory_seq_rm(bc.mem, s, len(shared), -1)

        one, sep = [], []
        for r in range(reps + 1):
            reset()
            t0 = clock()
            bc.decode([(s, len(shared), o) for s, o in enumerate(own)])
            t1 = clock()
            reset()
            t2 = clock()
            for s, o in enumerate(own):
                bc.decode([(s, len(shared), o)])
            t3 = clock()
            if r:
                one.append(t1 - t0)
                sep.append(t3 - t2)
        return statistics.median(one) / group, statistics.median(sep) / group
    finally:
        bc.close()


def load_items(bank: str, n: int, tmp: Path):
    from bayesrc.collect import builtin_bank, load_bank

    if bank == "builtin":
        return load_bank(builtin_bank(tmp / "bank.jsonl", n_items=n, seed=0))
    from bayesrc.datasets import MMLU_PRO_2000, path

    src = path(MMLU_PRO_2000)
    dst = tmp / "bank.jsonl"
    dst.write_text("".join(src.read_text().splitlines(keepends=True)[:n]))
    return load_bank(dst)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bank", choices=("builtin", "mmlu"), default="builtin")
    ap.add_argument("--items", type=int, default=12)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--threads", type=int, default=None, help="default: all physical cores")
    ap.add_argument("--engines", default=None, help="comma list; default: reference + every registered engine")
    ap.add_argument(
        "--naive-items", type=int, default=None, help="run the naive engine on the first N items only (it is slow)"
    )
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each floor / throughput timing (median)")
    ap.add_argument("--group", type=int, default=4, help="items per decode in the multi-item measurement")
    ap.add_argument(
        "--items-per-batch",
        default="4",
        help="comma list of N > 1: a fast/N engine for each (N items per decode); '' for none",
    )
    ap.add_argument("--epsilon", type=float, default=1e-6, help="exact engine: pruning threshold")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: elapsed time; cpu: this process's CPU time (on an oversubscribed machine it leaves out the time "
        "the process waits for a core; with --threads 1 it is the work done)",
    )
    ap.add_argument("--card", default=str(ROOT / "models" / "gemma-3-270m-q4_k_m.toml"))
    args = ap.parse_args()
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    import pandas as pd

    from bayesrc.collect import Model, build_prompt, load_card, resolve_model
    from bayesrc.collect.engines import ENGINES, FastEngine, make_engine
    from bayesrc.collect.run import render_prompts
    from bayesrc.collect.rundir import item_seeds, trial_rows
    from bayesrc.collect.sampling import Sampling

    card = load_card(args.card)
    load = dict(
        n_ctx=card.n_ctx,
        n_batch=card.n_batch,
        n_gpu_layers=card.n_gpu_layers,
        n_threads=args.threads or card.n_threads,
        label=card.label,
    )
    model = Model(resolve_model(card), **load)
    names = args.engines.split(",") if args.engines else ["reference", *ENGINES, "exact"]
    batched = {f"fast/{n}": int(n) for n in args.items_per_batch.split(",") if n.strip() and int(n) > 1}
    names += [n for n in batched if n not in names]
    sampling = Sampling(temperature=args.temperature, max_tokens=card.max_tokens)
    from bayesrc.collect.exact import ExactEngine

    engines = {
        n: (
            ReferenceLoop(Model(resolve_model(card), **load), sampling)
            if n == "reference"
            else ExactEngine(model, sampling, epsilon=args.epsilon)
            if n == "exact"
            else FastEngine(model, sampling, items_per_batch=batched[n])
            if n in batched
            else make_engine(n, model, sampling)
        )
        for n in names
    }

    with tempfile.TemporaryDirectory() as tmp:
        bank = load_items(args.bank, args.items, Path(tmp))
    _, prompts = render_prompts(card, model, bank.items, max_tokens=sampling.max_tokens)
    texts = {it.index: build_prompt(card, it) for it in bank.items}
    joint_same = sum(model.tokenize(texts[i]) == prompts[i].tokens for i in texts)
    n_shared = len(prompts[bank.items[0].index].shared)
    n_own = statistics.mean(len(p.own) for p in prompts.values())

    secs = {n: 0.0 for n in names}
    n_items = {n: 0 for n in names}
    rows = {n: [] for n in names}
    floor_own, floor_full = [], []
    dists = []  # (item, exact answer distribution)
    for j, it in enumerate(bank.items):
        p, seeds = prompts[it.index], item_seeds(it, args.k)
        order = names[j % len(names) :] + names[: j % len(names)]
        for name in order:
            if name == "naive" and args.naive_items is not None and j >= args.naive_items:
                continue
            # the batch of items j .. j+N-1 (bank order = index order), timed whole at its first item
            if name in batched:
                n_b = batched[name]
                if j % n_b:
                    continue
                members = bank.items[j : j + n_b]
                t0 = clock()
                out = engines[name].sample_items(
                    [prompts[m.index] for m in members],
                    [item_seeds(m, args.k) for m in members],
                    [m.letters for m in members],
                )
                secs[name] += clock() - t0
                n_items[name] += len(members)
                rows[name] += [trial_rows(m, smp, label=card.label, engine=name) for m, smp in zip(members, out)]
                continue
            t0 = clock()
            if name == "reference":
                samples = engines[name].sample_item(texts[it.index], seeds)
            elif name == "exact":
                dists.append((it, engines[name].item_distribution(p, it.letters)))
            else:
                samples = engines[name].sample_item(p, seeds, it.letters)
            secs[name] += clock() - t0
            n_items[name] += 1
            if name != "exact":
                rows[name].append(trial_rows(it, samples, label=card.label, engine=name))
        # The floor for this item, between the engines' turns (same load).
        t_full, t_own = [], []
        for _ in range(args.reps):
            t0 = clock()
            model.eval_prompt(p, fresh=True)
            t1 = clock()
            model.eval_prompt(p)
            t2 = clock()
            t_full.append(t1 - t0)
            t_own.append(t2 - t1)
        floor_full.append(statistics.median(t_full))
        floor_own.append(statistics.median(t_own))

    pp_batch = pp_throughput(model, card.n_batch, reps=args.reps, n_batch=card.n_batch)
    pp_own = pp_throughput(model, max(2, round(n_own)), reps=args.reps, n_batch=card.n_batch)
    tg = tg_throughput(model, 32, reps=args.reps)
    plist = [prompts[it.index] for it in bank.items]
    group = min(args.group, len(plist))
    multi, single = multi_item_decode(model, plist, group=group, reps=args.reps) if group > 1 else (float("nan"),) * 2

    own_floor = statistics.mean(floor_own)
    full_floor = statistics.mean(floor_full)
    res = {n: pd.concat(r, ignore_index=True) for n, r in rows.items() if r}
    per_item = {n: secs[n] / n_items[n] for n in names if n_items[n]}
    ref = per_item.get("reference")
    print(
        f"{args.items} {args.bank} items, K = {args.k}, T = {args.temperature}, {model.n_threads} threads, "
        f"n_batch {card.n_batch}, {args.clock} clock; "
        f"prompt = shared {n_shared} + own {n_own:.1f} tokens on average "
        f"(one-piece tokenisation equals the blocks' concatenation for {joint_same}/{len(texts)} items)"
    )
    print(
        f"floor per item: own block {own_floor * 1e3:.1f} ms ({n_own / own_floor:.0f} tok/s), "
        f"full prompt from an emptied cache {full_floor * 1e3:.1f} ms"
    )
    print(
        f"llama.cpp throughput (llama-bench style): pp{card.n_batch} {pp_batch:.0f} tok/s, "
        f"pp{round(n_own)} {pp_own:.0f} tok/s, tg32 {tg:.1f} tok/s; "
        f"the own-block floor runs at {n_own / own_floor / pp_batch:.0%} of pp{card.n_batch}, "
        f"{n_own / own_floor / pp_own:.0%} of pp{round(n_own)}"
    )
    print(
        f"several items per decode ({group} sequences): {multi * 1e3:.1f} ms/item in one decode "
        f"vs {single * 1e3:.1f} ms/item in one decode each ({single / multi:.2f}x)"
    )
    print(
        f"{'engine':>10} {'items':>5} {'trials':>6} {'s':>8} {'trials/s':>9} {'ms/item':>8} "
        f"{'x ref':>6} {'x own':>6} {'x full':>6} {'own tok/s % pp':>15}"
    )
    for n in names:
        if not n_items[n] or n == "exact":
            continue
        t = per_item[n]
        print(
            f"{n:>10} {n_items[n]:>5} {len(res[n]):>6} {secs[n]:8.2f} {len(res[n]) / secs[n]:9.2f} {t * 1e3:8.1f} "
            f"{(ref / t if ref else float('nan')):6.2f} {t / own_floor:6.2f} {t / full_floor:6.2f} "
            f"{n_own / t / pp_batch:15.1%}"
        )

    key = ["item_index", "k"]
    canon = [n for n in res if n != "reference"]
    one = [n for n in canon if n not in batched]
    for a_name, b_name in [*zip(one, one[1:]), *(("fast", n) for n in batched if "fast" in res and n in res)]:
        a, b = res[a_name], res[b_name]
        both = a.merge(b, on=key, suffixes=("_a", "_b"))
        same = (both["extracted_a"].fillna("-") == both["extracted_b"].fillna("-")).mean()
        line = (
            f"per-trial agreement {a_name} vs {b_name} (same item, k, seed): {same:.4f} "
            f"({int(round(same * len(both)))}/{len(both)})"
        )
        if b_name in batched:  # batching changes the logits' last bits: the distributions must agree
            g, df, p = g_test(
                a.groupby("item_id")["extracted"].apply(list).to_dict(),
                b.groupby("item_id")["extracted"].apply(list).to_dict(),
            )
            line += f"; G-test G = {g:.2f}, df = {df}, p = {p:.3f}"
        print(line)
    if "reference" in res:
        for n in canon:
            a, b = res["reference"], res[n]
            a = a[a["item_index"].isin(b["item_index"])]
            both = a.merge(b, on=key, suffixes=("_a", "_b"))
            same = (both["extracted_a"].fillna("-") == both["extracted_b"].fillna("-")).mean()
            g, df, p = g_test(
                a.groupby("item_id")["extracted"].apply(list).to_dict(),
                b.groupby("item_id")["extracted"].apply(list).to_dict(),
            )
            print(
                f"reference vs {n}: per-trial agreement {same:.3f}; "
                f"G-test of per-item answer distributions G = {g:.2f}, df = {df}, p = {p:.3f}"
            )
    tokens = ", ".join(f"{n} {r['n_tokens'].mean():.2f}" for n, r in res.items())
    print(f"generated tokens per trial: {tokens}")
    if "fast" in engines and n_items.get("fast"):
        print(
            f"fast engine: {engines['fast'].n_decodes / n_items['fast']:.2f} single-token decodes per item "
            "(prefix-tree nodes past the prompt)"
        )
    for name, n_b in batched.items():
        if n_items[name]:
            n_batches = -(-n_items[name] // n_b)
            print(
                f"{name}: {engines[name].n_decodes / n_batches:.2f} continuation decodes per batch of {n_b} items "
                "(one per tree level, all branches of all items)"
            )
    acc = ", ".join(f"{n} {r['is_correct'].mean():.3f}/{r['is_missing'].mean():.3f}" for n, r in res.items())
    print(f"accuracy/missing: {acc}")
    if dists:
        rate = {"fast": len(res["fast"]) / secs["fast"]} if "fast" in res else {"fast": float("nan")}
        exact_report(dists, {"exact": secs["exact"], "fast": secs.get("fast", float("nan"))}, rate, args)


def exact_report(dists, secs, rate, args) -> None:
    """Exact vs fast: items/s side by side, and the K fast needs for exact's precision."""
    n = len(dists)
    items_s = {name: n / secs[name] for name in secs}
    print(
        f"items/s at K = {args.k}: fast {items_s['fast']:.3f}; exact {items_s['exact']:.3f} "
        f"(exact/fast {items_s['exact'] / items_s['fast']:.2f}x; epsilon {args.epsilon:g}, "
        f"{np.mean([d.n_expanded for _, d in dists]):.1f} decodes/item)"
    )
    p = np.array([d.p(it.answer) for it, d in dists])
    unres = np.array([d.p_unresolved for _, d in dists])
    var = float(np.mean(p * (1 - p)))
    print(
        f"exact: mean p_correct {p.mean():.3f}; error bound p_unresolved mean {unres.mean():.2e}, max {unres.max():.2e}"
    )
    se_k = np.sqrt(var / args.k)
    print(f"fast at K = {args.k}: binomial SE of p (RMS over items) {se_k:.4f}")
    bound = float(unres.mean())
    if bound > 0:
        k_need = var / bound**2
        print(
            f"K for fast's SE to equal exact's mean error bound {bound:.2e}: {k_need:.3g} samples/item "
            f"(~{k_need / rate['fast']:.3g} s/item at {rate['fast']:.1f} trials/s, "
            f"vs exact {secs['exact'] / n:.2f} s/item)"
        )
    else:
        print("exact left no unresolved mass: no finite K matches it")
    k_eq = rate["fast"] * secs["exact"] / n
    print(f"in exact's time per item fast draws K = {k_eq:.0f} samples: SE {np.sqrt(var / max(k_eq, 1)):.4f}")


if __name__ == "__main__":
    main()
