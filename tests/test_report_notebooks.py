"""The notebooks execute top to bottom (nbclient) and are committed with outputs cleared."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code"), "commit notebooks with outputs cleared"
    monkeypatch.setenv("BAYESRC_NOTEBOOK_OUT", str(tmp_path))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    if "build_report" in "".join(c.source for c in nb.cells):
        assert list(tmp_path.rglob("report_*.html")), "the notebook writes a report"


def test_notebooks_present():
    assert [p.name for p in NOTEBOOKS] == ["01_quickstart.ipynb", "02_version_comparison.ipynb", "03_switch_matrices.ipynb", "04_planning.ipynb"]
