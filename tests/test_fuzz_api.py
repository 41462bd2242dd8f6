"""The readers' Python API fuzzed where the CLI does not reach: every option a user can pass
(``greedy``, ``model``, ``scorer``, ``filter``, dotted field paths, ...) over malformed inputs, and
:func:`bayesrc.data.normalise_trials` on in-memory frames of any fields and values
(tests/fuzzing.py): one InputError naming the file, never a traceback."""

from __future__ import annotations

import pandas as pd
import pytest
from fuzzing import FAULTS, OPTIONS, READERS, Workspace, trial_frames, try_frame, try_input, with_options
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bayesrc.data import normalise_trials
from bayesrc.errors import InputError

FRAMES = 600
PER_READER = 120  # options x inputs per reader (5 readers)


@settings(
    max_examples=FRAMES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)
@given(trial_frames())
def test_any_frame_is_trials_or_one_named_input_error(case):
    frame, options = case
    outcome, detail = try_frame(frame, options)
    assert outcome not in FAULTS, f"{outcome}: {detail}\n{frame.to_dict()} {options}"


@pytest.fixture(scope="module", params=list(OPTIONS))
def workspace(request, tmp_path_factory):
    return Workspace.make(READERS[request.param], tmp_path_factory.mktemp("options"))


@settings(
    max_examples=PER_READER,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_any_options_on_any_input_are_one_named_input_error(workspace, data):
    name = workspace.reader.name
    options = data.draw(OPTIONS[name][0], label="options")
    mutated = data.draw(st.just(workspace.seed_bytes) | workspace.reader.mutate(workspace.seed_bytes), label="input")
    outcome, detail = try_input(workspace, mutated, run=with_options(name, options))
    assert outcome not in FAULTS, f"{name} {options}: {outcome}: {detail}"


def test_k_sample_frame_without_k_names_the_field():
    """greedy=False (K samples) on a frame without ``k`` was a bare KeyError."""
    raw = pd.DataFrame({"item_id": ["a", "b"], "is_correct": [True, False]})
    with pytest.raises(InputError, match=r"^v1\.jsonl:1: field 'k': missing required field"):
        normalise_trials(raw, path="v1.jsonl", greedy=False)
    assert normalise_trials(raw, path="v1.jsonl")["k"].tolist() == [0, 0]  # detected as single-shot by default


def test_a_frames_own_line_column_does_not_break_the_error_message():
    """A caller's ``_line`` column of text (the readers' own column name) was a ValueError inside the error path."""
    raw = pd.DataFrame({"is_correct": [True], "_line": ["first"]})
    with pytest.raises(InputError, match=r"^v1\.jsonl:1: field 'item_id'"):
        normalise_trials(raw, path="v1.jsonl")
    lines = pd.DataFrame({"item_id": ["a", "a"], "k": [0, 0], "is_correct": [True, False], "_line": [7, 9]})
    with pytest.raises(InputError, match=r"^v1\.jsonl:9: field 'k': duplicate trial"):  # whole-number lines are kept
        normalise_trials(lines, path="v1.jsonl")
