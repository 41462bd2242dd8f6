"""Fuzzing every reader the CLI uses: malformed and truncated inputs give one InputError (CLI exit 2)
naming the file, never a traceback, and nothing written (tests/fuzzing.py; seeded, a few hundred
inputs in all; benchmarks/faults.py runs >= 1,000 per reader)."""

from __future__ import annotations

import pytest
from fuzzing import FAULTS, READERS, RETYPED, Workspace, retyped_inputs, try_input
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

EXAMPLES = 25  # per reader (13 readers)


@pytest.fixture(scope="module", params=list(READERS))
def workspace(request, tmp_path_factory):
    return Workspace.make(READERS[request.param], tmp_path_factory.mktemp("fuzz"))


def test_seed_inputs_are_valid(workspace):
    """The mutations start from inputs the reader accepts (so a refusal is the mutation's doing)."""
    assert try_input(workspace, workspace.seed_bytes) == ("ok", "")


@settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_malformed_input_is_one_named_input_error(workspace, data):
    mutated = data.draw(workspace.reader.mutate(workspace.seed_bytes), label="input")
    outcome, detail = try_input(workspace, mutated)
    assert outcome not in FAULTS, f"{workspace.reader.name}: {outcome}: {detail}"


@pytest.mark.parametrize("name", list(RETYPED))
def test_retyped_field_is_one_named_input_error(name, tmp_path):
    """Every field of an importer's seed given a value of another type (a number for an object,
    an object for a list or a number), one at a time and in each kind of record: never a traceback."""
    ws = Workspace.make(READERS[name], tmp_path)
    faults = []
    for label, data in retyped_inputs(ws.seed_bytes, jsonl=ws.target.suffix == ".jsonl"):
        outcome, detail = try_input(ws, data, run=RETYPED[name])
        if outcome in FAULTS:
            faults.append((label, f"{outcome}: {detail}"))
    assert not faults, f"{name}: {len(faults)} faults ({'; '.join(label for label, _ in faults)}); the first: {faults[0][1]}"
