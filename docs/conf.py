"""Sphinx configuration of the bayesrc documentation (``make docs`` builds it into docs/_build/html).

The four notebooks in ``notebooks/`` are copied into ``docs/notebooks/`` (git-ignored) and executed
by myst-nb at build time; outputs are cached in ``docs/_build/.jupyter_cache`` so a rebuild only
re-executes a notebook whose code changed. The API pages in ``docs/api/generated/`` (git-ignored) are
written from each public package's ``__all__``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

import bayesrc  # noqa: E402

project = "bayesrc"
author = "bayesrc developers"
copyright = "2026, bayesrc developers"
release = version = bayesrc.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]

exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints", "README.md"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# --- MyST / myst-nb -------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("BAYESRC_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = int(os.environ.get("BAYESRC_DOCS_NB_TIMEOUT", "1800"))
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_excludepatterns: list[str] = [p for p in os.environ.get("BAYESRC_DOCS_NB_EXCLUDE", "").split(",") if p]
nb_merge_streams = True

# --- autodoc / numpydoc ---------------------------------------------------------------------
autosummary_generate = False
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# --- HTML -------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"bayesrc {release}"
html_static_path = ["_static"]
html_css_files = ["bayesrc.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": [], "getting_started": []}
html_show_sourcelink = False

# The public packages documented in the API reference, in reading order.
API_MODULES = [
    ("bayesrc", "Top level: load, configure, errors"),
    ("bayesrc.data", "Trials, item counts, exact runs, simulation, run pins"),
    ("bayesrc.classical", "Classical reliable change (RCI)"),
    ("bayesrc.bayes", "Bayesian item models"),
    ("bayesrc.compare", "The CI gate"),
    ("bayesrc.testing", "The gate in a test suite"),
    ("bayesrc.results", "Typed results"),
    ("bayesrc.fields", "Result fields and their kinds"),
    ("bayesrc.power", "Resolution diagnostics and planning"),
    ("bayesrc.switch", "Switch matrices"),
    ("bayesrc.sensitivity", "Sensitivity analyses"),
    ("bayesrc.truth", "Real-model truth scoring"),
    ("bayesrc.importers", "lm-eval and Inspect importers"),
    ("bayesrc.collect", "Collection"),
    ("bayesrc.scale", "Scale-out on Ray"),
    ("bayesrc.report", "Reports"),
]


def _public_names(mod) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(mod).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == mod.__name__ and callable(v)
        ]
    return [n for n in names if not n.startswith("__")]


def write_api_pages() -> None:
    """One page per public package: an autosummary table of its ``__all__`` and every object's docstring.

    An object re-exported by a later package (the same object) is documented once, where it first appears.
    """
    out = DOCS / "api" / "generated"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    seen: dict[int, str] = {}
    for i, (name, title) in enumerate(API_MODULES):
        mod = importlib.import_module(name)
        names = _public_names(mod)
        own = []
        for n in names:
            obj = getattr(mod, n)
            if callable(obj) and not isinstance(obj, type(os)):
                if id(obj) in seen:
                    continue
                seen[id(obj)] = f"{name}.{n}"
            own.append(n)
        callables = [n for n in own if callable(getattr(mod, n))]
        heading = f"``{name}``: {title}"
        lines = [heading, "=" * len(heading), "", f".. currentmodule:: {name}", "", ".. autosummary::", ""]
        lines += [
            f"   {seen.get(id(getattr(mod, n)), n) if n not in own else n}" for n in names if callable(getattr(mod, n))
        ]
        lines += ["", f".. automodule:: {name}", "   :no-members:", ""]
        for n in callables:
            kind = "autoclass" if isinstance(getattr(mod, n), type) else "autofunction"
            lines += [f".. {kind}:: {n}", ""]
        (out / f"{i:02d}_{name}.rst").write_text("\n".join(lines) + "\n")


def copy_notebooks() -> None:
    """The repository's notebooks, copied (when changed) next to the pages that render them.

    The repository keeps them without outputs or kernel metadata; the copy names the Python kernel
    (myst-nb's syntax highlighting reads it from there even when execution is off).
    """
    dst = DOCS / "notebooks"
    dst.mkdir(exist_ok=True)
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        data = json.loads(nb.read_text())
        meta = data.setdefault("metadata", {})
        meta.setdefault("kernelspec", {"display_name": "Python 3", "language": "python", "name": "python3"})
        meta.setdefault("language_info", {"name": "python", "pygments_lexer": "ipython3"})
        text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        target = dst / nb.name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)


write_api_pages()
copy_notebooks()
