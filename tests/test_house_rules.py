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

    return ["bayesrc"] + sorted(
        m.name for m in pkgutil.walk_packages(bayesrc.__path__, "bayesrc.") if not m.name.endswith("__main__")
    )


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
state = dict(backend=matplotlib.get_backend(), xla=os.environ.get("XLA_FLAGS") == xla,
             jax_imported="jax" in sys.modules, pyplot="matplotlib.pyplot" in sys.modules)
import jax  # imported by the caller after bayesrc: JAX's defaults are intact
state.update(x64=bool(jax.config.jax_enable_x64), cache=jax.config.jax_compilation_cache_dir)
print(json.dumps(state))
"""
    state = json.loads(_run(code))
    assert state == {"backend": "svg", "xla": True, "jax_imported": False, "pyplot": False, "x64": False, "cache": None}


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["rci", "--help"],
        ["rci", "--z", "not-a-number"],
        ["fit", "--model", "nope", "a", "b", "--out", "o"],
        ["bogus"],
    ],
)
def test_cli_help_and_argument_errors_import_no_heavy_modules(argv):
    code = f"""
import json, sys
from bayesrc.cli import main
try:
    main({argv!r})
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code,
                  "heavy": [m for m in ("pandas", "xarray", "jax", "scipy", "pyarrow") if m in sys.modules]}}))
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
    res = subprocess.run(
        [lint], cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


# public objects whose modules other work streams own right now (the change model, truth scoring,
# the collection engines): their Examples sections are still to write. Nothing may join this list.
EXAMPLES_PENDING = {
    "bayesrc.collect": {
        "ExactEngine",
        "FastEngine",
        "ItemDistribution",
        "Model",
        "NaiveEngine",
        "Prompt",
        "Sample",
        "Sampling",
        "make_engine",
        "physical_cores",
    },
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
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and "\nExamples\n--------\n" not in (
                inspect.getdoc(obj) or ""
            ):
                missing.setdefault(name, set()).add(attr)
    extra = {
        m: sorted(v - EXAMPLES_PENDING.get(m, set())) for m, v in missing.items() if v - EXAMPLES_PENDING.get(m, set())
    }
    assert not extra, f"public objects without a numpydoc Examples section: {extra}"


# The only imports allowed inside functions: dependencies that are optional (an extra of
# pyproject.toml, or not declared) or whose import takes seconds, so that `import bayesrc` and
# `bayesrc --help` stay light and a missing extra fails only the feature that needs it. Every
# other import sits at the top of its module, where lint-imports and a reader see the layers.
DEFERRED_IMPORTS = {
    "jax": "bayes extra; ~1.5 s, and must not start before bayesrc.configure() sets XLA_FLAGS",
    "jaxlib": "bayes extra (JAX's runtime)",
    "numpyro": "bayes extra; ~2.5 s (loads JAX)",
    "pymc": "bayes extra; ~2 s",
    "pytensor": "bayes extra (PyMC's tensors)",
    "nutpie": "bayes extra (PyMC's sampler)",
    "arviz_base": "bayes extra; ~1 s",
    "arviz_stats": "bayes extra; ~3 s",
    "arviz_plots": "bayes extra; ~4 s (loads matplotlib)",
    "llama_cpp": "collect extra; loads the llama.cpp shared library",
    "jinja2": "report extra (also llama.cpp's chat templates)",
    "ray": "scale extra; ~1 s",
    "matplotlib": "~0.5 s, and only figures need it (never pyplot at import: the caller's backend stays)",
    "psutil": "not a dependency: physical cores when present, os.cpu_count() otherwise",
    "zstandard": "only Zstandard-compressed Inspect logs need it; its absence is a clear InputError",
    "nbclient": "report extra (notebook execution)",
    "nbformat": "report extra",
    "IPython": "only inside a notebook",
    "ipywidgets": "only inside a notebook",
    "tqdm": "tqdm.notebook and tqdm.auto, only where a notebook may run (they load IPython and ipywidgets)",
}

# (module, import) pairs kept inside a function for start-up: these modules load with
# `import bayesrc` and `bayesrc --help`, which must not wait for numpy (~0.2 s)
STARTUP_DEFERRED = {
    ("bayesrc/errors.py", "numpy"): "float_parameter: numpy only when a parameter is checked",
    (
        "bayesrc/config.py",
        "ctypes",
    ): "release_memory's malloc_trim, after a fit: ctypes.util loads subprocess and tempfile (~30 ms)",
}

_PRAGMAS = ("noqa", "fmt:", "type:", "pragma")


def _function_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module name) of each import nested in a function of ``path``."""
    import ast

    found = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                names = (
                    [a.name for a in child.names]
                    if isinstance(child, ast.Import)
                    else ["." * child.level + (child.module or "")]
                )
                found.extend((child.lineno, name.split(".")[0] or name) for name in names)
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(path.read_text()), False)
    return found


def _comment_lines(path: Path) -> set[int]:
    """Lines carrying a comment that is not a tool pragma (``# noqa``, ``# fmt: skip``, ...)."""
    import io
    import tokenize

    toks = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return {t.start[0] for t in toks if t.type == tokenize.COMMENT and not t.string.lstrip("# ").startswith(_PRAGMAS)}


def test_function_level_imports_are_heavy_optional_dependencies_and_say_so():
    """Inside a function, only the imports of :data:`DEFERRED_IMPORTS` (and :data:`STARTUP_DEFERRED`), each
    saying why: a comment on its line, or on the line above the run of consecutive import lines it belongs to."""
    bad, silent = [], []
    for path in sorted((ROOT / "bayesrc").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        imports = _function_level_imports(path)
        if not imports:
            continue
        lines, comments = path.read_text().splitlines(), _comment_lines(path)
        is_import = lambda n: lines[n - 1].lstrip().startswith(("import ", "from "))
        for line, name in imports:
            if name not in DEFERRED_IMPORTS and (rel, name) not in STARTUP_DEFERRED:
                bad.append(f"{rel}:{line}: {name}")
                continue
            first = line
            while first > 1 and is_import(first - 1):
                first -= 1
            last = line
            while last < len(lines) and is_import(last + 1):
                last += 1
            if not comments & set(range(first - 1, last + 1)):
                silent.append(f"{rel}:{line}: {name}")
    assert not bad, (
        "imports inside functions (move them to the top of the module, or add a heavy optional dependency to "
        "DEFERRED_IMPORTS):\n" + "\n".join(bad)
    )
    assert not silent, "deferred imports without a comment saying why:\n" + "\n".join(silent)


def test_every_subcommand_names_a_function_that_exists():
    """A commands.py names its commands' functions as ``"bayesrc.PKG.handlers:NAME"`` strings (its
    imports stay light); each string resolves to a function of a handlers module."""
    import argparse

    from bayesrc.cli import _handler, build_parser

    def funcs(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from ((f"{name} {n}".strip(), f) for n, f in funcs(sub))
        if parser.get_default("func") is not None:
            yield "", parser.get_default("func")

    named = dict(funcs(build_parser()))
    assert {"fit", "collect", "bank demo", "import lm-eval", "demo", "fit-many"} <= set(named)
    for command, func in named.items():
        assert isinstance(func, str) and func.split(":")[0].endswith(".handlers"), (command, func)
        assert callable(_handler(func)), command
