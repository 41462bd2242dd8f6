"""Reports: sections from a run directory, HTML / Markdown / LaTeX, and the HTML in headless Chromium."""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess

import numpy as np
import pandas as pd
import pytest
from helpers import CHROMIUM, CHROMIUM_FLAGS

from bayesrc.cli import main
from bayesrc.errors import InputError
from bayesrc.report import build_report, load_run, report_sections


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """A classical run directory as `bayesrc demo` writes it (400 items, two pairs)."""
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--simulated", "--no-bayes", "--out", str(out), "--items", "400", "--seed", "3"]) == 0
    return out


@pytest.fixture(scope="module")
def html_reports(demo_run):
    return build_report(demo_run, fmt="html")


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_html_is_self_contained_with_sections_figures_and_tables(demo_run, html_reports):
    assert set(html_reports) == {"minor", "major"}
    text = html_reports["minor"].read_text()
    # no external resource of any kind
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", text)
    assert "http://" not in text and "https://" not in text
    imgs = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(imgs) == 4  # scatter, RCI histogram, domain heatmap, difficulty churn
    for b64 in imgs:
        w, h = _png_size(base64.b64decode(b64))
        assert w > 200 and h > 150
    for key in ("pins", "aggregate", "rci", "figures"):
        assert f'<section id="{key}" data-status="ok">' in text
    # Bayesian sections are placeholders until `bayesrc fit` output is in the run directory
    for key in ("bayes_items", "crosscheck", "diagnostics"):
        assert f'<section id="{key}" data-status="waiting">' in text
    # the numbers come from rci.json
    rci = json.loads((demo_run / "rci.json").read_text())["pairs"]["minor"]
    assert f"S_diff = {rci['s_diff']:.4f}" in text
    assert f"<td>{rci['counts']['analysable']['improved']}</td>" in text


def test_classification_table_counts_the_item_table(demo_run):
    """The report's Table 1/2 (PairResult.classification_table) against class counts of items_NAME.parquet."""
    import bayesrc

    pair = bayesrc.load(demo_run)["rci.json"]["minor"]
    items = pd.read_parquet(demo_run / "items_minor.parquet")
    table = pair.classification_table().set_index("class")
    labels = {"improved": "improved", "no_change": "no reliable change", "deteriorated": "deteriorated"}
    for col, cls_col, rows in (
        ("analysable n", "class", ~items["excluded"]),
        ("conservative z n", "class_conservative", ~items["excluded"]),
        ("all items n", "class_all_items", items["class_all_items"] != "excluded"),
    ):
        counts = items.loc[rows, cls_col].value_counts()
        assert [table.loc[labels[c], col] for c in labels] == [counts.get(c, 0) for c in labels], col
        assert table.loc["total", col] == rows.sum()
    assert table.loc["total", "analysable %"] == 100.0 and np.isclose(
        table.loc[list(labels.values()), "analysable %"].sum(), 100.0
    )


def test_aggregate_matches_independent_formula(demo_run):
    from scipy import stats

    items = pd.read_parquet(demo_run / "items_minor.parquet")
    from bayesrc.report.classical_sections import aggregate_frame

    agg = aggregate_frame(items).set_index("items")
    d = (items["p_v2"] - items["p_v1"]).dropna().to_numpy()
    half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    row = agg.loc["all scored items"]
    assert row["n"] == d.size and np.isclose(row["delta"], d.mean())
    assert np.isclose(row["ci95_lo"], d.mean() - half) and np.isclose(row["ci95_hi"], d.mean() + half)


def test_markdown_and_latex(demo_run, tmp_path):
    md = build_report(demo_run, fmt="md", out_dir=tmp_path, pairs=["major"])
    text = md["major"].read_text()
    assert "## Classical reliable change" in text and "| class |" in text
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) == 4 and all((tmp_path / link).is_file() for link in links)
    tex = build_report(demo_run, fmt="latex", out_dir=tmp_path)["major"].read_text()
    assert tex.count(r"\begin{tabular}") >= 4
    assert tex.count(r"\toprule") == tex.count(r"\bottomrule") == tex.count(r"\begin{tabular}")
    assert r"\label{tab:rci-classes}" in tex and r"\label{tab:domains}" in tex
    # special characters are escaped (column names with underscores)
    assert "acc\\_v1" in tex and "acc_v1" not in tex.replace("acc\\_v1", "")


