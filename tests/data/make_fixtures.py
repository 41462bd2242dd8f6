r"""Regenerate the real-tool log fixtures under tests/data/ (run by hand, not by the tests).

Each part runs in a throwaway virtual environment holding the real tool, never in the
project's own environment::

    python -m venv /tmp/venv-inspect && /tmp/venv-inspect/bin/pip install inspect-ai zstandard
    /tmp/venv-inspect/bin/python tests/data/make_fixtures.py inspect
    # graded: model_graded_qa's grader is the Gemma GGUF behind the llama.cpp server below
    /tmp/venv-inspect/bin/python tests/data/make_fixtures.py inspect-graded --base-url http://127.0.0.1:8765/v1

    # 0.4.13: no torch needed for API models
    python -m venv /tmp/venv-lmeval && /tmp/venv-lmeval/bin/pip install 'lm-eval[api]'
    # a llama.cpp server on the Gemma-3-270M GGUF (from the project venv):
    python -m llama_cpp.server --model models/gemma-3-270m-q4_k_m.gguf --model_alias gemma-3-270m \
        --host 127.0.0.1 --port 8765 &
    /tmp/venv-lmeval/bin/python tests/data/make_fixtures.py lm-eval --base-url http://127.0.0.1:8765

Inspect AI: a multiple-choice task over 8 bundled MMLU-Pro items, solver
``multiple_choice()``, scorer ``choice()``, ``epochs = 5`` (reducer ``mean``), run on
Inspect's own ``mockllm/model`` provider whose custom outputs are seeded per (version,
item, call) and carry their usage (so no tokenizer is fetched). Two versions (a
stronger and a weaker mock), each written in the default ``.eval`` format (zip with
Zstandard members in current Inspect) and as ``.json``.

lm-evaluation-harness: a local ``generate_until`` task over 6 bundled MMLU-Pro items with
``repeats: 5`` and a per-repeat regex filter (no ``take_first``), run with
``--model local-completions`` against llama-cpp-python's own server running the Gemma
GGUF, ``--log_samples``. lm-eval sends its fixed ``--seed`` (1234) with every request, so
the K repeats of a document would be K copies of one draw; the task sets ``seed: null``
in its ``generation_kwargs`` (they override the payload's seed), so the server draws a
fresh seed per request and the repeats are independent samples (not reproducible run to
run, which is why the fixture is committed).

promptfoo: ``promptfoo eval --repeat 5 --no-cache -o results.json`` (promptfoo from the npm
registry, in a throwaway folder) over the same 6 items with two prompts (a few-shot prompt and a
bare one: the two versions), provider ``openai:completion`` against the same llama-cpp-python
server, a ``javascript`` assertion that the completion starts with the item's letter::

    mkdir -p /tmp/pf && (cd /tmp/pf && npm install promptfoo@0.120)   # 0.120: Node 20 (0.122 needs Node 22)
    python tests/data/make_fixtures.py promptfoo --base-url http://127.0.0.1:8765 \
        --promptfoo /tmp/pf/node_modules/.bin/promptfoo

Every run also writes ``expected.json`` beside its logs: per item, the correct counts
as the TOOL reports them, read with the tool's own API (Inspect: ``read_eval_log`` and the
log's per-sample epoch ``reductions``; lm-eval: its per-document ``exact_match`` record
and aggregated results), plus the tool versions. The importer tests compare to it.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BANK = ROOT / "bayesrc" / "datasets" / "mmlu_pro_2000.jsonl"
LETTERS = "ABCDEFGHIJ"


def bank_items(n: int, per_domain: int) -> list[dict]:
    """The first ``per_domain`` items of each domain among the bundled MMLU-Pro items."""
    out, seen = [], {}
    with BANK.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if seen.get(rec["domain"], 0) < per_domain:
                seen[rec["domain"]] = seen.get(rec["domain"], 0) + 1
                out.append(rec)
            if len(out) == n:
                break
    return out


# -- Inspect AI ----------------------------------------------------------------------------
INSPECT_VERSIONS = {"v1": 0.75, "v2": 0.45}  # mock accuracy per version (items vary around it)
INSPECT_EPOCHS = 5


def _inspect_samples() -> list:
    """The 8 bundled MMLU-Pro items as Inspect samples, 4 options each (the key among them: small logs)."""
    from inspect_ai.dataset import Sample

    samples = []
    for it in bank_items(8, 2):
        opts = it["options_raw"]
        key = LETTERS.index(it["answer"])
        keep = sorted({key, *[i for i in range(len(opts)) if i != key][:3]})
        samples.append(
            Sample(
                input=it["question"],
                choices=[opts[i] for i in keep],
                target=LETTERS[keep.index(key)],
                id=f"mmlu-{it['item_id']}",
                metadata={"subject": it["domain"]},
            )
        )
    return samples


def _mock_answers(samples: list, version: str, acc: float):
    """Inspect's ``mockllm/model`` outputs: per (version, item, call) a seeded answer letter, right with the item's
    probability around ``acc``, ~8% no answer; with their usage (so no tokenizer is fetched)."""
    from inspect_ai.model import ModelOutput, ModelUsage

    calls: dict[str, int] = {}

    def output(messages, tools, tool_choice, config):
        prompt = "".join(str(m.content) for m in messages)
        sample = next(s for s in samples if s.input in prompt)
        n = calls[sample.id] = calls.get(sample.id, 0) + 1
        rng = random.Random(f"{version}|{sample.id}|{n}")
        p_item = min(0.95, max(0.05, acc + random.Random(f"{version}|{sample.id}").uniform(-0.3, 0.3)))
        u = rng.random()
        if u < 0.08:
            text = "I am not sure which option is right."  # no answer: scored incorrect by choice()
        else:
            letters = LETTERS[: len(sample.choices)]
            pick = sample.target if rng.random() < p_item else rng.choice([c for c in letters if c != sample.target])
            text = f"Let me think about the options.\n\nANSWER: {pick}"
        out = ModelOutput.from_content(model="mockllm/model", content=text)
        out.usage = ModelUsage(
            input_tokens=len(prompt) // 4, output_tokens=len(text) // 4, total_tokens=(len(prompt) + len(text)) // 4
        )
        return out

    return output


def _run_inspect(task, model, log_dir: Path, fmt: str, dest: Path):
    """One Inspect run of ``task`` (``INSPECT_EPOCHS`` epochs), its log moved to ``dest`` and read back."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log

    logs = inspect_eval(
        task,
        model=model,
        epochs=INSPECT_EPOCHS,
        log_dir=str(log_dir),
        log_format=fmt,
        display="none",
        max_connections=1,
        log_level="warning",
    )
    src = Path(logs[0].location)
    src.rename(dest)
    shutil.rmtree(src.parent)
    log = read_eval_log(str(dest))
    assert log.status == "success", log.status
    return log


