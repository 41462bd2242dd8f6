"""``build_report``: a run directory -> one report file per comparison."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bayesrc.errors import InputError
from bayesrc.io import atomic_write_bytes, atomic_write_text, staged_output
from bayesrc.report.blocks import Section
from bayesrc.report.render import render_html, render_latex, render_markdown
from bayesrc.report.run import Comparison, Run, load_run
from bayesrc.report.sections import RUN_SECTION_BUILDERS, build_sections

FORMATS = ("html", "md", "latex")
SUFFIX = {"html": ".html", "md": ".md", "latex": ".tex"}


def report_sections(run: Run, comparison: Comparison | None) -> list[Section]:
    """Sections of one comparison (or, for a run with no pair, the run-wide ones).

    Examples
    --------
    >>> run = load_run("runs/demo")  # doctest: +SKIP
    >>> [(s.title, s.status) for s in report_sections(run, run.comparisons["minor"])]  # doctest: +SKIP
    """
    if comparison is None:
        return build_sections(run, None, builders=RUN_SECTION_BUILDERS)
    return build_sections(run, comparison)


@dataclass(frozen=True)
class ReportFiles:
    """Rendered reports, not yet written: each comparison's main file (``main``: name -> file
    name) and every file (``files``: relative path -> text, or bytes for a figure).

    Examples
    --------
    >>> files = ReportFiles({"demo": "report_demo.html"}, {"report_demo.html": "<html></html>"})
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     files.write_into(Path(tmp))
    ...     sorted(p.name for p in Path(tmp).iterdir())
    ['report_demo.html']
    """

    main: dict[str, str]
    files: dict[str, str | bytes]

    def write_into(self, stage: Path) -> None:
        """Write every file into ``stage`` (a staging folder the caller commits, as
        :meth:`bayesrc.results.Result.write_into`)."""
        for rel, content in self.files.items():
            (atomic_write_text if isinstance(content, str) else atomic_write_bytes)(stage / rel, content)


def build_report(
    run_dir: str | Path,
    *,
    fmt: str = "html",
    out_dir: str | Path | None = None,
    pairs: list[str] | None = None,
) -> dict[str, Path]:
    """Write ``report_<pair>.html`` (or ``.md`` + figures, or ``.tex``) for each comparison.

    Parameters
    ----------
    run_dir : a run directory (see :mod:`bayesrc.report.run` for the files it reads).
    fmt : ``"html"`` (self-contained, figures embedded), ``"md"`` (figures as PNG
        files in ``figures_<pair>/``) or ``"latex"`` (booktabs tables of the main tables).
    out_dir : where to write (default: ``run_dir``). All files appear together or not at all.
    pairs : only these comparisons (default: all).

    Returns the written report paths keyed by comparison name.

    Examples
    --------
    >>> from bayesrc.report import build_report
    >>> build_report("runs/demo", fmt="html")  # doctest: +SKIP
    {'minor': PosixPath('runs/demo/report_minor.html'), ...}
    """
    rendered = render_report(run_dir, fmt=fmt, pairs=pairs)
    out_dir = Path(out_dir) if out_dir is not None else Path(run_dir)
    with staged_output(out_dir) as stage:
        rendered.write_into(stage)
    return {name: out_dir / fname for name, fname in rendered.main.items()}


def render_report(
    run_dir: str | Path, *, fmt: str = "html", pairs: list[str] | None = None, run_name: str | None = None
) -> ReportFiles:
    """:func:`build_report`'s files, rendered from ``run_dir`` but not written (``run_name``: the
    run directory's name the reports give, default ``run_dir``'s own).

    Examples
    --------
    >>> sorted(render_report("runs/demo").main)  # doctest: +SKIP
    ['demo']
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}", field="--format")
    run = load_run(run_dir)
    names = list(run.comparisons) or ["run"]
    if pairs:
        unknown = [p for p in pairs if p not in run.comparisons]
        if unknown:
            raise InputError(
                f"no comparison {unknown[0]!r} in this run (has {', '.join(run.comparisons) or 'none'})",
                path=run_dir,
                field="--pair",
            )
        names = list(pairs)
    main: dict[str, str] = {}
    files: dict[str, str | bytes] = {}
    for name in names:
        comp = run.comparisons.get(name)
        sections = report_sections(run, comp)
        v1, v2 = comp.versions if comp else ("", "")
        title = f"Reliable-change report: {name}" + (f" ({v1} → {v2})" if comp else "")
        subtitle = (
            f"Run directory: {run_name or Path(run_dir).resolve().name}. "
            f"Sections: {', '.join(s.title for s in sections)}."
        )
        if fmt == "html":
            text, figs = render_html(title, sections, subtitle=subtitle), {}
        elif fmt == "md":
            text, figs = render_markdown(title, sections, figure_dir=f"figures_{name}", subtitle=subtitle)
        else:
            text, figs = render_latex(title, sections), {}
        main[name] = f"report_{name}{SUFFIX[fmt]}" if fmt != "latex" else f"tables_{name}.tex"
        files |= {main[name]: text, **figs}
    return ReportFiles(main, files)
