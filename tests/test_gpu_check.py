"""``benchmarks/gpu_check.sh run`` where there is no GPU (its dry run, ``BUILDS=cpu``): the GGUF reassembled from
its parts and checked against its SHA-256, the CPU build's fast and exact collection measured with the real Gemma
GGUF, one result file; a part that does not match stops the run before anything is measured or written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> Path:
    """The Q4_K_M GGUF cut into parts of 60 MiB with its SHA256SUMS, as ``gpu_check.sh pack`` lays them out."""
    from bayesrc.collect import load_card, resolve_model

    gguf = resolve_model(load_card(ROOT / "models" / "gemma-3-270m-q4_k_m.toml"))
    out = tmp_path_factory.mktemp("parts")
    subprocess.run(["split", "-b", "60m", "-d", "-a", "2", str(gguf), str(out / f"{gguf.name}.part-")], check=True)
    (out / "SHA256SUMS").write_text(f"{hashlib.sha256(gguf.read_bytes()).hexdigest()}  {gguf.name}\n")
    return out


def run_check(parts: Path, result: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, PYTHON=sys.executable, BUILDS="cpu", CPU_WHEEL="installed", CPU_ITEMS="6", EXACT_ITEMS="3", K="2"
    )
    return subprocess.run(
        ["bash", str(SCRIPT), "run", str(parts), str(result)], env=env, capture_output=True, text=True, timeout=600
    )


def test_dry_run_measures_the_cpu_build_from_the_reassembled_parts(parts, tmp_path):
    assert len(list(parts.glob("*.part-*"))) == 5  # 253 MB in parts of at most 60 MiB
    done = run_check(parts, tmp_path / "gpu_check.json")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert result["gpu_arch"] is None and result["build_s"] == {"cpu": 0} and "cuda_over_cpu_trials_per_s" not in result
    (row,) = result["rows"]
    assert (row["build"], row["gpu_offload"], row["items"], row["k"], row["exact_items"]) == ("cpu", False, 6, 2, 3)
    assert row["trials_per_s"] > 0 and row["s_per_trial"] == pytest.approx(row["fast_s"] / 12)
    assert result["cpu_vs_seed_study"] == pytest.approx(0.2 / row["s_per_trial"], rel=1e-2)
    p = row["exact_p_correct"]
    assert list(p) == ["demo-0000-r0", "demo-0001-r0", "demo-0002-r0"] and all(0.0 <= v <= 1.0 for v in p.values())


def test_a_corrupt_part_stops_the_run_before_it_measures(parts, tmp_path):
    bad = tmp_path / "parts"
    shutil.copytree(parts, bad)
    part = bad / "gemma-3-270m-q4_k_m.gguf.part-01"
    data = bytearray(part.read_bytes())
    data[1000] ^= 0xFF
    part.write_bytes(bytes(data))
    done = run_check(bad, tmp_path / "gpu_check.json")
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr
    assert not (tmp_path / "gpu_check.json").exists()
