"""Graded trials (issue 59, SPEC section 11): a numeric ``score`` per sample, its kind (ordinal levels or
continuous in [0, 1]) and the graded twin of the item counts, ``item_scores``.

Files are written here in the formats users bring (JSONL as an LLM-judge pipeline writes it, CSV, Parquet);
every bad one is one :class:`~bayesrc.errors.InputError` naming file, line and field. The item summaries are
checked against pandas' own group statistics (independent code).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayesrc.cli import main
from bayesrc.data import item_counts, item_scores, load_trials, normalise_trials, save_trials, simulate_pair
from bayesrc.errors import InputError


def _write_jsonl(path, records: list[dict]):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _graded(model: str, scores: dict[str, list], domain: str = "d") -> list[dict]:
    """One record per (item, k): an LLM judge's score, no ``is_correct``."""
    return [
        {"item_id": item, "k": k, "model": model, "domain": domain, "score": s}
        for item, values in scores.items()
        for k, s in enumerate(values)
    ]


def _judged_pair(rng: np.random.Generator, n_items: int = 30, k: int = 5) -> tuple[list[dict], list[dict]]:
    """Two versions of 1-5 ratings; version 2 shifted up by one level on the first third of the items."""
    base = rng.integers(1, 5, size=n_items)
    v1 = {f"i{i}": np.clip(base[i] + rng.integers(-1, 2, size=k), 1, 5).tolist() for i in range(n_items)}
    v2 = {
        f"i{i}": np.clip(base[i] + (i < n_items // 3) + rng.integers(-1, 2, size=k), 1, 5).tolist()
        for i in range(n_items)
    }
    return _graded("v1", v1), _graded("v2", v2)


def test_judge_ratings_load_without_is_correct_and_keep_their_score(tmp_path):
    records = _graded("judge", {"a": [1, 5, 3], "b": [2, 2, 4]})
    records[4]["is_missing"] = True  # the judge gave no rating: the sample is missing, its score dropped
    t = load_trials(_write_jsonl(tmp_path / "v1.jsonl", records))
    assert t["score"].dtype == np.float64 and t["is_correct"].isna().all()
    assert t["score"].tolist()[:4] == [1.0, 5.0, 3.0, 2.0] and np.isnan(t["score"].iloc[4])
    assert t["is_missing"].tolist() == [False, False, False, False, True, False]
    save_trials(t, tmp_path / "v1.parquet")  # the score survives a round trip
    back = load_trials(tmp_path / "v1.parquet")
    pd.testing.assert_series_equal(back["score"], t["score"])


def test_right_wrong_trials_carry_no_score_column():
    t = simulate_pair(5, 3, seed=1).trials_v1
    assert "score" not in t and "score" not in normalise_trials(t)


def test_partial_credit_in_csv_is_continuous(tmp_path):
    path = tmp_path / "v2.csv"
    pd.DataFrame(
        {"item_id": ["a", "a", "b", "b"], "k": [0, 1, 0, 1], "model": "v2", "score": [0.5, 1.0, 0.0, 0.25]}
    ).to_csv(path, index=False)
    t = load_trials(path)
    assert t["score"].tolist() == [0.5, 1.0, 0.0, 0.25]


@pytest.mark.parametrize(
    ("bad", "line", "field", "message"),
    [
        ({"score": "high"}, 3, "score", 'expected a finite number, got "high"'),
        ({"score": None, "is_missing": False}, 3, "score", "null but 'is_missing' is false"),
        ({"score": 2.5}, 3, "score", "2.5 is neither a whole-number level (ordinal) nor in [0, 1] (continuous)"),
        ({"score": 50}, 3, "score", "outside its levels: 50 with levels from 1"),
        ({"score": 0.5}, 3, "score", "a mix of kinds: 0.5 among whole-number levels up to 5"),
        ({"score": None, "is_correct": None, "drop": ["score", "is_correct"]}, 3, "is_correct", "nor 'score'"),
    ],
)
def test_a_bad_score_is_one_line_naming_file_line_and_field(tmp_path, bad, line, field, message):
    records = _graded("v1", {"a": [1, 5, 3, 4]})
    for key in bad.pop("drop", []):
        records[line - 1].pop(key, None)
        bad.pop(key)
    records[line - 1].update(bad)
    path = _write_jsonl(tmp_path / "v1.jsonl", records)
    with pytest.raises(InputError) as err:
        load_trials(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)
    assert message in err.value.message and "\n" not in str(err.value)


def test_a_nan_score_is_an_error_and_a_null_one_a_missing_answer(tmp_path):
    """JSON's NaN is an error; a null score is a missing answer (as a null ``is_correct`` is) unless the row says
    it is not missing. CSV and Parquet hold NaN and null alike: null."""
    path = tmp_path / "v1.jsonl"
    path.write_text('{"item_id": "a", "k": 0, "score": 3}\n{"item_id": "a", "k": 1, "score": NaN}\n')
    with pytest.raises(InputError, match=r"v1.jsonl:2: field 'score': expected a finite number, got nan"):
        load_trials(path)
    frame = pd.DataFrame({"item_id": ["a", "a", "a"], "k": [0, 1, 2], "score": [3.0, np.nan, 4.0]})
    for suffix in ("csv", "parquet"):
        path = tmp_path / f"v1.{suffix}"
        frame.to_csv(path, index=False) if suffix == "csv" else frame.to_parquet(path)
        assert load_trials(path)["is_missing"].tolist() == [False, True, False]
        said = frame.assign(is_missing=False)
        said.to_csv(path, index=False) if suffix == "csv" else said.to_parquet(path)
        with pytest.raises(InputError, match=r":[23]: field 'score': null but 'is_missing' is false"):
            load_trials(path)


def test_item_scores_equal_pandas_group_statistics_of_the_same_trials(tmp_path):
    v1, v2 = _judged_pair(np.random.default_rng(3))
    v2[7]["is_missing"], v2[7]["score"] = True, None  # a missing rating
    trials = [load_trials(_write_jsonl(tmp_path / f"v{i + 1}.jsonl", r)) for i, r in enumerate((v1, v2))]
    ds = item_scores(*trials)
    assert ds.attrs["score_kind"] == "ordinal" and ds["level"].values.tolist() == [1, 2, 3, 4, 5]
    for v, t in zip(ds["version"].values, trials):
        scored = t[~t["is_missing"]].groupby("item_id")["score"]
        got = ds.sel(version=v)
        np.testing.assert_allclose(got["score_mean"], scored.mean().reindex(ds["item"].values))
        np.testing.assert_allclose(got["score_sd"], scored.std(ddof=1).reindex(ds["item"].values))
        assert (got["n_valid"].values == scored.size().reindex(ds["item"].values).values).all()
        levels = t[~t["is_missing"]].groupby("item_id")["score"].value_counts().unstack(fill_value=0)
        levels = levels.reindex(index=ds["item"].values, columns=[1.0, 2.0, 3.0, 4.0, 5.0], fill_value=0)
        assert (got["level_counts"].values == levels.values).all()
    assert (ds["n_trials"] == 5).all() and int(ds["n_valid"].sum()) == 2 * 30 * 5 - 1
    # the versions' change in mean rating: the shifted third of the items moves up
    change = (ds["score_mean"].sel(version="v2") - ds["score_mean"].sel(version="v1")).values
    assert change[:10].mean() > 0.5 > abs(change[10:].mean())


def test_item_scores_take_one_kind_for_all_versions(tmp_path):
    frame = lambda model, scores: pd.DataFrame(  # noqa: E731
        {"item_id": ["a", "a", "b", "b"], "k": [0, 1, 0, 1], "model": model, "score": scores}
    )
    paths = []
    for name, scores in (("binary", [0, 1, 1, 1]), ("credit", [0.5, 1.0, 0.25, 0.0]), ("rating", [1, 5, 3, 4])):
        paths.append(tmp_path / f"{name}.parquet")
        frame(name, scores).to_parquet(paths[-1])
    binary, credit, rating = (load_trials(p) for p in paths)
    # a version with only 0 and 1 beside partial credit: both continuous
    ds = item_scores(binary, credit, sources=paths[:2])
    assert ds.attrs["score_kind"] == "continuous" and "level_counts" not in ds
    with pytest.raises(InputError) as err:
        item_scores(credit, rating, sources=paths[1:])
    assert err.value.path == str(paths[2]) and err.value.field == "score"
    assert "ordinal scores here but continuous in" in err.value.message
    wide = load_trials(frame("wide", [0, 10, 5, 5]).assign(model="wide").pipe(_to, tmp_path / "wide.parquet"))
    high = load_trials(frame("high", [2, 11, 5, 5]).pipe(_to, tmp_path / "high.parquet"))
    with pytest.raises(InputError, match="high.parquet: field 'score': outside the levels: 0-11 across the versions"):
        item_scores(wide, high, sources=[tmp_path / "wide.parquet", tmp_path / "high.parquet"])
    with pytest.raises(InputError, match="field 'score': missing"):
        item_scores(rating, simulate_pair(2, 2, seed=0).trials_v1, sources=["rating", "right_wrong"])


def _to(frame: pd.DataFrame, path):
    frame.to_parquet(path)
    return path


def test_the_right_wrong_analyses_refuse_graded_trials_in_one_line(tmp_path, capsys):
    """The Bayesian fit has no graded model yet (``bayesrc rci`` has: tests/test_graded_rci.py)."""
    v1, v2 = _judged_pair(np.random.default_rng(4), n_items=5)
    a, b = _write_jsonl(tmp_path / "v1.jsonl", v1), _write_jsonl(tmp_path / "v2.jsonl", v2)
    with pytest.raises(InputError, match="graded trials"):
        item_counts(load_trials(a), load_trials(b))
    code = main(["fit", str(a), str(b), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "v1.jsonl: field 'is_correct': graded trials" in err and not (tmp_path / "out").exists()
