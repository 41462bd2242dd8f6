"""Any K (samples chunked to llama.cpp's sequence limit) and the evaluation scheme as a pinned
engine setting, with the real Gemma-3-270M GGUF (issue 29). Kept cheap: one or two demo items."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bayesrc.collect import collect, load_card
from bayesrc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"


@pytest.fixture(scope="module")
def demo1(tmp_path_factory):
    """The demo bank's first item (``bayesrc bank demo --seed 0``), alone."""
    from bayesrc.collect import builtin_bank, load_bank

    return load_bank(builtin_bank(tmp_path_factory.mktemp("demo1") / "bank.jsonl", n_items=1, seed=0))


def _prompt(gemma, bank, i: int = 0):
    from bayesrc.collect.run import render_prompts

    return render_prompts(load_card(CARD), gemma, bank.items[i : i + 1], max_tokens=8)[1][bank.items[i].index]


def _logits(gemma) -> np.ndarray:
    import llama_cpp

    n_vocab = llama_cpp.llama_vocab_n_tokens(gemma.llm._model.vocab)
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(gemma.llm._ctx.ctx, -1), shape=(n_vocab,)).copy()


def test_k400_on_one_item_runs_with_no_other_flag(demo1, tmp_path):
    """``bayesrc collect --k 400``: K > llama.cpp's 256 sequences, no --seed-stride, no --items-per-batch, no
    refusal."""
    import pandas as pd

    from bayesrc.cli import main
    from bayesrc.data.seeds import sample_seeds

    assert (
        main(
            [
                "collect",
                "--model",
                str(CARD),
                "--items",
                str(demo1.path),
                "--k",
                "400",
                "--out",
                str(tmp_path / "k400"),
                "--no-progress",
            ]
        )
        == 0
    )
    t = pd.read_parquet(tmp_path / "k400" / "trials.parquet")
    assert len(t) == 400 and list(t["k"]) == list(range(400))
    pins = json.loads((tmp_path / "k400" / "run.json").read_text())["pins"]
    salt = pins["model.seed_salt"]
    assert (
        pins["sampling.k"] == 400
        and list(t["seed"]) == [salt + s for s in sample_seeds(0, 400)]
        and t["seed"].nunique() == 400
    )
    assert t["extracted"].notna().mean() > 0.9 and t["extracted"].nunique() >= 2  # real answers, not one repeated


def test_batched_samples_are_drawn_in_chunks_that_fit_the_sequence_limit(gemma, gemma_bank4, monkeypatch):
    """With llama.cpp's limit lowered to 5 sequences, 2 items x K = 5 are drawn in chunks of 2 samples:
    every k and seed in place, answers as the one-item engine's (in distribution, as any batch)."""
    from bayesrc.collect import batching
    from bayesrc.collect.batching import sample_chunks
    from bayesrc.collect.engines import FastEngine
    from bayesrc.collect.extract import extract
    from bayesrc.collect.run import render_prompts
    from bayesrc.collect.rundir import item_seeds
    from bayesrc.collect.sampling import Sampling

    monkeypatch.setattr(batching, "MAX_SEQ", 5)
    assert sample_chunks(2, 5) == [range(0, 2), range(2, 4), range(4, 5)]
    items = gemma_bank4.items[:2]
    prompts = render_prompts(load_card(CARD), gemma, items, max_tokens=8)[1]
    s = Sampling(temperature=0.7, max_tokens=8)
    seeds = [item_seeds(it, 5) for it in items]
    eng = FastEngine(gemma, s, items_per_batch=2)
    try:
        many = eng.sample_items([prompts[it.index] for it in items], seeds, [it.letters for it in items])
        assert eng._seq.n_seq <= 5
    finally:
        eng.close()
    one = [FastEngine(gemma, s).sample_item(prompts[it.index], sd, it.letters) for it, sd in zip(items, seeds)]
    same = 0
    for it, a, b, sd in zip(items, one, many, seeds):
        assert [x.k for x in b] == list(range(5)) and [x.seed for x in b] == sd
        same += sum(
            extract(x.response, it.letters).answer == extract(y.response, it.letters).answer for x, y in zip(a, b)
        )
    assert same >= 7, same
    with pytest.raises(InputError, match="items_per_batch.: must be <= 4"):
        sample_chunks(5, 10)


