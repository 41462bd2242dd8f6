"""bayesrc.collect without a model: extraction, bank validation, pins, merge, lock, sandbox."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from bayesrc.collect import (
    builtin_items,
    decided,
    extract,
    load_bank,
    merge_runs,
    render_chat_template,
)
from bayesrc.collect.rundir import RunLock, parse_range, shard_range
from bayesrc.data import check_comparable, compare_runs
from bayesrc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


# -- extraction ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, letters, answer, thinking",
    [
        (" B\n\nQuestion: What", "ABCD", "B", False),
        ("The answer is C.", "ABCD", "C", False),  # 'T' and 'The' are not standalone valid letters
        (" E then B", "ABCD", "B", False),  # E is not an option of a 4-option item
        ("<think></think> D", "ABCD", "D", False),  # empty think block stripped, not flagged
        ("<think>maybe A</think>\nC", "ABCD", "C", True),  # trace flagged; its letters ignored
        ("<think>still thinking A", "ABCD", None, True),  # unclosed: no answer
        ("But", "ABCD", None, False),
        ("", "ABCD", None, False),
        ("J", "ABCDEFGHIJ", "J", False),
    ],
)
def test_extract(text, letters, answer, thinking):
    ex = extract(text, letters)
    assert ex.answer == answer and ex.thinking == thinking


@pytest.mark.parametrize(
    "text, answer",
    [
        ("A is wrong, B is wrong too, so the answer is (C).", "C"),  # reasoning before the answer
        ("Let me think. Answer: B\n\nWait, A fits better. Final answer: A", "A"),  # the last statement
        ("**Answer:** (D)", "D"),
        ("The correct answer is \\boxed{B}", "B"),
        ("The answer is E, or rather C", "C"),  # E is no option: the last valid letter standing alone
        ("<think>the answer is A</think>The answer is B", "B"),  # a think block's statement is not the answer
        ("I pick B", "B"),  # no statement: the last valid letter
        ("none of them", None),
    ],
)
def test_extract_final(text, answer):
    from bayesrc.collect.extract import extract_answer, extract_final

    assert extract_final(text, "ABCD").answer == answer == extract_answer(text, "ABCD", "final").answer
    # the default rule is the first valid letter
    assert extract_answer(text, "ABCD").answer == extract(text, "ABCD").answer


def test_card_answer_rule_is_checked_and_pinned(tmp_path):
    from bayesrc.collect import load_card
    from bayesrc.collect.spec import prompt_pins

    base = (ROOT / "models" / "gemma-3-270m-q4_k_m.toml").read_text()
    card = tmp_path / "final.toml"
    card.write_text(
        base.replace("max_tokens = 8", 'max_tokens = 8\nanswer = "final"').replace(
            'path = "gemma', f'path = "{ROOT}/models/gemma'
        )
    )
    assert load_card(card).answer == "final" and prompt_pins(load_card(card))["prompt.answer"] == "final"
    # the default pins as before
    assert "prompt.answer" not in prompt_pins(load_card(ROOT / "models" / "gemma-3-270m-q4_k_m.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text(base.replace("max_tokens = 8", 'max_tokens = 8\nanswer = "last"'))
    with pytest.raises(InputError, match="field 'prompt.answer'"):
        load_card(bad)
    from bayesrc.collect import builtin_bank, collect

    bank = builtin_bank(tmp_path / "bank.jsonl", n_items=2, seed=0)
    with pytest.raises(InputError, match="server engine only"):  # the local engines stop at the first decided letter
        collect(card, bank, tmp_path / "run", k=2, engine="fast")
    assert not (tmp_path / "run").exists()


def test_decided_prefix_never_changes_the_answer():
    """decided(prefix) => every continuation extracts the same answer (the fast engine's stop rule)."""
    rng = random.Random(3)
    alphabet = ["A", "B", "C", "E", "a", " ", "\n", ".", "ut", "<think>", "</think>", "1", "Q"]
    checked = 0
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        for cut in range(len(text) + 1):
            if decided(text[:cut], "ABCD"):
                assert extract(text[:cut], "ABCD").answer == extract(text, "ABCD").answer, (text, cut)
                checked += 1
    assert checked > 1000
    assert not decided(" B", "ABCD") and decided(" B\n", "ABCD") and not decided(" <think> B\n", "ABCD")


# -- banks ---------------------------------------------------------------------------------
def _bank(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "bank.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


GOOD = json.dumps({"item_id": 1, "domain": "x", "question": "Q?", "options": ["a", "b", "c", "d"], "answer": "B"})


def test_bank_reads_reference_layout():
    from conftest import data_path

    bank = load_bank(data_path("mmlu_pro_2000.jsonl"))
    assert len(bank) == 2000 and bank.items[0].letters == "ABCDEFGHIJ" and bank.items[0].answer == "B"
    assert {it.domain for it in bank.items} == {"physics", "law", "psychology", "economics"}


@pytest.mark.parametrize(
    "bad, line, field, words",
    [
        ('{"item_id": 2, "question": "Q?", "options": ["a", "b"]', 2, None, "malformed JSON"),
        (json.dumps({"item_id": 2, "question": "Q?", "options": ["a", "b"]}), 2, "answer", "missing answer"),
        (
            json.dumps({"item_id": 2, "question": "Q?", "options": ["a", "b"], "answer": "C"}),
            2,
            "answer",
            "outside the options",
        ),
        (
            json.dumps({"item_id": 2, "question": "Q?", "options_formatted": "A. x\nB. y", "answer": "E"}),
            2,
            "answer",
            "outside the options",
        ),
        (
            json.dumps({"item_id": 2, "question": "", "options": ["a", "b"], "answer": "A"}),
            2,
            "question",
            "empty question",
        ),
        (json.dumps({"item_id": 1, "question": "Q?", "options": ["a", "b"], "answer": "A"}), 2, "item_id", "duplicate"),
    ],
)
def test_bank_errors_name_file_line_field(tmp_path, bad, line, field, words):
    path = _bank(tmp_path, [GOOD, bad])
    with pytest.raises(InputError) as err:
        load_bank(path)
    assert err.value.line == line and err.value.field == field and words in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}")


def test_builtin_bank_is_valid_and_seeded(tmp_path):
    from bayesrc.collect import builtin_bank

    bank = load_bank(builtin_bank(tmp_path / "b.jsonl", n_items=40, seed=1))
    assert len(bank) == 40 and len({it.question for it in bank.items}) == 40
    assert all(len(it.options) in (2, 3) and it.answer in it.letters for it in bank.items)
    assert {it.domain for it in bank.items} == {"repeat", "forward", "backward"}
    assert builtin_items(20, 5) == builtin_items(20, 5) != builtin_items(20, 6)


def test_ranges_and_shards_cover_the_bank():
    assert parse_range("3:7", 10) == (3, 7) and parse_range(":", 10) == (0, 10)
    spans = [shard_range(f"{i}/3", 10) for i in range(3)]
    assert spans[0][0] == 0 and spans[-1][1] == 10 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    for bad in ("7:3", "0:11", "x"):
        with pytest.raises(InputError):
            parse_range(bad, 10)
    with pytest.raises(InputError):
        shard_range("3/3", 10)


# -- pins ----------------------------------------------------------------------------------
def _run(tmp_path: Path, name: str, **changes) -> Path:
    pins = {
        "model.label": "m1",
        "model.file_sha256": "aa",
        "items.bank_sha256": "b",
        "items.range": [0, 4],
        "prompt.template_sha256": "t",
        "sampling.k": 10,
        "sampling.temperature": 0.7,
        "tooling.llama_cpp_python": "0.3.36",
        "runtime.engine": "fast",
    }
    pins.update(changes)
    d = tmp_path / name
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"format": "bayesrc-run/1", "status": "complete", "pins": pins, "info": {}}))
    return d


