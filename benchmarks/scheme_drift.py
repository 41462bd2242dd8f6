"""How far apart are the two evaluation schemes, and does ``whole`` reproduce ``create_completion``?

    .venv/bin/python benchmarks/scheme_drift.py [--items 40] [--draws 1000] [--fast-draws 1000]
                                                [--gtest-items 6] [--threads N] [--out runs/scheme_drift]

1. **Drift.** Exact runs (``bayesrc collect --engine exact``) of the demo bank (``bayesrc bank
   demo --seed 0``, its first ``--items`` items) under ``--scheme blocks`` and ``--scheme whole``:
   same card, tokens and sampler chain, only the batch split of the prompt differs. Per item the
   total variation distance between the two answer distributions (option letters and "no valid
   answer") and ``|dP(correct)|``; printed as a table with their max and mean. The run
   directories are kept under ``--out`` (resumed if there), so ``bayesrc pins`` can be pointed
   at them.
2. **G-test.** On the first ``--gtest-items`` items, ``--draws`` draws of llama-cpp-python's own
   ``create_completion(prompt_text, seed=s)`` on a fresh context (``Llama.reset()`` before each
   call, so the whole prompt is evaluated, as on a new ``Llama``) and ``--fast-draws`` samples
   of the fast engine under ``--scheme whole`` (same seeds), their extracted answers tested
   against each scheme's exact distribution (G-test, categories with expected count < 5
   pooled), and the share of seeds on which create_completion and the fast engine give the same
   answer. Under ``whole`` no item should be rejected at Bonferroni ``0.001 / items``; under
   ``blocks`` some may be (the drift of part 1). Each create_completion draw evaluates the whole
   prompt (seconds on a loaded 2-core machine: 1,000 draws x 6 items is hours there); the fast
   engine evaluates it once per item. ``--draws 0 --fast-draws 0`` skips it.

Writes ``--out/scheme_drift.json`` (per-item rows and the summary) and prints Markdown tables. The
create_completion answers are kept per item in ``--out/draws/ITEM.json`` as they come: a rerun with
the same ``--out`` resumes where the last one stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
SCHEMES = ("blocks", "whole")
SAVE_EVERY = 50  # create_completion draws between saves of an item's answers (the G-test part resumes after them)


def answer_table(dist: pd.DataFrame) -> pd.DataFrame:
    """Exact ``dist.parquet`` rows -> one row per item, one column per answer ("none": no valid answer).

    Examples
    --------
    >>> d = pd.DataFrame({"item_id": ["a", "a", "a"], "answer": ["A", "B", None], "prob": [0.25, 0.75, 0.0]})
    >>> float(answer_table(d).loc["a", "B"])
    0.75
    """
    d = dist.assign(answer=dist["answer"].astype(object).where(dist["answer"].notna(), "none"))
    return d.pivot_table(index="item_id", columns="answer", values="prob", aggfunc="sum", fill_value=0.0)


def drift_table(a: pd.DataFrame, b: pd.DataFrame, items_a: pd.DataFrame, items_b: pd.DataFrame) -> pd.DataFrame:
    """Per item: total variation distance between two exact runs' answer distributions and ``|dP(correct)|``.

    Examples
    --------
    >>> d1 = pd.DataFrame({"item_id": ["x", "x"], "answer": ["A", "B"], "prob": [0.4, 0.6]})
    >>> d2 = pd.DataFrame({"item_id": ["x", "x"], "answer": ["A", "B"], "prob": [0.5, 0.5]})
    >>> i1 = pd.DataFrame({"item_id": ["x"], "p_correct": [0.6]})
    >>> i2 = pd.DataFrame({"item_id": ["x"], "p_correct": [0.5]})
    >>> drift_table(d1, d2, i1, i2).round(3).to_dict("records")
    [{'item_id': 'x', 'tv': 0.1, 'p_correct_blocks': 0.6, 'p_correct_whole': 0.5, 'abs_dp_correct': 0.1}]
    """
    ta, tb = answer_table(a), answer_table(b)
    ta, tb = ta.align(tb, join="outer", fill_value=0.0)
    tv = 0.5 * (ta - tb).abs().sum(axis=1)
    pa, pb = items_a.set_index("item_id")["p_correct"], items_b.set_index("item_id")["p_correct"]
    out = pd.DataFrame({"tv": tv, "p_correct_blocks": pa, "p_correct_whole": pb}).rename_axis("item_id").reset_index()
    out["abs_dp_correct"] = (out["p_correct_blocks"] - out["p_correct_whole"]).abs()
    return out


def g_test(probs: dict, answers: list) -> tuple[float, float, int]:
    """G-test of observed answers against exact probabilities; expected counts < 5 pooled into one cell.

    Returns ``(G, p-value, df)``; an answer of probability 0 seen once makes p = 0.

    Examples
    --------
    >>> g, p, df = g_test({"A": 0.5, "B": 0.5}, ["A"] * 50 + ["B"] * 50)
    >>> round(p, 3), df
    (1.0, 1)
    """
    n = len(answers)
    cats = sorted(probs, key=lambda c: (c is None, c or ""))
    if any(probs.get(x, 0.0) == 0.0 for x in set(answers)):
        return float("inf"), 0.0, len(cats) - 1
    p = np.array([probs[c] for c in cats]) / sum(probs.values())
    obs = np.array([sum(x == c for x in answers) for c in cats], dtype=float)
    big = n * p >= 5
    o = np.append(obs[big], obs[~big].sum()) if (~big).any() else obs[big]
    e = np.append(n * p[big], n * p[~big].sum()) if (~big).any() else n * p[big]
    keep = e > 0
    if keep.sum() < 2:
        return 0.0, 1.0, 0
    g, pval = stats.power_divergence(o[keep], e[keep], lambda_="log-likelihood")
    return float(g), float(pval), int(keep.sum() - 1)


def exact_runs(bank, model, out: Path) -> dict[str, object]:
    """The exact run of ``bank`` under each scheme in ``out/exact-SCHEME`` (reused if complete); their
    :func:`load_exact`."""
    from bayesrc.collect import collect
    from bayesrc.data import load_exact

    runs = {}
    for scheme in SCHEMES:
        run_dir = out / f"exact-{scheme}"
        t0 = time.monotonic()
        if not (run_dir / "dist.parquet").exists():  # complete runs are reused as they are
            collect(
                CARD, bank, run_dir, engine="exact", model=model, scheme=scheme, resume=(run_dir / "run.json").exists()
            )
        print(f"exact {scheme}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
        runs[scheme] = load_exact(run_dir)
    return runs


def completion_draws(model, text: str, letters: str, seeds: range, sampling, saved: Path) -> list[str | None]:
    """Extracted answers of ``create_completion(text, seed=s)``, each on a fresh context (``reset()`` first).

    Resumable: the answers so far are written to ``saved`` (JSON, atomically) every
    :data:`SAVE_EVERY` draws and a rerun starts after them (1,000 draws of one item take tens of
    minutes on a loaded 2-core machine)."""
    from bayesrc.collect.extract import extract
    from bayesrc.io import atomic_write_text

    s, llm = sampling, model.llm
    out = json.loads(saved.read_text()) if saved.exists() else []
    for seed in seeds[len(out) :]:
        llm.reset()  # no prefix reuse: the whole prompt evaluated, as by a new Llama
        res = llm.create_completion(
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
        out.append(extract(res["choices"][0]["text"], letters).answer)
        if len(out) % SAVE_EVERY == 0 or len(out) == len(seeds):
            atomic_write_text(saved, json.dumps(out))
    model.forget_prefix()
    return out


def fast_draws(model, shared: str, own: str, letters: str, seeds: range, sampling) -> list[str | None]:
    """Extracted answers of the fast engine under the whole scheme, sample ``k`` seeded ``seeds[k]`` (one prompt
    evaluation)."""
    from bayesrc.collect.engines import FastEngine
    from bayesrc.collect.extract import extract

    samples = FastEngine(model, sampling, scheme="whole").sample_item(model.prompt(shared, own), list(seeds), letters)
    return [extract(x.response, letters).answer for x in samples]


def exact_probs(run, item_id: str) -> dict[str | None, float]:
    """One item's exact answer distribution (``None``: no valid answer) from a :func:`load_exact` run."""
    d = run.dist[run.dist["item_id"] == item_id]
    return {(None if pd.isna(a) else a): float(p) for a, p in zip(d["answer"], d["prob"])}


