"""Faults of a collection on the real Gemma GGUF: SIGKILL crash points then resume (trial for
trial), two collectors or a collector and a ``merge`` on one run, read-only and full outputs.

The crash points are real SIGKILLs of forked collectors (tests/collect_crashpoints.py, run
as a subprocess: it forks, so it must not run inside pytest's threads); benchmarks/faults.py
runs the same harness at benchmark sizes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _harness(*args: str) -> dict:
    cmd = [sys.executable, "-W", "ignore", str(HERE / "collect_crashpoints.py"), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.parametrize(("engine", "seed"), [("fast", 33), ("exact", 34)])
def test_collection_killed_at_seeded_crash_points_resumes_to_the_uninterrupted_trials(gemma, engine, seed):
    """Three seeded points (filesystem events and calls of the collector) of a 2-item run: each
    a real SIGKILL, then a resume; every part on disk is whole and the resumed run equals the
    uninterrupted one row for row (the harness checks that it sees one changed row)."""
    s = _harness("--engine", engine, "--items", "2", "--k", "2", "--calls", "40", "--sample", "3", "--seed", str(seed))
    assert s["tried"] == s["killed"] == 3, s["outcomes"]
    assert (s["torn"], s["lost"], s["duplicated"], s["resume_failed"]) == (0, 0, 0, 0), s["outcomes"]
    assert s["events"]["fs"] >= 20 and s["events"]["call"] >= 100
