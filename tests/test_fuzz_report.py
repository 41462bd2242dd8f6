"""Result fields through ``bayesrc report``: a result folder that ``bayesrc.load`` opens, each
field given another value of its type (null, NaN, ±inf, 0, negative, huge, an empty or
one-element list, an empty object, deleted; a Parquet column within its dtype, no row or one),
gives a report or one ``bayesrc: error:`` line naming the file and the field (exit 2), never a
traceback and nothing written (tests/fuzzing.py: REPORT_KINDS; seeded, a sample here;
benchmarks/faults.py runs >= 1,000 per kind, with the kinds whose seed needs a fit)."""

from __future__ import annotations

import shutil

import pytest
from fuzzing import REPORT_KINDS, Workspace, fuzz_report, report_retyped, report_without_each_column, try_report

#: seeded inputs per kind: an RCI pair's HTML report draws four figures (about 1 s here), the others are cheaper
EXAMPLES = {
    "rci.json": 10,
    "items_A.parquet": 6,
    "run.json": 4,
    "switch.json": 10,
    "truth.json": 10,
    "truth_replicates.parquet": 6,
    "family_truth.json": 10,
}


@pytest.fixture(scope="module", autouse=True)
def seeds_made_once(tmp_path_factory):
    """Each kind's seed input is written once for the module (a family truth run takes ~3 s, a sensitivity run ~1 s;
    the tests here make each kind's seed 3 to 7 times, fuzzing.py's helpers among them): every
    :meth:`Workspace.make` of this module gets a fresh copy of that seed's folder, as it would get a freshly written one
    (a test may write into its copy; the first one written stays as it is)."""
    make = Workspace.make.__func__
    made: dict[int, tuple[object, Workspace]] = {}  # id(reader) -> (reader, its seed)

    def from_made_seed(cls, reader, root):
        if id(reader) not in made:
            made[id(reader)] = (reader, make(cls, reader, tmp_path_factory.mktemp("seed")))
        seed = made[id(reader)][1]
        folder = root / "seed"
        shutil.copytree(seed.folder, folder)  # as make: a new folder (and its parents), an error if it exists
        return cls(reader, folder, folder / seed.target.relative_to(seed.folder), seed.seed_bytes)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Workspace, "make", classmethod(from_made_seed))
        yield


@pytest.mark.parametrize("name", [n for n, kind in REPORT_KINDS.items() if not kind.slow_seed])
def test_any_value_of_a_fields_type_is_a_report_or_one_named_line(name, tmp_path):
    ws = Workspace.make(REPORT_KINDS[name], tmp_path / "seed")
    assert try_report(ws, ws.seed_bytes) == ("ok", "")  # the seed gives a report: a refusal is the mutation's doing
    outcomes, faults = fuzz_report(REPORT_KINDS[name], EXAMPLES.get(name, 40), tmp_path / "fuzz")
    assert not faults, (
        f"{name}: {len(faults)} faults of {sum(outcomes.values())}; the first: {faults[0][0]}: {faults[0][1]}"
    )
    assert outcomes["ok"] > 0  # the mutations leave reports to draw, not only refusals


@pytest.mark.parametrize("name", [n for n, kind in REPORT_KINDS.items() if n.endswith(".json") and not kind.slow_seed])
def test_a_field_of_another_type_is_a_report_or_one_named_line(name, tmp_path):
    """A string, list, object, flag, null, negative or huge number in place of any field: before
    ``Result.field_kinds`` (checked by ``load``), 175 of 1,162 such rci.json inputs were tracebacks in
    the report (a text where a number is formatted, a list where a table is built, a null block).
    A seeded sample here; benchmarks/faults.py tries every field with every value."""
    outcomes, faults = report_retyped(REPORT_KINDS[name], tmp_path, sample=25)
    assert not faults, (
        f"{name}: {len(faults)} faults of {sum(outcomes.values())}; the first: {faults[0][0]}: {faults[0][1]}"
    )


@pytest.mark.parametrize(
    "name", [n for n, kind in REPORT_KINDS.items() if n.endswith(".parquet") and not kind.slow_seed]
)
def test_a_table_without_any_one_of_its_columns_is_a_report_or_one_named_line(name, tmp_path):
    """Every column dropped in turn (the mutations above keep columns): before ``Result.required_columns``,
    a missing ``rci`` or ``class`` in a pair's item table, or ``method`` in the truth replicates, was a KeyError."""
    outcomes, faults = report_without_each_column(REPORT_KINDS[name], tmp_path)
    assert not faults, f"{name}: {len(faults)} faults; the first: {faults[0][0]}: {faults[0][1]}"
    assert outcomes["input error"] > 0 and outcomes["ok"] > 0


