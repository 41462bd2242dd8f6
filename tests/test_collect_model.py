"""bayesrc.collect with the real Gemma-3-270M GGUF (loaded once per session; tiny banks)."""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli_in_process

from bayesrc.collect import Model, collect, load_card, merge_runs, read_run_trials
from bayesrc.collect.extract import extract
from bayesrc.data import load_trials
from bayesrc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
K = 3


@pytest.fixture(scope="session")
def full_run(gemma, gemma_bank4, tmp_path_factory):
    """An uninterrupted fast run over the 4 items: the reference for the other tests."""
    out = tmp_path_factory.mktemp("runs") / "full"
    collect(CARD, gemma_bank4, out, k=K, model=gemma)
    return out


def _core(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["item_id", "k", "seed", "response", "extracted", "is_correct", "is_missing", "finish"]
    return df[cols].sort_values(["item_id", "k"]).reset_index(drop=True)


def test_same_seeds_twice_identical_trials(gemma, gemma_bank4, full_run, tmp_path):
    again = collect(CARD, gemma_bank4, tmp_path / "again", k=K, model=gemma)
    pd.testing.assert_frame_equal(_core(read_run_trials(full_run)), _core(again.trials()))
    t = load_trials(full_run / "trials.parquet")  # the canonical loader reads the run
    assert len(t) == 4 * K and set(t["k"]) == set(range(K))
    # Default rule "version": seed = salt(version pin) + item_index*10 + k, the salt pinned as model.seed_salt.
    import json

    salt = json.loads((full_run / "run.json").read_text())["pins"]["model.seed_salt"]
    assert salt > 0 and list(t["seed"].head(K)) == [salt, salt + 1, salt + 2] and t["seed"].iloc[K] == salt + 10


def test_shards_in_any_order_merge_to_the_full_run(gemma, gemma_bank4, full_run, tmp_path):
    """Item order and history do not matter: the second shard collected first gives the same trials."""
    collect(CARD, gemma_bank4, tmp_path / "s1", k=K, shard="1/2", model=gemma)
    collect(CARD, gemma_bank4, tmp_path / "s0", k=K, shard="0/2", model=gemma)
    merged = merge_runs([tmp_path / "s1", tmp_path / "s0"], tmp_path / "merged")
    pd.testing.assert_frame_equal(_core(read_run_trials(full_run)), _core(read_run_trials(merged)))
    from bayesrc.data import compare_runs

    assert compare_runs(full_run, merged).differences.empty


def _prompts(model, items):
    from bayesrc.collect.run import render_prompts

    return render_prompts(load_card(CARD), model, items, max_tokens=8)[1]


def test_fast_equals_naive_per_trial(gemma, gemma_bank4):
    """Same (item, k, seed): the naive engine's full completion extracts the fast engine's answer."""
    from bayesrc.collect.engines import FastEngine, NaiveEngine
    from bayesrc.collect.sampling import Sampling

    s = Sampling(temperature=0.7, max_tokens=load_card(CARD).max_tokens)
    prompts = _prompts(gemma, gemma_bank4.items[:1])
    agree = total = 0
    for item in gemma_bank4.items[:1]:
        seeds = [item.index * 10 + k for k in range(K)]
        fast = FastEngine(gemma, s).sample_item(prompts[item.index], seeds, item.letters)
        naive = NaiveEngine(gemma, s).sample_item(prompts[item.index], seeds, item.letters)
        for f, n in zip(fast, naive):
            assert n.response.startswith(f.response)  # fast stops at the decision point of the same text
            agree += extract(f.response, item.letters).answer == extract(n.response, item.letters).answer
            total += 1
    assert total == K and agree == total


def _last_logits(model):
    import llama_cpp
    import numpy as np

    n_vocab = llama_cpp.llama_vocab_n_tokens(model.llm._model.vocab)
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(model.llm._ctx.ctx, -1), shape=(n_vocab,)).copy()


def test_shared_prefix_cache_gives_the_logits_of_a_fresh_evaluation(gemma, gemma_bank4):
    """Own block on the cached shared KV == whole prompt from an emptied cache, bitwise, whatever came before."""
    import numpy as np

    prompts = _prompts(gemma, gemma_bank4.items[:3])
    order = [it.index for it in gemma_bank4.items[:3]]
    assert len({p.shared for p in prompts.values()}) == 1 and all(p.own for p in prompts.values())
    fresh = {}
    for i in order:
        gemma.eval_prompt(prompts[i], fresh=True)
        fresh[i] = _last_logits(gemma)
    for i in order[::-1] + order:  # cached, after other items in both orders
        n = gemma.eval_prompt(prompts[i])
        assert n == len(prompts[i].own)  # only the item's own tokens were decoded
        assert np.array_equal(_last_logits(gemma), fresh[i])
    assert not np.array_equal(fresh[order[0]], fresh[order[1]])  # the check can fail


