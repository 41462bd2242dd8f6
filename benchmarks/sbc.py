"""Simulation-based calibration of the Bayesian item models (issue 31; Talts et al. 2018).

    python benchmarks/sbc.py [--models change betabinom] [--backends numpyro pymc] [--sims 200]
        [--items 40] [--k 10] [--first 0] [--out benchmarks/results/sbc.jsonl] [--summarise]
        [--engine bayesrc|simuk] [--plots docs/_static/sbc]

Each simulation draws the hyperparameters from the model's own priors on a fixed design (two
domains of ``items / 2``, K trials per item and version, no covariate:
:func:`bayesrc.bayes.prior_predictive.prior_draws`), then the data from them exactly as the
posterior predictive does (:func:`bayesrc.bayes.checks.new_item_p`, ``y ~ Binomial(K, p)``), and
fits the collapsed model with every default (``SamplerConfig(seed=sim)``, no escalation: SBC
checks the sampler as configured). The rank of each drawn hyperparameter entry among 99 evenly
thinned posterior draws is recorded (0-99); if the model's computation is right, every rank is
uniform. Rows go to ``--out`` as JSON lines (resumable with ``--first``); ``--summarise`` reads them
and tests each parameter's ranks for uniformity (chi-square over 10 bins, Holm over the
parameters of a model and backend, level 0.01), printing the histograms; ``--plots DIR`` draws
each group's ranks as a Δ-ECDF with a second uniformity test (:func:`plot_ranks`). Goal (issue 31): no
rejection for either model or backend at >= 200 simulations. Fits that fail the gate are kept
and counted (dropping them would bias the ranks).

``--engine simuk`` runs the same check through simuk's own loop instead (NumPyro twin only:
simuk's reference draws from the model's priors, its NumPyro ``MCMC``, its rank statistic), with
the counts drawn by :func:`simulate_counts`; the rows carry ``"engine": "simuk"`` and are tested
apart. ``tests/test_bayes_checks.py`` checks that :func:`ranks` equals simuk's rank statistic on
the same fits.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import xarray as xr

N_RANK_DRAWS = 99  # posterior draws a rank is taken among: ranks 0..99, 100 values
N_BINS = 10
SIMUK_CHUNK = 10  # simulations per simuk run (its seed is the chunk's first simulation)
# the sampled hyperparameters
HYPER = {"change": ["mu_theta", "sigma_theta", "shift", "sigma_delta", "pi"], "betabinom": ["logit_mu", "log_kappa"]}


def design(n_items: int, k: int):
    """The fixed design: two domains, K trials per item and version (the counts are replaced per simulation)."""
    from bayesrc.bayes import ModelInputs

    dom = np.repeat([0, 1], [n_items // 2, n_items - n_items // 2])
    y = np.zeros((n_items, 2), np.int64)
    return ModelInputs(
        y=y,
        n=np.full_like(y, k),
        dom=dom,
        items=np.array([f"i{i:04d}" for i in range(n_items)]),
        versions=("v1", "v2"),
        domains=("d0", "d1"),
    )


def simulate(data, model: str, sim: int):
    """The drawn hyperparameters (one draw, posterior layout) and the design with counts drawn from them."""
    from dataclasses import replace

    from bayesrc.bayes.prior_predictive import prior_draws

    truth = prior_draws(data, model, n_draws=1, seed=10_000 + sim)
    return truth, replace(data, y=simulate_counts(truth, data, np.random.default_rng(20_000 + sim)))


def simulate_counts(truth, data, rng: np.random.Generator) -> np.ndarray:
    """Counts (item, version) drawn given one draw of the hyperparameters, as the posterior predictive draws them."""
    from bayesrc.bayes.checks import new_item_p

    return rng.binomial(data.n, new_item_p(truth, data, rng, max_draws=1)[0])


def ranks(truth, post, names: list[str]) -> dict[str, int]:
    """Per scalar entry of each hyperparameter: the number of thinned posterior draws below the drawn value.

    Examples
    --------
    >>> import xarray as xr
    >>> post = xr.Dataset({"a": (("chain", "draw"), np.arange(200.0).reshape(2, 100))})
    >>> truth = xr.Dataset({"a": (("chain", "draw"), [[50.5]])})
    >>> ranks(truth, post, ["a"])
    {'a': 25}
    """
    out = {}
    for name in names:
        draws = post[name].values.reshape(-1, *post[name].shape[2:])
        draws = draws[np.linspace(0, len(draws) - 1, N_RANK_DRAWS).round().astype(int)]
        true = truth[name].values.reshape(draws.shape[1:])
        below = (draws < true).sum(0)
        for idx in np.ndindex(below.shape):
            out[name + "".join(f"[{i}]" for i in idx)] = int(below[idx])
    return out


def one(data, model: str, backend: str, sim: int) -> dict:
    from bayesrc.config import releases_jax_caches

    # sample() bypasses fit()'s release: ~30 fits exhausted the memory mappings
    return releases_jax_caches(_one)(data, model, backend, sim)


def _one(data, model: str, backend: str, sim: int) -> dict:
    from bayesrc.bayes import SamplerConfig
    from bayesrc.bayes.diagnostics import gate
    from bayesrc.bayes.fit import sample
    from bayesrc.bayes.gating import gated_vars

    truth, sim_data = simulate(data, model, sim)
    t0 = time.perf_counter()
    dt = sample(sim_data, model, backend, config=SamplerConfig(seed=sim, progress=False))
    diag = gate(dt, gated_vars(model, collapsed=True))
    return {
        "model": model,
        "backend": backend,
        "sim": sim,
        "gate": bool(diag.passed),
        "divergences": diag.divergences,
        "ranks": ranks(truth, dt["posterior"].to_dataset(), HYPER[model]),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def counts_model(data, model: str):
    """The collapsed NumPyro model as a function of the counts alone, the form simuk conditions on.

    ``y=None`` leaves the likelihood out (simuk's reference draws from the priors); otherwise the
    sufficient statistics are taken from the concrete counts, as ``fit`` takes them.
    """
    from dataclasses import replace

    from bayesrc.bayes import betabinom, change_collapsed, change_grid
    from bayesrc.bayes.change import group_effects_numpyro, hyperpriors_numpyro, prior_arguments, prior_settings

    def sbc_model(y=None):
        if y is None and model == "betabinom":
            betabinom.hyperpriors_numpyro(data.n_domains)
        elif y is None:
            hyperpriors_numpyro(data.n_domains, False, prior_settings(None), data.n_groups)
            group_effects_numpyro(data.n_groups, prior_settings(None), data.stratum_contrasts())
        elif model == "betabinom":
            d = replace(data, y=np.asarray(y))
            betabinom._numpyro_model(d.y, d.n, d.dom, d.n_domains, collapsed=True, suff=betabinom.sufficient_stats(d))
        else:
            cells = change_grid.cell_stats(replace(data, y=np.asarray(y)))
            tables = change_grid.likelihood_tables(cells, change_grid.SAMPLER_BAND_DTYPE)
            change_collapsed._numpyro_model(
                tables,
                cells=cells,
                n_domains=data.n_domains,
                slope=False,
                prior=prior_arguments(None),
                n_groups=data.n_groups,
                contrasts=data.stratum_contrasts(),
            )

    return sbc_model


def one_draw(values: dict) -> xr.Dataset:
    """One draw of each named value in the posterior's layout (one chain, one draw).

    Examples
    --------
    >>> one_draw({"pi": 0.1, "mu": [0.0, 1.0]})["mu"].dims
    ('chain', 'draw', 'mu_dim_0')
    """
    return xr.Dataset(
        {
            k: (("chain", "draw", *(f"{k}_dim_{i}" for i in range(np.ndim(v)))), np.asarray(v, float)[None, None])
            for k, v in values.items()
        }
    )


def simuk_sbc(data, model: str, sims: int, seed: int = 0, warmup: int = 500, thinning: int = 10):
    """simuk's prior SBC of the collapsed NumPyro model (one chain, ``N_RANK_DRAWS`` kept draws after
    ``thinning``); returns the ``simuk.SBC`` object, fits kept (``.posteriors``, ``.ref_params``)."""
    import simuk
    from numpyro.infer import NUTS

    from bayesrc.config import precision

    def simulator(seed, **params):
        return {"y": simulate_counts(one_draw(params), data, np.random.default_rng(int(seed)))}

    sbc = simuk.SBC(
        NUTS(counts_model(data, model)),
        num_simulations=sims,
        seed=seed,
        simulator=simulator,
        progress_bar=False,
        sample_kwargs={
            "num_warmup": warmup,
            "num_samples": N_RANK_DRAWS * thinning,
            "thinning": thinning,
            "progress_bar": False,
        },
    )
    with precision():  # float64, as fit() samples
        sbc.run_simulations()
    return sbc


def simuk_rows(data, model: str, sims: int, first: int) -> list[dict]:
    """One row per simulation of :func:`simuk_sbc` (seed ``first``): simuk's own rank statistic per entry."""
    t0 = time.perf_counter()
    sbc = simuk_sbc(data, model, sims, seed=first)
    wall = round((time.perf_counter() - t0) / sims, 1)
    got = sbc.simulations["prior_sbc"]
    rows = []
    for i in range(sims):
        entry = {}
        for name in HYPER[model]:
            vals = got[name].values[0, i]
            for idx in np.ndindex(vals.shape):
                entry[name + "".join(f"[{j}]" for j in idx)] = int(vals[idx])
        rows.append(
            {
                "model": model,
                "backend": "numpyro",
                "engine": "simuk",
                "sim": first + i,
                "gate": None,
                "ranks": entry,
                "wall_s": wall,
            }
        )
    return rows