def test_a_truth_run_with_null_figures_reads_n_a(tmp_path):
    """Found by the fuzzer (benchmarks/faults.py --report-only, 5 of 200 truth.json inputs): a null
    median |Δp|, mean flag count or coverage share raised a TypeError in the report's text."""
    import json

    ws = Workspace.make(REPORT_KINDS["truth.json"], tmp_path / "seed")
    doc = json.loads(ws.seed_bytes)
    doc["exact"]["median_abs_dp"] = None
    for method in doc["methods"].values():
        method.update({k: None for k in ("flagged_mean", "selected_mean", "rci_fdp_interval_coverage") if k in method})
    assert try_report(ws, json.dumps(doc).encode()) == ("ok", "")


def test_null_counts_of_an_rci_pair_read_n_a_not_none(tmp_path):
    """Found by setting each numeric field of ``rci.json`` to null in turn: 16 counts (items analysable,
    excluded, flagged, flips, permutations, replicates, K) printed as "None" in the report's text."""
    import html
    import json
    import re

    ws = Workspace.make(REPORT_KINDS["rci.json"], tmp_path / "seed")
    doc = json.loads(ws.seed_bytes)
    pair = next(iter(doc["pairs"].values()))
    nulled = {
        "params": ["k"],
        "exclusions": ["n_before", "n_after", "low_valid", "floor_ceiling"],
        "counts.analysable": ["n"],
        "null_samples": ["replicates"],
        "no_change_test": ["n_permutations"],
        "flips": ["n", "negative_flips", "positive_flips"],
        "direction_asymmetry": ["n_permutations", "n_items", "observed_improved", "observed_deteriorated"],
    }
    for path, fields in nulled.items():
        record = pair
        for key in path.split("."):
            record = record[key]
        record.update(dict.fromkeys(fields))
    pair["min_detectable_samples"] = None
    out = tmp_path / "report"
    folder = ws.target.parent
    ws.target.write_text(json.dumps(doc))
    assert ws.reader.run(ws.target, out) == 0, folder
    text = html.unescape(
        re.sub(
            r"<[^>]+>",
            " ",
            re.sub(
                r"<script.*?</script>|<style.*?</style>", "", next(out.glob("report_*.html")).read_text(), flags=re.S
            ),
        )
    )
    assert "n/a of K = n/a samples" in text or "n/a analysable" in text or "n/a items are analysable" in text
    assert not re.search(r"\bNone\b", text), re.search(r".{0,60}\bNone\b.{0,30}", text).group(0)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda pair: pair["params"].update(z=None), "params.z"),
        (lambda pair: pair.update(versions=["example-v1"]), "versions"),
        (lambda pair: next(iter(pair["domain"]["per_domain"].values())).update(improved=None), "improved"),
    ],
    ids=["null z", "one version label", "null domain count"],
)
def test_rci_fields_the_report_cannot_show_are_one_named_line(edit, field, tmp_path):
    """Found at 1,000 inputs per kind (benchmarks/faults.py --report-only; 16 of 1,000 rci.json inputs):
    a null RCI threshold, a version list without two labels and a null per-domain count were
    tracebacks (TypeError, IndexError) in the report; each is now one line naming rci.json and the field."""
    import json

    ws = Workspace.make(REPORT_KINDS["rci.json"], tmp_path / "seed")
    doc = json.loads(ws.seed_bytes)
    edit(next(iter(doc["pairs"].values())))
    outcome, detail = try_report(ws, json.dumps(doc).encode())
    assert outcome == "input error", detail
    assert "rci.json" in detail and field in detail, detail


def test_a_truth_fdr_level_the_report_cannot_use_is_one_named_line(tmp_path):
    """Found at 1,000 truth.json inputs (6 of 1,000): a null, NaN or infinite ``q`` was a TypeError
    in the report's truth figure, drawn after the section was built; now one line naming truth.json
    and the field, before anything is drawn."""
    import json

    ws = Workspace.make(REPORT_KINDS["truth.json"], tmp_path / "seed")
    doc = json.loads(ws.seed_bytes)
    for q in (None, float("nan"), float("inf"), 1.5):
        outcome, detail = try_report(ws, json.dumps(doc | {"q": q}).encode())
        assert outcome == "input error" and "truth.json" in detail and "field 'q'" in detail, (q, detail)


@pytest.mark.parametrize("table", ["cells", "effects"])
def test_a_switch_cell_listed_twice_is_one_named_line(table, tmp_path):
    """Found at 1,000 switch.json inputs (1 of 1,000): a (prefix, suffix) cell listed twice made the
    report's matrix a pandas ValueError ("Index contains duplicate entries"); now one line naming the table."""
    import json

    ws = Workspace.make(REPORT_KINDS["switch.json"], tmp_path / "seed")
    doc = json.loads(ws.seed_bytes)
    bench = next(iter(doc["benchmarks"].values()))
    bench[table] = [*bench[table], bench[table][0]]
    outcome, detail = try_report(ws, json.dumps(doc).encode())
    assert outcome == "input error", detail
    assert "switch.json" in detail and f".{table}" in detail, detail
