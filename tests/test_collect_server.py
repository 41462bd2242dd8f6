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
from bayesrc.collect.server import collect_server
from bayesrc.collect.server_client import ServerClient, ServerError
from bayesrc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
K = 4  # 16 trials each way: enough for trial-for-trial equality and the resume checks


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """``python -m llama_cpp.server`` on the card's GGUF (its chat endpoint in Gemma's turn format: the GGUF has no
    template); yields its base URL."""
    with start_llama_server(
        resolve_model(load_card(CARD)), tmp_path_factory.mktemp("server") / "server.log", chat_format="gemma"
    ) as url:
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
    rc = main(
        [
            "collect",
            "--model",
            str(CARD),
            "--items",
            str(bank4.path),
            "--out",
            str(out),
            "--k",
            str(K),
            "--engine",
            "server",
            "--base-url",
            llama_server,
            "--concurrency",
            "3",
            "--seed-rule",
            "shared",
            "--resume",
            "--no-progress",
        ]
    )
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
    assert (
        "model.file_sha256" not in pins
        and pins["sampling.k"] == K
        and pins["sampling.seed_rule"] == "0 + item_index * 10 + k"
    )
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
    # the lock names its last holder
    files = {p: p.read_bytes() for p in server_run.rglob("*") if p.is_file() and p.name != ".lock"}
    again = collect_server(CARD, bank4, server_run, base_url=llama_server, k=K, seed_rule="shared", resume=True)
    assert (
        again.n_new_items == 0
        and again.n_trials == 4 * K
        and {p: p.read_bytes() for p in server_run.rglob("*") if p.is_file() and p.name != ".lock"} == files
    )


@pytest.fixture(scope="session")
def chat_run(llama_server, bank4, tmp_path_factory):
    """A run through /v1/chat/completions interrupted after one item, then resumed (CLI) to completion."""
    out = tmp_path_factory.mktemp("chat") / "run"
    first = collect_server(CARD, bank4, out, base_url=llama_server, api="chat", k=K, concurrency=2, max_items=1)
    assert first.n_items == 1
    rc = main(
        [
            "collect",
            "--model",
            str(CARD),
            "--items",
            str(bank4.path),
            "--out",
            str(out),
            "--k",
            str(K),
            "--engine",
            "server",
            "--base-url",
            llama_server,
            "--api",
            "chat",
            "--concurrency",
            "3",
            "--resume",
            "--no-progress",
        ]
    )
    assert rc == 0
    return out


def test_chat_run_samples_pins_and_resumes(chat_run, server_run, llama_server, bank4):
    rec = json.loads((chat_run / "run.json").read_text())
    pins = rec["pins"]
    assert rec["status"] == "complete" and rec["n_trials"] == 4 * K and len(rec["info"]["resumed_at"]) == 1
    # the server's template renders the messages
    assert pins["runtime.server_api"] == "chat" and pins["model.chat_template_sha256"] is None
    # llama-cpp-python's server answers n = 2 with one choice: one request per sample
    assert pins["runtime.server_samples_per_request"] == 1
    # completions runs pin as before
    assert "runtime.server_api" not in json.loads((server_run / "run.json").read_text())["pins"]
    t = read_run_trials(chat_run).sort_values(["item_index", "k"])
    assert sorted(t["item_index"].unique()) == [0, 1, 2, 3] and (t.groupby("item_index")["k"].nunique() == K).all()
    assert t["response"].map(lambda r: isinstance(r, str)).all() and t["seed"].is_unique  # one seeded request per trial
    assert t["extracted"].notna().mean() > 0.5  # the chat turn answers with letters, mostly
    with pytest.raises(InputError, match="cannot resume.*runtime.server_api"):  # the other API is another run
        collect_server(CARD, bank4, chat_run, base_url=llama_server, api="completions", k=K, resume=True)
    # the chat endpoint honours the sampling settings: a greedy request answers alike twice
    from bayesrc.collect.card import chat_messages
    from bayesrc.collect.spec import RunSpec

    client, msgs = ServerClient(llama_server), chat_messages(load_card(CARD), bank4.items[0])
    greedy = RunSpec(k=K, engine="server", temperature=0.0).sampling(load_card(CARD).max_tokens)
    answers = {client.chat("gemma-3-270m", msgs, seed, greedy)[0]["text"] for seed in (1, 2)}
    assert len(answers) == 1


