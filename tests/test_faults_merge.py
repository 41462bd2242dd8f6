"""``bayesrc merge`` and ``bayesrc pins`` on damaged run records of real shard runs: each
missing or mistyped field merge reads (``pins``, ``items.range``, ``status``, ``info``,
``runtime.engine``) is one ``bayesrc: error:`` line naming the file and the field (exit 2),
never a traceback, and the ``--out`` directory is left as it was (issue 33).

The shards are a real collection (the suite's Gemma-3-270M, two shards of the 4-item bank);
the CLI runs in-process, so each damaged record costs a merge's reads, not an interpreter start.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bayesrc.cli import main

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"


@pytest.fixture(scope="module")
def shard_pair(gemma, gemma_bank4, tmp_path_factory):
    """Two complete shards (items 0:2 and 2:4, K = 2) of one real fast collection."""
    from bayesrc.collect import collect

    root = tmp_path_factory.mktemp("shards")
    for i in range(2):
        collect(CARD, gemma_bank4, root / f"s{i}", k=2, shard=f"{i}/2", model=gemma, seed_rule="shared")
    return root


def _set_pin(name: str, value: object):
    return lambda rec: {**rec, "pins": {**rec["pins"], name: value}}


def _drop_pin(name: str):
    return lambda rec: {**rec, "pins": {k: v for k, v in rec["pins"].items() if k != name}}


def _set(name: str, value: object):
    return lambda rec: {**rec, name: value}


def _drop(name: str):
    return lambda rec: {k: v for k, v in rec.items() if k != name}


# (case, how the record is damaged, the field the error line must name)
DAMAGES = [
    ("no pins", _drop("pins"), "pins"),
    ("pins a list", _set("pins", [1, 2]), "pins"),
    ("no items.range", _drop_pin("items.range"), "items.range"),
    ("range null", _set_pin("items.range", None), "items.range"),
    ("range a string", _set_pin("items.range", "0:2"), "items.range"),
    ("range an object", _set_pin("items.range", {"start": 0, "stop": 2}), "items.range"),
    ("range of one", _set_pin("items.range", [0]), "items.range"),
    ("range of three", _set_pin("items.range", [0, 2, 4]), "items.range"),
    ("range negative", _set_pin("items.range", [-2, 2]), "items.range"),
    ("range reversed", _set_pin("items.range", [4, 0]), "items.range"),
    ("range floats", _set_pin("items.range", [0.0, 2.5]), "items.range"),
    ("range booleans", _set_pin("items.range", [False, True]), "items.range"),
    ("range strings", _set_pin("items.range", ["0", "2"]), "items.range"),
    ("no status", _drop("status"), "status"),
    ("status a number", _set("status", 1), "status"),
    ("info a list", _set("info", []), "info"),
    ("started_at a number", lambda rec: {**rec, "info": {**rec.get("info", {}), "started_at": 5}}, "info.started_at"),
    ("finished_at null", lambda rec: {**rec, "info": {**rec.get("info", {}), "finished_at": None}}, "info.finished_at"),
    ("engine a number", _set_pin("runtime.engine", 3), "runtime.engine"),
    ("engine exact", _set_pin("runtime.engine", "exact"), "runtime.engine"),
]


def _cli(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    return code, capsys.readouterr().err.strip().splitlines()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else b"" for p in sorted(folder.rglob("*"))}


def _damaged_pair(shard_pair: Path, tmp_path: Path, which: int, damage) -> tuple[Path, Path, Path]:
    """A copy of the shard pair with shard ``which``'s run.json damaged; its path and the two shards."""
    pair = tmp_path / "pair"
    shutil.copytree(shard_pair, pair)
    record = pair / f"s{which}" / "run.json"
    record.write_text(json.dumps(damage(json.loads(record.read_text()))))
    return record, pair / "s0", pair / "s1"


def test_the_undamaged_shards_merge(shard_pair, tmp_path, capsys):
    """The control: the copied pair merges (so each refusal below is the damage's doing)."""
    _, s0, s1 = _damaged_pair(shard_pair, tmp_path, 0, lambda rec: rec)
    code, err = _cli(capsys, "merge", str(s0), str(s1), "--out", str(tmp_path / "merged"))
    assert (code, err) == (0, [])
    assert json.loads((tmp_path / "merged" / "run.json").read_text())["pins"]["items.range"] == [0, 4]


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize(("case", "damage", "field"), DAMAGES, ids=[d[0] for d in DAMAGES])
def test_damaged_shard_record_is_one_line_naming_file_and_field(
    shard_pair, tmp_path, capsys, which, case, damage, field
):
    record, s0, s1 = _damaged_pair(shard_pair, tmp_path, which, damage)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("a user's file that a refused merge must leave alone\n")
    before, shards_before = _snapshot(out), _snapshot(tmp_path / "pair")
    code, err = _cli(capsys, "merge", str(s0), str(s1), "--out", str(out))
    assert code == 2 and len(err) == 1 and err[0].startswith("bayesrc: error: "), (case, err)
    assert str(record) in err[0] and f"field {field!r}" in err[0], (case, err)
    assert _snapshot(out) == before and _snapshot(tmp_path / "pair") == shards_before
    assert not [p for p in tmp_path.iterdir() if p.name not in ("pair", "out")]  # no stage left beside --out


