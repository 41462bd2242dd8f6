"""The upgrade gate: ``bayesrc compare V1 V2`` for CI (docs/guides/ci_gate.md)."""

from bayesrc.compare.gate import FAIL_ON, CompareResult, compare, markdown_summary

__all__ = ["FAIL_ON", "CompareResult", "compare", "markdown_summary"]
