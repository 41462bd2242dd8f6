"""The upgrade gate: ``bayesrc compare V1 V2`` for CI (docs/guides/ci_gate.md)."""

from bayesrc.compare.gate import (
    EXIT_CODES,
    FAIL_ON,
    CompareResult,
    compare,
    margin_evidence,
    markdown_summary,
    require_resolution,
    resolution,
    what_would_decide,
)
from bayesrc.compare.github import github_outputs, write_github_files

__all__ = [
    "EXIT_CODES",
    "FAIL_ON",
    "CompareResult",
    "compare",
    "github_outputs",
    "margin_evidence",
    "markdown_summary",
    "require_resolution",
    "resolution",
    "what_would_decide",
    "write_github_files",
]
