"""Several items per decode (``items_per_batch``) with the real Gemma-3-270M GGUF.

Batches are fixed by bank index (items ``i`` with the same ``i // N``) and always evaluated
whole, so the trials must not depend on item order, shards or resume points. Batching
changes the batch shapes llama.cpp computes in (the continuation rows of all items in one
decode), so the logits move in their last bits: checked here against one-item evaluation
(bitwise for an own block in a sequence of its own, close in distribution for several
sequences in one decode). One item at a time (N = 1) stays the engine path the
naive engine matches trial by trial (tests/test_collect_model.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesrc.collect import collect, load_card, merge_runs, read_run_trials
from bayesrc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
K, N = 2, 2


@pytest.fixture(scope="session")
def batched_run(gemma, gemma_bank4, tmp_path_factory):
    """An uninterrupted run, two items per decode (batches {0, 1} and {2, 3})."""
    out = tmp_path_factory.mktemp("batched") / "full"
    collect(CARD, gemma_bank4, out, k=K, model=gemma, items_per_batch=N)
    return out


def _core(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["item_id", "k", "seed", "response", "extracted", "is_correct", "is_missing", "finish"]
    return df[cols].sort_values(["item_id", "k"]).reset_index(drop=True)


def test_batched_trials_do_not_depend_on_order_shards_or_resume_point(gemma, gemma_bank4, batched_run, tmp_path):
    full = _core(read_run_trials(batched_run))
    assert len(full) == 4 * K
    pins = json.loads((batched_run / "run.json").read_text())["pins"]
    assert pins["prompt.items_per_batch"].startswith(f"{N}:")
    # Shards cut inside a batch ({0, 1}), the later shard collected first: batch-mates outside a
    # shard are evaluated with it (not written), so every item sees the same batch.
    collect(CARD, gemma_bank4, tmp_path / "s1", k=K, model=gemma, items_range=(1, 4), items_per_batch=N)
    collect(CARD, gemma_bank4, tmp_path / "s0", k=K, model=gemma, items_range=(0, 1), items_per_batch=N)
    merged = merge_runs([tmp_path / "s1", tmp_path / "s0"], tmp_path / "merged")
    pd.testing.assert_frame_equal(full, _core(read_run_trials(merged)))
    # Stopped after every item (inside batches too) and resumed.
    out = tmp_path / "resumed"
    for step in range(len(gemma_bank4.items)):
        collect(CARD, gemma_bank4, out, k=K, model=gemma, resume=step > 0, max_items=1, items_per_batch=N)
    pd.testing.assert_frame_equal(full, _core(read_run_trials(out)))
    # The batch size is pinned: a run cannot be resumed with another.
    with pytest.raises(InputError, match="prompt.items_per_batch"):
        collect(CARD, gemma_bank4, out, k=K, model=gemma, resume=True, items_per_batch=3)


def _softmax(x: np.ndarray, t: float = 0.7) -> np.ndarray:
    z = np.exp((x - x.max()) / t)
    return z / z.sum()


def test_batched_logits_are_the_one_item_logits_up_to_batch_shape_rounding(gemma, gemma_bank4):
    """In the multi-sequence context (one KV stream per sequence) an own block decoded into a
    sequence of its own gives bitwise Model.eval_prompt's logits, whatever the other sequences
    hold; several own blocks in one decode move each item's next-token distribution only by
    rounding (a wrong position or attention across sequences would move it far)."""
    import llama_cpp

    from bayesrc.collect.batching import SeqContext
    from bayesrc.collect.run import render_prompts

    prompts = render_prompts(load_card(CARD), gemma, gemma_bank4.items[:3], max_tokens=8)[1]
    plist = [prompts[it.index] for it in gemma_bank4.items[:3]]
    n_vocab = llama_cpp.llama_vocab_n_tokens(gemma.llm._model.vocab)

    def logits(ctx, i):
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(n_vocab,)).copy()

    ref = []
    for p in plist:
        gemma.eval_prompt(p)
        ref.append(logits(gemma.llm._ctx.ctx, -1))
    seq = SeqContext(gemma, n_seq=4, n_per_seq=256, n_batch=512)
    try:
        shared = plist[0].shared
        seq.start(shared)
        for i, p in enumerate(plist):  # one after another, the earlier items' sequences kept
            seq.fork(0, 1 + i)
            (out,) = seq.decode([(1 + i, len(shared), p.own)])
            assert np.array_equal(logits(seq.ctx, out), ref[i])
        seq.start(shared)
        for s in range(1, 4):
            seq.fork(0, s)
        outs = seq.decode([(1 + i, len(shared), p.own) for i, p in enumerate(plist)])
        got = [_softmax(logits(seq.ctx, o)) for o in outs]
        want = [_softmax(r) for r in ref]
        # row: batched item, column: one-item item
        tv = np.array([[0.5 * np.abs(g - w).sum() for w in want] for g in got])
        print("total variation, batched item x one-item item:", np.round(tv, 3))
        # Rounding moves an item's distribution (measured TV <= 0.07, as much as splitting an own block
        # into two decodes does) far less than another item's is from it (a mix-up would show here).
        assert np.diag(tv).max() < 0.15, np.diag(tv)
        assert np.diag(tv).mean() < 0.5 * tv[~np.eye(len(plist), dtype=bool)].mean()
    finally:
        seq.close()


def test_batched_engine_agrees_with_one_item_engine_in_distribution(gemma, gemma_bank4):
    """The K answers of each item, batched vs one at a time (same seeds): mostly the same trials,
    every sample decided the same way (the batched tree ends samples exactly where one-item does)."""
    from bayesrc.collect.engines import FastEngine
    from bayesrc.collect.extract import extract
    from bayesrc.collect.run import render_prompts
    from bayesrc.collect.rundir import item_seeds
    from bayesrc.collect.sampling import Sampling

    items = gemma_bank4.items[:3]
    prompts = render_prompts(load_card(CARD), gemma, items, max_tokens=8)[1]
    s = Sampling(temperature=0.7, max_tokens=8)
    seeds = [item_seeds(it, 8) for it in items]
    one = [FastEngine(gemma, s).sample_item(prompts[it.index], sd, it.letters) for it, sd in zip(items, seeds)]
    eng = FastEngine(gemma, s, items_per_batch=3)
    try:
        many = eng.sample_items([prompts[it.index] for it in items], seeds, [it.letters for it in items])
    finally:
        eng.close()
    same = total = 0
    for it, a, b in zip(items, one, many):
        assert [x.k for x in b] == list(range(8)) and [x.seed for x in b] == [x.seed for x in a]
        for x, y in zip(a, b):
            assert y.finish in ("decided", "stop", "length") and (y.finish == "length") == (y.n_tokens >= 8)
            same += extract(x.response, it.letters).answer == extract(y.response, it.letters).answer
            total += 1
    assert same >= 0.75 * total, (same, total)  # measured 99-100% on 16 demo-bank and 8 MMLU-Pro items at K = 10


def test_items_per_batch_bad_values_are_input_errors(gemma_bank4, tmp_path):
    with pytest.raises(InputError, match="items_per_batch"):
        collect(CARD, gemma_bank4, tmp_path / "a", k=K, items_per_batch=0)
    with pytest.raises(InputError, match="fast engine"):
        collect(CARD, gemma_bank4, tmp_path / "b", k=K, engine="naive", items_per_batch=2)
    # K is chunked; the items of a decode are not
    with pytest.raises(InputError, match="items_per_batch.: must be <= 255"):
        collect(CARD, gemma_bank4, tmp_path / "c", k=10, items_per_batch=256)
    assert not any(tmp_path.iterdir())  # nothing written
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "bayesrc",
            "collect",
            "--model",
            str(CARD),
            "--items",
            str(gemma_bank4.path),
            "--out",
            str(tmp_path / "d"),
            "--items-per-batch",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "items_per_batch" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
