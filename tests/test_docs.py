"""The documentation site (docs/): built with warnings as errors, every page there, and the home page,
a notebook with its figure and an API page looked at in headless Chromium.

The site is built once per session into a temporary folder (``python -m sphinx -W --keep-going``),
unless ``docs/_build/html`` holds a build that passed with -W (``make docs`` marks it; ``make test`` runs
it first) newer than every source of it: the pages in docs/, the notebooks and the package's docstrings. The
executed notebooks come from the shared cache in ``docs/_build/.jupyter_cache`` either way, so only a changed
notebook runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import CHROMIUM, CHROMIUM_FLAGS, DOCS, DOCS_HTML, ROOT, docs_build_is_fresh

from bayesrc.report.render import SECTION_DOCS

GUIDES = ("compare_notebook", "ci_gate", "import_logs", "collect", "exact_truth", "switch", "planning", "reports")
NOTEBOOKS = ("01_quickstart", "02_version_comparison", "03_switch_matrices", "04_planning")
# the three pages looked at in the browser: home, a user guide notebook with its figure, an API page
SHOTS = {
    "home": "index.html",
    "notebook": "notebooks/01_quickstart.html",
    "api": "api/generated/02_bayesrc.classical.html",
}


@pytest.fixture(scope="session")
def docs_html(tmp_path_factory) -> Path:
    if docs_build_is_fresh() and os.environ.get("BAYESRC_DOCS_REBUILD") != "1":
        return DOCS_HTML
    out = tmp_path_factory.mktemp("docs") / "html"
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    assert res.returncode == 0, f"sphinx-build -W failed:\n{res.stdout[-2000:]}\n{res.stderr[-6000:]}"
    return out


def _png_images(page: Path) -> list[Path]:
    """The PNG files a page's <img> tags point at (myst-nb writes notebook figures into _images/)."""
    srcs = re.findall(r'<img[^>]*\ssrc="([^"]+\.png)"', page.read_text())
    return [(page.parent / s).resolve() for s in srcs]


def test_every_page_is_built(docs_html):
    pages = [
        "index",
        "getting_started",
        "cli",
        "performance",
        "development",
        "methods/classical",
        "methods/bayesian",
        "validation/calibration",
        "validation/truth",
        "validation/faults",
        "api/index",
    ]
    pages += [f"guides/{g}" for g in GUIDES] + [f"notebooks/{n}" for n in NOTEBOOKS]
    for page in pages:
        assert (docs_html / f"{page}.html").is_file(), page
    api = sorted((docs_html / "api" / "generated").glob("*.html"))
    assert len(api) >= 12, api
    # numpydoc rendered the docstrings: parameter lists and examples on the API pages
    text = (docs_html / SHOTS["api"]).read_text()
    assert 'id="bayesrc.classical.reliable_change"' in text and "Parameters" in text and "Examples" in text
    # the validation record kept its tables and the commands that regenerate them
    truth = (docs_html / "validation" / "truth.html").read_text()
    assert truth.count("<table") >= 6 and "benchmarks/truth_default.py" in truth


def test_notebooks_are_rendered_with_their_figures(docs_html):
    """Every notebook page holds executed output; the quick start and the version comparison show a figure."""
    for name in NOTEBOOKS:
        text = (docs_html / "notebooks" / f"{name}.html").read_text()
        assert "cell_output" in text, f"{name}: no executed output on the page"
        assert "Traceback" not in text and "Figure size" not in text, f"{name}: an error or an undisplayed figure"
        # no warning with the build machine's paths (tqdm.auto's "IProgress not found" without ipywidgets)
        assert "IProgress" not in text and "site-packages" not in text, f"{name}: a warning or a machine path"
    import matplotlib.image as mpimg

    for name in ("01_quickstart", "02_version_comparison", "03_switch_matrices"):
        images = _png_images(docs_html / "notebooks" / f"{name}.html")
        assert images, f"{name}: no figure on the page"
        for png in images:
            assert png.is_file() and png.stat().st_size > 1000, png
            img = mpimg.imread(png)
            assert img.shape[0] > 100 and img.shape[1] > 100 and img[..., :3].std() > 0.05, (png, img.shape)


def test_report_sections_link_to_existing_docs_anchors(docs_html):
    """Each report section's docs link (bayesrc.report.render.SECTION_DOCS) names a page and an anchor that exist."""
    for key, target in SECTION_DOCS.items():
        page, _, anchor = target.partition("#")
        path = docs_html / page
        assert path.is_file(), (key, page)
        assert f'id="{anchor}"' in path.read_text(), (key, target)


def _not_blank(shot: Path) -> None:
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)[..., :3]
    colours = np.unique((img[::3, ::3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 40, f"{shot.name}: {len(colours)} distinct colours: a blank page"
    assert (img < 0.5).any(axis=2).mean() > 0.005, f"{shot.name}: almost no dark pixels: no text was painted"


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium not installed (make browser: apt-get install -y --no-install-recommends chromium)",
)
@pytest.mark.parametrize("name", list(SHOTS))
def test_docs_page_renders_in_headless_chromium(docs_html, name, tmp_path):
    """Screenshot of the page in headless Chromium is not blank; on the notebook page every image decoded."""
    page = docs_html / SHOTS[name]
    shot = tmp_path / f"docs_{name}.png"
    res = subprocess.run(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'u1'}",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            "--window-size=1280,2400",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    _not_blank(shot)
    if name != "notebook":
        return
    # The figure is really shown: a copy of the page beside it reports, after load, how many <img> decoded.
    probe = page.with_name(f"_probe_{os.getpid()}_{page.name}")
    script = (
        "<script>window.addEventListener('load',function(){"
        "var im=[].slice.call(document.querySelectorAll('article img'));"
        "document.body.setAttribute('data-images',im.length);"
        "document.body.setAttribute('data-decoded',"
        "im.filter(function(i){return i.complete&&i.naturalWidth>100;}).length);});</script>"
    )
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    try:
        dom = subprocess.run(
            [
                CHROMIUM,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={tmp_path / 'u2'}",
                "--virtual-time-budget=5000",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        probe.unlink()
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stdout[:500]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(0)))
    assert int(attrs.get("data-images", 0)) >= 1 and attrs.get("data-decoded") == attrs.get("data-images"), attrs