def test_whole_scheme_is_create_completion_on_a_fresh_context(gemma, demo1):
    """Under the whole scheme the naive engine draws create_completion's responses (on a fresh
    context) seed for seed and the fast engine their answers; the blocks scheme's logits differ
    from the whole scheme's (another batch split of the same tokens)."""
    from bayesrc.collect.engines import FastEngine, NaiveEngine
    from bayesrc.collect.extract import extract
    from bayesrc.collect.sampling import Sampling

    item, p, llm = demo1.items[0], _prompt(gemma, demo1), gemma.llm
    gemma.eval_prompt(p, scheme="whole")
    whole = _logits(gemma)
    gemma.eval_prompt(p)
    blocks = _logits(gemma)
    gemma.forget_prefix()
    seeds = [11, 12]
    cc = []
    for seed in seeds:
        llm.reset()  # a fresh context: create_completion evaluates the whole prompt
        cc.append(
            llm.create_completion(p.tokens, max_tokens=8, temperature=0.7, top_k=40, top_p=0.95, min_p=0.05, seed=seed)[
                "choices"
            ][0]["text"]
        )
    gemma.forget_prefix()
    assert not np.array_equal(whole, blocks)
    s = Sampling(temperature=0.7, max_tokens=8)
    naive = NaiveEngine(gemma, s, scheme="whole").sample_item(p, seeds, item.letters)
    assert [x.response for x in naive] == cc
    fast = FastEngine(gemma, s, scheme="whole").sample_item(p, seeds, item.letters)
    assert [extract(x.response, item.letters).answer for x in fast] == [extract(t, item.letters).answer for t in cc]


def test_batched_whole_scheme_gives_the_one_item_logits(gemma, demo1):
    """An item's whole prompt decoded into a sequence of its own (several items per decode) gives
    bitwise Model.eval_prompt(scheme="whole")'s logits."""
    import llama_cpp

    from bayesrc.collect.batching import SeqContext

    p = _prompt(gemma, demo1)
    gemma.eval_prompt(p, scheme="whole")
    ref = _logits(gemma)
    seq = SeqContext(gemma, n_seq=3, n_per_seq=256, n_batch=512)
    try:
        seq.start(())
        out = seq.eval_item(2, p, whole=True, n_batch=gemma.llm.n_batch)
        n_vocab = ref.shape[0]
        assert np.array_equal(
            np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(seq.ctx, out), shape=(n_vocab,)), ref
        )
    finally:
        seq.close()


@pytest.fixture(scope="module")
def scheme_runs(gemma, demo1, tmp_path_factory):
    """Exact and fast (K = 4) runs of one item under each scheme."""
    root = tmp_path_factory.mktemp("schemes")
    for scheme in ("blocks", "whole"):
        collect(CARD, demo1, root / f"exact-{scheme}", engine="exact", model=gemma, scheme=scheme)
        collect(CARD, demo1, root / f"fast-{scheme}", k=4, model=gemma, scheme=scheme)
    return root


