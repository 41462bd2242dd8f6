"""Benchmark: what a leapfrog step of the default change fit spends its time on, operation by operation.

    .venv/bin/python benchmarks/step_profile.py [--top 15] [--transitions 100] [--flags "--xla_cpu_..."]

On the bundled Q4_K_M -> Q3_K_M pair (300 items, K = 10), one fresh process per setting with one JAX
device and one chain: after a short warm-up, ``--transitions`` transitions are timed, then as many again
run under JAX's profiler, whose trace (Perfetto JSON) gives each compiled operation's own time (a loop's
or branch's less the operations inside it); per leapfrog step it prints the timed step and the ``--top``
operations (the profiler's own overhead inflates them: compare them with each other). Two settings side
by side, with the ratio: XLA's defaults, and ``--flags`` added to ``XLA_FLAGS`` (default: no YNNPACK library
fusions, ``--xla_cpu_experimental_ynn_fusion_type=``, measured in docs/performance.md and not adopted).

The operations' names are XLA's (``dot.35``, ``cond.819``): ``--dump DIR`` also writes the optimised
HLO there (``*cpu_after_optimizations.txt``), where each name's shapes and source line can be read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bayes import BUNDLED_PAIR, ROOT

CHILD = r"""
import collections, glob, gzip, json, os, sys, tempfile, time
import numpy as np
from bayesrc import config
jax = config.prepare_jax()  # as a fit starts JAX
from bayesrc.bayes import model_inputs, samplers
from bayesrc.bayes import change_collapsed as cc
from bayesrc.config import SamplerConfig
from bayesrc.data import item_counts, sample_from_exact
from bayesrc.datasets import path

n = int(sys.argv[1])
counts = BUNDLED_PAIR
trace, calls, timed, real = tempfile.mkdtemp(), [], {}, samplers._advance_chunks


def watched(advance, state, data, length, chunk, bar, n_chains, into):
    def one(s, d):  # call 0 warms up (and compiles), call 1 is timed, call 2 profiled
        calls.append(1)
        if len(calls) == 3:
            jax.profiler.start_trace(trace, create_perfetto_trace=True)
        t = time.perf_counter()
        out = jax.block_until_ready(advance(s, d))
        if len(calls) == 2:
            timed.update(s=time.perf_counter() - t, steps=int(np.asarray(out[1][2]).sum()))
        if len(calls) == 3:
            jax.profiler.stop_trace()
            timed["profiled_steps"] = int(np.asarray(out[1][2]).sum())
        return out
    return real(one, state, data, length, chunk, bar, n_chains, into)


samplers._advance_chunks = watched
cfg = SamplerConfig(chains=1, seed=0, progress=False, tune=n, draws=2 * n, max_draws=2 * n)
cc.change_collapsed_numpyro(model_inputs(counts), config=cfg, items=False)
events = json.load(gzip.open(glob.glob(f"{trace}/**/perfetto_trace.json.gz", recursive=True)[0]))["traceEvents"]
spans = sorted((e["tid"], e["ts"], -e.get("dur", 0.0), e["name"]) for e in events if e.get("ph") == "X")
# self time: a loop's or branch's span less the operations inside it
per_op, open_spans = collections.defaultdict(float), []
for tid, ts, neg, name in spans:
    while open_spans and (open_spans[-1][0] != tid or open_spans[-1][1] <= ts):
        open_spans.pop()
    if open_spans:
        per_op[open_spans[-1][2]] += neg / timed["profiled_steps"]
    per_op[name] -= neg / timed["profiled_steps"]  # microseconds per leapfrog step
    open_spans.append((tid, ts - neg, name))
per_op = {k: v for k, v in per_op.items() if not k.startswith(("$", "ThunkExecutor"))}
print(json.dumps({"step_ms": 1e3 * timed["s"] / timed["steps"], "steps_per_transition": timed["steps"] / n,
                  "per_op_us": per_op}))
""".replace("BUNDLED_PAIR", BUNDLED_PAIR)


def run(extra: str, transitions: int, dump: str | None) -> dict:
    """CHILD in a fresh process (one device, ``extra`` XLA flags; ``dump``: the optimised HLO's folder); its JSON line
    or ``{"error": ...}``."""
    flags = f"--xla_force_host_platform_device_count=1 {extra}" + (
        f" --xla_dump_to={dump} --xla_dump_hlo_as_text" if dump else ""
    )
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip())
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(transitions)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    return (
        json.loads(lines[-1])
        if lines and not out.returncode
        else {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--transitions", type=int, default=100)
    ap.add_argument(
        "--flags", default="--xla_cpu_experimental_ynn_fusion_type=", help="XLA flags of the second setting"
    )
    ap.add_argument("--dump", default=None, help="folder for the optimised HLO under XLA's defaults")
    args = ap.parse_args()
    rows = {}
    for name, extra in (("xla defaults", ""), (args.flags, args.flags)):
        rows[name] = r = run(extra, args.transitions, args.dump if not extra else None)
        if "error" in r:
            print(f"{name}: {r['error']}")
            continue
        top = sorted(r["per_op_us"].items(), key=lambda kv: -kv[1])[: args.top]
        print(
            f"{name}: leapfrog step {r['step_ms']:.3f} ms ({r['steps_per_transition']:.1f} steps per transition); "
            "under the profiler, per step:"
        )
        print("\n".join(f"  {us:8.1f} us  {op}" for op, us in top))
    if all("step_ms" in r for r in rows.values()):
        print(
            f"step, xla defaults / {args.flags}: {rows['xla defaults']['step_ms'] / rows[args.flags]['step_ms']:.2f}x"
        )


if __name__ == "__main__":
    main()