def summarise(rows: list[dict], alpha: float = 0.01, plots: Path | None = None) -> None:
    from scipy import stats

    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["backend"], row.get("engine", "bayesrc")), []).append(row)
    for (model, backend, engine), rs in groups.items():
        params = list(rs[0]["ranks"])
        pvals = []
        for name in params:
            hist = np.bincount(
                np.array([r["ranks"][name] for r in rs]) * N_BINS // (N_RANK_DRAWS + 1), minlength=N_BINS
            )
            pvals.append(stats.chisquare(hist).pvalue)
            print(
                f"  {model:<9} {backend:<7} {engine:<7} {name:<16} {' '.join(f'{h:3d}' for h in hist)}  "
                f"p {pvals[-1]:.3f}"
            )
        holm = _holm(np.array(pvals))
        rejected = [p for p, a in zip(params, holm) if a <= alpha]
        if plots:
            plot_ranks(rs, plots / f"sbc_{model}_{backend}_{engine}.png")
        gates = np.mean([r["gate"] for r in rs]) if rs[0]["gate"] is not None else None  # simuk: no gate
        print(
            json.dumps(
                {
                    "model": model,
                    "backend": backend,
                    "engine": engine,
                    "sims": len(rs),
                    "parameters": len(params),
                    "rejected_at_0.01_holm": rejected,
                    "min_p_holm": float(holm.min()),
                    "gate_passed_share": gates if gates is None else float(gates),
                }
            )
        )


