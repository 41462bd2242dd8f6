"""The gate where users run it: the composite GitHub Action (``action.yml``) and ``bayesrc.testing``.

The action's steps are read from ``action.yml`` and run in bash as the runner would run them: inputs
substituted, ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY`` and ``GITHUB_ENV`` as files, the install step
left out (bayesrc is installed here). One real ``bayesrc compare`` with the defaults on a 40-item
no-change pair (too small to resolve the default margin: inconclusive, exit 4), then the verdict
step under each exit status; ``assert_no_regression`` fits the same pair once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import bayesrc.testing
from bayesrc.compare import CompareResult
from bayesrc.compare.rules import margin_evidence
from bayesrc.data import save_trials, simulate_pair
from bayesrc.testing import GateFailure, assert_no_regression, check_gate

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())


@pytest.fixture(scope="module")
def small_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("action")
    sim = simulate_pair(40, 10, models=("base", "cand"), seed=5, pi_change=0.0)
    a, b = root / "base.parquet", root / "cand.parquet"
    save_trials(sim.trials_v1, a)
    save_trials(sim.trials_v2, b)
    return sim, a, b


def step(name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s["name"] == name)


def run_step(name: str, inputs: dict, files: dict, env_extra: dict | None = None) -> int:
    """Run one of the action's bash steps as the runner does: ``${{ inputs.X }}`` substituted in its env, the runner's
    files named."""
    s = step(name)
    given = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()} | inputs
    sub = lambda text: re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: given[m.group(1)], str(text))  # noqa: E731
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **{k: sub(v) for k, v in s.get("env", {}).items()},
    }
    env |= {
        "GITHUB_OUTPUT": str(files["output"]),
        "GITHUB_STEP_SUMMARY": str(files["summary"]),
        "GITHUB_ENV": str(files["env"]),
        **(env_extra or {}),
    }
    return subprocess.run(["bash", "-e", "-c", s["run"]], env=env, cwd=files["cwd"], timeout=900).returncode


def runner_files(tmp_path: Path) -> dict:
    files = {"output": tmp_path / "output", "summary": tmp_path / "summary", "env": tmp_path / "env", "cwd": tmp_path}
    for key in ("output", "summary", "env"):
        files[key].write_text("")
    return files


def read_pairs(path: Path) -> dict:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def test_the_action_declares_its_inputs_outputs_and_install():
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["outputs"]) >= {
        "decision",
        "exit-code",
        "mean-dp",
        "mean-dp-lo90",
        "mean-dp-hi90",
        "items-deteriorated",
        "would-decide",
        "mde",
    }
    assert all(f"steps.gate.outputs.{k}" in v["value"] for k, v in ACTION["outputs"].items())
    assert (
        step("install bayesrc")["if"] == "inputs.install == 'true'"
        and "GITHUB_ACTION_PATH" in step("install bayesrc")["run"]
    )
    assert (
        ACTION["inputs"]["rope"]["default"] == "0.02" and ACTION["inputs"]["fail-on-inconclusive"]["default"] == "false"
    )


@pytest.mark.slow
def test_action_steps_gate_a_small_pair(small_pair, tmp_path):
    _, a, b = small_pair
    files = runner_files(tmp_path)
    inputs = {"baseline": str(a), "candidate": str(b), "install": "false", "args": "--seed 1 --no-progress"}
    assert run_step("bayesrc compare", inputs, files) == 0  # the gate step records; the verdict step decides
    out, env = read_pairs(files["output"]), read_pairs(files["env"])
    assert out["decision"] == "inconclusive" and out["exit-code"] == "4" and env["BAYESRC_EXIT"] == "4"
    assert out["margin"] == "0.02" and float(out["mde"]) > 0.02  # 40 items cannot resolve two accuracy points
    assert (
        float(out["mean-dp-lo90"]) < float(out["mean-dp"]) < float(out["mean-dp-hi90"])
        and out["items-deteriorated"] == "0"
    )
    assert "would decide the mean" in out["would-decide"] and "items at K = 10" in out["would-decide"]
    summary = files["summary"].read_text()
    assert (
        summary.startswith("### bayesrc compare") and "**inconclusive** (exit 4" in summary and "Resolution:" in summary
    )
    assert (tmp_path / "bayesrc-gate" / "compare.json").is_file()  # the default out folder
    assert run_step("verdict", {}, files, {"BAYESRC_EXIT": "4"}) == 0
    assert run_step("verdict", {"fail-on-inconclusive": "true"}, files, {"BAYESRC_EXIT": "4"}) == 4


@pytest.mark.parametrize(("code", "expected"), [("0", 0), ("1", 1), ("2", 2), ("3", 3)])
def test_action_verdict_fails_the_step_on_fail_bad_input_and_failed_fit(tmp_path, code, expected):
    assert run_step("verdict", {}, runner_files(tmp_path), {"BAYESRC_EXIT": code}) == expected


def test_action_bad_input_sets_exit_code_2(small_pair, tmp_path):
    _, a, _ = small_pair
    files = runner_files(tmp_path)
    assert (
        run_step(
            "bayesrc compare",
            {"baseline": str(a), "candidate": str(tmp_path / "missing.parquet"), "install": "false"},
            files,
        )
        == 0
    )
    assert read_pairs(files["output"]) == {"exit-code": "2"} and read_pairs(files["env"])["BAYESRC_EXIT"] == "2"
    assert files["summary"].read_text() == "" and not (tmp_path / "bayesrc-gate").exists()
    assert run_step("verdict", {}, files, {"BAYESRC_EXIT": "2"}) == 2


@pytest.mark.slow
def test_assert_no_regression_fails_a_test_it_cannot_decide(small_pair):
    sim, _, _ = small_pair
    from bayesrc.config import SamplerConfig

    with pytest.raises(GateFailure, match=r"^bayesrc gate: inconclusive \(exit 4\)") as e:
        assert_no_regression(sim.trials_v1, sim.trials_v2, config=SamplerConfig(seed=1, progress=False))
    res = e.value.result
    assert (
        isinstance(e.value, AssertionError)
        and res.decision == "inconclusive"
        and "would decide the mean" in str(e.value)
    )
    assert check_gate(res, allow_inconclusive=True) is res


def test_assert_no_regression_refuses_runs_whose_pins_differ(small_pair, tmp_path, monkeypatch):
    """As ``bayesrc compare``: two collected runs that differ in a pin other than the model's (here the sampling
    temperature) are refused in one line before any fit, unless that pin is allowed to differ."""
    import json
    import shutil

    from bayesrc.errors import InputError

    _, a, b = small_pair
    pins = {
        "model.label": "m",
        "items.bank_sha256": "b",
        "sampling.k": 10,
        "sampling.temperature": 0.7,
        "prompt.template_sha256": "t",
    }
    runs = []
    for trials, name, temperature in ((a, "base", 0.7), (b, "cand", 1.0)):
        (tmp_path / name).mkdir()
        shutil.copy(trials, tmp_path / name / "trials.parquet")
        record = {
            "format": "bayesrc-run/1",
            "status": "complete",
            "pins": pins | {"sampling.temperature": temperature},
            "info": {},
        }
        (tmp_path / name / "run.json").write_text(json.dumps(record))
        runs.append(tmp_path / name)
    with pytest.raises(InputError, match="pins differ in sampling.temperature"):
        assert_no_regression(*runs)

    class Compared(Exception):
        pass

    def compared(*args, **kwargs):
        raise Compared  # past the pin check (the fit itself is tested above)

    monkeypatch.setattr(bayesrc.testing, "compare", compared)
    with pytest.raises(Compared):
        assert_no_regression(*runs, allow_pin=["sampling.temperature"])


def gate_result(mean: float) -> CompareResult:
    """A gate decided on known posterior draws of 100 items' dp (no fit)."""
    dp = np.random.default_rng(0).normal(mean, 0.05, size=(4000, 100))
    ev = margin_evidence(
        dp, np.array(["no_change"] * 100), np.arange(100).astype(str), fail_on="deteriorated", margin=0.02, q=0.1
    )
    items = pd.DataFrame(
        {"item_id": ["a"], "domain": ["law"], "bayes_class": ["no_change"], "p_improve": [0.1], "p_deteriorate": [0.1]}
    )
    bayes = {
        "n_improved": 0,
        "n_deteriorated": 0,
        "expected_false": 0.0,
        "aggregate": {"mean": mean, "lo90": mean - 0.01, "hi90": mean + 0.01, "p_below_0": 0.5},
        "diagnostics": {},
    }
    classical = {
        "improved": 0,
        "deteriorated": 0,
        "n_analysable": 1,
        "n_items": 100,
        "z": 1.96,
        "min_valid_rule": "6",
        "aggregate": {"mean_delta": mean, "ci95": [mean - 0.02, mean + 0.02]},
    }
    return CompareResult.from_decision(
        ("v1", "v2"), "deteriorated", 0.1, False, "ok", bayes, classical, items, margin=ev
    )


@pytest.mark.parametrize(
    ("mean", "allow", "passes"), [(0.0, False, True), (-0.05, True, False), (-0.02, False, False), (-0.02, True, True)]
)
def test_check_gate_passes_only_what_the_gate_passes(mean, allow, passes):
    res = gate_result(mean)
    assert res.decision == {0.0: "pass", -0.05: "fail", -0.02: "inconclusive"}[mean]
    if passes:
        assert check_gate(res, allow_inconclusive=allow) is res
    else:
        with pytest.raises(GateFailure, match=f"bayesrc gate: {res.decision}"):
            check_gate(res, allow_inconclusive=allow)