@pytest.fixture(scope="module")
def minor_fit(demo_run):
    """A real (small) collapsed beta-binomial fit (the cheapest model with every Bayesian file) of the demo's "minor"
    pair, cross-checked against the run's own RCI result, so report and fit share one classification."""
    import bayesrc
    from bayesrc.bayes import SamplerConfig, fit
    from bayesrc.data import load_counts

    counts = load_counts([demo_run / "trials" / "minor_v1.parquet", demo_run / "trials" / "minor_v2.parquet"])
    pair = bayesrc.load(demo_run / "rci.json")["minor"]
    res = fit(counts, model="betabinom", config=SamplerConfig(seed=1), rci=pair)
    return res, pair


def test_bayes_sections_render_from_fit_outputs(demo_run, minor_fit, tmp_path):
    """The files `bayesrc fit` writes (BayesFit.save: fit.json, items.parquet, posterior.nc) fill the Bayesian
    sections."""
    res, pair = minor_fit
    run = tmp_path / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("trials", "report_*"))
    res.save(run / "minor")
    r = load_run(run)
    # the report reads the fit through its class: the very object that was saved, posterior included
    assert r.comparisons["minor"].bayes == res and r.comparisons["major"].bayes is None
    assert r.comparisons["minor"].pair.payload == pair.payload
    keys = {s.key: s.status for s in report_sections(r, r.comparisons["minor"])}
    assert (
        keys["bayes_items"]
        == keys["crosscheck"]
        == keys["diagnostics"]
        == keys["domain_shift"]
        == keys["checks"]
        == "ok"
    )
    text = build_report(run, pairs=["minor"])["minor"].read_text()
    # one classification: the fit cross-checked the very RCI classes the report shows
    cc = res.crosscheck
    assert cc["rci_n_flagged"] == pair.n_flagged
    assert (
        f"Of the {pair.n_flagged} items the RCI calls reliably changed, "
        f"the posterior estimates that about {100 * cc['rci_estimated_fdp']:.1f}%" in text
    )
    assert "other settings" not in text
    assert f"κ = {cc['kappa']:.3f}" in text
    # the gate table states the thresholds this fit used (the defaults)
    t = res.diagnostics.thresholds
    assert (
        f"R-hat ≤ {t['max_rhat']:g}, bulk and tail ESS ≥ {t['min_ess']:g}" in text
        and "R-hat ≤ 1.01, bulk and tail ESS ≥ 400" in text
    )
    # domain shifts: the interval fit.json holds (lo90/hi90), shown in the table
    from bayesrc.report.render import fmt_value

    for dom, v in res.domain_shift.items():
        assert (
            f"<td>{dom}</td><td>{fmt_value(v['mean'])}</td><td>{fmt_value(v['lo90'])}</td><td>{fmt_value(v['hi90'])}</td>"
            in text
        )
    # + P(change) vs RCI, forest, domain shifts, trace, rank, posterior predictive check, LOO-PIT, prior predictive
    # check
    assert len(re.findall(r'src="data:image/png', text)) == 4 + 3 + 2 + 3
    # the workflow checks (issue 31): the posterior and prior predictive checks in words, and their figures
    assert "Predictive checks and LOO" in text and f"ELPD {res.loo['elpd']:.1f}" in text
    pp = res.prior_predictive
    assert f"expect {pp['share_abs_dp_above']['0.05']:.0%} of items to move by more than 0.05" in text


def test_crosscheck_sentence_refuses_to_mix_two_rci_runs(demo_run, minor_fit):
    """A report whose RCI pair used other settings (z = 2.58, a real second run) than the fit's cross-check says so."""
    from bayesrc.classical import reliable_change
    from bayesrc.data import load_counts
    from bayesrc.report.bayes_sections import crosscheck_sentence

    res, pair = minor_fit
    counts = load_counts([demo_run / "trials" / "minor_v1.parquet", demo_run / "trials" / "minor_v2.parquet"])
    other = reliable_change(counts, z=2.58, n_splits=50, n_permutations=50, n_null=0, name="minor")
    assert other.n_flagged < pair.n_flagged
    text = crosscheck_sentence(res, other)
    assert f"Of the {res.crosscheck['rci_n_flagged']} items" in text and f"flags {other.n_flagged} items" in text
    assert "other settings" not in crosscheck_sentence(res, pair)


