"""Fuzzing every reader the CLI uses: malformed and truncated inputs give one InputError (CLI exit 2)
naming the file, never a traceback, and nothing written (tests/fuzzing.py; seeded, a few hundred
inputs in all; benchmarks/faults.py runs >= 1,000 per reader). Every field retyped: tests/test_fuzz_retyped.py;
the Python API's options and in-memory frames: tests/test_fuzz_api.py."""

from __future__ import annotations

import pytest
from fuzzing import FAULTS, READERS, Workspace, try_input
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

EXAMPLES = 25  # per reader (every reader but those whose seed needs a NUTS fit: benchmarks/faults.py fuzzes them)


@pytest.fixture(scope="module", params=[name for name, r in READERS.items() if not r.slow_seed])
def workspace(request, tmp_path_factory):
    return Workspace.make(READERS[request.param], tmp_path_factory.mktemp("fuzz"))


def test_seed_inputs_are_valid(workspace):
    """The mutations start from inputs the reader accepts (so a refusal is the mutation's doing)."""
    assert try_input(workspace, workspace.seed_bytes) == ("ok", "")


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_malformed_input_is_one_named_input_error(workspace, data):
    mutated = data.draw(workspace.reader.mutate(workspace.seed_bytes), label="input")
    outcome, detail = try_input(workspace, mutated)
    assert outcome not in FAULTS, f"{workspace.reader.name}: {outcome}: {detail}"
