"""The notebooks execute top to bottom and are committed with outputs cleared.

After ``make docs`` (``make test`` runs it first) the executed notebooks are the documentation
build's: Sphinx (myst-nb) ran each copy in ``docs/notebooks`` and failed on any error, and its
cache in ``docs/_build/.jupyter_cache`` holds the executed copy of the notebook as it is now. The
cache is keyed on the notebook alone, so a copy executed before the package's code last changed
does not count. Without a fresh build, or with a stale copy, this test executes the notebook itself
(nbclient): one execution per notebook either way, not one for the docs and another here.
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import nbformat
import pytest
from helpers import DOCS, ROOT, docs_build_is_fresh

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _executed_by_docs_build(path: Path):
    """The docs build's executed copy of the notebook at ``path``; None without a fresh build or
    when it ran before the package's code last changed."""
    if not docs_build_is_fresh():
        return None
    from jupyter_cache import get_cache

    copy = nbformat.read(DOCS / "notebooks" / path.name, as_version=4)  # the copy the build ran (kernel metadata added)
    assert [c.source for c in copy.cells] == [c.source for c in nbformat.read(path, as_version=4).cells], (
        "the docs copy is stale"
    )
    cache = get_cache(str(DOCS / "_build" / ".jupyter_cache"))
    record = cache.match_cache_notebook(copy)  # KeyError: the build did not execute this version
    code_changed = max(p.stat().st_mtime for p in (ROOT / "bayesrc").rglob("*.py"))
    if record.created.replace(tzinfo=UTC).timestamp() < code_changed:  # the cache stores naive UTC
        return None
    return cache.get_cache_bundle(record.pk).nb


def _executed_here(nb, out: Path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("BAYESRC_NOTEBOOK_OUT", str(out))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(out)}}).execute()
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code"), (
        "commit notebooks with outputs cleared"
    )
    executed = _executed_by_docs_build(path)
    ran_here = executed is None
    if ran_here:
        executed = _executed_here(nb, tmp_path, monkeypatch)
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), "every code cell ran"
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    if "build_report" in "".join(c.source for c in nb.cells):
        shown = [str(o.get("data", o.get("text", ""))) for o in outputs]
        assert any("report_" in t and ".html" in t for t in shown), "the notebook writes a report"
        if ran_here:  # its folder is this test's: the report file itself is there
            assert list(tmp_path.rglob("report_*.html")), "the notebook writes a report"


def test_notebooks_present():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_version_comparison.ipynb",
        "03_switch_matrices.ipynb",
        "04_planning.ipynb",
    ]
