"""Benchmark: the default fits in a fresh process, this code side by side with an earlier release.

    .venv/bin/python benchmarks/bayes.py [--sizes 40,300,2000,12000] [--baseline REF] [--skip-baseline-above N]
        [--backends numpyro,pymc] [--warm] [--floor] [--plain] [--refits N]

Each row is one fresh Python process that simulates the data, imports bayesrc and runs the
default ``bayesrc.bayes.fit(counts)`` (change model; the beta-binomial at 2,000 items too), each backend of
``--backends`` (PyMC's twin up to 2,000 items), then the PyMC / NumPyro ratio per row:
wall time of the whole process (import and compile included), the fit's own ``runtime_s``, the
gate, its attempts (``#``: 2 or 3 when it escalated) and peak memory. Cold (default): every process gets an empty
JAX compilation cache, so it compiles; ``--warm``: each tree (this code, the baseline) has a cache of its own,
filled by an unreported first run of each row, so the reported run loads what it compiled (a user's second process).
``--baseline REF`` (default ``bb41b19``, the last commit before issue 28) checks REF out in a
``git worktree`` and runs the same processes on its code, interleaved with this code's on the
same machine, and prints the ratio baseline / this. Goals (issue 28, 2 cores): change model
40 items <= 5 s, 300 <= 15 s, 2,000 <= 30 s, 12,000 (14 domains x 10 letters) <= 120 s, peak
<= 1.5 GB; beta-binomial at 2,000 <= 3 s; PyMC within 2x of NumPyro.

Sizes ``q3`` and ``q3k40``: the bundled exact Q4_K_M -> Q3_K_M pair (300 items) sampled at K = 10 and 40.

``--floor`` adds, per row, the same process with the fit cut to its fixed cost (:data:`FLOOR`:
2 chains x 25 warm-up steps + 25 draws, no escalation, no checks): import, tracing, compilation
(or loading it from the cache) and the fit's bookkeeping, with next to no sampling. A wall-time
goal below that floor cannot be met by a faster sampler or likelihood.

``--refits N`` adds, per NumPyro change row, one process per tree that fits the row's data and then N new samples of
the same items (new seeds) one after the other, as ``bayesrc truth``'s replicates or a notebook's refits do: the mean
wall time of a refit, and the baseline's over this code's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the bundled exact Q4_K_M -> Q3_K_M pair (300 items) sampled at K = 10, as the children load it
#: (benchmarks/step_profile.py too)
BUNDLED_PAIR = (
    'item_counts(sample_from_exact(path("exact_gemma/q4"), k=10, seed=1), '
    'sample_from_exact(path("exact_gemma/q3"), k=10, seed=2))'
)

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np
from bayesrc.data import item_counts, simulate_pair
from bayesrc.data.simulate import item_truth
size, model, backend = sys.argv[1], sys.argv[2], sys.argv[3]
if size.startswith("q3"):  # the bundled exact Q4_K_M -> Q3_K_M pair (300 items), K = 10 (q3k40: K = 40)
    from bayesrc.data import sample_from_exact
    from bayesrc.datasets import path
    K = 40 if size == "q3k40" else 10
    def dataset(s):  # s = 1: the samples every row fits (BUNDLED_PAIR)
        v1 = sample_from_exact(path("exact_gemma/q4"), k=K, seed=2 * s - 1)
        return item_counts(v1, sample_from_exact(path("exact_gemma/q3"), k=K, seed=2 * s))
else:
    n = int(size)
    domains = [f"d{i:02d}" for i in range(14)] if n >= 12000 else ["physics", "law", "psychology", "economics"]
    truth = item_truth(n, domains=domains, sigma_theta=2.0, sigma_delta=1.0, seed=1)
    truth["correct_answer"] = np.array(list("ABCDEFGHIJ" if n >= 12000 else "ABCD"))[
        np.random.default_rng(1).integers(0, 10 if n >= 12000 else 4, n)
    ]
    def dataset(s):
        sim = simulate_pair(truth=truth, k=10, seed=s)
        return item_counts(sim.trials_v1, sim.trials_v2)
counts = dataset(1)
from bayesrc.bayes import fit
t1 = time.perf_counter()
res = fit(counts, model=model, backend=backend)
print(json.dumps({"process_s": time.perf_counter() - t0, "fit_s": time.perf_counter() - t1, "runtime_s": res.runtime_s,
                  "passed": bool(res.diagnostics.passed), "attempts": len(res.payload.get("attempts", [1])),
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""

FLOOR = CHILD.replace(
    "res = fit(counts, model=model, backend=backend)",
    "from bayesrc.config import SamplerConfig\n"
    "from bayesrc.bayes import GateConfig\n"
    "res = fit(counts, model=model, backend=backend, gate=GateConfig(escalate=False), checks=False,\n"
    "          config=SamplerConfig(chains=2, tune=25, draws=25, max_draws=25, progress=False))",
)
assert FLOOR != CHILD, "FLOOR no longer finds CHILD's fit call"

# New samples of the same items fitted one after the other in one process (truth's replicates, a notebook's refits):
# each refit's wall time.
REFITS = CHILD.replace(
    "res = fit(counts, model=model, backend=backend)",
    """res = fit(counts, model=model, backend=backend)
