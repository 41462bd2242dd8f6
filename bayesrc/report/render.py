"""Render sections as one self-contained HTML file, Markdown, or LaTeX (booktabs) tables.

HTML embeds every figure as a base64 PNG ``data:`` URI and has no external URL,
so the file opens anywhere (also offline, also in headless Chromium). A small
inline script sets ``<body data-report-status="...">`` once the page has loaded:
``ok`` if every image decoded with a non-zero size, else ``broken:N`` — a check
that ``chromium --dump-dom`` reveals.

Each section's heading links to the documentation page that explains it: ``DOCS_URL`` (the
environment variable ``BAYESRC_DOCS_URL`` if set, else the ``docs/_build/html`` folder that
``make docs`` writes in this checkout, as a ``file:`` URI) joined with ``SECTION_DOCS[key]``.
"""

from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrc import __version__
from bayesrc.markdown import markdown_table
from bayesrc.report.blocks import Figure, Section, Table, Text


def default_docs_url() -> str:
    """Base address of the documentation: ``$BAYESRC_DOCS_URL``, else this checkout's ``docs/_build/html``.

    Examples
    --------
    >>> default_docs_url().endswith("docs/_build/html") or "BAYESRC_DOCS_URL" in os.environ
    True
    """
    env = os.environ.get("BAYESRC_DOCS_URL", "").strip()
    return env.rstrip("/") if env else (Path(__file__).resolve().parents[2] / "docs" / "_build" / "html").as_uri()


DOCS_URL = default_docs_url()

# The docs page (and anchor) that explains each report section, relative to DOCS_URL.
SECTION_DOCS = {
    "pins": "guides/collect.html#pins",
    "aggregate": "methods/classical.html#what-uses-which-items",
    "rci": "methods/classical.html#is-the-classification-calibrated-spec-2-1",
    "pairwise_rci": "methods/classical.html#a-family-of-versions-every-pair-and-the-multiplicity",
    "figures": "methods/classical.html#what-uses-which-items",
    "bayes_items": "methods/bayesian.html#the-models",
    "domain_shift": "methods/bayesian.html#the-models",
    "diagnostics": "methods/bayesian.html#the-convergence-gate",
    "checks": "methods/bayesian.html#does-the-model-fit-the-data-predictive-checks-and-loo",
    "crosscheck": "methods/bayesian.html#outputs-selection-and-the-cross-check",
    "power": "guides/planning.html#resolution-diagnostics-of-existing-scores",
    "switch": "guides/switch.html#shared-baselines-and-the-noise-floor-spec-4",
    "sensitivity": "guides/reports.html#sensitivity-analyses",
    "truth": "guides/exact_truth.html#scoring-methods-against-real-model-truth",
    "family_truth": "guides/exact_truth.html#a-family-of-versions-against-exact-truth",
}


def docs_link(key: str, base: str | None = None) -> str | None:
    """The documentation address for report section ``key`` (None for a section without a page).

    Examples
    --------
    >>> docs_link("diagnostics", base="https://example.org/bayesrc")
    'https://example.org/bayesrc/methods/bayesian.html#the-convergence-gate'
    >>> docs_link("no-such-section") is None
    True
    """
    page = SECTION_DOCS.get(key)
    return None if page is None else f"{(DOCS_URL if base is None else base).rstrip('/')}/{page}"


CSS = """
body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;\
color:#222;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #4c72b0;padding-bottom:.2em}
h2{font-size:1.25em;margin-top:1.8em;color:#274a7a}
nav ul{columns:2;font-size:.9em}
table{border-collapse:collapse;margin:.6em 0 1.2em 0;font-size:.85em}
caption{caption-side:top;text-align:left;font-weight:bold;padding:.3em 0}
th,td{border-top:1px solid #ccc;border-bottom:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f2f5fa}
td:first-child,th:first-child{text-align:left;white-space:nowrap}
.tblwrap{overflow-x:auto;max-width:100%}
figure{margin:1em 0}
figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
.waiting{color:#777;font-style:italic}
a.docs{font-size:.65em;font-weight:normal;margin-left:.8em;color:#4c72b0}
footer{margin-top:3em;font-size:.8em;color:#777}
"""

STATUS_JS = """
window.addEventListener('load',function(){
 var imgs=document.images,bad=0;
 for(var i=0;i<imgs.length;i++){if(!imgs[i].complete||imgs[i].naturalWidth===0){bad++;}}
 document.body.setAttribute('data-images',String(imgs.length));
 document.body.setAttribute('data-tables',String(document.getElementsByTagName('table').length));
 document.body.setAttribute('data-report-status',bad===0?'ok':'broken:'+bad);
});
"""


def fmt_value(v) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)) or v is pd.NA:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        a = abs(float(v))
        return (
            f"{v:.0f}"
            if float(v).is_integer() and a < 1e6
            else (f"{v:.4f}" if a < 1 else f"{v:.4g}" if a < 1e4 else f"{v:.3e}")
        )
    return str(v)


def _bold_html(text: str) -> str:
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(text))


