"""One llama-cpp-python build's collection speed, for ``benchmarks/gpu_check.sh``: one JSON line.

    python benchmarks/gpu_collect.py --build cuda --gguf FILE --n-gpu-layers -1 --items 2000 --k 10 \
        --exact-items 200 --out DIR

With the llama-cpp-python build that is on ``PYTHONPATH`` (the script builds one with CUDA and one for the CPU
and runs this once for each), on the Q4_K_M card with ``--gguf`` as its weights and ``--n-gpu-layers`` (``-1``:
every layer on the GPU): the fast engine's K samples per item of ``--items`` items of the built-in bank (its
distinct items repeated under new ids where more are asked for) and the exact engine on the first
``--exact-items``, each timed from the model's load to the run's last file. Prints the build, whether it can
offload, trials/s and s/trial (the seed study's loop took 0.2 s/trial), exact items/s and each item's exact
probability of a correct answer (the script compares the builds' on the same items).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"


def repeated_builtin_bank(path: Path, n_items: int) -> Path:
    """The built-in bank's first ``n_items`` items, its distinct items repeated (ids ``-r1``, ``-r2``, ...) past its
    capacity."""
    from bayesrc.collect import builtin_capacity, builtin_items

    base = builtin_items(min(n_items, builtin_capacity()))
    rows = [
        dict(base[i % len(base)], item_id=f"{base[i % len(base)]['item_id']}-r{i // len(base)}") for i in range(n_items)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def timed_collect(card, bank: Path, out: Path, **settings) -> float:
    """Seconds for one ``collect`` into the new directory ``out`` (model load included)."""
    from bayesrc.collect import collect

    t0 = time.perf_counter()
    collect(card, bank, out, **settings)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="the build's name in the result (cuda, cpu)")
    ap.add_argument("--build-s", type=int, default=0, help="seconds its build took (0: not built here), into the row")
    ap.add_argument("--gguf", type=Path, required=True, help="the Q4_K_M weights (reassembled from their parts)")
    ap.add_argument("--n-gpu-layers", type=int, default=0)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--exact-items", type=int, default=200)
    ap.add_argument("--out", type=Path, required=True, help="a new directory for the runs")
    args = ap.parse_args()

    import llama_cpp
    import pandas as pd

    from bayesrc.collect import load_card

    card = dataclasses.replace(load_card(CARD), path=args.gguf.resolve(), n_gpu_layers=args.n_gpu_layers)
    args.out.mkdir(parents=True)
    bank = repeated_builtin_bank(args.out / "bank.jsonl", args.items)
    fast_s = timed_collect(card, bank, args.out / "fast", k=args.k, engine="fast")
    exact_bank = repeated_builtin_bank(args.out / "exact_bank.jsonl", args.exact_items)
    exact_s = timed_collect(card, exact_bank, args.out / "exact", engine="exact")
    exact = pd.read_parquet(args.out / "exact" / "items_exact.parquet")
    trials = args.items * args.k
    print(
        json.dumps(
            {
                "build": args.build,
                "build_s": args.build_s,
                "llama_cpp_python": llama_cpp.__version__,
                "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
                "n_gpu_layers": args.n_gpu_layers,
                "items": args.items,
                "k": args.k,
                "fast_s": fast_s,
                "trials_per_s": trials / fast_s,
                "s_per_trial": fast_s / trials,
                "exact_items": args.exact_items,
                "exact_s": exact_s,
                "exact_items_per_s": args.exact_items / exact_s,
                "exact_p_correct": dict(zip(exact["item_id"], exact["p_correct"].round(6))),
            }
        )
    )


if __name__ == "__main__":
    main()
