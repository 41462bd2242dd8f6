"""Real data shipped with bayesrc, so a clone works with nothing beside it.

See ``README.md`` in this folder for each file's source and licence.

Examples
--------
>>> from bayesrc.datasets import path
>>> path("mmlu_pro_2000.jsonl").name
'mmlu_pro_2000.jsonl'
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

#: The reference study's 2,000 MMLU-Pro items (paper 001).
MMLU_PRO_2000 = "mmlu_pro_2000.jsonl"
#: Its real greedy (T = 0) answers of Llama-3-8B-Instruct and Llama-3.1-8B-Instruct (Q5_K_M).
GREEDY_LLAMA3 = ("greedy/llama3-8b_greedy.jsonl", "greedy/llama3.1-8b_greedy.jsonl")
#: The switch-matrix cells published in paper 004's appendix.
SWITCH_CELLS = "switch_matrix_cells.csv"


def path(name: str) -> Path:
    """Path of a bundled data file or folder (``name`` relative to this folder).

    Parameters
    ----------
    name : str
        e.g. ``"mmlu_pro_2000.jsonl"``, ``"greedy/llama3-8b_greedy.jsonl"`` or an exact run
        directory, ``"exact_gemma/q3"``.

    Raises
    ------
    FileNotFoundError
        If no such file is bundled.
    """
    p = _HERE / name
    if not p.exists():
        raise FileNotFoundError(f"no bundled data file {name!r} in {_HERE}")
    return p