refits = []
for s in range(2, 2 + int(sys.argv[4])):
    again = dataset(s)
    t2 = time.perf_counter()
    fit(again, model=model, backend=backend)
    refits.append(time.perf_counter() - t2)""",
).replace('"runtime_s": res.runtime_s,', '"runtime_s": res.runtime_s, "refit_s": refits,')
assert "refits.append" in REFITS and "refit_s" in REFITS, "REFITS no longer finds CHILD's fit call or its output"

# The model a user would write instead (issue 57's bar): a paired logit per item, theta_i and delta_i
# non-centred around per-domain means, every item parameter sampled by NUTS, 4 chains x 500 draws after
# 500 warm-up steps; its posterior gated like the default fit's hyperparameters.
PLAIN = CHILD.replace(
    "res = fit(counts, model=model, backend=backend)",
    """from types import SimpleNamespace
from bayesrc.config import precision, prepare_jax
prepare_jax()  # the host devices (parallel chains) and the compilation cache, as a fit has them
import jax, numpyro, numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
import arviz_base as azb
from bayesrc.bayes import model_inputs
from bayesrc.bayes.diagnostics import gate
d = model_inputs(counts, covariate=None)
def paired_logit(y, n, dom, n_domains):
    mu = numpyro.sample("mu", dist.Normal(0, 2).expand([n_domains]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2).expand([n_domains]).to_event(1))
    shift = numpyro.sample("shift", dist.Normal(0, 1).expand([n_domains]).to_event(1))
    tau = numpyro.sample("tau", dist.HalfNormal(1))
    with numpyro.plate("item", y.shape[0]):
        theta = mu[dom] + sigma[dom] * numpyro.sample("z", dist.Normal(0, 1))
        delta = shift[dom] + tau * numpyro.sample("w", dist.Normal(0, 1))
        numpyro.sample("y1", dist.Binomial(n[:, 0], logits=theta), obs=y[:, 0])
        numpyro.sample("y2", dist.Binomial(n[:, 1], logits=theta + delta), obs=y[:, 1])
with precision():
    mcmc = MCMC(NUTS(paired_logit), num_warmup=500, num_samples=500, num_chains=4, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), d.y, d.n, d.dom, d.n_domains)
post = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
diverging = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"])
dt = azb.from_dict({"posterior": post, "sample_stats": {"diverging": diverging}})
res = SimpleNamespace(runtime_s=0.0, diagnostics=gate(dt, list(post)), payload={})""",
)
assert PLAIN != CHILD, "PLAIN no longer finds CHILD's fit call"


def run_child(tree: Path, n: int, model: str, backend: str, cache: str, script: str = CHILD, *extra: str) -> dict:
    """``script`` (default :data:`CHILD`) in a fresh process on ``tree``'s code; its last JSON line, or
    ``{"error": ...}``."""
    env = dict(
        os.environ, PYTHONPATH=str(tree), BAYESRC_JAX_CACHE=cache or tempfile.mkdtemp(prefix="bayesrc-bench-jax-")
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(n), model, backend, *extra],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(lines[-1])


def fit_columns(r: dict) -> str:
    """A child's process time, fit time, gate, attempts and peak memory (or its error)."""
    if "process_s" not in r:
        return f"{r.get('error', '-')[:40]:>40}"
    return (
        f"{r['process_s']:15.1f} {r['fit_s']:7.1f} {('ok' if r['passed'] else 'FAIL'):>6} "
        f"{r['attempts']:>2} {r['peak_gb']:5.2f}"
    )


def refit_columns(trees: list[Path], n: str, refits: int, caches: dict) -> str:
    """Each tree's refits (:data:`REFITS`) in one process: their mean wall time, the baseline's over this code's."""
    means = []
    for tree in trees:
        r = run_child(tree, n, "change", "numpyro", caches[tree], REFITS, str(refits))
        means.append(sum(r["refit_s"]) / len(r["refit_s"]) if "refit_s" in r else None)
    cells = [f"{m:.1f} s a refit ({refits})" if m else "-" for m in means]
    ratio = f" | {means[1] / means[0]:.2f}x" if len(means) == 2 and all(means) else ""
    return " | ".join(cells) + ratio


