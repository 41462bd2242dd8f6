"""The upgrade gate: ``bayesrc compare V1 V2`` for CI (docs/guides/ci_gate.md)."""

from bayesrc.compare.gate import EXIT_CODES, FAIL_ON, CompareResult, compare, margin_evidence, markdown_summary

__all__ = ["EXIT_CODES", "FAIL_ON", "CompareResult", "compare", "margin_evidence", "markdown_summary"]