def test_damaged_record_json_is_one_line_and_no_output(shard_pair, tmp_path, capsys):
    """Not a JSON object, or not JSON at all: one line naming the file; a missing --out is not created."""
    for text in ("[1, 2]", '{"status": "complete", "pins": {"items.range": [0, '):
        record, s0, s1 = _damaged_pair(shard_pair, tmp_path / str(len(text)), 1, lambda rec: rec)
        record.write_text(text)
        code, err = _cli(capsys, "merge", str(s0), str(s1), "--out", str(tmp_path / "merged"))
        assert code == 2 and len(err) == 1 and str(record) in err[0], err
        assert not (tmp_path / "merged").exists()


@pytest.mark.parametrize(
    ("case", "damage", "field"), [d for d in DAMAGES if d[2] == "pins"], ids=[d[0] for d in DAMAGES if d[2] == "pins"]
)
def test_pins_refuses_a_record_without_pins(shard_pair, tmp_path, capsys, case, damage, field):
    """``bayesrc pins`` used to compare a record without pins as an empty one (every pin "blocking")."""
    record, s0, s1 = _damaged_pair(shard_pair, tmp_path, 1, damage)
    code, err = _cli(capsys, "pins", str(s0), str(s1))
    assert code == 2 and len(err) == 1 and f"field {field!r}" in err[0] and str(s1) in err[0], (case, err)


@pytest.mark.parametrize(
    ("case", "damage", "field"), [d for d in DAMAGES if d[2] != "pins"], ids=[d[0] for d in DAMAGES if d[2] != "pins"]
)
def test_pins_compares_any_other_damaged_record_without_a_traceback(shard_pair, tmp_path, capsys, case, damage, field):
    """``bayesrc pins`` only compares values: a mistyped pin is a difference, never a crash."""
    _, s0, s1 = _damaged_pair(shard_pair, tmp_path, 1, damage)
    code, err = _cli(capsys, "pins", str(s0), str(s1))
    assert code in (0, 1) and err == [], (case, err)


def _refused_untouched(capsys, s0: Path, s1: Path, out: Path, *words: str) -> None:
    """A merge into an existing ``out`` holding a user's file: exit 2, one line with ``words``, ``out`` as it was."""
    out.mkdir()
    (out / "notes.txt").write_text("a user's file\n")
    before = _snapshot(out)
    code, err = _cli(capsys, "merge", str(s0), str(s1), "--out", str(out))
    assert code == 2 and len(err) == 1 and all(w in err[0] for w in words), err
    assert _snapshot(out) == before


def test_range_edited_into_another_valid_range_is_refused(shard_pair, tmp_path, capsys):
    """s1's items.range 2:4 made 2:5 (still contiguous with s0's 0:2): its trials do not hold item 4."""
    record, s0, s1 = _damaged_pair(shard_pair, tmp_path, 1, _set_pin("items.range", [2, 5]))
    _refused_untouched(capsys, s0, s1, tmp_path / "out", str(s1), "field 'items.range'", "2:5")


@pytest.mark.parametrize("which", [0, 1])
def test_damaged_trials_parquet_is_one_line_naming_it(shard_pair, tmp_path, capsys, which):
    _, s0, s1 = _damaged_pair(shard_pair, tmp_path, which, lambda rec: rec)
    trials = (s0, s1)[which] / "trials.parquet"
    trials.write_bytes(trials.read_bytes()[: trials.stat().st_size // 2])
    _refused_untouched(capsys, s0, s1, tmp_path / "out", str(trials), "Parquet")


@pytest.mark.parametrize("column", ["item_index", "k"])
def test_trials_without_a_merge_key_are_refused(shard_pair, tmp_path, capsys, column):
    import pandas as pd

    _, s0, s1 = _damaged_pair(shard_pair, tmp_path, 1, lambda rec: rec)
    trials = s1 / "trials.parquet"
    pd.read_parquet(trials).drop(columns=[column]).to_parquet(trials, index=False)
    _refused_untouched(capsys, s0, s1, tmp_path / "out", str(s1), f"field {column!r}")


def test_exact_shards_merge_and_a_range_their_parts_do_not_cover_is_refused(gemma, gemma_bank4, tmp_path, capsys):
    """Exact shards are merged from their per-item parts: the same range check, on item_index alone."""
    from bayesrc.collect import collect

    for i in range(2):
        collect(CARD, gemma_bank4, tmp_path / f"s{i}", engine="exact", shard=f"{i}/2", model=gemma)
    s0, s1 = tmp_path / "s0", tmp_path / "s1"
    assert _cli(capsys, "merge", str(s1), str(s0), "--out", str(tmp_path / "merged")) == (0, [])
    record = s0 / "run.json"
    record.write_text(json.dumps(_set_pin("items.range", [1, 2])(json.loads(record.read_text()))))
    _refused_untouched(capsys, s0, s1, tmp_path / "out", str(s0), "field 'items.range'", "1:2")