def baseline_tree(ref: str) -> Path:
    """A worktree of ``ref``'s code, named by the commit it resolves to: a tree named by the ref itself (``HEAD``)
    was reused once the ref had moved, so a run measured against an older commit than it said."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", f"{ref}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"bayesrc-baseline-{commit}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True, capture_output=True
        )
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="40,300,2000,12000")
    ap.add_argument("--backends", default="numpyro,pymc")
    ap.add_argument("--baseline", default="bb41b19", help="git ref of the earlier code ('' to skip)")
    ap.add_argument(
        "--skip-baseline-above",
        type=int,
        default=300,
        help="baseline runs only up to this many items (it took 10-28 min at 120-300)",
    )
    ap.add_argument(
        "--warm",
        action="store_true",
        help="a compilation cache per tree, filled by an unreported first run of each row",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also each row's fixed cost: the same process sampling next to nothing (FLOOR)",
    )
    ap.add_argument(
        "--refits",
        type=int,
        default=0,
        help="also, per NumPyro change row, N fits of new samples of the same items after it in one process (REFITS)",
    )
    ap.add_argument(
        "--plain",
        action="store_true",
        help="also, beside each NumPyro change row, the plain paired-logit model on the same counts (PLAIN)",
    )
    args = ap.parse_args()
    base = baseline_tree(args.baseline) if args.baseline else None
    caches = {tree: tempfile.mkdtemp(prefix="bayesrc-bench-jax-") if args.warm else "" for tree in (ROOT, base)}
    sizes = args.sizes.split(",")  # item counts, or q3 / q3k40: the bundled Q4_K_M -> Q3_K_M pair (300 items)
    runs = [
        (n, "change", b)
        for n in sizes
        for b in args.backends.split(",")
        if not (b == "pymc" and not n.startswith("q3") and int(n) >= 12000)
    ]
    runs += [("2000", "betabinom", b) for b in args.backends.split(",")]
    print(
        f"{'items':>6} {'model':>9} {'backend':>8} | {'this: process s':>15} {'fit s':>7} {'gate':>6} {'#':>2} "
        f"{'GB':>5} | {'baseline: process s':>19} {'gate':>6} | ratio"
    )
    seconds = {}
    for n, model, backend in runs:
        items = 300 if n.startswith("q3") else int(n)
        trees = [ROOT] + ([base] if base and items <= args.skip_baseline_above else [])
        if args.warm:  # fill each tree's cache with this row's compiled code (and the floor's)
            for tree in trees:
                run_child(tree, n, model, backend, caches[tree])
            if args.floor:
                run_child(ROOT, n, model, backend, caches[ROOT], FLOOR)
        this = run_child(ROOT, n, model, backend, caches[ROOT])
        seconds[n, model, backend] = this.get("process_s")
        old = run_child(base, n, model, backend, caches[base]) if base in trees else {}
        ratio = f"{old['process_s'] / this['process_s']:.1f}x" if "process_s" in old and "process_s" in this else "-"
        old_s = (
            f"{old['process_s']:19.1f} {('ok' if old['passed'] else 'FAIL'):>6}"
            if "process_s" in old
            else f"{'-':>19} {'':>6}"
        )
        floor = run_child(ROOT, n, model, backend, caches[ROOT], FLOOR) if args.floor else {}
        floor_s = (
            f" | floor {floor['process_s']:.1f} s ({floor['process_s'] / this['process_s']:.0%} of this)"
            if "process_s" in floor and "process_s" in this
            else ""
        )
        print(f"{n:>6} {model:>9} {backend:>8} | {fit_columns(this)} | {old_s} | {ratio}{floor_s}", flush=True)
        if args.refits and model == "change" and backend == "numpyro":
            print(f"{n:>6} {'refits':>9} {backend:>8} | {refit_columns(trees, n, args.refits, caches)}", flush=True)
        if args.plain and model == "change" and backend == "numpyro":
            if args.warm:
                run_child(ROOT, n, model, backend, caches[ROOT], PLAIN)
            plain = run_child(ROOT, n, model, backend, caches[ROOT], PLAIN)
            versus = (
                f" | default / plain {this['process_s'] / plain['process_s']:.2f}x"
                if "process_s" in plain and "process_s" in this
                else ""
            )
            print(f"{n:>6} {'plain':>9} {backend:>8} | {fit_columns(plain)} | {'':>19} {'':>6} |{versus}", flush=True)
    twins = [
        (n, m, seconds[n, m, "pymc"] / seconds[n, m, "numpyro"])
        for n, m, b in runs
        if b == "pymc" and seconds.get((n, m, "pymc")) and seconds.get((n, m, "numpyro"))
    ]
    if twins:  # the goal: PyMC within 2x of NumPyro
        print("PyMC / NumPyro, process s: " + ", ".join(f"{m} {n} items {r:.2f}x" for n, m, r in twins))


if __name__ == "__main__":
    main()
