"""``bayesrc demo``: the main job on the built-in default (its options: ``commands.py``; the job: ``handlers.py``).

Real by default: assembles the bundled Gemma-3-270M base model, collects K samples per
item on the project's own item bank under two versions (the Q4_K_M weights and the same
weights re-quantised to Q3_K_M by llama.cpp's quantiser), checks the two runs' pins, runs
the classical reliable-change analysis, the Bayesian paired change model (NumPyro, gated),
the resolution diagnostics, and writes the HTML report. ``--simulated`` swaps collection
for simulated trials with known truth (seconds instead of minutes).
"""
