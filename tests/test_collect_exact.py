"""The exact engine (SPEC section 7) with the real Gemma-3-270M GGUF.

Known truth: seeded fast-engine samples are draws from the distribution the exact engine
computes, so per-item G-tests of >= 400 samples against it must not reject (Bonferroni).
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import cli_in_process
from scipy import stats

from bayesrc.collect import builtin_bank, collect, load_bank, load_card, resolve_model
from bayesrc.collect.engines import FastEngine
from bayesrc.collect.exact import ExactEngine, check_epsilon
from bayesrc.collect.extract import extract
from bayesrc.collect.sampling import Sampling
from bayesrc.data import load_exact, load_trials
from bayesrc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
N_SAMPLES = 400
ALPHA = 0.001


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bayesrc", *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def _prompt(card, model, item):
    """The item's canonical two-block prompt, as collect() builds it."""
    from bayesrc.collect.run import render_prompts

    return render_prompts(card, model, [item], max_tokens=card.max_tokens)[1][item.index]


@pytest.fixture(scope="session")
def g_items(tmp_path_factory):
    """6 MMLU-Pro items (the shortest questions, 4+ options) and 6 demo-bank items."""
    from bayesrc.datasets import path

    mmlu = load_bank(path("mmlu_pro_2000.jsonl"))
    short = sorted(mmlu.items, key=lambda it: (len(it.question) + sum(map(len, it.options)), it.item_id))[:6]
    demo = load_bank(builtin_bank(tmp_path_factory.mktemp("gbank") / "bank.jsonl", n_items=230, seed=3)).items
    # 2- and 3-option items from the start, 4-option (repeat4) ones from the end of the bank
    return [*short, *demo[:4], *demo[-2:]]


@pytest.fixture(scope="session")
def exact_vs_sampled(gemma, g_items):
    """Per item: exact distribution, fast-engine answer counts over 400 seeds, G-test."""
    card, model = load_card(CARD), gemma
    # max_tokens 4 bounds the prefix tree (the base model rambles on MMLU-Pro prompts: thousands of
    # expansions per item at the card's 8); the check is the sampler-chain arithmetic, the same at any depth.
    s = Sampling(temperature=0.7, max_tokens=4)
    # both engines evaluate the same two blocks (Model.eval_prompt)
    exact, fast = ExactEngine(model, s, epsilon=1e-6), FastEngine(model, s)
    rows = []
    for it in g_items:
        toks = _prompt(card, model, it)
        d = exact.item_distribution(toks, it.letters)
        seeds = [10_000 + 1000 * it.index + j for j in range(N_SAMPLES)]  # a seed range no run uses
        answers = [extract(x.response, it.letters).answer for x in fast.sample_item(toks, seeds, it.letters)]
        rows.append((it, d, answers))
    return rows


def g_test(probs: dict, answers: list) -> tuple[float, int, list]:
    """G-test of observed answers against exact probabilities (categories with expected < 5 pooled).

    Returns (p-value, df, impossible answers seen).
    """
    n = len(answers)
    cats = sorted(probs, key=lambda a: (a is None, a or ""))
    total = sum(probs.values())
    p = np.array([probs[c] / total for c in cats])
    obs = np.array([sum(1 for a in answers if a == c) for c in cats], dtype=float)
    impossible = [a for a in set(answers) if probs.get(a, 0.0) == 0.0]
    exp = n * p
    big = exp >= 5
    o = list(obs[big]) + ([obs[~big].sum()] if (~big).any() else [])
    e = list(exp[big]) + ([exp[~big].sum()] if (~big).any() else [])
    o, e = np.array(o), np.array(e)
    keep = e > 0
    o, e = o[keep], e[keep]
    if len(e) < 2:
        return 1.0, 0, impossible
    g = 2.0 * float(np.sum(np.where(o > 0, o * np.log(np.where(o > 0, o, 1) / e), 0.0)))
    df = len(e) - 1
    return float(stats.chi2.sf(g, df)), df, impossible


def test_exact_matches_400_seeded_fast_samples_per_item(exact_vs_sampled):
    n_items = len(exact_vs_sampled)
    assert n_items >= 12
    table = []
    for it, d, answers in exact_vs_sampled:
        assert math.isclose(sum(d.probs.values()) + d.p_unresolved, 1.0, abs_tol=1e-9)
        assert d.p_unresolved < 1e-3
        pval, df, impossible = g_test(d.probs, answers)
        table.append((it.item_id, len(it.letters), df, pval))
        assert not impossible, f"{it.item_id}: sampled answers {impossible} have exact probability 0"
    print("\nitem, options, df, G-test p:\n" + "\n".join(f"  {a:>14} {b:>2} {c:>2} {p:.3f}" for a, b, c, p in table))
    rejected = [(i, p) for i, _, _, p in table if p < ALPHA / n_items]
    assert not rejected, f"exact distribution rejected by sampling (Bonferroni {ALPHA}): {rejected}"
    # the items are not degenerate: several have real spread
    assert sum(1 for _, d, _ in exact_vs_sampled if max(d.probs.values()) < 0.95) >= 6


