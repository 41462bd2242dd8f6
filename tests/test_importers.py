"""Importers: round trips through generated lm-eval and Inspect logs, and clear errors."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pandas as pd
import pytest

from bayesrc.cli import main
from bayesrc.data import item_counts, load_trials, simulate_pair
from bayesrc.errors import InputError
from bayesrc.importers import (
    read_inspect,
    read_lm_eval,
    score_value,
    task_from_filename,
    write_inspect_example,
    write_lm_eval_example,
)


@pytest.fixture(scope="module")
def pair():
    return simulate_pair(30, 6, models=("imp-v1", "imp-v2"), seed=3, missing_rate=0.08)


def _key(t: pd.DataFrame) -> pd.DataFrame:
    cols = ["item_id", "domain", "k", "extracted", "correct_answer", "is_correct", "is_missing"]
    return (
        t[cols]
        .sort_values(["item_id", "k"])
        .reset_index(drop=True)
        .astype({"extracted": "string", "correct_answer": "string", "is_correct": "boolean"})
    )


def test_lm_eval_round_trip_repeats(pair, tmp_path):
    src = pair.trials_v1
    files = write_lm_eval_example(src, tmp_path / "v1")
    assert len(files) == src["domain"].nunique() and all(f.name.startswith("samples_mmlu_pro_") for f in files)
    back = read_lm_eval(tmp_path / "v1", model="imp-v1", item_id_field="doc.question_id", domain_field="doc.category")
    pd.testing.assert_frame_equal(_key(back), _key(src), check_dtype=False)
    assert back["model"].unique().tolist() == ["imp-v1"]
    # counts computed from the imported file equal those of the original trials
    a = item_counts(src, pair.trials_v2).sortby("item")
    b = item_counts(back, pair.trials_v2.assign(model="other")).sortby("item")
    np.testing.assert_array_equal(
        a["n_correct"].sel(version="imp-v1").values, b["n_correct"].sel(version="imp-v1").values
    )
    np.testing.assert_array_equal(a["n_valid"].sel(version="imp-v1").values, b["n_valid"].sel(version="imp-v1").values)


def test_lm_eval_defaults_task_ids_and_stacked_runs(pair, tmp_path):
    """Default ids are TASK/doc_id; two runs of one task stack as samples k."""
    one = pair.trials_v1[pair.trials_v1["k"] == 0]
    two = pair.trials_v1[pair.trials_v1["k"] == 1].assign(k=0)
    write_lm_eval_example(one, tmp_path / "run1", stamp="2025-06-01T10-00-00.1")
    write_lm_eval_example(two, tmp_path / "run2", stamp="2025-06-02T10-00-00.1")
    notes: list[str] = []
    back = read_lm_eval([tmp_path / "run1", tmp_path / "run2"], model="m", notes=notes)
    assert back["item_id"].str.match(r"mmlu_pro_\w+/\d+$").all()
    assert set(back["domain"]) == {f"mmlu_pro_{d}" for d in pair.trials_v1["domain"].unique()}
    assert all(sorted(ks) == [0, 1] for ks in back.groupby("item_id")["k"].apply(list))
    assert any("stacked as repeated runs" in n for n in notes)
    # single-response records are scored by their exact_match metric
    assert back["is_correct"].sum() == one["is_correct"].sum() + two["is_correct"].sum()


def test_task_from_filename():
    assert task_from_filename("samples_mmlu_pro_law_2025-01-02T10-11-12.345678.jsonl") == "mmlu_pro_law"
    assert task_from_filename("samples_gsm8k.jsonl") == "gsm8k"


@pytest.mark.parametrize("suffix", [".json", ".eval"])
def test_inspect_round_trip_epochs(pair, tmp_path, suffix):
    src = pair.trials_v2
    path = write_inspect_example(src, tmp_path / f"log{suffix}")
    if suffix == ".eval":
        assert zipfile.is_zipfile(path)
    back = read_inspect(path)
    pd.testing.assert_frame_equal(_key(back), _key(src), check_dtype=False)
    assert back["model"].iloc[0] == "llama-cpp/imp-v2"
    assert read_inspect(path, model="v2")["model"].iloc[0] == "v2"


def test_score_values():
    """As Inspect's value_to_float: C / I / P 1 / 0 / 0.5, booleans and numbers as they are; N and NaN (no grade)
    are no answer; anything else, or an infinite score, is refused."""
    assert [score_value(v) for v in ("C", "I", "P", "N", "yes", "0.25", True, 2, float("nan"))] == [
        1.0,
        0.0,
        0.5,
        None,
        1.0,
        0.25,
        1.0,
        2.0,
        None,
    ]
    for bad in ("maybe", float("inf"), None, [1]):
        with pytest.raises(ValueError):
            score_value(bad)


def _lines(path):
    return path.read_text().splitlines()


def test_lm_eval_bad_input_names_file_line_field(pair, tmp_path):
    f = write_lm_eval_example(pair.trials_v1, tmp_path)[0]
    lines = _lines(f)
    # truncated last record (a partial log)
    f.write_text("\n".join(lines[:-1] + [lines[-1][: len(lines[-1]) // 2]]) + "\n")
    with pytest.raises(InputError) as e:
        read_lm_eval(f, model="m")
    assert f.name in str(e.value) and f":{len(lines)}:" in str(e.value) and "partial" in str(e.value)
    # a record without doc_id
    rec = json.loads(lines[2])
    del rec["doc_id"]
    f.write_text("\n".join(lines[:2] + [json.dumps(rec)] + lines[3:]) + "\n")
    with pytest.raises(InputError) as e:
        read_lm_eval(f, model="m")
    assert f"{f.name}:3:" in str(e.value) and "'doc_id'" in str(e.value)
    # repeats reduced to one answer by the filter: not per-sample data
    rec = json.loads(lines[1])
    rec["filtered_resps"] = ["A"]
    f.write_text("\n".join(lines[:1] + [json.dumps(rec)] + lines[2:]) + "\n")
    with pytest.raises(InputError, match=r":2: field 'filtered_resps': .*aggregates repeats"):
        read_lm_eval(f, model="m")


def test_inspect_bad_input_names_sample_and_field(pair, tmp_path):
    path = write_inspect_example(pair.trials_v1, tmp_path / "log.json")
    log = json.loads(path.read_text())
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InputError, match=r"log\.json:\d+: malformed JSON.*partial"):
        read_inspect(path)
    bad = json.loads(json.dumps(log))
    bad["samples"][7]["scores"]["choice"]["value"] = "maybe"
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError) as e:
        read_inspect(path)
    msg = str(e.value)
    assert "log.json" in msg and "sample 7" in msg and "field 'scores.choice.value'" in msg and '"maybe"' in msg
    # partial credit makes the whole log graded: C / I read as 1 / 0 beside P's 0.5
    graded = json.loads(json.dumps(log))
    graded["samples"][7]["scores"]["choice"]["value"] = "P"
    path.write_text(json.dumps(graded))
    t = read_inspect(path)
    assert t["is_correct"].isna().all() and set(t["score"].dropna()) == {0.0, 0.5, 1.0}
    (tmp_path / "binary.json").write_text(json.dumps(log))
    binary = read_inspect(tmp_path / "binary.json")["is_correct"].astype("Float64").fillna(-1).to_numpy()
    assert (t["score"].fillna(-1).to_numpy() != binary).sum() == 1  # sample 7 alone
    bad = json.loads(json.dumps(log))
    del bad["samples"][3]["epoch"]
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"sample 3: missing required field.*|field 'epoch'"):
        read_inspect(path)
    bad = json.loads(json.dumps(log))
    bad["status"] = "error"
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match="did not finish"):
        read_inspect(path)
    assert len(read_inspect(path, allow_partial=True)) == len(log["samples"])
    bad = json.loads(json.dumps(log))
    del bad["samples"]
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match="field 'samples': log has no samples"):
        read_inspect(path)


def test_cli_import_writes_loadable_trials_and_refuses_bad_input(pair, tmp_path, capsys):
    write_lm_eval_example(pair.trials_v1, tmp_path / "lm")
    write_inspect_example(pair.trials_v2, tmp_path / "ins.json")
    out1, out2 = tmp_path / "v1.parquet", tmp_path / "v2.parquet"
    assert (
        main(
            [
                "import",
                "lm-eval",
                str(tmp_path / "lm"),
                "--model",
                "v1",
                "--item-id-field",
                "doc.question_id",
                "--domain-field",
                "doc.category",
                "--out",
                str(out1),
            ]
        )
        == 0
    )
    assert main(["import", "inspect", str(tmp_path / "ins.json"), "--model", "v2", "--out", str(out2)]) == 0
    t1, t2 = load_trials(out1), load_trials(out2)
    ds = item_counts(t1, t2)
    assert ds.sizes["item"] == 30 and int(ds["n_trials"].max()) == 6
    # bad input: exit 2, one clear line, nothing written
    (tmp_path / "bad.json").write_text('{"eval": {"model": "m"}, "samples": [{"id": 1}]}')
    out3 = tmp_path / "bad.parquet"
    capsys.readouterr()
    assert main(["import", "inspect", str(tmp_path / "bad.json"), "--out", str(out3)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("bayesrc: error:")
        and "bad.json" in err
        and "'epoch'" in err
        and len(err.strip().splitlines()) == 1
    )
    assert not out3.exists()


def test_lm_eval_multiple_choice_and_several_filters(tmp_path):
    """Loglikelihood (multiple-choice) records scored by `acc`; a file with two filters uses the one chosen."""
    path = tmp_path / "samples_arc_easy_2025-06-01T12-00-00.000000.jsonl"
    recs = []
    for doc_id, (lls, gold) in enumerate(
        [([-3.1, -0.4, -5.0, -2.2], 1), ([-1.0, -2.5, -0.7, -4.0], 0), ([-2.0, -2.1, -3.3, -0.9], 3)]
    ):
        for filt in ("none", "other"):
            acc = float(int(np.argmax(lls)) == gold) if filt == "none" else 1.0
            recs.append(
                {
                    "doc_id": doc_id,
                    "doc": {"id": f"arc-{doc_id}"},
                    "target": gold,
                    "filter": filt,
                    "metrics": ["acc", "acc_norm"],
                    "resps": [[[ll, False]] for ll in lls],
                    "filtered_resps": [[ll, False] for ll in lls],
                    "acc": acc,
                    "acc_norm": acc,
                }
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    notes: list[str] = []
    t = read_lm_eval(path, model="m", notes=notes)
    assert list(t["is_correct"]) == [True, False, True] and list(t["extracted"]) == ["1", "2", "3"]
    assert list(t["item_id"]) == ["arc_easy/0", "arc_easy/1", "arc_easy/2"] and (t["k"] == 0).all()
    assert any("2 filters" in n and "'none'" in n for n in notes)
    assert read_lm_eval(path, model="m", filter="other")["is_correct"].all()
    with pytest.raises(InputError, match="filter 'x' not in this file"):
        read_lm_eval(path, model="m", filter="x")
    bad = dict(recs[0], acc=0.5)
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(InputError, match=r":1: field 'acc': expected 0 or 1"):
        read_lm_eval(path, model="m")


def _inspect_log_with(pair, tmp_path, change):
    """The example Inspect log with ``change(log)`` applied, written to log.json."""
    path = write_inspect_example(pair.trials_v1, tmp_path / "log.json")
    log = json.loads(path.read_text())
    change(log)
    path.write_text(json.dumps(log))
    return path


@pytest.mark.parametrize("scores", [0.5, [1, 2], ["choice"]])
def test_inspect_scores_not_an_object_names_sample_and_field(pair, tmp_path, scores):
    path = _inspect_log_with(pair, tmp_path, lambda log: log["samples"][5].update(scores=scores))
    with pytest.raises(InputError) as e:
        read_inspect(path)
    msg = str(e.value)
    assert "log.json" in msg and "sample 5" in msg and "field 'scores'" in msg and "expected an object of scores" in msg


@pytest.mark.parametrize("epochs", [{"n": 6}, "6", 2.5, 0])
def test_inspect_epochs_not_a_count_names_field(pair, tmp_path, epochs):
    path = _inspect_log_with(pair, tmp_path, lambda log: log["eval"]["config"].update(epochs=epochs))
    with pytest.raises(InputError, match=r"log\.json: field 'eval\.config\.epochs': expected a number of epochs >= 1"):
        read_inspect(path)


def test_inspect_eval_spec_not_an_object_names_field(pair, tmp_path):
    path = _inspect_log_with(pair, tmp_path, lambda log: log.update(eval=[1]))
    with pytest.raises(InputError, match=r"log\.json: field 'eval': expected an object"):
        read_inspect(path)


def _mc_file(tmp_path, **change):
    """A multiple-choice lm-eval samples file: two records, the second with ``change`` applied."""
    path = tmp_path / "samples_arc_easy_2025-06-01T12-00-00.000000.jsonl"
    lls = [-3.1, -0.4, -5.0]
    recs = [
        {
            "doc_id": i,
            "target": 1,
            "filter": "other",
            "metrics": ["acc"],
            "resps": [[[ll, False]] for ll in lls],
            "filtered_resps": [[ll, False] for ll in lls],
            "acc": 1.0,
        }
        for i in range(2)
    ]
    recs[1].update(change)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_lm_eval_multiple_choice_entries_not_pairs_names_line_and_field(tmp_path):
    assert read_lm_eval(_mc_file(tmp_path), model="m")["extracted"].tolist() == ["1", "1"]
    path = _mc_file(tmp_path, filtered_resps=[{"ll": -3.1}, {"ll": -0.4}, {"ll": -5.0}])
    with pytest.raises(InputError) as e:
        read_lm_eval(path, model="m")
    msg = str(e.value)
    assert f"{path.name}:2: field 'filtered_resps'" in msg and "[loglikelihood, is_greedy] pair" in msg


def test_lm_eval_metrics_not_names_names_line_and_field(tmp_path):
    with pytest.raises(InputError, match=r":2: field 'metrics': expected a list of metric names"):
        read_lm_eval(_mc_file(tmp_path, metrics=[{"name": "acc"}]), model="m")


def test_cli_import_non_object_scores_is_one_error_line(pair, tmp_path, capsys):
    path = _inspect_log_with(pair, tmp_path, lambda log: log["samples"][2].update(scores=1.5))
    out = tmp_path / "v1.parquet"
    capsys.readouterr()
    assert main(["import", "inspect", str(path), "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("bayesrc: error:")
        and "log.json" in lines[0]
        and "sample 2" in lines[0]
        and "'scores'" in lines[0]
    )
    assert not out.exists()