def _log_record(log, scorer: str) -> dict:
    """What ``expected.json`` holds of every Inspect log: its model, status, scorer, reducer and each epoch's score
    value per sample, as Inspect's own API reads them."""
    per_epoch: dict = {}
    for s in log.samples:
        per_epoch.setdefault(str(s.id), {})[s.epoch] = s.scores[scorer].value
    return {
        "model": log.eval.model,
        "status": log.status,
        "scorer": log.reductions[0].scorer,
        "reducer": log.reductions[0].reducer,
        "scores": per_epoch,
    }


def make_inspect(out: Path) -> None:
    import inspect_ai
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset
    from inspect_ai.model import get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    samples = _inspect_samples()
    target = out / "inspect"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    expected: dict = {"tool": "inspect-ai", "version": inspect_ai.__version__, "epochs": INSPECT_EPOCHS, "logs": {}}
    for version, acc in INSPECT_VERSIONS.items():
        for fmt in ("eval", "json"):
            task = Task(
                dataset=MemoryDataset(samples, name="mmlu_pro_mini"),
                solver=multiple_choice(),
                scorer=choice(),
                name="mmlu_pro_mini",
            )
            model = get_model("mockllm/model", custom_outputs=_mock_answers(samples, version, acc), memoize=False)
            dest = target / f"{version}.{fmt}"
            log = _run_inspect(task, model, target / f"tmp-{version}-{fmt}", fmt, dest)
            # The tool's own per-item report: the epoch reduction (mean of the C/I scores) times the epochs.
            per_item = {}
            for red in log.reductions[0].samples:
                per_item[str(red.sample_id)] = round(float(red.value) * INSPECT_EPOCHS)
            expected["logs"][dest.name] = _log_record(log, "choice") | {
                "n_correct": per_item,
                "accuracy": log.results.scores[0].metrics["accuracy"].value,
            }
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {sorted(p.name for p in target.iterdir())}")


