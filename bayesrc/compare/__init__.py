"""The upgrade gate: ``bayesrc compare V1 V2`` for CI (docs/guides/ci_gate.md)."""

from bayesrc.compare.gate import compare
from bayesrc.compare.github import github_outputs, write_github_files
from bayesrc.compare.result import EXIT_CODES, CompareResult, markdown_summary
from bayesrc.compare.rules import FAIL_ON, margin_evidence, require_resolution, resolution, what_would_decide

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
