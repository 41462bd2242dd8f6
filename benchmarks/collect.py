"""Naive vs fast vs exact collection engine, side by side on the same model, items and seeds.

    .venv/bin/python benchmarks/collect.py [--bank builtin|mmlu] [--items 12] [--k 10] [--temperature 0.7] [--epsilon 1e-6]

The exact engine (SPEC section 7) computes each item's answer distribution instead of
sampling it: its rate is in items/s beside the sampling engines' items/s at K, and the
K the fast engine would need for the same precision is printed (the K at which the
binomial SE of p, sqrt(p(1-p)/K) averaged over items, equals exact's error bound, the
unresolved mass p_unresolved; and the K fast can draw in the time exact takes).

Prints trials/s of each engine, the ratio (goal >= 8x at K = 10), exact per-trial
agreement of the extracted answers (same item, k, seed), and a G-test of the per-item
answer distributions (pooled over items: sum of per-item G statistics, df = sum of
(options seen - 1)), which is the check to rely on where logits are not bitwise
reproducible across batch shapes (e.g. some GPU backends).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]


def g_test(a: dict[str, list], b: dict[str, list]) -> tuple[float, int, float]:
    """Pooled G-test of homogeneity of two engines' answer counts, item by item."""
    g_total, df_total = 0.0, 0
    for item in a:
        cats = sorted({str(x) for x in a[item]} | {str(x) for x in b[item]})
        if len(cats) < 2:
            continue
        table = np.array([[sum(str(x) == c for x in a[item]) for c in cats], [sum(str(x) == c for x in b[item]) for c in cats]], float)
        expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
        mask = table > 0
        g_total += 2 * float((table[mask] * np.log(table[mask] / expected[mask])).sum())
        df_total += len(cats) - 1
    p = float(stats.chi2.sf(g_total, df_total)) if df_total else 1.0
    return g_total, df_total, p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bank", choices=("builtin", "mmlu"), default="builtin")
    ap.add_argument("--items", type=int, default=12)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--epsilon", type=float, default=1e-6)
    ap.add_argument("--no-naive", action="store_true", help="fast vs exact only (the naive engine is slow)")
    ap.add_argument("--card", default=str(ROOT / "models" / "gemma-3-270m-q4_k_m.toml"))
    args = ap.parse_args()

    from bayesrc.collect import Model, builtin_bank, load_bank, load_card, resolve_model

    card = load_card(args.card)
    model = Model(resolve_model(card), n_ctx=card.n_ctx, n_batch=card.n_batch, n_gpu_layers=card.n_gpu_layers, n_threads=card.n_threads, label=card.label)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.bank == "builtin":
            bank_path = builtin_bank(tmp / "bank.jsonl", n_items=args.items, seed=0)
        else:
            from bayesrc.datasets import MMLU_PRO_2000, path

            src = path(MMLU_PRO_2000)
            bank_path = tmp / "bank.jsonl"
            bank_path.write_text("".join(src.read_text().splitlines(keepends=True)[: args.items]))
        bank = load_bank(bank_path)
        from bayesrc.collect import build_prompt
        from bayesrc.collect.engines import FastEngine, NaiveEngine, Sampling
        from bayesrc.collect.run import _rows, item_seeds

        sampling = Sampling(temperature=args.temperature, max_tokens=card.max_tokens)
        from bayesrc.collect.exact import ExactEngine

        engines = {"naive": NaiveEngine(model, sampling), "fast": FastEngine(model, sampling), "exact": ExactEngine(model, sampling, epsilon=args.epsilon)}
        secs = {"naive": 0.0, "fast": 0.0, "exact": 0.0}
        rows = {"naive": [], "fast": []}
        dists = []
        # Interleaved item by item (alternating which engine goes first) so that load
        # changes on a shared machine hit both engines alike.
        for it in bank.items:
            toks = model.tokenize(build_prompt(card, it))
            seeds = item_seeds(it, args.k)
            order = ("naive", "fast", "exact") if it.index % 2 == 0 else ("exact", "fast", "naive")
            for name in order:
                if name == "naive" and args.no_naive:
                    continue
                t0 = time.perf_counter()
                if name == "exact":
                    dists.append((it, engines[name].item_distribution(toks, it.letters)))
                else:
                    samples = engines[name].sample_item(toks, seeds, it.letters)
                secs[name] += time.perf_counter() - t0
                if name != "exact":
                    rows[name].append(_rows(it, samples, label=card.label, engine=name))
        import pandas as pd

        if args.no_naive:
            rows["naive"], secs["naive"] = rows["fast"], secs["fast"]  # only so the report below runs; not a measurement
        res = {name: pd.concat(r, ignore_index=True) for name, r in rows.items()}
        rate = {}
        for name in ("naive", "fast"):
            rate[name] = len(res[name]) / secs[name]
            if name == "naive" and args.no_naive:
                continue
            print(f"{name:>5}: {len(res[name])} trials in {secs[name]:7.1f} s = {rate[name]:7.2f} trials/s")
    print(f"ratio fast/naive: {rate['fast'] / rate['naive']:.1f}x  (goal >= 8x; {args.items} {args.bank} items, K = {args.k}, T = {args.temperature}, {model.llm.n_threads} threads)")
    a = res["naive"].sort_values(["item_index", "k"]).reset_index(drop=True)
    b = res["fast"].sort_values(["item_index", "k"]).reset_index(drop=True)
    same = (a["extracted"].fillna("-") == b["extracted"].fillna("-")).mean()
    print(f"exact per-trial agreement of extracted answers (same item, k, seed): {same:.4f} ({int(same * len(a))}/{len(a)})")
    g, df, p = g_test(a.groupby("item_id")["extracted"].apply(list).to_dict(), b.groupby("item_id")["extracted"].apply(list).to_dict())
    print(f"G-test of per-item answer distributions: G = {g:.2f}, df = {df}, p = {p:.3f}")
    print(f"accuracy naive {a['is_correct'].mean():.3f}, fast {b['is_correct'].mean():.3f}; missing naive {a['is_missing'].mean():.3f}, fast {b['is_missing'].mean():.3f}")
    exact_report(dists, secs, rate, args)