# The model-graded scorer's prompt: a few-shot completion for the base Gemma model, which continues after
# "GRADE:" with a letter (C correct, P partially correct, I incorrect); the grade is the completion's first
# letter among C, P, I (model_graded_qa scores 0 when it finds none).
GRADER_TEMPLATE = """Grade each submission against the expert answer: C correct, P partially correct, I incorrect.

Question: What is 2+2?
Expert answer: 4
Submission: ANSWER: 4
GRADE: C

Question: Name the capital of France and of Spain.
Expert answer: Paris and Madrid
Submission: ANSWER: Paris
GRADE: P

Question: What colour is the sky on a clear day?
Expert answer: blue
Submission: ANSWER: green
GRADE: I

Question: {question}
Expert answer: {criterion}
Submission: {answer}
GRADE:"""
GRADER_PATTERN = r"^\s*([CPI])"


def make_inspect_graded(out: Path, base_url: str, server_software: str) -> None:
    """Inspect logs with graded scores: the same items and mock answers as :func:`make_inspect`, scored by
    ``model_graded_qa(partial_credit=True)`` whose grader is the Gemma GGUF behind llama-cpp-python's server
    (``openai-api-completions``: the raw few-shot prompt, no chat template), ``epochs = 5``."""
    import inspect_ai
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset
    from inspect_ai.model import GenerateConfig, get_model
    from inspect_ai.scorer import model_graded_qa
    from inspect_ai.solver import generate

    samples = _inspect_samples()
    target = out / "inspect_graded"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    grader = get_model(
        "openai-api-completions/llama/gemma-3-270m",
        base_url=base_url,
        api_key="none",
        config=GenerateConfig(max_tokens=4, temperature=1.0),
    )
    expected: dict = {
        "tool": "inspect-ai",
        "version": inspect_ai.__version__,
        "epochs": INSPECT_EPOCHS,
        "grader": server_software,
        "logs": {},
    }
    for version, acc in INSPECT_VERSIONS.items():
        task = Task(
            dataset=MemoryDataset(samples, name="mmlu_pro_mini"),
            solver=generate(),
            scorer=model_graded_qa(
                template=GRADER_TEMPLATE, grade_pattern=GRADER_PATTERN, partial_credit=True, model=grader
            ),
            name="mmlu_pro_mini_graded",
        )
        model = get_model("mockllm/model", custom_outputs=_mock_answers(samples, version, acc), memoize=False)
        dest = target / f"{version}.eval"
        log = _run_inspect(task, model, target / f"tmp-{version}", "eval", dest)
        # The tool's own report: the mean reduction over epochs as Inspect computes it (its value_to_float:
        # C 1, P 0.5, I 0).
        expected["logs"][dest.name] = _log_record(log, "model_graded_qa") | {
            "mean_score": {str(r.sample_id): float(r.value) for r in log.reductions[0].samples},
        }
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {sorted(p.name for p in target.iterdir())}")