def gtest_row(item, source: str, answers: list, runs: dict) -> dict:
    """Answer counts of one item's draws and their G-test against each scheme's exact distribution."""
    row = {"item_id": item.item_id, "source": source, "draws": len(answers)}
    row.update({f"n_{c or 'none'}": sum(a == c for a in answers) for c in [*item.letters, None]})
    for scheme in SCHEMES:
        probs = exact_probs(runs[scheme], item.item_id)
        row[f"exact_{scheme}"] = " ".join(f"{c or 'none'} {probs.get(c, 0.0):.3f}" for c in [*item.letters, None])
        row[f"g_{scheme}"], row[f"p_{scheme}"], row[f"df_{scheme}"] = g_test(probs, answers)
    return row


def gtest_rows(bank, model, runs: dict, n_items: int, n_draws: int, n_fast: int, out: Path) -> pd.DataFrame:
    """Per item and source: ``n_draws`` create_completion draws on a fresh context and ``n_fast``
    fast-engine samples under the whole scheme (seeds 0, 1, ...), G-tested against each scheme's
    exact run; ``same_trials`` is the share of seeds both drew whose answers agree (1 expected:
    the whole scheme *is* create_completion's evaluation)."""
    from bayesrc.collect import load_card
    from bayesrc.collect.card import prompt_blocks
    from bayesrc.collect.sampling import Sampling

    card, rows = load_card(CARD), []
    sampling = Sampling(temperature=0.7, max_tokens=card.max_tokens)
    for it in bank.items[:n_items]:
        shared, own = prompt_blocks(card, it)
        same_tokens = model.tokenize(shared + own) == model.prompt(shared, own).tokens
        t0 = time.monotonic()
        cc = completion_draws(
            model, shared + own, it.letters, range(n_draws), sampling, out / "draws" / f"{it.item_id}.json"
        )
        t1 = time.monotonic()
        fast = fast_draws(model, shared, own, it.letters, range(n_fast), sampling)
        t2 = time.monotonic()
        both = min(len(cc), len(fast))
        agree = sum(a == b for a, b in zip(cc, fast)) / both if both else float("nan")
        for source, answers, secs in (("create_completion", cc, t1 - t0), ("fast whole", fast, t2 - t1)):
            if answers:
                rows.append(
                    gtest_row(it, source, answers, runs)
                    | {"same_tokens": same_tokens, "same_trials": agree, "seconds": round(secs, 1)}
                )
                r = rows[-1]
                print(
                    f"item {it.item_id}, {source}: {len(answers)} draws in {secs:.0f} s, "
                    f"G-test p vs whole {r['p_whole']:.3g}, vs blocks {r['p_blocks']:.3g}",
                    file=sys.stderr,
                )
        print(f"item {it.item_id}: same answer for {agree:.3f} of the seeds both drew", file=sys.stderr)
    return pd.DataFrame(rows)


