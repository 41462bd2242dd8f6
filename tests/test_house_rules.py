"""House rules enforced: no global side effects on import, a light CLI start-up, ruff clean.

Each check runs in a fresh interpreter (subprocess): what matters is what *importing*
does to a caller's process, which an already-warm pytest process cannot show.
"""

from __future__ import annotations

import json
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.strip().splitlines()[-1]


def _all_modules() -> list[str]:
    import bayesrc

    return ["bayesrc"] + sorted(m.name for m in pkgutil.walk_packages(bayesrc.__path__, "bayesrc.") if not m.name.endswith("__main__"))


def test_importing_every_bayesrc_module_leaves_matplotlib_and_jax_alone():
    """A caller with their own backend and JAX settings imports all of bayesrc: nothing changes."""
    mods = _all_modules()
    assert "bayesrc.report.figures" in mods and "bayesrc.bayes.samplers" in mods and "bayesrc.switch.bayes" in mods
    code = f"""
import importlib, json, os, sys
import matplotlib
matplotlib.use("svg")  # the caller's choice
import jax
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "")
before = dict(backend=matplotlib.get_backend(), x64=bool(jax.config.jax_enable_x64),
              cache=jax.config.jax_compilation_cache_dir, xla=os.environ["XLA_FLAGS"], devices=jax.local_device_count())
for m in {mods!r}:
    importlib.import_module(m)
after = dict(backend=matplotlib.get_backend(), x64=bool(jax.config.jax_enable_x64),
             cache=jax.config.jax_compilation_cache_dir, xla=os.environ["XLA_FLAGS"], devices=jax.local_device_count())
print(json.dumps([before, after]))
"""
    before, after = json.loads(_run(code))
    assert before == after
    assert after["backend"] == "svg" and after["x64"] is False


def test_importing_bayesrc_does_not_import_jax_or_choose_a_backend():
    code = """
import importlib, json, sys
for m in ("bayesrc", "bayesrc.bayes", "bayesrc.switch", "bayesrc.report", "bayesrc.results"):
    importlib.import_module(m)
import matplotlib
print(json.dumps({"jax": "jax" in sys.modules, "pyplot": "matplotlib.pyplot" in sys.modules,
                  "backend_set": matplotlib.rcParams._get("backend") is not matplotlib.rcsetup._auto_backend_sentinel}))
"""
    assert json.loads(_run(code)) == {"jax": False, "pyplot": False, "backend_set": False}


def test_a_fit_keeps_the_callers_jax_precision():
    """x64 is scoped to the fit (bayesrc.configure documents it); the caller's float32 stays."""
    code = """
import json
import jax, jax.numpy as jnp
from bayesrc.data import item_counts, simulate_pair
from bayesrc.bayes import SamplerConfig, fit
sim = simulate_pair(60, 6, seed=1)
res = fit(item_counts(sim.trials_v1, sim.trials_v2), model="betabinom", config=SamplerConfig(chains=1, draws=50, tune=50))
print(json.dumps({"x64": bool(jax.config.jax_enable_x64), "dtype": str(jnp.zeros(1).dtype),
                  "posterior_dtype": str(res.posterior["posterior"]["logit_mu"].dtype)}))
"""
    assert json.loads(_run(code)) == {"x64": False, "dtype": "float32", "posterior_dtype": "float64"}


@pytest.mark.parametrize("argv", [["--help"], ["rci", "--help"], ["rci", "--z", "not-a-number"], ["fit", "--model", "nope", "a", "b", "--out", "o"], ["bogus"]])
def test_cli_help_and_argument_errors_import_no_heavy_modules(argv):
    code = f"""
import json, sys
from bayesrc.cli import main
try:
    main({argv!r})
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "heavy": [m for m in ("pandas", "xarray", "jax", "scipy", "pyarrow") if m in sys.modules]}}))
"""
    out = json.loads(_run(code))
    assert out["heavy"] == []
    assert out["code"] == (0 if argv[-1] == "--help" else 2)


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff(args):
    """`ruff check` and `ruff format --check` with the settings in pyproject.toml ([tool.ruff])."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    res = subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
