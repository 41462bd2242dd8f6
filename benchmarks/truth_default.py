"""The default change model against real truth, replicate by replicate (issue 12).

    .venv/bin/python benchmarks/truth_default.py [--pairs q3,q4-prompt2,q4] [--replicates 2] [--first 1] [--seed 0]

For each bundled exact pair (Gemma-3-270M Q4_K_M against ``q3``: its Q3_K_M re-quantisation,
``q4-prompt2``: a prompt change, ``q4``: itself, a null pair with exact Delta p = 0) it draws
the same K = 10 replicate datasets as ``bayesrc truth --seed S`` (replicate r from
``SeedSequence(S)``), fits the default change model with the ``--fast`` settings (2 chains x 400
draws after 300 warm-up, sampler seed 1) and prints one row per replicate: items selected at
q = 0.10 and their realised FDP (sign / material), coverage of the exact Delta p by the 90%
intervals, the model's estimate of RCI's FDP beside RCI's realised one (RCI as the fit
cross-checks it), and the posterior of ``sigma_delta`` and ``pi``. One fit takes 5-10 minutes
on 2 cores. ``bayesrc truth`` runs the same on every method with its own aggregation; this
script is the quick per-replicate view that the README's "current default" table comes from.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", default="q3,q4-prompt2,q4")
    ap.add_argument("--replicates", type=int, default=2)
    ap.add_argument("--first", type=int, default=1, help="number of the first replicate (1-based)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from bayesrc import datasets
    from bayesrc.bayes import SamplerConfig, fit
    from bayesrc.data.exact import load_exact
    from bayesrc.truth.score import _model_scores, replicate_datasets, score_classes

    root = datasets.path("exact_gemma")
    base = load_exact(root / "q4")
    numbers = range(args.first - 1, args.first - 1 + args.replicates)  # 0-based, as bayesrc truth counts them
    for pair in args.pairs.split(","):
        for r, counts, dp, _ in replicate_datasets(base, load_exact(root / pair), k=10, seed=args.seed, replicates=numbers):
            res = fit(counts, config=SamplerConfig(chains=2, tune=300, draws=400, seed=1), fdr=0.1, model="change", covariate="auto")
            it = res.items.set_index("item_id").reindex(counts["item"].values)
            own = score_classes(it["bayes_class"].to_numpy(dtype=object), dp)
            rci = score_classes(it["rci_class"].to_numpy(dtype=object), dp)
            post = res.posterior["posterior"]
            row = {
                "pair": pair, "replicate": r + 1, "selected": own["flagged"], "fdp_sign": own["fdp_sign"], "fdp_material": own["fdp_material"],
                "coverage90": _model_scores(it, dp)["coverage90"], "rci_fdp_estimate": res.crosscheck["rci_estimated_fdp"],
                "rci_fdp_realised": rci["fdp_sign"], "rci_flagged": rci["flagged"],
                "sigma_delta": [float(post["sigma_delta"].mean()), float(post["sigma_delta"].std())], "pi": float(post["pi"].mean()),
                "max_rhat": float(res.diagnostics.max_rhat), "runtime_s": res.runtime_s,
            }  # fmt: skip
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