def test_g_test_detects_a_wrong_distribution(exact_vs_sampled):
    """The check has power: shifting 0.15 of mass between two answers is rejected."""
    rejected = 0
    for _it, d, answers in exact_vs_sampled:
        top = sorted(d.probs, key=lambda a: -d.probs[a])
        if d.probs[top[0]] < 0.3 or d.probs[top[0]] > 0.85:
            continue
        wrong = dict(d.probs)
        wrong[top[0]] -= 0.15
        wrong[top[1]] += 0.15
        rejected += g_test(wrong, answers)[0] < ALPHA / len(exact_vs_sampled)
    assert rejected >= 2


def test_epsilon_range():
    for bad in (0, 0.1, -1e-6, 0.5, float("nan"), "x"):
        with pytest.raises(InputError, match="epsilon"):
            check_epsilon(bad)
    assert check_epsilon("1e-6") == 1e-6


def test_epsilon_outside_range_is_one_line_exit_2(tmp_path, capfd):
    """One real CLI process; the other values through the same command in this process."""
    bank = builtin_bank(tmp_path / "b.jsonl", n_items=3)
    for eps in ("0", "0.1", "2", "abc"):
        run = cli if eps == "0" else functools.partial(cli_in_process, capfd=capfd)
        r = run(
            "collect",
            "--engine",
            "exact",
            "--epsilon",
            eps,
            "--model",
            CARD,
            "--items",
            bank,
            "--out",
            tmp_path / "r",
            "--no-progress",
        )
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "epsilon" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="session")
def exact_runs(gemma, tmp_path_factory):
    """The same 4 items: in one go, interrupted after 2 and resumed, and in reversed bank order."""
    model = gemma
    base = tmp_path_factory.mktemp("exact")
    bank = load_bank(builtin_bank(base / "bank.jsonl", n_items=4, seed=5))
    full = collect(CARD, bank, base / "full", engine="exact", model=model)
    collect(CARD, bank, base / "resumed", engine="exact", model=model, max_items=2)
    part = set(pd.read_parquet(p)["item_id"].iloc[0] for p in (base / "resumed" / "parts").glob("*.parquet"))
    assert len(part) == 2 and not (base / "resumed" / "dist.parquet").exists()
    collect(CARD, bank, base / "resumed", engine="exact", model=model, resume=True)
    rev = base / "rev.jsonl"
    rev.write_text("".join(reversed((base / "bank.jsonl").read_text().splitlines(keepends=True))))
    collect(CARD, rev, base / "reversed", engine="exact", model=model)
    return full.run_dir, base / "resumed", base / "reversed"


def test_exact_run_layout_and_sums(exact_runs):
    full = exact_runs[0]
    run = load_exact(full)
    dist, items = run.dist, run.items
    assert list(dist.columns[:5]) == ["item_id", "domain", "answer", "prob", "is_correct"]
    assert list(items.columns[:6]) == ["item_id", "domain", "p_correct", "p_missing", "p_unresolved", "n_expanded"]
    assert len(items) == 4 and (items["n_expanded"] >= 1).all()
    sums = dist.groupby("item_id")["prob"].sum()
    for row in items.itertuples():
        assert math.isclose(sums[row.item_id], 1.0 - row.p_unresolved, abs_tol=1e-12)
        d = dist[dist["item_id"] == row.item_id]
        assert math.isclose(
            row.p_correct, d.loc[d["is_correct"].fillna(False).astype(bool), "prob"].sum(), abs_tol=1e-15
        )
        assert math.isclose(row.p_missing, d.loc[d["answer"].isna(), "prob"].sum(), abs_tol=1e-15)
        assert d["is_correct"].isna().sum() == 1  # the no-valid-answer row
    assert not (full / "trials.parquet").exists()


def test_item_order_and_resume_do_not_change_a_single_probability(exact_runs):
    full, resumed, rev = (
        load_exact(r).dist.sort_values(["item_id", "answer"]).reset_index(drop=True) for r in exact_runs
    )
    cols = ["item_id", "answer", "prob", "is_correct"]
    pd.testing.assert_frame_equal(full[cols], resumed[cols], check_exact=True)
    pd.testing.assert_frame_equal(full[cols], rev[cols], check_exact=True)


def test_exact_run_where_trials_are_needed_and_the_reverse(exact_runs, tmp_path):
    full = exact_runs[0]
    for p in (full / "dist.parquet", full / "items_exact.parquet", full):
        with pytest.raises(InputError, match="exact run"):
            load_trials(p)
    r = cli("rci", "--pair", "x", full / "dist.parquet", full / "dist.parquet", "--out", tmp_path / "o")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "exact run" in r.stderr, r.stderr
    # a trials run where an exact run is needed
    trials = tmp_path / "t"
    trials.mkdir()
    pd.DataFrame({"item_id": ["a"], "k": [0], "model": ["m"], "extracted": ["A"], "is_correct": [True]}).to_parquet(
        trials / "trials.parquet"
    )
    with pytest.raises(InputError, match="trials run, not an exact run"):
        load_exact(trials / "trials.parquet")
    with pytest.raises(InputError, match="trials run, not an exact run"):
        load_exact(trials)


