"""Small, realistic example logs in lm-eval and Inspect layouts, written from trials.

The project ships no third-party logs: these writers turn canonical trials (for
instance :func:`bayesrc.data.simulate_pair`) into the files the two tools write,
so the importers can be documented and round-trip tested. Importing the written
files gives back the same items, samples, answers and correctness.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from bayesrc.data import simulate_pair
from bayesrc.io import atomic_write_bytes, atomic_write_text

LETTERS = "ABCDEFGHIJ"
STAMP = "2025-06-01T12-00-00.000000"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _question(item_id: str, domain: str) -> tuple[str, list[str]]:
    options = [f"option {c} for {item_id}" for c in LETTERS]
    return f"[{domain}] Simulated question {item_id}?", options


def _prompt(question: str, options: list[str]) -> str:
    body = "\n".join(f"{c}. {o}" for c, o in zip(LETTERS, options))
    return f"The following is a multiple choice question. Answer with the letter.\n\n{question}\n{body}\nAnswer:"


def _reply(response, extracted, missing) -> str:
    """A chat-style reply around the extracted letter (what a sampled model writes)."""
    if missing or _none(extracted) is None:
        return str(_none(response) or "I am not sure.")
    return f"Let me work through the options. The answer is ({extracted})."


def _by_item(trials: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    t = trials.sort_values(["item_id", "k"], kind="stable")
    return t.groupby("item_id", sort=False)


def _none(v):
    return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v


def lm_eval_records(trials: pd.DataFrame, *, temperature: float = 0.7) -> dict[str, list[dict]]:
    """lm-eval ``--log_samples`` records per task (task = ``mmlu_pro_<domain>``).

    Items with K > 1 samples use the repeats layout (``resps = [[r_1..r_K]]``,
    ``filtered_resps = [[a_1..a_K]]``, unanswered repeats as ``"[invalid]"``); items
    with one sample use the single-response layout with ``exact_match`` 0 / 1.

    Examples
    --------
    >>> from bayesrc.data import simulate_pair
    >>> recs = lm_eval_records(simulate_pair(8, 3, seed=0).trials_v1)
    >>> all(t.startswith("mmlu_pro_") for t in recs)
    True
    """
    out: dict[str, list[dict]] = {}
    for item_id, g in _by_item(trials):
        domain = str(g["domain"].iloc[0])
        task = f"mmlu_pro_{domain}"
        recs = out.setdefault(task, [])
        key = _none(g["correct_answer"].iloc[0]) or "A"
        question, options = _question(item_id, domain)
        doc = {
            "question_id": item_id,
            "question": question,
            "options": options,
            "answer": key,
            "answer_index": LETTERS.index(key) if key in LETTERS else 0,
            "category": domain,
            "src": "bayesrc-example",
        }
        prompt = _prompt(question, options)
        raw = [_reply(r, e, m) for r, e, m in zip(g["response"], g["extracted"], g["is_missing"])]
        answers = [("[invalid]" if bool(m) else str(_none(e))) for e, m in zip(g["extracted"], g["is_missing"])]
        correct = [bool(c) for c in g["is_correct"].fillna(False)]
        rec = {
            "doc_id": len(recs),
            "doc": doc,
            "target": key,
            "arguments": {
                "gen_args_0": {
                    "arg_0": prompt,
                    "arg_1": {"until": ["</s>", "Question:"], "do_sample": True, "temperature": temperature},
                }
            },
            "resps": [raw],
            "filtered_resps": [answers] if len(raw) > 1 else [answers[0]],
            "filter": "custom-extract",
            "metrics": ["exact_match"],
            "doc_hash": _sha(json.dumps(doc, indent=2, ensure_ascii=False)),
            "prompt_hash": _sha(prompt),
            "target_hash": _sha(key),
            "exact_match": (sum(correct) / len(correct)) if len(raw) > 1 else float(correct[0]),
        }
        recs.append(rec)
    return out


def write_lm_eval_example(trials: pd.DataFrame, out_dir: str | Path, *, stamp: str = STAMP) -> list[Path]:
    """Write ``samples_<task>_<stamp>.jsonl`` files (one per domain) into ``out_dir``.

    Also writes ``results_<stamp>.json`` with the aggregate metric per task, as
    lm-eval does. Returns the samples files.

    Examples
    --------
    >>> from bayesrc.data import simulate_pair
    >>> write_lm_eval_example(simulate_pair(8, 3, seed=0).trials_v1, "examples/lm_eval_v1")  # doctest: +SKIP
    """
    out_dir = Path(out_dir)
    paths = []
    results: dict[str, dict] = {}
    for task, recs in lm_eval_records(trials).items():
        p = out_dir / f"samples_{task}_{stamp}.jsonl"
        atomic_write_text(p, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
        paths.append(p)
        results[task] = {"alias": task, "exact_match,custom-extract": sum(r["exact_match"] for r in recs) / len(recs)}
    model = str(trials["model"].iloc[0])
    atomic_write_text(
        out_dir / f"results_{stamp}.json",
        json.dumps(
            {
                "results": results,
                "config": {"model": "local-completions", "model_args": f"model={model}"},
                "model_name": model,
            },
            indent=2,
        )
        + "\n",
    )
    return paths


def inspect_log(trials: pd.DataFrame, *, task: str = "mmlu_pro", model: str | None = None) -> dict:
    """An Inspect ``EvalLog`` dict: one sample per (item, epoch), epochs = K, scorer ``choice``."""
    model = model or f"llama-cpp/{trials['model'].iloc[0]}"
    k_max = int(trials["k"].max()) + 1
    samples = []
    for item_id, g in _by_item(trials):
        domain = str(g["domain"].iloc[0])
        key = _none(g["correct_answer"].iloc[0]) or "A"
        question, options = _question(item_id, domain)
        for _, row in g.iterrows():
            missing = bool(row["is_missing"])
            reply = _reply(row["response"], row["extracted"], missing)
            value = "N" if missing else ("C" if bool(row["is_correct"]) else "I")
            samples.append(
                {
                    "id": item_id,
                    "epoch": int(row["k"]) + 1,
                    "input": question,
                    "choices": options,
                    "target": key,
                    "messages": [
                        {"role": "user", "content": _prompt(question, options), "source": "input"},
                        {"role": "assistant", "content": reply, "source": "generate"},
                    ],
                    "output": {
                        "model": model,
                        "choices": [{"message": {"role": "assistant", "content": reply}, "stop_reason": "stop"}],
                    },
                    "scores": {
                        "choice": {
                            "value": value,
                            "answer": None if missing else str(row["extracted"]),
                            "explanation": reply,
                        }
                    },
                    "metadata": {"subject": domain},
                }
            )
    n_correct = sum(1 for s in samples if s["scores"]["choice"]["value"] == "C")
    return {
        "version": 2,
        "status": "success",
        "eval": {
            "run_id": "bayesrc-example",
            "task": task,
            "task_version": 0,
            "created": "2025-06-01T12:00:00+00:00",
            "model": model,
            "dataset": {"name": "mmlu_pro_example", "samples": int(trials["item_id"].nunique())},
            "config": {"epochs": k_max, "epochs_reducer": ["mean"]},
        },
        "plan": {
            "name": "plan",
            "steps": [{"solver": "multiple_choice", "params": {}}],
            "config": {"temperature": 0.7},
        },
        "results": {
            "total_samples": len(samples),
            "completed_samples": len(samples),
            "scores": [
                {
                    "name": "choice",
                    "scorer": "choice",
                    "metrics": {"accuracy": {"name": "accuracy", "value": n_correct / max(len(samples), 1)}},
                }
            ],
        },
        "stats": {"started_at": "2025-06-01T12:00:00+00:00", "completed_at": "2025-06-01T12:30:00+00:00"},
        "samples": samples,
    }


def write_inspect_example(trials: pd.DataFrame, path: str | Path, *, task: str = "mmlu_pro") -> Path:
    """Write an Inspect log: JSON for ``.json``, the zipped ``.eval`` layout for ``.eval``.

    Examples
    --------
    >>> from bayesrc.data import simulate_pair
    >>> write_inspect_example(simulate_pair(8, 3, seed=0).trials_v1, "examples/v1.eval")  # doctest: +SKIP
    """
    path = Path(path)
    log = inspect_log(trials, task=task)
    if path.suffix == ".eval":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(
                "_journal/start.json", json.dumps({"version": log["version"], "eval": log["eval"], "plan": log["plan"]})
            )
            for s in log["samples"]:
                zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
            header = {k: v for k, v in log.items() if k != "samples"}
            zf.writestr("header.json", json.dumps(header))
        atomic_write_bytes(path, buf.getvalue())
    else:
        atomic_write_text(path, json.dumps(log, indent=2) + "\n")
    return path


def example_trials(
    n_items: int = 24, k: int = 5, *, seed: int = 0, missing_rate: float = 0.05
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two versions' small simulated trials for the example files."""
    sim = simulate_pair(n_items, k, models=("example-v1", "example-v2"), seed=seed, missing_rate=missing_rate)
    return sim.trials_v1, sim.trials_v2


def write_examples(out_dir: str | Path, *, n_items: int = 24, k: int = 5, seed: int = 0) -> dict[str, list[Path]]:
    """Write example lm-eval folders and Inspect logs for two versions under ``out_dir``.

    Examples
    --------
    >>> import tempfile
    >>> sorted(write_examples(tempfile.mkdtemp(), n_items=24, k=5))
    ['inspect', 'lm-eval']
    """
    out_dir = Path(out_dir)
    written: dict[str, list[Path]] = {"lm-eval": [], "inspect": []}
    for t in example_trials(n_items, k, seed=seed):
        name = str(t["model"].iloc[0])
        written["lm-eval"] += write_lm_eval_example(t, out_dir / "lm-eval" / name)
        written["inspect"].append(write_inspect_example(t, out_dir / "inspect" / f"{name}.json"))
    return written