def exact_report(dists, secs, rate, args) -> None:
    """Exact vs fast: items/s side by side, and the K fast needs for exact's precision."""
    n = len(dists)
    items_s = {name: n / secs[name] for name in secs}
    print(f"items/s at K = {args.k}: naive {items_s['naive']:.3f}, fast {items_s['fast']:.3f}; exact {items_s['exact']:.3f} "
          f"(exact/fast {items_s['exact'] / items_s['fast']:.2f}x; epsilon {args.epsilon:g}, "
          f"{np.mean([d.n_expanded for _, d in dists]):.1f} decodes/item)")
    p = np.array([d.p(it.answer) for it, d in dists])
    unres = np.array([d.p_unresolved for _, d in dists])
    var = float(np.mean(p * (1 - p)))
    print(f"exact: mean p_correct {p.mean():.3f}; error bound p_unresolved mean {unres.mean():.2e}, max {unres.max():.2e}")
    se_k = np.sqrt(var / args.k)
    print(f"fast at K = {args.k}: binomial SE of p (RMS over items) {se_k:.4f}")
    bound = float(unres.mean())
    if bound > 0:
        k_need = var / bound**2
        print(f"K for fast's SE to equal exact's mean error bound {bound:.2e}: {k_need:.3g} samples/item "
              f"(~{k_need / rate['fast']:.3g} s/item at {rate['fast']:.1f} trials/s, vs exact {secs['exact'] / n:.2f} s/item)")
    else:
        print("exact left no unresolved mass: no finite K matches it")
    k_eq = rate["fast"] * secs["exact"] / n
    print(f"in exact's time per item fast draws K = {k_eq:.0f} samples: SE {np.sqrt(var / max(k_eq, 1)):.4f}")


if __name__ == "__main__":
    main()