def md(df: pd.DataFrame) -> str:
    """A frame as a Markdown table (:func:`bayesrc.markdown.markdown_table`), floats to 4 decimals.

    Examples
    --------
    >>> print(md(pd.DataFrame({"a": [0.12345]})))
    | a |
    |---|
    | 0.1235 |
    """
    from bayesrc.markdown import markdown_table

    return markdown_table(
        list(df.columns), df.itertuples(index=False), lambda v: f"{v:.4f}" if isinstance(v, float) else str(v)
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=40, help="demo-bank items of the drift table (default 40)")
    ap.add_argument(
        "--draws",
        type=int,
        default=1000,
        help="create_completion draws per item for the G-test (default 1000; each evaluates the whole prompt)",
    )
    ap.add_argument(
        "--fast-draws",
        type=int,
        default=1000,
        help="fast-engine samples (whole scheme) per item for the G-test (default 1000)",
    )
    ap.add_argument("--gtest-items", type=int, default=6, help="items of the G-test (the bank's first; default 6)")
    ap.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: the card's, else all physical cores)"
    )
    ap.add_argument(
        "--alpha",
        type=float,
        default=0.001,
        help="family-wise level of the G-tests, Bonferroni over items (default 0.001)",
    )
    ap.add_argument("--out", type=Path, default=Path("runs/scheme_drift"))
    args = ap.parse_args(argv)
    from bayesrc.collect import Model, builtin_bank, load_bank, load_card, resolve_model

    args.out.mkdir(parents=True, exist_ok=True)
    bank = load_bank(builtin_bank(args.out / "bank.jsonl", n_items=max(args.items, args.gtest_items), seed=0))
    card = load_card(CARD)
    model = Model(
        resolve_model(card),
        n_ctx=card.n_ctx,
        n_batch=card.n_batch,
        n_threads=args.threads or card.n_threads,
        label=card.label,
    )
    runs = exact_runs(bank, model, args.out)
    drift = drift_table(runs["blocks"].dist, runs["whole"].dist, runs["blocks"].items, runs["whole"].items)
    summary = {
        "items": len(drift),
        "tv_max": float(drift["tv"].max()),
        "tv_mean": float(drift["tv"].mean()),
        "abs_dp_correct_max": float(drift["abs_dp_correct"].max()),
        "abs_dp_correct_mean": float(drift["abs_dp_correct"].mean()),
        "p_unresolved_max": float(max(r.items["p_unresolved"].max() for r in runs.values())),
    }
    print(md(drift))
    print()
    print(md(pd.DataFrame([summary])))
    result = {"summary": summary, "drift": drift.to_dict("records"), "threads": model.n_threads}
    if args.draws > 0 or args.fast_draws > 0:
        (args.out / "draws").mkdir(exist_ok=True)
        g = gtest_rows(bank, model, runs, args.gtest_items, args.draws, args.fast_draws, args.out)
        level = args.alpha / args.gtest_items
        for scheme in SCHEMES:
            g[f"rejected_{scheme}"] = g[f"p_{scheme}"] < level
        print()
        print(md(g))
        for source, r in g.groupby("source", sort=False):
            print(
                f"{source}: Bonferroni level {level:.2g}, "
                f"rejected under whole {int(r['rejected_whole'].sum())}/{len(r)}, "
                f"under blocks {int(r['rejected_blocks'].sum())}/{len(r)}"
            )
        result["gtest"] = {"level": level, "rows": g.to_dict("records")}
    (args.out / "scheme_drift.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