def plot_ranks(rows: list[dict], out: Path, seed: int = 0) -> Path:
    """The Δ-ECDF of each parameter's ranks against the uniform, with arviz-plots' uniformity
    p-value (``plot_ecdf_pit``, its default test), for the rows of one model, backend and engine.

    Ranks 0-99 become PIT values ``(rank + U) / 100`` (U uniform, seeded): uniform exactly when the
    ranks are.
    """
    import arviz_plots as azp
    from arviz_base import from_dict

    rng = np.random.default_rng(seed)
    names = list(rows[0]["ranks"])
    pit = {
        n: ((np.array([r["ranks"][n] for r in rows]) + rng.uniform(size=len(rows))) / (N_RANK_DRAWS + 1))[None]
        for n in names
    }
    pc = azp.plot_ecdf_pit(from_dict({"prior_sbc": pit}), backend="matplotlib", visuals={"xlabel": False})
    fig = pc.viz["figure"].item()
    fig.suptitle(
        f"SBC {rows[0]['model']} ({rows[0]['backend']}, {rows[0].get('engine', 'bayesrc')}): {len(rows)} simulations"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    return out


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values."""
    order = np.argsort(p)
    adj = np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]).clip(max=1.0)
    out = np.empty_like(adj)
    out[order] = adj
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["change", "betabinom"], choices=("change", "betabinom"))
    ap.add_argument("--backends", nargs="+", default=["numpyro"], choices=("numpyro", "pymc"))
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "sbc.jsonl")
    ap.add_argument("--summarise", action="store_true", help="only summarise the rows in --out")
    ap.add_argument("--plots", type=Path, default=None, help="write each group's rank Δ-ECDF figure into this folder")
    ap.add_argument(
        "--engine", choices=("bayesrc", "simuk"), default="bayesrc", help="simuk: simuk's own SBC loop (NumPyro twin)"
    )
    args = ap.parse_args(argv)
    if args.engine == "simuk":
        data = design(args.items, args.k)
        for model in args.models:
            for first in range(args.first, args.first + args.sims, SIMUK_CHUNK):  # rows reach --out chunk by chunk
                rows = simuk_rows(data, model, min(SIMUK_CHUNK, args.first + args.sims - first), first)
                with args.out.open("a") as fh:
                    fh.writelines(json.dumps(row) + "\n" for row in rows)
                print(
                    json.dumps(
                        {
                            "model": model,
                            "engine": "simuk",
                            "sims": f"{first}-{first + len(rows) - 1}",
                            "wall_s_each": rows[0]["wall_s"],
                        }
                    ),
                    flush=True,
                )
    elif not args.summarise:
        data = design(args.items, args.k)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        for model in args.models:
            for backend in args.backends:
                for sim in range(args.first, args.first + args.sims):
                    row = one(data, model, backend, sim)
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                    print(json.dumps({k: v for k, v in row.items() if k != "ranks"}), flush=True)
    summarise([json.loads(line) for line in args.out.read_text().splitlines() if line.strip()], plots=args.plots)


if __name__ == "__main__":
    main()
