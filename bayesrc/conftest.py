"""pytest settings for the docstring examples that ``make test`` runs (``--doctest-modules bayesrc``).

- Examples run from the repository root, so a docstring may name a file of this repository
  (``models/gemma-3-270m-q4_k_m.toml``) as a user would from a clone.
- A docstring whose every example is marked ``# doctest: +SKIP`` (it needs a model, a sampler run
  of minutes or files a user has) is deselected rather than reported as skipped, so the suite's
  closing line counts the examples that ran, and ``BAYESRC_NO_SKIP=1`` keeps meaning "nothing skipped".
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem

ROOT = Path(__file__).resolve().parents[1]


def _all_skipped(item: DoctestItem) -> bool:
    examples = item.dtest.examples if item.dtest is not None else []
    return bool(examples) and all(e.options.get(doctest.SKIP) for e in examples)


def pytest_collection_modifyitems(config, items):
    skipped = [it for it in items if isinstance(it, DoctestItem) and _all_skipped(it)]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [it for it in items if it not in set(skipped)]


@pytest.fixture(autouse=True)
def _doctests_run_from_the_repository_root(request, monkeypatch):
    if isinstance(request.node, DoctestItem):
        monkeypatch.chdir(ROOT)
