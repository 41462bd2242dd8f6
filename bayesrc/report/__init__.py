"""Reports a person reads: one self-contained HTML (or Markdown / LaTeX) file per comparison.

``build_report(run_dir, fmt="html")`` reads whatever result files the run directory
holds (:mod:`bayesrc.report.run`), builds the sections whose inputs exist
(:mod:`bayesrc.report.sections`) and renders them (:mod:`bayesrc.report.render`).
Sensitivity analyses live in :mod:`bayesrc.sensitivity` (this package draws their sections).
"""

from bayesrc.report.build import FORMATS, ReportFiles, build_report, render_report, report_sections
from bayesrc.report.run import Comparison, Run, load_run

__all__ = [
    "FORMATS",
    "Comparison",
    "ReportFiles",
    "Run",
    "build_report",
    "load_run",
    "render_report",
    "report_sections",
]
