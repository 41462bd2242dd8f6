"""``bayesrc power`` end to end: real greedy files, a leaderboard, K-sample trials, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, data_path

from bayesrc.cli import main
from bayesrc.data import save_trials, simulate_pair


def _greedy_file(path: Path, model: str, correct: np.ndarray, domains=("law", "physics")) -> Path:
    with path.open("w") as fh:
        for i, c in enumerate(correct):
            rec = {
                "item_id": i,
                "domain": domains[i % len(domains)],
                "model": model,
                "parsed_response": "A",
                "is_correct": None if c is None else bool(c),
            }
            fh.write(json.dumps(rec) + "\n")
    return path


def test_cli_llama_greedy_pair_subprocess(tmp_path):
    g1 = data_path("greedy", "llama3-8b_greedy.jsonl")
    g2 = data_path("greedy", "llama3.1-8b_greedy.jsonl")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "bayesrc", "power", str(g1), str(g2), "--cluster-by", "domain", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 item(s) without a valid answer" in proc.stderr
    doc = json.loads((out / "power.json").read_text())
    (pair,) = doc["pairs"]
    assert pair["name_a"] == "llama3.1-8b" and pair["n"] == 1997 and pair["b"] + pair["c"] == 329
    assert pair["n_clusters"] == 4 and pair["design_effect"] >= 1
    assert pair["verdicts"]["fixed_n"] == "unresolved"
    assert doc["info"]["cluster_by"] == "domain"
    md = (out / "power.md").read_text()
    assert "| llama3.1-8b vs llama3-8b |" in md and "**unresolved**" in md
    assert (out / "pairs.csv").exists()


def test_cli_leaderboard_of_three(tmp_path, capsys):
    rng = np.random.default_rng(1)
    base = rng.random(1500)
    files = []
    for name, thr in (("small", 0.55), ("mid", 0.45), ("big", 0.44)):
        corr = (base + 0.15 * rng.random(1500) > thr + 0.075).astype(int)
        files.append(_greedy_file(tmp_path / f"{name}.jsonl", name, corr))
    out = tmp_path / "lb"
    assert main(["power", *map(str, files), "--cluster-by", "domain", "--anytime", "stitched", "--out", str(out)]) == 0
    doc = json.loads((out / "power.json").read_text())
    assert [r["model"] for r in doc["ranking"]] == ["big", "mid", "small"]
    assert len(doc["pairs"]) == 2 and doc["info"]["comparisons"] == 2
    assert {r["paradigm"] for r in doc["unresolved"]} == {"fixed_n", "bonferroni", "holm", "bh", "clustered", "anytime"}
    assert doc["pairs"][0]["anytime"]["method"] == "stitched"
    assert "big vs mid" in capsys.readouterr().out


def test_cli_k_sample_trials_mean_and_majority(tmp_path):
    sim = simulate_pair(300, 6, seed=4, models=("v1", "v2"))
    f1, f2 = tmp_path / "v1.parquet", tmp_path / "v2.parquet"
    save_trials(sim.trials_v1, f1)
    save_trials(sim.trials_v2, f2)
    assert main(["power", str(f1), str(f2), "--aggregate", "mean", "--out", str(tmp_path / "m")]) == 0
    doc = json.loads((tmp_path / "m" / "power.json").read_text())
    assert doc["info"]["binary"] is False and doc["pairs"][0]["p_paired_t"] is not None
    assert main(["power", str(f1), str(f2), "--comparisons", "10", "--out", str(tmp_path / "j")]) == 0
    doc = json.loads((tmp_path / "j" / "power.json").read_text())
    assert doc["info"]["aggregate"] == "majority" and doc["pairs"][0]["b"] is not None
    assert doc["pairs"][0]["multiplicity"]["bonferroni"]["alpha"] == pytest.approx(0.005)


@pytest.mark.parametrize(
    "case",
    ["one_file", "missing_file", "bad_alpha", "non_binary", "too_few_comparisons"],
)
def test_cli_bad_input_exit_2_one_line_no_output(tmp_path, capsys, case):
    a = _greedy_file(tmp_path / "a.jsonl", "a", [1, 0, 1, 1, 0, 1])
    b = _greedy_file(tmp_path / "b.jsonl", "b", [0, 0, 1, 0, 0, 1])
    c = _greedy_file(tmp_path / "c.jsonl", "c", [1, 1, 1, 0, 0, 1])
    out = tmp_path / "out"
    out.mkdir()
    (out / "power.json").write_text("OLD")
    args = {
        "one_file": [str(a)],
        "missing_file": [str(a), str(tmp_path / "nope.jsonl")],
        "bad_alpha": [str(a), str(b), "--alpha", "1.5"],
        "non_binary": None,
        "too_few_comparisons": [str(a), str(b), str(c), "--comparisons", "1"],
    }[case]
    if case == "non_binary":
        bad = tmp_path / "bad.jsonl"
        bad.write_text(b.read_text().replace('"is_correct": false', '"is_correct": 0.5', 1))
        args = [str(a), str(bad)]
    code = main(["power", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len([e for e in err if e.startswith("bayesrc: error:")]) == 1 and "Traceback" not in "\n".join(err)
    assert (out / "power.json").read_text() == "OLD"
    assert sorted(p.name for p in out.iterdir()) == ["power.json"]


def test_cli_power_plan(tmp_path):
    out, cache = tmp_path / "plan", tmp_path / "cache"
    args = [
        "power-plan",
        "--delta-p",
        "0.4",
        "--k",
        "4",
        "20",
        "--n",
        "200",
        "--replicates",
        "1",
        "--cache-dir",
        str(cache),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    doc = json.loads((out / "plan.json").read_text())
    assert doc["recommendation"]["method"] == "rci" and len(doc["grid"]) == 2
    assert "Recommendation: K =" in (out / "plan.md").read_text()
    assert main(["power-plan", "--delta-p", "0", "--cache-dir", str(cache), "--out", str(tmp_path / "bad")]) == 2
    assert not (tmp_path / "bad").exists()
