"""Report sections: one small builder per section, each returning ``None`` when its
inputs are absent from the run directory, so a report shows exactly what was run.

A section is a title plus blocks (:mod:`bayesrc.report.blocks`); the builders live by concern in
:mod:`bayesrc.report.classical_sections`, :mod:`bayesrc.report.bayes_sections` and
:mod:`bayesrc.report.study_sections`, and the renderers in :mod:`bayesrc.report.render` turn the
same sections into HTML, Markdown or LaTeX. To add a section, write a builder ``(run, comparison) ->
Section | None`` and list it in :data:`SECTION_BUILDERS` (a pair's section) or :data:`RUN_SECTION_BUILDERS`
(a section of the run's own results) in this module.
"""

from __future__ import annotations

from collections.abc import Callable

from bayesrc.errors import InputError
from bayesrc.report.bayes_sections import (
    section_bayes_items,
    section_checks,
    section_crosscheck,
    section_diagnostics,
    section_domain_shift,
    section_joint,
    section_model_comparison,
)
from bayesrc.report.blocks import Section
from bayesrc.report.classical_sections import (
    section_aggregate,
    section_pairwise_rci,
    section_pins,
    section_rci,
    section_reference_figures,
)
from bayesrc.report.run import Comparison, Run
from bayesrc.report.study_sections import (
    section_family_truth,
    section_power,
    section_sensitivity,
    section_switch,
    section_truth,
)

PairBuilder = Callable[[Run, Comparison], "Section | None"]

#: the sections of the run's own results, not a pair's: a comparison's report ends with them, and they are
#: all a run with no pair shows
RUN_SECTION_BUILDERS: list[PairBuilder] = [
    section_model_comparison,
    section_joint,
    section_pairwise_rci,
    section_sensitivity,
    section_power,
    section_switch,
    section_truth,
    section_family_truth,
]

SECTION_BUILDERS: list[PairBuilder] = [
    section_pins,
    section_aggregate,
    section_rci,
    section_reference_figures,
    section_bayes_items,
    section_domain_shift,
    section_crosscheck,
    section_diagnostics,
    section_checks,
    *RUN_SECTION_BUILDERS,
]


def build_sections(run: Run, c: Comparison | None, *, builders: list[PairBuilder] | None = None) -> list[Section]:
    """The sections whose inputs the run holds, in order. A result file that lacks a field a
    section needs (written by another bayesrc version, or edited) is one clear error, not a traceback."""
    out = []
    for b in builders or SECTION_BUILDERS:
        try:
            s = b(run, c)
        except KeyError as exc:
            raise InputError(
                f"{b.__name__}: the result lacks field {exc} (rerun the analysis with this bayesrc)",
                path=section_file(run, c, b.__name__),
                field=str(exc.args[0]),
            ) from None
        except InputError as exc:
            if exc.path is not None:
                raise
            # a result's accessor refused a field's value (a null count, say): name the file it came from
            raise InputError(exc.message, path=section_file(run, c, b.__name__), field=exc.field) from None
        if s is not None:
            out.append(s)
    return out


BAYES_SECTIONS = {
    "section_bayes_items",
    "section_domain_shift",
    "section_crosscheck",
    "section_diagnostics",
    "section_checks",
}

#: the result file each run-wide or classical section reads (an error in it names that file)
SECTION_FILES = {
    "section_aggregate": "rci.json",
    "section_rci": "rci.json",
    "section_reference_figures": "rci.json",
    "section_power": "power.json",
    "section_switch": "switch.json",
    "section_sensitivity": "sensitivity.json",
    "section_truth": "truth.json",
    "section_family_truth": "family_truth.json",
    "section_model_comparison": "loo_compare.json",
    "section_joint": "joint.json",
    "section_pairwise_rci": "pairwise_rci.json",
}


def section_file(run: Run, c: Comparison | None, builder: str):
    """The file a section builder read: the pair's fit for the Bayesian sections, else its result file (the run's
    first file when unknown).

    Examples
    --------
    >>> section_file(load_run("runs/demo"), None, "section_power")  # doctest: +SKIP
    PosixPath('runs/demo/power.json')
    """
    if c is not None and builder in BAYES_SECTIONS and "fit" in c.files:
        return c.files["fit"]
    if named := run.files.get(SECTION_FILES.get(builder, "")):
        return named
    if c is not None and "fit" in c.files and not run.files:  # a fit's folder on its own: its fit.json is all it read
        return c.files["fit"]
    return next(iter(run.files.values()), run.path)