def test_power_and_switch_sections_from_their_commands(demo_run, tmp_path):
    """power.json and switch.json as `bayesrc power` / `bayesrc switch` write them fill their sections."""
    from conftest import data_path

    run = tmp_path / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("report_*"))
    assert (
        main(
            [
                "power",
                str(run / "trials" / "minor_v1.parquet"),
                str(run / "trials" / "minor_v2.parquet"),
                "--cluster-by",
                "domain",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    cells = data_path("switch_matrix_cells.csv")
    assert main(["switch", str(cells), "--bayes", "none", "--bootstrap", "200", "--out", str(run)]) == 0
    power = json.loads((run / "power.json").read_text())["pairs"][0]
    text = build_report(run, pairs=["minor"])["minor"].read_text()
    assert '<section id="power" data-status="ok">' in text and '<section id="switch" data-status="ok">' in text
    assert f"N* ≈ {power['n_star_ceil']} items" in text and f"q = N/N* = {power['q']:.3g}" in text
    verdict = (
        "unresolved under every stress test"
        if all(v == "unresolved" for v in power["verdicts"].values())
        else "resolved under"
    )
    assert verdict in text
    switch = json.loads((run / "switch.json").read_text())["benchmarks"]
    for name, bench in switch.items():
        assert f"<strong>{name}</strong>: μ = {bench['mu']:.3f}" in text
    # 4 reference figures + an effects and a residual heatmap per benchmark
    assert len(re.findall(r'src="data:image/png', text)) == 4 + 2 * len(switch)


def test_each_section_links_to_its_docs_page(demo_run, html_reports, monkeypatch, tmp_path):
    """Every section heading links to the docs page that explains it (tests/test_docs.py checks the anchors exist)."""
    from bayesrc.report import render

    text = html_reports["minor"].read_text()
    keys = re.findall(r'<section id="([^"]+)"', text)
    assert {"pins", "aggregate", "rci", "figures", "power"} <= set(keys) and set(keys) <= set(render.SECTION_DOCS)
    for key in keys:
        heading = re.search(rf'<section id="{key}"[^>]*><h2>(.*?)</h2>', text).group(1)
        assert f'<a class="docs" href="{render.DOCS_URL}/{render.SECTION_DOCS[key]}"' in heading, (key, heading)
    # by default the links point at this checkout's docs/_build/html (a file: URI, no network); a published copy via
    # BAYESRC_DOCS_URL
    assert render.DOCS_URL.startswith("file:") and render.DOCS_URL.endswith("docs/_build/html")
    monkeypatch.setenv("BAYESRC_DOCS_URL", "https://docs.example.org/bayesrc/")
    monkeypatch.setattr(render, "DOCS_URL", render.default_docs_url())
    page = build_report(shutil.copytree(demo_run, tmp_path / "run"), fmt="html")["minor"].read_text()
    assert 'href="https://docs.example.org/bayesrc/methods/classical.html#what-uses-which-items"' in page


def test_bad_run_dir_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(InputError, match="no result files"):
        build_report(tmp_path)
    (tmp_path / "rci.json").write_text('{"pairs": ')
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "rci.json:1" in err and "malformed JSON" in err
    assert not list(tmp_path.glob("report_*"))
    # a result lacking a field a section needs: one line naming the file and the field, no traceback
    (tmp_path / "rci.json").write_text('{"pairs": {"p": {"versions": ["a", "b"]}}}')
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "rci.json" in err and "'exclusions'" in err and "Traceback" not in err
    assert not list(tmp_path.glob("report_*"))


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install -y --no-install-recommends chromium)"
)
def test_report_renders_in_headless_chromium(html_reports, tmp_path):
    """Open the demo's report in headless Chromium: every figure decodes, tables are there, a screenshot is written."""
    page = html_reports["minor"].resolve().as_uri()
    dom = subprocess.run(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'u1'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stdout[:500]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(0)))
    assert attrs.get("data-report-status") == "ok", attrs  # set by the page's script after load: all images decoded
    assert attrs["data-images"] == "4" and int(attrs["data-tables"]) >= 5
    shot = tmp_path / "report.png"
    res = subprocess.run(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'u2'}",
            f"--screenshot={shot}",
            "--window-size=1280,4000",
            page,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    w, h = _png_size(shot.read_bytes())
    assert (w, h) == (1280, 4000)
    # the page is not blank: the screenshot has real content (many distinct colours)
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)[..., :3]
    assert len(np.unique((img[::4, ::4] * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50
    assert (img < 0.5).any(axis=2).mean() > 0.01  # dark pixels: text and figure axes were painted


def test_pair_pins_side_by_side(tmp_path):
    """The comparison block is made by the real pin check (bayesrc.data.compare_runs) of two run records."""
    from bayesrc.data import compare_runs
    from bayesrc.io import atomic_write_json
    from bayesrc.report.classical_sections import pair_pins_frame

    pins = {
        "v1": {
            "model.file_sha256": "a" * 64,
            "sampling.temperature": 0.7,
            "items.bank_sha256": "b" * 64,
            "runtime.threads": 2,
        },
        "v2": {
            "model.file_sha256": "c" * 64,
            "sampling.temperature": 1.0,
            "items.bank_sha256": "b" * 64,
            "runtime.threads": 4,
        },
    }
    for v, p in pins.items():
        atomic_write_json(tmp_path / v / "run.json", {"status": "complete", "pins": p})
    record = {"comparison": compare_runs(tmp_path / "v1", tmp_path / "v2").to_dict(), **pins}
    df = pair_pins_frame(record).set_index("pin")
    assert df["status"].to_dict() == {
        "items.bank_sha256": "same",
        "model.file_sha256": "allowed",
        "runtime.threads": "ignored",
        "sampling.temperature": "blocking",
    }
    assert (
        len(df.loc["model.file_sha256", "v1"]) < 64
        and df.loc["model.file_sha256", "v1"] != df.loc["model.file_sha256", "v2"]
    )
    assert df.loc["sampling.temperature"].tolist()[:2] == ["0.7", "1.0"]


def test_demo_pins_come_from_demo_json_not_a_run_record(demo_run, tmp_path):
    """`bayesrc demo` (collected) writes its two runs' pins as demo.json; the report shows them side by side,
    and a run directory's own run.json stays the collection's run record."""
    from bayesrc.io import atomic_write_json
    from bayesrc.report.blocks import Table
    from bayesrc.report.classical_sections import section_pins

    run_dir = shutil.copytree(demo_run, tmp_path / "run")
    record = {
        "format": "bayesrc-demo/1",
        "comparison": {"comparable": True, "differences": [{"field": "model.file_sha256", "status": "allowed"}]},
        "v1": {"model.file_sha256": "a" * 64, "sampling.k": 10},
        "v2": {"model.file_sha256": "c" * 64, "sampling.k": 10},
    }
    atomic_write_json(run_dir / "demo.json", record)
    run = load_run(run_dir)
    assert run.demo_record == record and run.run_record is None and run.files["demo.json"] == run_dir / "demo.json"
    tables = [b for b in section_pins(run, run.comparisons["minor"]).blocks if isinstance(b, Table)]
    assert tables[0].caption == "Run pins of both versions (demo.json)"
    assert tables[0].frame.set_index("pin")["status"].to_dict() == {
        "model.file_sha256": "allowed",
        "sampling.k": "same",
    }


def test_crosscheck_table_rows_are_rci_classes(minor_fit):
    """fit.json stores table[posterior class][RCI class]; the report shows RCI classes as rows.
    Checked against a crosstab of the fit's own item table (RCI-excluded items count as no change)."""
    from bayesrc.report.bayes_sections import crosscheck_table

    res, _ = minor_fit
    frame = crosscheck_table(res).set_index("RCI \\ posterior")
    items = res.items
    order = ["improved", "no_change", "deteriorated"]
    expect = pd.crosstab(items["rci_class"].replace("excluded", "no_change"), items["bayes_class"]).reindex(
        index=order, columns=order, fill_value=0
    )
    assert frame.to_numpy().tolist() == expect.to_numpy().tolist()
    assert frame.loc["improved"].sum() + frame.loc["deteriorated"].sum() == res.crosscheck["rci_n_flagged"]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda doc: doc["params"].update(versions=["only-one"]), "params.versions"),
        (lambda doc: doc["diagnostics"]["thresholds"].update(max_rhat=None), "diagnostics.thresholds.max_rhat"),
        (
            lambda doc: doc["diagnostics"]["thresholds"].update(max_divergences=0.5),
            "diagnostics.thresholds.max_divergences",
        ),
        (lambda doc: doc.pop("backend"), "backend"),
        (lambda doc: doc.update(diagnostics={}), "diagnostics"),
        (
            lambda doc: doc["prior_predictive"]["hist_p"]["prior_v1"].__setitem__(0, None),
            "prior_predictive.hist_p.prior_v1",
        ),
        (lambda doc: doc["prior_predictive"]["hist_dp"].pop("prior"), "prior_predictive.hist_dp.prior"),
        (
            lambda doc: doc["crosscheck"].update(rci_estimated_fdp_interval90=[0.1]),
            "crosscheck.rci_estimated_fdp_interval90",
        ),
        (
            lambda doc: doc["crosscheck"].update(rci_estimated_fdp_material_interval90=[0.1, "x"]),
            "crosscheck.rci_estimated_fdp_material_interval90",
        ),
        (lambda doc: doc["ppc"].pop("table"), "ppc.table"),
        (lambda doc: doc["loo"].update(high_k_items=None), "loo.high_k_items"),
        (lambda doc: doc.update(prior_predictive="x"), "prior_predictive"),
    ],
    ids=[
        "one version label",
        "null R-hat threshold",
        "fractional divergence threshold",
        "no backend",
        "empty gate record",
        "null prior count",
        "no prior histogram",
        "one-bound interval",
        "text bound",
        "no check table",
        "null high-k list",
        "text prior predictive",
    ],
)
def test_fit_fields_the_report_cannot_show_are_one_named_line(minor_fit, edit, field, tmp_path, capsys):
    """Found at 1,000 fit.json inputs (benchmarks/faults.py --report-fit: 122 tracebacks, these among
    them): a version list without two labels (IndexError) and a null or fractional gate threshold
    (TypeError in the gate table); each is now one line naming fit.json and the field, exit 2. A
    missing field of a fit's folder read on its own named the folder, not its fit.json. A null count
    or a missing series of the prior predictive histograms failed when the figure was drawn, as did
    a posterior predictive check without its table (1,000 fit.json inputs after those fixes); a null
    list of high Pareto k items or a prior predictive block that is not an object (every field
    retyped). A
    cross-check interval of one bound was an IndexError in the report's sentence (150 fuzzed fit.json
    inputs after those fixes)."""

    res, _ = minor_fit
    run = tmp_path / "fit"  # a fit's folder on its own, as `bayesrc fit --out` writes it
    res.save(run)
    doc = json.loads((run / "fit.json").read_text())
    edit(doc)
    (run / "fit.json").write_text(json.dumps(doc))
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fit.json" in err and f"field '{field}'" in err, err
    assert not (tmp_path / "out").exists()


