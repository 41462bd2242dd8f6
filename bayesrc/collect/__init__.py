"""Collection: seeded, resumable, pinned K-sample collection with llama-cpp-python (SPEC section 6).

Public API::

    collect(card, items, out, k=10, temperature=0.7, engine="fast"|"naive"|"exact"|"server", resume=False) -> RunResult
    collect(card, items, out, RunSpec(k=40, ...), resume=False) -> RunResult  (the same settings as one object)
    load_bank(path) -> Bank;  load_card(path) -> ModelCard;  Model(gguf_path, ...)
    prompt_blocks(card, item) -> (shared, own);  Model.prompt(shared, own) -> Prompt;
    Model.eval_prompt(prompt)   (shared block's KV kept once, own tokens decoded)
    (whether two runs are comparable, their pins: bayesrc.data.compare_runs / check_comparable)
    merge_runs(shard_dirs, out);  read_run_trials(run_dir);  read_run_record(run)
    builtin_bank(path, n_items, seed);  collect_demo_runs(out_dir, n_items, k)
    quantize_card(card, "Q3_K_M", out_dir) -> (gguf, card)  (exact runs read with bayesrc.data.load_exact)
    ExactEngine(model, sampling, epsilon=1e-6).item_distribution(prompt_tokens, letters)  (SPEC section 7)
"""

from bayesrc.collect.bank import Bank, Item, load_bank
from bayesrc.collect.builtin import (
    builtin_bank,
    builtin_capacity,
    builtin_items,
    collect_demo_runs,
    quantize_card,
    requantize,
)
from bayesrc.collect.card import (
    ModelCard,
    build_prompt,
    load_card,
    prompt_blocks,
    render_chat_template,
    resolve_model,
    shared_block,
)
from bayesrc.collect.engines import FastEngine, NaiveEngine, make_engine
from bayesrc.collect.exact import ExactEngine, ItemDistribution
from bayesrc.collect.extract import Extraction, decided, extract, strip_think
from bayesrc.collect.model import Model, Prompt, physical_cores
from bayesrc.collect.pins import merge_runs
from bayesrc.collect.run import collect
from bayesrc.collect.rundir import RunResult, item_seeds, read_run_record, read_run_trials
from bayesrc.collect.sampling import Sample, Sampling
from bayesrc.collect.spec import RunSpec

__all__ = [
    "Bank",
    "ExactEngine",
    "Extraction",
    "FastEngine",
    "ItemDistribution",
    "Item",
    "Model",
    "ModelCard",
    "NaiveEngine",
    "Prompt",
    "RunResult",
    "RunSpec",
    "Sample",
    "Sampling",
    "build_prompt",
    "builtin_bank",
    "builtin_capacity",
    "builtin_items",
    "collect",
    "collect_demo_runs",
    "decided",
    "extract",
    "item_seeds",
    "load_bank",
    "load_card",
    "make_engine",
    "merge_runs",
    "physical_cores",
    "prompt_blocks",
    "quantize_card",
    "read_run_record",
    "read_run_trials",
    "render_chat_template",
    "requantize",
    "resolve_model",
    "shared_block",
    "strip_think",
]
