"""``bayesrc compare`` in a GitHub Actions step: the decision as step outputs, the summary on the job page.

When the runner names its files (``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``), ``bayesrc compare``
appends to them after writing its own outputs, so a workflow can read ``steps.<id>.outputs.decision``
and the job page shows ``summary.md``; the composite action in the repository's ``action.yml`` runs
it this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bayesrc.compare.result import CompareResult, markdown_summary
from bayesrc.compare.rules import decide_sentence


def github_outputs(res: CompareResult) -> dict[str, str]:
    """The step outputs of a gate decision, one line each.

    ``decision`` (pass / fail / inconclusive / undecided), ``exit-code``, ``mean-dp`` with its 90%
    credible interval (``mean-dp-lo90``, ``mean-dp-hi90``; all items of the fit), the items the FDR
    selection flagged (``items-deteriorated``, ``items-improved``), the ``margin`` ("none" without one),
    the detectable mean change (``mde``, 80% power) and, when inconclusive, ``would-decide`` (a
    sentence: how many items or samples per item would decide it; empty otherwise).

    Examples
    --------
    >>> out = github_outputs(bayesrc.load("gate"))  # doctest: +SKIP
    >>> out["decision"], out["exit-code"]  # doctest: +SKIP
    ('inconclusive', '4')
    """
    a, m, r = res.bayes["aggregate"], res.margin, res.resolution
    would = ""
    if res.status == "ok" and m is not None and m["decision"] == "inconclusive" and res.noise is not None:
        would = decide_sentence(m.get("would_decide"), res.noise["k"], res.noise["n_items"])
    return {
        "decision": res.decision,
        "exit-code": str(res.exit_code),
        "mean-dp": f"{a['mean']:.4f}",
        "mean-dp-lo90": f"{a['lo90']:.4f}",
        "mean-dp-hi90": f"{a['hi90']:.4f}",
        "items-deteriorated": str(res.bayes["n_deteriorated"]),
        "items-improved": str(res.bayes["n_improved"]),
        "margin": "none" if m is None else f"{m['margin']:g}",
        "mde": "" if r is None else f"{r['aggregate_mde']:.4f}",
        "would-decide": would,
    }


def write_github_files(res: CompareResult, env: Mapping[str, str]) -> None:
    """Append the step outputs to ``env["GITHUB_OUTPUT"]`` and the Markdown summary to
    ``env["GITHUB_STEP_SUMMARY"]``, where named.

    Examples
    --------
    >>> write_github_files(res, os.environ)  # inside a GitHub Actions step  # doctest: +SKIP
    """
    if env.get("GITHUB_OUTPUT"):
        lines = [f"{k}={v.replace(chr(10), ' ')}" for k, v in github_outputs(res).items()]
        with Path(env["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    if env.get("GITHUB_STEP_SUMMARY"):
        with Path(env["GITHUB_STEP_SUMMARY"]).open("a", encoding="utf-8") as f:
            f.write(markdown_summary(res) + "\n")
