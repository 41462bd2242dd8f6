"""The server engine against llama-cpp-python's own server (``python -m llama_cpp.server``) on the Gemma GGUF.

The server is started once per session on 127.0.0.1 at a free port and stopped at the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import free_port
from helpers import llama_server as start_llama_server
from scipy import stats

from bayesrc.cli import main
from bayesrc.collect import (
    builtin_bank,
    collect,
    load_bank,
    load_card,
    read_run_trials,
    resolve_model,
)
from bayesrc.collect.server import ServerClient, ServerError, collect_server
from bayesrc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
K = 4  # 16 trials each way: enough for trial-for-trial equality and the resume checks


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """``python -m llama_cpp.server`` on the card's GGUF; yields its base URL."""
    with start_llama_server(resolve_model(load_card(CARD)), tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def bank4(tmp_path_factory):
    return load_bank(builtin_bank(tmp_path_factory.mktemp("sbank") / "bank.jsonl", n_items=4, seed=3))


@pytest.fixture(scope="session")
def server_run(llama_server, bank4, tmp_path_factory):
    """A server run interrupted after one item, then resumed (CLI) to completion."""
    out = tmp_path_factory.mktemp("srv") / "run"
    # the reference study's shared seed rule, so the local fast run below draws the very same seeds
    first = collect_server(CARD, bank4, out, base_url=llama_server, k=K, concurrency=2, max_items=1, seed_rule="shared")
    assert first.n_items == 1 and not (out / "trials.parquet").exists()
    rc = main(["collect", "--model", str(CARD), "--items", str(bank4.path), "--out", str(out), "--k", str(K), "--engine", "server",
               "--base-url", llama_server, "--concurrency", "3", "--seed-rule", "shared", "--resume", "--no-progress"])  # fmt: skip
    assert rc == 0
    return out


@pytest.mark.slow
def test_server_run_matches_local_fast_engine(server_run, bank4, tmp_path):
    """Same card, items, seeds and sampling: the server's answers against the local fast engine's.

    On this CPU build the seeds make them equal trial by trial (llama-cpp-python's server builds
    the same sampler chain from the same seed); the per-item distribution test is what would
    remain if a server's logits were not bitwise equal (GPU kernels, another build).
    """
    srv = read_run_trials(server_run)
    loc = collect(CARD, bank4, tmp_path / "local", k=K, engine="fast", seed_rule="shared").trials()
    assert len(srv) == len(loc) == 4 * K
    srv, loc = (t.sort_values(["item_index", "k"]).reset_index(drop=True) for t in (srv, loc))
    assert (srv["seed"].to_numpy() == loc["seed"].to_numpy()).all() and (srv["engine"] == "server").all()
    same = srv["extracted"].fillna("-").to_numpy() == loc["extracted"].fillna("-").to_numpy()
    assert same.all(), f"{int((~same).sum())} of {same.size} trials differ"
    # Distribution test: pooled chi-squared homogeneity of per-item answer counts (server vs local).
    g, dof = 0.0, 0
    for item, a in srv.groupby("item_id"):
        b = loc[loc["item_id"] == item]
        cats = sorted(set(a["extracted"].fillna("-")) | set(b["extracted"].fillna("-")))
        table = np.array([[int((x["extracted"].fillna("-") == c).sum()) for c in cats] for x in (a, b)])
        if len(cats) > 1:
            g += stats.chi2_contingency(table, correction=False, lambda_="log-likelihood")[0]
            dof += len(cats) - 1
    assert dof == 0 or stats.chi2.sf(g, dof) > 0.01


def test_server_run_record_pins_and_resume(server_run, llama_server, bank4):
    rec = json.loads((server_run / "run.json").read_text())
    pins = rec["pins"]
    assert rec["status"] == "complete" and rec["n_trials"] == 4 * K
    assert pins["model.server_model_id"] == "gemma-3-270m" and pins["runtime.engine"] == "server"
    assert "model.file_sha256" not in pins and pins["sampling.k"] == K and pins["sampling.seed_rule"] == "0 + item_index * 10 + k"
    assert len(rec["info"]["resumed_at"]) == 1 and rec["info"]["base_url"] == llama_server
    t = read_run_trials(server_run)
    assert sorted(t["item_index"].unique()) == [0, 1, 2, 3] and list(t["seed"].head(K)) == list(range(K))
    # resume with other sampling settings is refused (exit 2), the run untouched
    before = (server_run / "trials.parquet").read_bytes()
    with pytest.raises(InputError, match="cannot resume.*sampling.temperature"):
        collect_server(CARD, bank4, server_run, base_url=llama_server, k=K, temperature=0.9, resume=True)
    with pytest.raises(InputError, match="already holds a run"):
        collect_server(CARD, bank4, server_run, base_url=llama_server, k=K)
    with pytest.raises(InputError, match="not served here"):
        collect_server(CARD, bank4, server_run.parent / "other", base_url=llama_server, k=K, api_model="nope")
    assert (server_run / "trials.parquet").read_bytes() == before
    # resuming the complete run draws nothing and rewrites nothing, not even its record
    files = {p: p.read_bytes() for p in server_run.rglob("*") if p.is_file() and p.name != ".lock"}  # the lock names its last holder
    again = collect_server(CARD, bank4, server_run, base_url=llama_server, k=K, seed_rule="shared", resume=True)
    assert again.n_new_items == 0 and again.n_trials == 4 * K and {p: p.read_bytes() for p in server_run.rglob("*") if p.is_file() and p.name != ".lock"} == files


def test_unreachable_server_retries_then_one_line_exit_2(bank4, tmp_path, capsys):
    port = free_port()  # nothing listens here
    client = ServerClient(f"http://127.0.0.1:{port}", retries=2, backoff=0.01, timeout=2)
    with pytest.raises(ServerError, match="after 3 attempt"):  # the first try and 2 retries, backing off between them
        client.model_id()
    rc = main(["collect", "--model", str(CARD), "--items", str(bank4.path), "--out", str(tmp_path / "r"), "--engine", "server",
               "--base-url", f"http://127.0.0.1:{port}", "--retries", "0", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "no answer from /v1/models" in err
    assert main(["collect", "--model", str(CARD), "--items", str(bank4.path), "--out", str(tmp_path / "r2"), "--engine", "server"]) == 2
    assert "--base-url" in capsys.readouterr().err