# -- the run specification -------------------------------------------------------------------
def test_run_spec_fills_its_defaults_once():
    """Any K runs without a seed stride, K moves no seed (K <= 10 keeps the reference study's
    i * 10 + k) and no two samples of a run share one; the exact
    engine draws no samples (K 1, 0 trials per item) and gets its default decode budget."""
    from bayesrc.collect import Item, RunSpec
    from bayesrc.collect.exact import DEFAULT_MAX_EXPANSIONS

    item = Item(3, "q3", "math", "?", ("a", "b"), "A")
    assert RunSpec(k=10).seeds(item) == list(range(30, 40))
    k400 = RunSpec(k=400).seeds(item, salt=7)
    assert (
        RunSpec(k=400).seed_stride is None
        and k400[:10] == [7 + s for s in range(30, 40)]
        and k400[:40] == RunSpec(k=40).seeds(item, salt=7)
    )
    assert RunSpec(k=40, seed_stride=100, seed_offset=5).seeds(item)[0] == 305
    exact = RunSpec(engine="exact", k=50, epsilon="1e-4")
    assert (exact.k, exact.per_item, exact.epsilon, exact.max_expansions) == (1, 0, 1e-4, DEFAULT_MAX_EXPANSIONS)
    shard = RunSpec(k=4, shard="1/4").for_range((10, 20))
    assert (shard.items_range, shard.shard, shard.item_range(40), shard.k) == ((10, 20), None, (10, 20), 4)
    assert RunSpec(shard="1/4").item_range(40) == (10, 20) and RunSpec(items_range="3:7").item_range(40) == (3, 7)