# -- lm-evaluation-harness ------------------------------------------------------------------
LM_EVAL_REPEATS = 5
# The card's few-shot completion prompt (models/gemma-3-270m-q4_k_m.toml), as an lm-eval task.
LM_EVAL_TASK = (
    """\
task: mmlu_pro_mini
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Question: What comes next: A B A B A ?\\nA. A\\nB. B\\nAnswer: B\\n\\n"""
    """Question: What comes next: A B C A B ?\\nA. A\\nB. B\\nC. C\\nAnswer: C\\n\\n"""
    """Question: {{{{question}}}}\\n{{{{options_formatted}}}}\\nAnswer:"
doc_to_target: answer
repeats: {repeats}
generation_kwargs:
  until: ["\\n", "Question:"]
  do_sample: true
  temperature: 1.0
  max_gen_toks: 4
  # lm-eval sends its fixed --seed with every request unless the task overrides it:
  # null lets the server draw a fresh seed per request, so the repeats differ.
  seed: null
filter_list:
  - name: per-repeat-letter
    filter:
      - function: regex
        regex_pattern: "([A-D])"
        group_select: 0
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""
)


def make_lm_eval(out: Path, base_url: str, server_software: str) -> None:
    import importlib.metadata as md

    target = out / "lm_eval"
    shutil.rmtree(target, ignore_errors=True)
    work = Path("/tmp/bayesrc-lm-eval-fixture")
    shutil.rmtree(work, ignore_errors=True)
    (work / "tasks").mkdir(parents=True)
    items = bank_items(6, 2)
    with (work / "items.jsonl").open("w", encoding="utf-8") as fh:
        for it in items:
            key = LETTERS.index(it["answer"])
            keep = sorted({key, *[i for i in range(len(it["options_raw"])) if i != key][:3]})
            opts = [it["options_raw"][i] for i in keep]
            fh.write(
                json.dumps(
                    {
                        "question_id": it["item_id"],
                        "category": it["domain"],
                        "question": it["question"],
                        "options_formatted": "\n".join(f"{LETTERS[j]}. {o}" for j, o in enumerate(opts)),
                        "answer": LETTERS[keep.index(key)],
                    }
                )
                + "\n"
            )
    (work / "tasks" / "mmlu_pro_mini.yaml").write_text(
        LM_EVAL_TASK.format(data=work / "items.jsonl", repeats=LM_EVAL_REPEATS)
    )
    server = json.loads(
        subprocess.run(
            ["curl", "-s", base_url.rstrip("/") + "/v1/models"], capture_output=True, text=True, check=True
        ).stdout
    )
    cmd = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "local-completions",
        "--model_args",
        f"model=gemma-3-270m,base_url={base_url.rstrip('/')}/v1/completions,tokenizer_backend=None,tokenized_requests=False,num_concurrent=1,max_retries=3",
        "--tasks",
        "mmlu_pro_mini",
        "--include_path",
        str(work / "tasks"),
        "--log_samples",
        "--output_path",
        str(work / "out"),
    ]
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    subprocess.run(cmd, check=True, env=env)
    samples = sorted((work / "out").rglob("samples_mmlu_pro_mini_*.jsonl"))
    results = sorted((work / "out").rglob("results_*.json"))
    assert len(samples) == 1 and len(results) == 1, (samples, results)
    target.mkdir(parents=True)
    shutil.copy(samples[0], target / samples[0].name)
    shutil.copy(results[0], target / results[0].name)
    shutil.copy(work / "tasks" / "mmlu_pro_mini.yaml", target / "mmlu_pro_mini.yaml")
    # The tool's own per-document report: exact_match (the mean over the K repeats) and its filtered answers.
    per_doc = {}
    for line in samples[0].read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        per_doc[str(rec["doc_id"])] = {
            "exact_match": rec["exact_match"],
            "filtered_resps": rec["filtered_resps"],
            "target": rec["target"],
            "n_correct": round(rec["exact_match"] * LM_EVAL_REPEATS),
        }
    agg = json.loads(results[0].read_text(encoding="utf-8"))["results"]["mmlu_pro_mini"]
    expected = {
        "tool": "lm-evaluation-harness",
        "version": md.version("lm_eval"),
        "repeats": LM_EVAL_REPEATS,
        "server": server,
        "server_software": server_software,
        "samples_file": samples[0].name,
        "docs": per_doc,
        "aggregate": agg,
    }
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(work)
    print(f"wrote {sorted(p.name for p in target.iterdir())}")


# -- promptfoo ------------------------------------------------------------------------------
PROMPTFOO_REPEATS = 5
PROMPTFOO_PROMPTS = {
    "few-shot": (
        "Question: What comes next: A B A B A ?\nA. A\nB. B\nAnswer: B\n\nQuestion: {{question}}\n{{options}}\nAnswer:"
    ),
    "bare": "{{question}}\n{{options}}\nThe answer is",
}


def make_promptfoo(out: Path, base_url: str, promptfoo: str) -> None:
    target = out / "promptfoo"
    shutil.rmtree(target, ignore_errors=True)
    work = Path("/tmp/bayesrc-promptfoo-fixture")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tests = []
    for it in bank_items(6, 2):
        key = LETTERS.index(it["answer"])
        keep = sorted({key, *[i for i in range(len(it["options_raw"])) if i != key][:3]})
        options = "\n".join(f"{LETTERS[j]}. {it['options_raw'][i]}" for j, i in enumerate(keep))
        tests.append(
            {
                "description": str(it["item_id"]),
                "vars": {
                    "question": it["question"],
                    "options": options,
                    "answer": LETTERS[keep.index(key)],
                    "domain": it["domain"],
                },
            }
        )
    config = {
        "description": "bayesrc fixture: 6 MMLU-Pro items, two prompts, Gemma-3-270M behind llama-cpp-python's server",
        "prompts": [{"raw": text, "label": label} for label, text in PROMPTFOO_PROMPTS.items()],
        "providers": [
            {
                "id": "openai:completion:gemma-3-270m",
                "config": {
                    "apiBaseUrl": base_url.rstrip("/") + "/v1",
                    "apiKey": "none",
                    "temperature": 1.0,
                    "max_tokens": 4,
                    "stop": ["\n"],
                },
            }
        ],
        "defaultTest": {
            "assert": [
                {
                    "type": "javascript",
                    "value": "output.trim().replace(/^[(\\[]/, '').toUpperCase().startsWith(context.vars.answer)",
                }
            ]
        },
        "tests": tests,
    }
    (work / "promptfooconfig.yaml").write_text(json.dumps(config, indent=1))  # JSON is YAML
    env = {
        **__import__("os").environ,
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_CONFIG_DIR": str(work / ".promptfoo"),
    }
    version = subprocess.run(
        [promptfoo, "--version"], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    cmd = [
        promptfoo,
        "eval",
        "-c",
        str(work / "promptfooconfig.yaml"),
        "--repeat",
        str(PROMPTFOO_REPEATS),
        "--no-cache",
        "--max-concurrency",
        "1",
        "-o",
        str(work / "results.json"),
        "-o",
        str(work / "table.csv"),
    ]
    subprocess.run(cmd, env=env, cwd=work)  # exits non-zero when an assertion fails: expected here
    target.mkdir(parents=True)
    shutil.copy(work / "results.json", target / "results.json")
    shutil.copy(work / "promptfooconfig.yaml", target / "promptfooconfig.yaml")
    doc = json.loads((work / "results.json").read_text(encoding="utf-8"))
    expected = {"tool": "promptfoo", "version": version, "repeats": PROMPTFOO_REPEATS, "prompts": {}}
    for p in doc["results"]["prompts"]:  # the tool's own per-prompt counts
        expected["prompts"][p["label"]] = {
            "pass": p["metrics"]["testPassCount"],
            "fail": p["metrics"]["testFailCount"],
            "error": p["metrics"].get("testErrorCount", 0),
        }
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    shutil.copy(work / "table.csv", target / "table.csv")
    shutil.rmtree(work)
    print(f"wrote {sorted(p.name for p in target.iterdir())}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="tool", required=True)
    sub.add_parser("inspect")
    graded = sub.add_parser("inspect-graded")
    graded.add_argument("--base-url", required=True, help="the llama-cpp-python server's /v1 URL")
    graded.add_argument(
        "--server-software",
        default="llama-cpp-python 0.3.36 (python -m llama_cpp.server), Gemma-3-270M Q4_K_M GGUF",
        help="what serves --base-url (recorded in expected.json)",
    )
    lm = sub.add_parser("lm-eval")
    lm.add_argument("--base-url", required=True)
    lm.add_argument(
        "--server-software",
        default="llama-cpp-python 0.3.36 (python -m llama_cpp.server), Gemma-3-270M Q4_K_M GGUF",
        help="what serves --base-url (recorded in expected.json)",
    )
    pf = sub.add_parser("promptfoo")
    pf.add_argument("--base-url", required=True)
    pf.add_argument("--promptfoo", required=True, help="the promptfoo executable (node_modules/.bin/promptfoo)")
    args = ap.parse_args(argv)
    if args.tool == "inspect":
        make_inspect(HERE)
    elif args.tool == "inspect-graded":
        make_inspect_graded(HERE, args.base_url, args.server_software)
    elif args.tool == "lm-eval":
        make_lm_eval(HERE, args.base_url, args.server_software)
    else:
        make_promptfoo(HERE, args.base_url, args.promptfoo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
