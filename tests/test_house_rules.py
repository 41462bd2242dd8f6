"""House rules enforced: no global side effects on import, a light CLI start-up, ruff clean.

Each check runs in a fresh interpreter (subprocess): what matters is what *importing*
does to a caller's process, which an already-warm pytest process cannot show.
"""

from __future__ import annotations

import json
import os
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
    """A caller with their own matplotlib backend imports every bayesrc module: the backend,
    ``XLA_FLAGS`` and JAX's config are as before (JAX is not even imported), and no
    pyplot figure manager is created. (A fit keeps the caller's x64 too: test_results.)"""
    mods = _all_modules()
    assert "bayesrc.report.figures" in mods and "bayesrc.bayes.samplers" in mods and "bayesrc.switch.bayes" in mods
    code = f"""
import importlib, json, os, sys
import matplotlib
matplotlib.use("svg")  # the caller's choice
xla = os.environ.get("XLA_FLAGS")
for m in {mods!r}:
    importlib.import_module(m)
state = dict(backend=matplotlib.get_backend(), xla=os.environ.get("XLA_FLAGS") == xla, jax_imported="jax" in sys.modules,
             pyplot="matplotlib.pyplot" in sys.modules)
import jax  # imported by the caller after bayesrc: JAX's defaults are intact
state.update(x64=bool(jax.config.jax_enable_x64), cache=jax.config.jax_compilation_cache_dir)
print(json.dumps(state))
"""
    state = json.loads(_run(code))
    assert state == {"backend": "svg", "xla": True, "jax_imported": False, "pyplot": False, "x64": False, "cache": None}


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


def test_import_layers():
    """`lint-imports`: no module imports a layer above its own ([tool.importlinter] in pyproject.toml),
    inside functions included."""
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    res = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


# public objects whose modules other work streams own right now (the change model, truth scoring,
# the collection engines): their Examples sections are still to write. Nothing may join this list.
EXAMPLES_PENDING = {
    "bayesrc.collect": {"ExactEngine", "FastEngine", "ItemDistribution", "Model", "NaiveEngine", "Prompt", "Sample", "Sampling", "make_engine", "physical_cores"},
}


def test_public_api_has_numpydoc_examples():
    """Every function and class in bayesrc's and its subpackages' ``__all__`` carries an Examples section."""
    import importlib
    import inspect

    import bayesrc

    missing = {}
    for name in ["bayesrc"] + [f"bayesrc.{m.name}" for m in pkgutil.iter_modules(bayesrc.__path__) if m.ispkg]:
        mod = importlib.import_module(name)
        for attr in getattr(mod, "__all__", []):
            obj = getattr(mod, attr)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and "\nExamples\n--------\n" not in (inspect.getdoc(obj) or ""):
                missing.setdefault(name, set()).add(attr)
    extra = {m: sorted(v - EXAMPLES_PENDING.get(m, set())) for m, v in missing.items() if v - EXAMPLES_PENDING.get(m, set())}
    assert not extra, f"public objects without a numpydoc Examples section: {extra}"