def test_default_seeds_of_a_run_are_distinct_and_below_llamas_random_seed():
    """Over the whole layout (every k up to the largest K, items at both ends of the bank and the
    largest salt) no two samples share a seed and none reaches 2**32 - 1 (llama.cpp's "random");
    an item past the layout is refused, naming it."""
    from bayesrc.collect import Item
    from bayesrc.collect.rundir import item_seeds
    from bayesrc.data.seeds import ITEM_SLOTS, MAX_K, sample_seeds
    from bayesrc.errors import InputError

    indices = [*range(25), *range(ITEM_SLOTS - 25, ITEM_SLOTS)]
    seeds = [s for i in indices for s in sample_seeds(i, MAX_K, salt=(1 << 30) - 1, offset=1000)]
    assert len(set(seeds)) == len(seeds) and max(seeds) < 2**32 - 1
    with pytest.raises(InputError, match="number 524,289 of its bank"):
        item_seeds(Item(ITEM_SLOTS, "far", "math", "?", ("a", "b"), "A"), 3)
    assert item_seeds(Item(ITEM_SLOTS, "far", "math", "?", ("a", "b"), "A"), 3, stride=3)[0] == 3 * ITEM_SLOTS


@pytest.mark.parametrize(
    "settings, field, words",
    [
        ({"k": 0}, "k", "must be >= 1"),
        ({"k": 11, "seed_stride": 10}, "k", "exceeds the seed stride"),
        ({"k": 4097}, "k", "above the 4,096 the default seed rule lays out"),
        ({"temperature": 6.0}, "temperature", "in [0, 5]"),
        ({"seed_rule": "mine"}, "seed_rule", "must be one of"),
        ({"engine": "turbo"}, "engine", "unknown engine"),
        ({"scheme": "halves"}, "scheme", "unknown evaluation scheme"),
        ({"engine": "server", "scheme": "whole"}, "scheme", "the server evaluates prompts its own way"),
        ({"engine": "naive", "items_per_batch": 2}, "items_per_batch", "fast engine"),
        ({"items_per_batch": 256}, "items_per_batch", "must be <= 255"),
        ({"threads": 0}, "threads", "must be >= 1"),
        ({"engine": "exact", "epsilon": 0.5}, "epsilon", "in (0, 0.1)"),
        ({"engine": "exact", "max_expansions": 0}, "max-expansions", "must be >= 1"),
        ({"items_range": "0:2", "shard": "0/2"}, "shard", "not both"),
    ],
)
def test_run_spec_refuses_a_bad_setting_naming_its_field(settings, field, words):
    from bayesrc.collect import RunSpec

    with pytest.raises(InputError, match=re.escape(words)) as err:
        RunSpec(**settings)
    assert err.value.field == field


def test_cli_options_make_the_spec_collect_makes(tmp_path):
    """``bayesrc collect`` (single process and --ray alike) and collect()'s keywords give one and the same spec."""
    import argparse

    from bayesrc.collect import RunSpec
    from bayesrc.collect.commands import register
    from bayesrc.collect.handlers import run_spec

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    argv = [
        "collect",
        "--model",
        "m.toml",
        "--items",
        "b.jsonl",
        "--out",
        str(tmp_path),
        "--k",
        "40",
        "--seed-rule",
        "shared",
        "--scheme",
        "whole",
        "--label",
        "v1",
    ]
    assert run_spec(parser.parse_args(argv)) == RunSpec(k=40, seed_rule="shared", scheme="whole", label="v1")
    exact = parser.parse_args(
        ["collect", "--model", "m", "--items", "b", "--out", "r", "--engine", "exact", "--epsilon", "1e-5"]
    )
    assert run_spec(exact) == RunSpec(engine="exact", epsilon=1e-5)