def test_undecidable_prompt_is_reported_as_unresolved(tmp_path):
    """A prompt that invites free text: at max_tokens 12 and a small decode budget the mass
    that is still undecided is p_unresolved (in items_exact and on stderr), not hidden."""
    text = CARD.read_text()
    text = text.replace('path = "gemma-3-270m-q4_k_m.gguf"', f'path = "{resolve_model(load_card(CARD))}"')
    text = text.replace("max_tokens = 8", "max_tokens = 12")
    text = text.replace('Answer:"""', 'Explain your reasoning in detail before giving the letter.\nReasoning:"""')
    card = tmp_path / "ramble.toml"
    card.write_text(text)
    bank = builtin_bank(tmp_path / "b.jsonl", n_items=1, seed=1)
    r = cli(
        "collect",
        "--engine",
        "exact",
        "--max-expansions",
        "25",
        "--model",
        card,
        "--items",
        bank,
        "--out",
        tmp_path / "r",
        "--no-progress",
        "--temperature",
        "1.0",
        # one thread, as the other collections here: on a loaded 2-core machine llama.cpp's spinning workers made this
        # run take 4 to 22 s; what is checked does not depend on the thread count
        "--threads",
        "1",
    )
    assert r.returncode == 0, r.stderr
    items = load_exact(tmp_path / "r").items
    assert (items["p_unresolved"] > 0.01).all()
    assert "p_unresolved" in r.stdout and "warning" in r.stderr and "p_unresolved > 0.01" in r.stderr


def test_quantized_card_differs_only_in_the_model(tmp_path):
    from bayesrc.collect.builtin import quantized_name, requantized_card_text

    assert quantized_name("gemma-3-270m-q4_k_m", "Q3_K_M") == "gemma-3-270m-q3_k_m"
    assert quantized_name("gemma-3-270m-Q4_K_M", "Q5_K_M") == "gemma-3-270m-Q5_K_M"
    assert quantized_name("mymodel", "Q8_0") == "mymodel-q8_0"
    text = requantized_card_text(CARD, "x.gguf", "gemma-3-270m-Q3_K_M")
    src = load_card(CARD)
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    (tmp_path / "c.toml").write_text(text)
    new = load_card(tmp_path / "c.toml")
    assert new.path == (tmp_path / "x.gguf").resolve() and new.label == "gemma-3-270m-Q3_K_M"
    assert new.package is None and new.sha256 is None
    for f in (
        "system",
        "template",
        "format",
        "max_tokens",
        "n_ctx",
        "n_batch",
        "n_threads",
        "n_gpu_layers",
        "chat_format",
    ):
        assert getattr(new, f) == getattr(src, f), f
    import difflib

    diff = [d for d in difflib.ndiff(CARD.read_text().splitlines(), text.splitlines()) if d[:2] in ("- ", "+ ")]
    changed = [d[2:] for d in diff]
    assert changed and all(line.startswith(("label", "path", "package", "module", "sha256")) for line in changed), (
        changed
    )


def test_quantize_and_bank_commands_bad_input(tmp_path, capfd):
    """A real CLI process of each command's one-line refusal; the other cases through the same commands in this
    process."""
    r = cli("quantize", CARD, "--type", "Q9_X", "--out", tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Q3_K_M" in r.stderr, r.stderr
    (tmp_path / "gemma-3-270m-q3_k_m.toml").write_text("keep")
    r = cli_in_process("quantize", CARD, "--type", "Q3_K_M", "--out", tmp_path, capfd=capfd)
    assert (
        r.returncode == 2
        and "nothing overwritten" in r.stderr
        and (tmp_path / "gemma-3-270m-q3_k_m.toml").read_text() == "keep"
    )
    r = cli_in_process("bank", "demo", "--n", "300", "--seed", "0", "--out", tmp_path / "b.jsonl", capfd=capfd)
    assert r.returncode == 0, r.stderr
    bank = load_bank(tmp_path / "b.jsonl")
    # repeat4 items reuse a question with 4 options
    assert len(bank) == 300 and len({(it.question, it.options) for it in bank.items}) == 300
    assert {len(it.letters) for it in bank.items} == {2, 3, 4}
    # a smaller bank of the same seed keeps the earlier items (the demo's bank is unchanged)
    assert [it.question for it in load_bank(builtin_bank(tmp_path / "s.jsonl", n_items=40, seed=0)).items] == [
        it.question for it in bank.items[:40]
    ]
    r = cli_in_process("bank", "demo", "--n", "300", "--out", tmp_path / "b.jsonl", capfd=capfd)
    assert r.returncode == 2 and "nothing overwritten" in r.stderr
    r = cli("bank", "demo", "--n", "100000", "--out", tmp_path / "c.jsonl")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "c.jsonl").exists()
