"""Importers: other tools' per-sample logs -> the canonical trials layout.

* :func:`read_lm_eval` — lm-evaluation-harness ``--log_samples`` JSONL (repeats = K);
* :func:`read_inspect` — Inspect AI eval logs, ``.json`` or ``.eval`` (epochs = K);
* :func:`read_promptfoo` — promptfoo ``eval --repeat N -o results.json`` output (repeats = K; one prompt
  under one provider per version).

All return trials validated by :func:`bayesrc.data.normalise_trials`, so they feed
``bayesrc rci`` / ``bayesrc fit`` like collected runs. :mod:`bayesrc.importers.examples`
writes small example logs of both kinds from simulated trials.
"""

from bayesrc.importers.examples import (
    inspect_log,
    lm_eval_records,
    write_examples,
    write_inspect_example,
    write_lm_eval_example,
)
from bayesrc.importers.inspect_log import read_inspect, score_value
from bayesrc.importers.lm_eval import read_lm_eval, task_from_filename
from bayesrc.importers.promptfoo import read_promptfoo

__all__ = [
    "inspect_log",
    "lm_eval_records",
    "read_inspect",
    "read_lm_eval",
    "read_promptfoo",
    "score_value",
    "task_from_filename",
    "write_examples",
    "write_inspect_example",
    "write_lm_eval_example",
]