def _table_html(t: Table) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fmt_value(v))}</td>" for v in row) + "</tr>"
        for row in t.frame.itertuples(index=False)
    )
    return (
        f'<div class="tblwrap"><table><caption>{html.escape(t.caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _figure_html(f: Figure) -> str:
    b64 = base64.b64encode(f.png).decode("ascii")
    return (
        f'<figure id="fig-{html.escape(f.name)}"><img alt="{html.escape(f.caption)}" '
        f'src="data:image/png;base64,{b64}"><figcaption>{html.escape(f.caption)}</figcaption></figure>'
    )


def render_html(title: str, sections: list[Section], *, subtitle: str = "") -> str:
    """One self-contained HTML page."""
    nav = "".join(f'<li><a href="#{s.key}">{html.escape(s.title)}</a></li>' for s in sections)
    parts = []
    for s in sections:
        inner = []
        for b in s.blocks:
            if isinstance(b, Text):
                inner.append(f'<p class="{"waiting" if s.status == "waiting" else ""}">{_bold_html(b.text)}</p>')
            elif isinstance(b, Table):
                inner.append(_table_html(b))
            elif isinstance(b, Figure):
                inner.append(_figure_html(b))
        link = docs_link(s.key)
        doc = (
            f' <a class="docs" href="{html.escape(link)}" '
            'title="What this section shows and how it is computed">docs</a>'
            if link
            else ""
        )
        parts.append(
            f'<section id="{s.key}" data-status="{s.status}">'
            f"<h2>{html.escape(s.title)}{doc}</h2>{''.join(inner)}</section>"
        )

    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title>'
        f'<style>{CSS}</style></head><body data-report-status="loading">'
        f"<h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p><nav><ul>{nav}</ul></nav>"
        + "".join(parts)
        + f"<footer>bayesrc {__version__}: self-contained report (figures embedded).</footer>"
        f"<script>{STATUS_JS}</script></body></html>\n"
    )


def table_markdown(frame: pd.DataFrame) -> str:
    return markdown_table(frame.columns, frame.itertuples(index=False), cell=lambda v: fmt_value(v).replace("|", "\\|"))


def render_markdown(
    title: str, sections: list[Section], *, figure_dir: str | None = None, subtitle: str = ""
) -> tuple[str, dict[str, bytes]]:
    """Markdown text and the figures it links (``figure_dir/NAME.png``; none if ``figure_dir`` is None)."""
    lines = [f"# {title}", "", subtitle, ""] if subtitle else [f"# {title}", ""]
    figs: dict[str, bytes] = {}
    for s in sections:
        lines += [f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, Text):
                lines += [b.text, ""]
            elif isinstance(b, Table):
                lines += [f"**{b.caption}**", "", table_markdown(b.frame), ""]
            elif isinstance(b, Figure) and figure_dir is not None:
                rel = f"{figure_dir}/{b.name}.png"
                figs[rel] = b.png
                lines += [f"![{b.caption}]({rel})", "", f"*{b.caption}*", ""]
    return "\n".join(lines), figs


_LATEX_SPECIAL = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "\\": r"\textbackslash{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_LATEX_UNICODE = {
    "Δ": r"$\Delta$",
    "χ²": r"$\chi^2$",
    "κ": r"$\kappa$",
    "±": r"$\pm$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "×": r"$\times$",
    "–": "--",
    "—": "---",
    "→": r"$\to$",
    "é": r"\'e",
}
_LATEX_ASCII = {"->": "→", "<=": "≤", ">=": "≥"}  # as the symbols they stand for (before "<" and ">" are escaped)


def latex_escape(text: str) -> str:
    r"""``text`` for LaTeX's text mode under any font encoding: the special characters escaped, and
    ``<``, ``>`` and ``|`` (OT1, LaTeX's default encoding, prints them as ¡, ¿ and —), ``->`` and a few
    Unicode symbols as their commands.

    Examples
    --------
    >>> print(latex_escape("q4 -> q3: 50% of n_items <= 3"))
    q4 $\to$ q3: 50\% of n\_items $\le$ 3
    >>> print(latex_escape("|dp| > 0.05"))
    \textbar{}dp\textbar{} \textgreater{} 0.05
    """
    text = str(text)
    for k, v in _LATEX_ASCII.items():
        text = text.replace(k, v)
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    for k, v in _LATEX_UNICODE.items():
        out = out.replace(k, v)
    return out


def table_latex(t: Table) -> str:
    """A booktabs table (``\\toprule / \\midrule / \\bottomrule``); needs ``\\usepackage{booktabs}``."""
    cols = list(t.frame.columns)
    numeric = [pd.api.types.is_numeric_dtype(t.frame[c]) for c in cols]
    spec = "".join("r" if n else "l" for n in numeric)
    lines = [r"\begin{table}[ht]", r"\centering", f"\\caption{{{latex_escape(t.caption)}}}"]
    if t.label:
        lines.append(f"\\label{{tab:{t.label}}}")
    lines += [
        f"\\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_escape(c) for c in cols) + r" \\",
        r"\midrule",
    ]
    for row in t.frame.itertuples(index=False):
        if str(row[0]) == "total":
            lines.append(r"\midrule")
        lines.append(" & ".join(latex_escape(fmt_value(v)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines)


def render_latex(title: str, sections: list[Section]) -> str:
    """The report's main tables (those marked ``latex=True``) as booktabs LaTeX."""
    out = [f"% {title}", "% bayesrc report tables; requires \\usepackage{booktabs}", ""]
    for s in sections:
        for b in s.blocks:
            if isinstance(b, Table) and b.latex:
                out += [f"% section: {s.title}", table_latex(b), ""]
    return "\n".join(out)
