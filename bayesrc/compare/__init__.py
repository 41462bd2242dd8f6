"""The upgrade gate: ``bayesrc compare V1 V2`` for CI (README "CI gate after an upgrade")."""

from bayesrc.compare.gate import FAIL_ON, CompareResult, compare, markdown_summary

__all__ = ["FAIL_ON", "CompareResult", "compare", "markdown_summary"]