def test_a_null_flip_count_in_fit_json_reads_n_a(minor_fit, tmp_path):
    """Found at 1,000 fit.json inputs: a null expected flip count was a TypeError in the Bayesian items
    section's sentence; unknown numbers read "n/a" there, as elsewhere in the report."""
    res, _ = minor_fit
    assert res.flips  # the default fit records them
    run = tmp_path / "fit"
    res.save(run)
    doc = json.loads((run / "fit.json").read_text())
    doc["flips"]["expected_negative_flips"]["mean"] = None
    (run / "fit.json").write_text(json.dumps(doc))
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 0
    assert (
        "Expected real majority flips (true accuracy crossing 0.5): n/a negative"
        in (tmp_path / "out" / "report_comparison.html").read_text()
    )


def test_difficulty_counts_above_their_bin_size_keep_the_figure_its_size(demo_run, tmp_path):
    """Found at 1,000 rci.json inputs: a difficulty bin with more improved items than items put its
    "n=" label at a share of 1e19, which stretched the PNG past what Agg can draw (a TypeError).
    The label stays inside the axes; the figure is its usual size."""
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    doc = json.loads((run / "rci.json").read_text())
    pair = next(iter(doc["pairs"].values()))
    pair["difficulty_bins"][0] |= {"n": 110, "improved": 267846723950262668492}
    (run / "rci.json").write_text(json.dumps(doc))
    loaded = load_run(run)
    sections = [s for c in loaded.comparisons.values() for s in report_sections(loaded, c)]
    pngs = [b.png for s in sections for b in s.blocks if getattr(b, "name", "") == "difficulty"]
    assert pngs and all(_png_size(p)[1] < 1000 for p in pngs)