def test_chat_run_reads_the_final_answer_where_the_card_says(llama_server, bank4, tmp_path):
    """A card with ``answer = "final"``: each trial's answer is the response's final answer, and the rule is pinned."""
    from bayesrc.collect.extract import extract_final

    card = tmp_path / "final.toml"
    card.write_text(
        CARD.read_text()
        .replace("max_tokens = 8", 'max_tokens = 24\nanswer = "final"')
        .replace('path = "gemma', f'path = "{CARD.parent}/gemma')
    )
    out = tmp_path / "run"
    collect_server(card, bank4, out, base_url=llama_server, api="chat", k=2, concurrency=2, items_range="0:2")
    rec = json.loads((out / "run.json").read_text())
    assert rec["pins"]["prompt.answer"] == "final" and rec["n_trials"] == 4
    t = read_run_trials(out)
    letters = {it.item_id: it.letters for it in bank4.items}
    assert [extract_final(r, letters[i]).answer for r, i in zip(t["response"], t["item_id"])] == t["extracted"].tolist()


class ChoicesServer:
    """An OpenAI-compatible chat endpoint that honours ``n`` (as vLLM and hosted APIs do; llama-cpp-python's does not):
    each choice a letter drawn from the request's seed and the choice's index. Counts the chat requests."""

    def __init__(self):
        import http.server
        import threading

        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, doc):
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path != "/v1/models":
                    return self.send_error(404)  # no /props, no /version: no build to pin
                self._send({"object": "list", "data": [{"id": "choices-model"}]})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(req)
                self._send(
                    {
                        "choices": [
                            {
                                "index": j,
                                "message": {"role": "assistant", "content": ChoicesServer.answer(req["seed"], j)},
                                "finish_reason": "stop",
                            }
                            for j in range(req["n"])
                        ]
                    }
                )

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def answer(seed: int, j: int) -> str:
        return "The answer is " + "ABC"[(seed * 7 + j * 3) % 3]


def test_chat_endpoint_that_honours_n_gets_an_items_samples_in_one_request(bank4, tmp_path):
    srv = ChoicesServer()
    try:
        out = tmp_path / "run"
        collect_server(CARD, bank4, out, base_url=srv.url, api="chat", k=3, items_range="0:2")
        t = read_run_trials(out).sort_values(["item_index", "k"])
        rec = json.loads((out / "run.json").read_text())
    finally:
        srv.httpd.shutdown()
    probe, *runs = srv.requests
    assert probe["n"] == 2 and probe["max_tokens"] == 1  # the probe for n
    # one request per item
    assert [r["n"] for r in runs] == [3, 3] and rec["pins"]["runtime.server_samples_per_request"] == 3
    by_seed = {r["seed"]: r for r in runs}  # the two items' requests run concurrently: in either order
    assert sorted(by_seed) == sorted(t.groupby("item_index")["seed"].first())
    for _, item in t.groupby("item_index"):
        req = by_seed[item["seed"].iloc[0]]
        assert (item["seed"] == req["seed"]).all()  # the item's first seed, recorded with each of its samples
        assert item["response"].tolist() == [ChoicesServer.answer(req["seed"], j) for j in range(3)]


def test_chat_api_needs_the_server_engine(bank4, tmp_path, capsys):
    code = main(
        [
            "collect",
            "--model",
            str(CARD),
            "--items",
            str(bank4.path),
            "--out",
            str(tmp_path / "x"),
            "--k",
            "2",
            "--api",
            "chat",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.splitlines() == [
        "bayesrc: error: <input>: field '--engine': --base-url / --api-model / --api need --engine server"
    ], err
    with pytest.raises(InputError, match="field '--api'"):
        collect_server(CARD, bank4, tmp_path / "y", base_url="http://127.0.0.1:9", api="responses", k=2)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_unreachable_server_retries_then_one_line_exit_2(bank4, tmp_path, capsys):
    port = free_port()  # nothing listens here
    client = ServerClient(f"http://127.0.0.1:{port}", retries=2, backoff=0.01, timeout=2)
    with pytest.raises(ServerError, match="after 3 attempt"):  # the first try and 2 retries, backing off between them
        client.model_id()
    rc = main(
        [
            "collect",
            "--model",
            str(CARD),
            "--items",
            str(bank4.path),
            "--out",
            str(tmp_path / "r"),
            "--engine",
            "server",
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--retries",
            "0",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "no answer from /v1/models" in err
    assert (
        main(
            [
                "collect",
                "--model",
                str(CARD),
                "--items",
                str(bank4.path),
                "--out",
                str(tmp_path / "r2"),
                "--engine",
                "server",
            ]
        )
        == 2
    )
    assert "--base-url" in capsys.readouterr().err