def test_scheme_is_pinned_and_runs_of_two_schemes_are_refused(gemma, demo1, scheme_runs, capsys):
    from bayesrc.data import check_comparable, compare_runs, load_exact
    from bayesrc.data.provenance import SCHEMES, scheme_of

    pins = {s: json.loads((scheme_runs / f"exact-{s}" / "run.json").read_text())["pins"] for s in SCHEMES}
    assert pins["blocks"]["prompt.blocks"] == SCHEMES["blocks"]  # as before the option: old runs stay comparable
    assert scheme_of(pins["whole"]) == "whole" and pins["whole"]["prompt.blocks"].startswith("whole/")
    a, b = scheme_runs / "exact-blocks", scheme_runs / "exact-whole"
    with pytest.raises(InputError, match=r"prompt.blocks; evaluation schemes differ \(blocks vs whole\)"):
        check_comparable(a, b)
    with pytest.raises(InputError, match="prompt.blocks"):
        check_comparable(a, b, allow=["prompt"])  # a prompt change does not let the scheme differ
    assert not check_comparable(a, b, allow=["prompt.blocks"]).blocking.shape[0]
    assert not check_comparable(a, b, force=True).comparable  # --force: analysed anyway, with a warning
    assert "warning: runs are not comparable" in capsys.readouterr().err
    assert compare_runs(scheme_runs / "fast-blocks", scheme_runs / "fast-whole").blocking["field"].tolist() == [
        "prompt.blocks"
    ]
    pa, pb = (load_exact(r).items["p_correct"].iloc[0] for r in (a, b))
    assert 0 < pa < 1 and 0 < pb < 1 and pa != pb  # same tokens, other batch split, other probabilities
    with pytest.raises(InputError, match="prompt.blocks"):  # a run resumes only under its own scheme
        collect(CARD, demo1, scheme_runs / "fast-blocks", k=4, model=gemma, scheme="whole", resume=True)


@pytest.mark.parametrize("command", ["rci", "fit", "compare", "sensitivity", "truth", "power"])
def test_analyses_refuse_runs_of_two_schemes_unless_forced(scheme_runs, tmp_path, command):
    """Every analysis that reads two runs refuses other schemes in one line (exit 2), before any work."""
    kind = "exact" if command == "truth" else "fast"
    a, b = str(scheme_runs / f"{kind}-blocks"), str(scheme_runs / f"{kind}-whole")
    argv = {"rci": ["rci", "--pair", "p", a, b], "sensitivity": ["sensitivity", "threshold", a, b]}.get(
        command, [command, a, b]
    )
    res = subprocess.run(
        [sys.executable, "-m", "bayesrc", *argv, "--out", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2, res.stderr
    assert "evaluation schemes differ (blocks vs whole)" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_scheme_option_errors_are_one_line(demo1, tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "bayesrc",
            "collect",
            "--model",
            str(CARD),
            "--items",
            str(demo1.path),
            "--out",
            str(tmp_path / "a"),
            "--scheme",
            "halves",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "--scheme" in res.stderr and "Traceback" not in res.stderr
    with pytest.raises(InputError, match="scheme"):
        collect(CARD, demo1, tmp_path / "b", engine="server", scheme="whole", server={"base_url": "http://127.0.0.1:9"})
    assert not (tmp_path / "b").exists()


def test_whole_scheme_exact_distribution_passes_a_g_test_of_fast_samples(gemma, tmp_path):
    """A small version of benchmarks/scheme_drift.py's G-test: on 2 demo items, 300 fast-engine samples
    under the whole scheme (the draws of create_completion, seed for seed: test above) against the
    exact engine's whole-scheme distribution; none rejected at Bonferroni 0.001."""
    from test_collect_exact import g_test

    from bayesrc.collect import builtin_bank, load_bank
    from bayesrc.collect.engines import FastEngine
    from bayesrc.collect.exact import ExactEngine
    from bayesrc.collect.extract import extract
    from bayesrc.collect.sampling import Sampling

    bank = load_bank(builtin_bank(tmp_path / "bank.jsonl", n_items=2, seed=0))
    s = Sampling(temperature=0.7, max_tokens=8)
    exact, fast = ExactEngine(gemma, s, scheme="whole"), FastEngine(gemma, s, scheme="whole")
    pvals = []
    for it in bank.items:
        p = _prompt(gemma, bank, it.index)
        d = exact.item_distribution(p, it.letters)
        answers = [extract(x.response, it.letters).answer for x in fast.sample_item(p, list(range(300)), it.letters)]
        pval, df, impossible = g_test(d.probs, answers)
        assert df >= 1 and not impossible and d.p_unresolved < 1e-3
        pvals.append(pval)
    print("G-test p, whole-scheme exact vs 300 fast samples:", pvals)
    assert min(pvals) >= 0.001 / len(pvals), pvals