def test_any_resume_point_gives_identical_trials(gemma, gemma_bank4, full_run, tmp_path):
    """A run stopped after every item and resumed (shared block re-evaluated each time) gives the uninterrupted
    trials."""
    out = tmp_path / "resumed"
    for step in range(len(gemma_bank4.items)):
        gemma.forget_prefix()
        collect(CARD, gemma_bank4, out, k=K, model=gemma, resume=step > 0, max_items=1)
    pd.testing.assert_frame_equal(_core(read_run_trials(out)), _core(read_run_trials(full_run)))
    rec = json.loads((out / "run.json").read_text())
    assert rec["pins"]["runtime.n_threads"] == gemma.n_threads == 1 and rec["pins"]["prompt.blocks"].startswith(
        "shared+own/"
    )


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bayesrc", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, **kw
    )


def test_sigkill_at_random_points_then_resume_gives_the_uninterrupted_trials(gemma_bank4, full_run, tmp_path):
    out = tmp_path / "killed"
    rng = random.Random(20260101)
    base = [
        "collect",
        "--model",
        str(CARD),
        "--items",
        str(gemma_bank4.path),
        "--k",
        str(K),
        "--out",
        str(out),
        "--no-progress",
        "--threads",
        "1",
    ]
    kills = 0

    def n_parts() -> int:
        return len(list((out / "parts").glob("item-*"))) if (out / "parts").exists() else 0

    for _attempt in range(3):
        args = base + (["--resume"] if (out / "run.json").exists() else [])
        # Kill at a random point of the run's progress, not of the clock: after 0-2 more items are on
        # disk, plus up to 0.3 s (a fixed 3-8 s sleep let a fast machine finish all 4 items first).
        target = n_parts() + rng.randint(0, 2)
        proc = subprocess.Popen(
            [sys.executable, "-m", "bayesrc", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 120
        while proc.poll() is None and n_parts() < target and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.3))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        parts = list((out / "parts").glob("*")) if (out / "parts").exists() else []
        for p in parts:  # every part on disk is complete (never torn)
            if p.name.startswith("item-"):
                assert len(pd.read_parquet(p)) == K
    assert kills >= 1
    done = _cli(*base, "--resume")
    assert done.returncode == 0, done.stderr
    got, want = read_run_trials(out), read_run_trials(full_run)
    assert not got.duplicated(["item_id", "k"]).any() and len(got) == len(want)
    pd.testing.assert_frame_equal(_core(got), _core(want))


