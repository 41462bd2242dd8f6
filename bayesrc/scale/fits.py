"""Grids of fits as tasks: ``fit-many`` (a manifest of version pairs) and the prior-sensitivity grid.

Every fit is a pure function of (counts, settings, seed), so running it as a Ray task on
another process or machine gives the serial result; the driver validates every input
first (one clear line, nothing written), ships the counts, and writes the outputs itself
(no shared filesystem needed).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from bayesrc.bayes.task import fit_task
from bayesrc.data import check_comparable, load_counts
from bayesrc.errors import InputError
from bayesrc.io import atomic_write_text, read_table, staged_output
from bayesrc.scale.cluster import serial_map

MANIFEST_COLUMNS = ("name", "v1", "v2")
SUMMARY_COLUMNS = (
    "name",
    "v1",
    "v2",
    "status",
    "n_items",
    "improved",
    "deteriorated",
    "expected_false",
    "max_rhat",
    "min_ess_bulk",
    "divergences",
    "kappa_vs_rci",
    "rci_estimated_fdp",
    "rci_estimated_fdp_lo90",
    "rci_estimated_fdp_hi90",
    "rci_fdp_prior_sensitive",
    "runtime_s",
    "fit_dir",
)


def read_manifest(path: str | Path) -> pd.DataFrame:
    """A table (CSV, JSONL or Parquet) with columns ``name``, ``v1``, ``v2`` (trials files; relative
    paths are taken from the manifest's folder). Names must be unique and usable as folder names.

    Examples
    --------
    ``pairs.csv``::

        name,v1,v2
        llama,runs/llama-3/trials.parquet,runs/llama-3.1/trials.parquet
    """
    path = Path(path)
    df, _ = read_table(path, kind="manifest")
    missing = [c for c in MANIFEST_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=path, field=missing[0])
    if len(df) == 0:
        raise InputError("manifest lists no pairs", path=path)
    seen: set[str] = set()
    rows = []
    for rec in df.to_dict(orient="records"):
        line = int(rec["_line"])
        for col in MANIFEST_COLUMNS:
            if rec[col] is None or (isinstance(rec[col], float) and pd.isna(rec[col])) or str(rec[col]).strip() == "":
                raise InputError("empty value", path=path, line=line, field=col)
        name = str(rec["name"]).strip()
        if name in seen:
            raise InputError(f"duplicate name {name!r}", path=path, line=line, field="name")
        if name in (".", "..") or "/" in name or "\\" in name:
            raise InputError(f"name {name!r} is not a folder name", path=path, line=line, field="name")
        seen.add(name)
        files = {}
        for col in ("v1", "v2"):
            f = Path(str(rec[col]).strip())
            f = f if f.is_absolute() else path.parent / f
            if not f.exists():
                raise InputError(f"trials file {f} not found", path=path, line=line, field=col)
            files[col] = f
        rows.append({"name": name, "v1": files["v1"], "v2": files["v2"], "_line": line})
    return pd.DataFrame(rows)


def _summary_row(name: str, v1: Path, v2: Path, res, fit_dir: Path) -> dict:
    d, s, c = res.diagnostics, res.selection, res.crosscheck
    return {
        "name": name,
        "v1": str(v1),
        "v2": str(v2),
        "status": res.status,
        "n_items": res.params.get("n_items"),
        "improved": s["n_improved"],
        "deteriorated": s["n_deteriorated"],
        "expected_false": s["expected_false"],
        "max_rhat": d.max_rhat,
        "min_ess_bulk": d.min_ess_bulk,
        "divergences": d.divergences,
        "kappa_vs_rci": c["kappa"],
        "rci_estimated_fdp": c["rci_estimated_fdp"],
        **dict(
            zip(
                ("rci_estimated_fdp_lo90", "rci_estimated_fdp_hi90"),
                c.get("rci_estimated_fdp_interval90") or (None, None),
            )
        ),
        "rci_fdp_prior_sensitive": (c.get("prior_sensitivity") or {}).get("sensitive"),
        "runtime_s": res.runtime_s,
        "fit_dir": str(fit_dir),
    }


def fit_many(
    manifest: str | Path,
    out: str | Path,
    *,
    mapper: Callable | None = None,
    fit_kwargs: dict | None = None,
    allow_pin: tuple[str, ...] = (),
    force: bool = False,
    allow_unmatched: bool = False,
    n_devices: int | None = None,
) -> pd.DataFrame:
    """Fit every version pair of ``manifest`` (see :func:`read_manifest`) into ``out/NAME/`` and
    write ``out/summary.csv`` (one row per pair, manifest order); returns that table.

    ``mapper(fn, arg_tuples) -> results`` runs the fits: :func:`~bayesrc.scale.serial_map`
    (default) or :func:`~bayesrc.scale.ray_map` (Ray tasks; same seeds, same results).
    ``fit_kwargs`` go to :func:`bayesrc.bayes.fit` (model, config, fdr, ...). Every pair's pins
    and counts are checked before any fit runs; nothing is written if one is bad. The folder is
    written whole (every pair's fit, then the summary) or not at all, so a failed write (a full
    disk) leaves it as it was and the same command can be run again.

    Examples
    --------
    >>> table = fit_many("pairs.csv", "fits/", fit_kwargs={"config": SamplerConfig(chains=2)})  # doctest: +SKIP
    """
    pairs = read_manifest(manifest)
    out = Path(out)
    taken = [n for n in pairs["name"] if (out / n / "fit.json").exists()]
    if taken:
        raise InputError(f"already holds a fit for {', '.join(taken)}; choose another --out", path=out)
    jobs = []
    for row in pairs.itertuples(index=False):
        check_comparable(row.v1, row.v2, allow=allow_pin, force=force)
        counts = load_counts([row.v1, row.v2], on_unmatched="drop" if allow_unmatched else "raise")
        jobs.append((n_devices or 1, counts, dict(fit_kwargs or {})))
    results = (mapper or serial_map)(fit_task, jobs)
    rows = []
    # every pair's fit and the summary, or none: a failed write can be rerun as it was
    with staged_output(out) as stage:
        for row, res in zip(pairs.itertuples(index=False), results):
            (stage / row.name).mkdir()
            res.write_into(stage / row.name)
            rows.append(_summary_row(row.name, row.v1, row.v2, res, out / row.name))
        table = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
        atomic_write_text(stage / "summary.csv", table.to_csv(index=False))
    return table


def default_devices(chains: int) -> int:
    """The JAX device count the single-fit CLI uses (``min(chains, cores)``)."""
    return max(1, min(chains, os.cpu_count() or 1))
