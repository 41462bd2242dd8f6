"""Single process vs Ray with N workers, on the same model, items and seeds.

    .venv/bin/python benchmarks/ray_collect.py [--items 24] [--k 10] [--workers 2] [--engine fast]
        [--address HOST:PORT] [--card models/gemma-3-270m-q4_k_m.toml]

Prints trials/s of each (sampling only, and end to end with model loading), the ratio,
the cluster start-up separately (a local cluster unless --address / $RAY_ADDRESS), whether
the two runs hold identical trials, and the workers needed for a target workload
(default 10 models x 12,000 items x K = 10 within an hour) at the measured per-worker rate.
On a GPU machine: a card with ``n_gpu_layers = -1`` and ``--workers`` = number of GPUs.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=24)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--engine", default="fast")
    ap.add_argument("--address", default=os.environ.get("RAY_ADDRESS"))
    ap.add_argument("--card", default=str(ROOT / "models" / "gemma-3-270m-q4_k_m.toml"))
    ap.add_argument(
        "--target", default="10,12000,10", help="models,items,K for the on-paper sizing (default 10,12000,10)"
    )
    ap.add_argument("--hours", type=float, default=1.0)
    args = ap.parse_args()

    from bayesrc.collect import (
        builtin_bank,
        collect,
        load_bank,
        load_card,
        read_run_trials,
    )
    from bayesrc.scale import collect_ray, ray_session

    card = load_card(args.card)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bank = load_bank(builtin_bank(tmp / "bank.jsonl", n_items=args.items, seed=0))
        n = args.items * args.k

        t0 = time.perf_counter()
        single = collect(card, bank, tmp / "single", k=args.k, engine=args.engine)
        single_wall = time.perf_counter() - t0
        threads = card.n_threads or max(1, (os.cpu_count() or 2) // 2)  # llama.cpp's default

        # kept up for the timing
        with ray_session(args.address, num_cpus=args.workers * (card.n_threads or 1)) as session:
            startup = session.startup_seconds
            t0 = time.perf_counter()
            res = collect_ray(card, bank, tmp / "ray", k=args.k, engine=args.engine, workers=args.workers)
            ray_wall = time.perf_counter() - t0
        cols = ["item_index", "k", "seed", "response", "extracted"]
        a = read_run_trials(tmp / "single")[cols].sort_values(["item_index", "k"]).reset_index(drop=True)
        b = read_run_trials(tmp / "ray")[cols].sort_values(["item_index", "k"]).reset_index(drop=True)
        identical = a.equals(b)

    r1, r1_wall = n / single.sample_seconds, n / single_wall
    rr, rr_wall = n / res.sample_seconds, n / ray_wall
    print(
        f"{args.items} built-in items x K = {args.k} = {n} trials, engine {args.engine}, {os.cpu_count()} CPU cores, "
        f"llama.cpp threads per process {threads}"
    )
    print(
        f"single process : {r1:7.2f} trials/s sampling; {r1_wall:7.2f} trials/s end to end "
        f"({single_wall:.1f} s incl. model load)"
    )
    print(
        f"Ray, {args.workers} workers : {rr:7.2f} trials/s sampling; {rr_wall:7.2f} trials/s end to end "
        f"({ray_wall:.1f} s incl. "
        f"{res.actor_start_seconds:.1f} s actor start + model load, {res.n_shards} shards, merge)"
    )
    print(f"ratio Ray/single: {rr / r1:.2f}x sampling, {rr_wall / r1_wall:.2f}x end to end")
    print(
        f"cluster start-up (not in the above): {startup:.1f} s "
        f"({'joined ' + args.address if args.address else 'local cluster'})"
    )
    print(f"identical trials (item, k, seed, response, answer): {identical}")
    models, items, k = (int(x) for x in args.target.split(","))
    need_trials = models * items * k / (args.hours * 3600)
    per_worker = rr / args.workers
    print(
        f"on paper: {models} models x {items} items x K = {k} in {args.hours:g} h needs {need_trials:.0f} trials/s "
        f"= {need_trials / k:.1f} items/s; at {per_worker:.2f} trials/s per worker measured here that is "
        f"{math.ceil(need_trials / per_worker)} workers"
    )


if __name__ == "__main__":
    main()