def test_bad_inputs_one_line_exit_2_nothing_lost(gemma_bank4, full_run, tmp_path, capfd):
    """Real CLI processes for a junk GGUF (llama.cpp's loader, whose native output would reach stderr) and for a run
    this process has locked (the collector: another process); the other bad inputs through the same command in this
    process."""
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + os.urandom(4096))
    card = tmp_path / "junk.toml"
    card.write_text(f'label = "junk"\n[model]\npath = "{junk}"\n')
    missing = tmp_path / "missing.toml"
    missing.write_text('[model]\npath = "no-such-model.gguf"\n')
    bad_bank = tmp_path / "bad.jsonl"
    bad_bank.write_text(
        gemma_bank4.path.read_text().splitlines()[0] + '\n{"item_id": "x", "question": "Q?", "options": ["a", "b"]}\n'
    )
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cases = {
        "GGUF": (str(card), str(gemma_bank4.path), str(tmp_path / "r1")),
        "not found": (str(missing), str(gemma_bank4.path), str(tmp_path / "r2")),
        "missing answer": (str(CARD), str(bad_bank), str(tmp_path / "r3")),
        "run directory": (str(CARD), str(gemma_bank4.path), str(blocker / "sub")),
        "already holds a run": (str(CARD), str(gemma_bank4.path), str(full_run)),
    }
    before = (full_run / "trials.parquet").read_bytes()
    for words, (c, b, o) in cases.items():
        run = _cli if words == "GGUF" else functools.partial(cli_in_process, capfd=capfd)
        res = run("collect", "--model", c, "--items", b, "--out", o, "--k", "2", "--no-progress")
        assert res.returncode == 2, (words, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bayesrc: error:") and words in lines[0], (words, res.stderr)
    assert (full_run / "trials.parquet").read_bytes() == before  # nothing lost or overwritten
    # A second collector on the same run directory is refused while the first holds the lock.
    from bayesrc.collect.rundir import RunLock

    (tmp_path / "locked").mkdir()
    with RunLock(tmp_path / "locked"):
        res = _cli(
            "collect",
            "--model",
            str(CARD),
            "--items",
            str(gemma_bank4.path),
            "--out",
            str(tmp_path / "locked"),
            "--k",
            "2",
            "--no-progress",
        )
    assert res.returncode == 2 and "another collector" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_garbage_gguf_in_process_is_input_error(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(os.urandom(1024))
    with pytest.raises(InputError, match="not a GGUF"):
        Model(junk)
    junk.write_bytes(b"GGUF" + os.urandom(1024))
    with pytest.raises(InputError, match="could not load"):
        Model(junk)


@pytest.mark.slow
def test_shared_seeds_couple_versions_and_the_version_rule_removes_it(gemma, gemma_bank4):
    """Two prompt versions of the real Gemma, sample k of an item drawn with the same seed in both
    (the reference study's rule) vs version-salted seeds (the default): with shared seeds the
    versions' answers agree far from what independent draws give (llama.cpp draws one uniform
    over candidates sorted by probability, so differently ranked letters decouple); salted seeds
    agree as independent draws do (SPEC 2.1)."""
    import dataclasses
    from collections import Counter

    import numpy as np

    from bayesrc.collect.card import build_prompt
    from bayesrc.collect.engines import FastEngine
    from bayesrc.collect.sampling import Sampling
    from bayesrc.data.seeds import sample_seeds, seed_salt

    card = load_card(CARD)
    card2 = dataclasses.replace(
        card,
        system="Pick the letter that continues the pattern. Think of the options in reverse order.",
        template=card.template.replace("Answer: B\n", "Answer: A\n", 1),
    )  # a re-templated version
    eng = FastEngine(gemma, Sampling(temperature=0.7, max_tokens=card.max_tokens))
    n = 40
    shared_dev, salted_dev, shared_agree, expected_agree = [], [], [], []
    for item in gemma_bank4.items:
        shared = sample_seeds(item.index, n, stride=1000)
        salted = sample_seeds(item.index, n, stride=1000, salt=seed_salt("version 2"))
        a1 = [
            extract(x.response, item.letters).answer
            for x in eng.sample_item(gemma.tokenize(build_prompt(card, item)), shared, item.letters)
        ]
        both = [
            extract(x.response, item.letters).answer
            for x in eng.sample_item(gemma.tokenize(build_prompt(card2, item)), shared + salted, item.letters)
        ]
        a2, a2s = both[:n], both[n:]
        f1, f2 = Counter(a1), Counter(both)
        expected = sum(f1[x] / n * f2[x] / (2 * n) for x in f1 if x is not None)  # agreement of independent draws
        agree = np.mean([x is not None and x == y for x, y in zip(a1, a2)])
        agree_salted = np.mean([x is not None and x == y for x, y in zip(a1, a2s)])
        shared_dev.append(abs(agree - expected))
        salted_dev.append(abs(agree_salted - expected))
        shared_agree.append(agree)
        expected_agree.append(expected)
    print(
        f"agreement: shared seeds {np.mean(shared_agree):.3f}, independent expectation {np.mean(expected_agree):.3f}; "
        f"mean |deviation| shared {np.mean(shared_dev):.3f}, salted {np.mean(salted_dev):.3f}"
    )
    assert np.mean(shared_dev) > 0.15 and np.mean(salted_dev) < 0.12 and np.mean(shared_dev) > 2 * np.mean(salted_dev)
    assert np.mean(shared_agree) < np.mean(expected_agree)  # answer alike less often than independent draws would


def test_resuming_a_complete_run_changes_no_byte(gemma, gemma_bank4, full_run, tmp_path):
    """A finished run resumed (re-running ``make demo``, a Ray shard retried) is left exactly as
    it is: nothing drawn, no output or record rewritten (the lock file says who held it last), so a
    full disk cannot fail it."""
    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    res = collect(CARD, gemma_bank4, run, k=K, model=gemma, resume=True)
    assert (res.n_new_items, res.n_items, res.n_trials) == (0, 4, 4 * K)
    assert res.run.status == "complete" and len(res.run.tables["trials"]) == 4 * K  # the run, read and validated
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"} == files
    (run / "trials.parquet").unlink()  # an output gone: the resume writes it again from the journal
    assert collect(CARD, gemma_bank4, run, k=K, model=gemma, resume=True).n_new_items == 0
    assert (run / "trials.parquet").read_bytes() == files[run / "trials.parquet"]


def test_a_larger_k_needs_no_flag_and_draws_the_smaller_ks_trials_first(gemma, gemma_bank4, full_run, tmp_path, capfd):
    """K = 40 runs with no other flag, no two of its samples share a seed, and its first K = 3
    trials of an item are the K = 3 run's trial for trial (seeds of the item and k alone); the
    K <= 10 run keeps the reference study's i * 10 + k. (The command in this process: its options, not a process's
    exit, are under test.)"""
    res = cli_in_process(
        "collect",
        "--model",
        str(CARD),
        "--items",
        str(gemma_bank4.path),
        "--items-range",
        "0:2",
        "--k",
        "40",
        "--threads",
        "1",
        "--out",
        str(tmp_path / "k40"),
        "--no-progress",
        capfd=capfd,
    )
    assert res.returncode == 0, res.stderr
    trials = load_trials(tmp_path / "k40" / "trials.parquet")
    assert len(trials) == 80 and trials["seed"].nunique() == 80
    first = _core(read_run_trials(tmp_path / "k40")).query("k < @K").reset_index(drop=True)
    small = _core(read_run_trials(full_run))
    pd.testing.assert_frame_equal(first, small[small["item_id"].isin(first["item_id"])].reset_index(drop=True))
    pins = json.loads((tmp_path / "k40" / "run.json").read_text())["pins"]
    assert "(k - 10) * 2**19 + item_index for k >= 10" in pins["sampling.seed_rule"]
    assert json.loads((full_run / "run.json").read_text())["pins"]["sampling.seed_rule"].endswith(
        "0 + item_index * 10 + k"
    )