def test_pins_model_fields_may_differ_others_block(tmp_path):
    a = _run(tmp_path, "a")
    b = _run(tmp_path, "b", **{"model.label": "m2", "model.file_sha256": "bb", "runtime.engine": "naive"})
    comp = compare_runs(a, b)
    assert comp.pinned and comp.comparable
    assert set(comp.differences["field"]) == {"model.label", "model.file_sha256", "runtime.engine"}
    c = _run(tmp_path, "c", **{"items.bank_sha256": "other", "sampling.temperature": 1.0})
    comp = compare_runs(a, c)
    assert not comp.comparable and set(comp.blocking["field"]) == {"items.bank_sha256", "sampling.temperature"}
    with pytest.raises(InputError, match="items.bank_sha256, sampling.temperature"):
        check_comparable(a, c)
    assert check_comparable(a, c, force=True).comparable is False
    assert compare_runs(a, c, allow=["items", "sampling.temperature"]).comparable
    # A trials file inside a run directory is resolved to its run record; unpinned data passes unchecked.
    assert not check_comparable(a / "trials.parquet", c / "trials.parquet", force=True).comparable
    assert check_comparable(tmp_path / "nowhere.parquet", a).pinned is False


def test_merge_refuses_mismatched_or_overlapping_shards(tmp_path):
    a = _run(tmp_path, "a")
    b = _run(tmp_path, "b", **{"items.range": [2, 6]})
    with pytest.raises(InputError, match="overlaps"):
        merge_runs([a, b], tmp_path / "m")
    c = _run(tmp_path, "c", **{"items.range": [4, 8], "sampling.temperature": 1.0})
    with pytest.raises(InputError, match="sampling.temperature"):
        merge_runs([a, c], tmp_path / "m")
    assert not (tmp_path / "m" / "run.json").exists()


# -- run directory guards --------------------------------------------------------------------
def test_lock_refuses_a_second_collector(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(InputError, match="another collector"):
            RunLock(tmp_path)
    RunLock(tmp_path).release()  # free again once released


# -- chat templates cannot run code ----------------------------------------------------------
@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__.os.popen('touch /tmp/bayesrc_pwned').read() }}",
        "{% for m in messages %}{{ m.__class__.__base__.__subclasses__() }}{% endfor %}",
    ],
)
def test_malicious_chat_template_cannot_execute(template, tmp_path):
    marker = Path("/tmp/bayesrc_pwned")
    marker.unlink(missing_ok=True)
    with pytest.raises(InputError) as err:
        render_chat_template(template, [{"role": "user", "content": "hi"}], source=tmp_path / "evil.gguf")
    assert "unsafe" in str(err.value) or "failed to render" in str(err.value)
    assert not marker.exists()


def test_benign_chat_template_renders():
    out = render_chat_template(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}", [{"role": "user", "content": "hi"}]
    )
    assert out == "<user>hi"


@pytest.mark.parametrize("fmt", ["completion", "chat"])
def test_prompt_blocks_split_at_a_line_start_and_concatenate_to_the_prompt(tmp_path, fmt):
    from bayesrc.collect import build_prompt, builtin_bank, load_card, prompt_blocks, shared_block

    card = tmp_path / "c.toml"
    chat = 'format = "chat"\nchat_format = "chatml"\n' if fmt == "chat" else ""
    card.write_text(
        f'[model]\npath = "x.gguf"\n[prompt]\n{chat}system = "Be brief."\n'
        f'template = """Example: 1+1?\\nAnswer: 2\\n\\nQuestion: {{question}}\\n{{options}}\\nAnswer:"""\n'
    )
    c = load_card(card)
    items = load_bank(builtin_bank(tmp_path / "bank.jsonl", n_items=5, seed=3)).items
    shared = shared_block(c)
    assert shared.endswith("\n") and "Be brief." in shared and "Example: 1+1?" in shared
    for it in items:
        s, own = prompt_blocks(c, it)
        assert s == shared and s + own == build_prompt(c, it)
        assert own.startswith("Question: " + it.question[:10])
    import dataclasses

    c2 = dataclasses.replace(c, template="{question}\n{options}")  # item field first: only the system text is shared
    s2, own2 = prompt_blocks(c2, items[0])
    assert (
        s2 == "Be brief.\n\n" if fmt == "completion" else s2.endswith("\n") and "Be brief." in s2
    ) and own2.startswith(items[0].question)
