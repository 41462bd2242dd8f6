"""Scale-out on a real Ray cluster: a head plus a second node started with ``ray start --address``
on this machine (one session-scoped cluster), the real Gemma GGUF, tiny item banks.

Must show: a Ray run equals a single-process run trial for trial; a killed actor's shard is
retried with the same result; a driver killed mid-run resumes; fit-many on Ray equals serial.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import free_port, stop

from bayesrc.collect import (
    builtin_bank,
    collect,
    load_bank,
    load_card,
    read_run_trials,
    resolve_model,
)
from bayesrc.data import compare_runs
from bayesrc.io import read_run_record

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
K = 3
pytestmark = pytest.mark.slow


def _start_node(args: list[str], env: dict) -> subprocess.Popen:
    ray_bin = Path(sys.executable).with_name("ray")
    return subprocess.Popen(
        [str(ray_bin), "start", "--block", "--num-cpus=1", "--disable-usage-stats", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@pytest.fixture(scope="module")
def ray_cluster():
    """Head (1 CPU) + a second node (1 CPU) joined with ``ray start --address``; the test driver connects.

    Module scope: the cluster and the driver's Ray threads are gone before the next test file
    (suite runs crashed in later files; the crash, in libgcc's unwinder, came back without Ray
    attached too: docs/performance.md, "The test suite")."""
    ray = pytest.importorskip("ray")
    tmp = tempfile.mkdtemp(prefix="brc-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = free_port()
    address = f"127.0.0.1:{port}"
    # Token auth with a one-off token in the environment (this process, the nodes, the CLI runs):
    # nothing read from or written to ~/.ray.
    from bayesrc.scale.cluster import _restore, use_private_token

    saved = {v: os.environ.get(v) for v in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    use_private_token()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        RAY_USAGE_STATS_ENABLED="0",
    )
    procs = [
        _start_node(
            [
                "--head",
                f"--port={port}",
                "--node-ip-address=127.0.0.1",
                "--include-dashboard=false",
                f"--temp-dir={tmp}",
            ],
            env,
        )
    ]
    try:
        deadline = time.monotonic() + 90
        while True:  # the head is up when a driver can connect
            try:
                ray.init(address=address, log_to_driver=False, logging_level="ERROR", _node_ip_address="127.0.0.1")
                break
            except Exception:
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    raise
                time.sleep(1)
        procs.append(_start_node([f"--address={address}", "--node-ip-address=127.0.0.1"], env))
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            if time.monotonic() > deadline or procs[1].poll() is not None:
                raise RuntimeError("the second Ray node did not join")
            time.sleep(0.5)
        yield address
    finally:
        ray.shutdown()
        stop(*procs, group=True, grace=5)  # both nodes at once; what outlives SIGTERM is SIGKILLed with its group
        shutil.rmtree(tmp, ignore_errors=True)
        _restore(saved)


@pytest.fixture(scope="session")
def bank8(tmp_path_factory):
    return load_bank(builtin_bank(tmp_path_factory.mktemp("rbank") / "bank.jsonl", n_items=8, seed=5))


@pytest.fixture(scope="session")
def single_run(bank8, tmp_path_factory):
    """The single-process fast run over the 8 items: what every Ray run must reproduce."""
    pytest.importorskip("llama_cpp")
    out = tmp_path_factory.mktemp("rruns") / "single"
    collect(CARD, bank8, out, k=K, threads=1)  # a Ray actor runs on the one CPU it reserves
    return out


def _core(df: pd.DataFrame) -> pd.DataFrame:
    cols = [
        "item_id",
        "item_index",
        "k",
        "seed",
        "response",
        "extracted",
        "is_correct",
        "is_missing",
        "n_tokens",
        "finish",
        "engine",
    ]
    return df[cols].sort_values(["item_index", "k"]).reset_index(drop=True)


def _assert_same_run(ray_out: Path, single: Path) -> None:
    pd.testing.assert_frame_equal(_core(read_run_trials(ray_out)), _core(read_run_trials(single)))
    comp = compare_runs(single, ray_out)
    assert comp.comparable and comp.differences.empty, comp.summary()


def test_ray_run_equals_single_process_trial_for_trial(ray_cluster, bank8, single_run, tmp_path):
    import ray

    from bayesrc.scale import collect_ray

    assert sum(n["Alive"] for n in ray.nodes()) == 2  # head + the `ray start --address` node
    res = collect_ray(CARD, bank8, tmp_path / "r", k=K, workers=2, threads=1)
    assert (res.n_items, res.n_trials, res.n_new_items, res.retries) == (8, 8 * K, 8, 0)
    assert res.n_shards == 8 and len(list((tmp_path / "r" / "shards").iterdir())) == 8
    # --threads reaches the actors' models (and their CPU reservation): every shard ran with it
    assert {read_run_record(d)["info"]["n_threads"] for d in (tmp_path / "r" / "shards").iterdir()} == {1}
    _assert_same_run(tmp_path / "r", single_run)
    again = collect_ray(CARD, bank8, tmp_path / "r", k=K, workers=2, resume=True)  # complete: nothing redrawn
    assert again.n_new_items == 0 and again.n_trials == 8 * K


def test_threads_reach_the_actor_model_and_its_cpu_reservation():
    """--threads with --ray (issue 29: it was ignored, the actors ran with the card's threads): the
    actor body's model runs with the run's threads, and the actor reserves as many CPUs."""
    pytest.importorskip("llama_cpp")
    from bayesrc.collect.spec import RunSpec
    from bayesrc.scale.collect import ShardCollector, _actor_options, actor_threads

    card = load_card(CARD)
    threads = actor_threads(card, RunSpec(threads=2))
    assert threads == 2 and _actor_options(card, threads) == {"num_cpus": 2}
    actor = ShardCollector(card, None, threads)  # the actor's body, here in this process
    assert actor.error is None and actor.model.n_threads == 2


def test_killed_actor_has_its_shard_retried_nothing_lost_or_duplicated(ray_cluster, bank8, single_run, tmp_path):
    """SIGKILL the actor collecting shard 0 after its first item: a new actor resumes the shard."""
    from bayesrc.collect.rundir import done_items
    from bayesrc.scale import collect_ray

    out, box = tmp_path / "killed", {}
    worker = threading.Thread(
        target=lambda: box.update(res=collect_ray(CARD, bank8, out, k=K, workers=2, shards=2)), daemon=True
    )
    worker.start()
    shard0, killed = out / "shards" / "0000", None
    deadline = time.monotonic() + 120
    while worker.is_alive() and time.monotonic() < deadline and killed is None:
        n = len(done_items(shard0))
        if 1 <= n < 4 and (shard0 / ".lock").exists():
            pid = int((shard0 / ".lock").read_text().strip())  # the actor process holding the shard
            os.kill(pid, signal.SIGKILL)
            killed = pid
        time.sleep(0.02)
    worker.join(180)
    assert killed is not None, "shard 0 finished before it could be interrupted"
    res = box["res"]
    assert res.retries == 1 and res.lost[0][0] == 0
    assert res.n_trials == 8 * K
    _assert_same_run(out, single_run)


def test_actor_killed_at_a_seeded_crash_point_has_its_shard_retried_to_the_same_trials(ray_cluster, tmp_path):
    """tests/ray_crashpoints.py on one seeded point (a filesystem event or a call of the actor's
    collection) of a 2-item run; ``benchmarks/faults.py`` runs every point."""
    import ray_crashpoints

    s = ray_crashpoints.crash_points(tmp_path, n_items=2, calls=8, sample=1, seed=3)
    assert s["tried"] == s["killed"] == s["retried"] == 1, s["outcomes"]
    assert (s["lost"], s["duplicated"], s["torn"], s["resume_failed"]) == (0, 0, 0, 0), s["outcomes"]


def test_bad_setting_is_one_input_error_before_ray_starts(ray_cluster, bank8, tmp_path):
    """A bad setting is the single-process run's InputError (the RunSpec is checked on the driver, before Ray starts),
    nothing written."""
    from bayesrc.errors import InputError
    from bayesrc.scale import collect_ray

    with pytest.raises(InputError, match="exceeds the seed stride") as err:
        collect_ray(CARD, bank8, tmp_path / "bad", k=11, seed_stride=10, workers=1)
    assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
    assert not (tmp_path / "bad" / "run.json").exists() and not (tmp_path / "bad" / "ray.json").exists()


def test_driver_killed_mid_run_then_resume(ray_cluster, bank8, single_run, tmp_path):
    """The CLI on the cluster (RAY_ADDRESS) killed as a whole mid-run; --resume finishes it exactly."""
    from bayesrc.collect.rundir import done_items
    from bayesrc.errors import InputError
    from bayesrc.scale import collect_ray

    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "bayesrc",
        "collect",
        "--model",
        str(CARD),
        "--items",
        str(bank8.path),
        "--out",
        str(out),
        "--k",
        str(K),
        "--ray",
        "--workers",
        "2",
        "--no-progress",
    ]
    env = dict(os.environ, RAY_ADDRESS=ray_cluster, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if sum(len(done_items(d)) for d in (out / "shards").glob("*")) >= 2:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    assert not (out / "run.json").exists()
    with pytest.raises(InputError, match="--resume"):  # without --resume: refused, nothing touched
        collect_ray(CARD, bank8, out, k=K, workers=2)
    again = collect_ray(CARD, bank8, out, k=K, workers=2, resume=True)
    assert again.n_trials == 8 * K and 0 < again.n_new_items < 8
    _assert_same_run(out, single_run)


def test_gpu_layers_on_a_cpu_build_is_one_line(tmp_path, bank8):
    """A card asking for GPU layers: refused in one line where llama.cpp cannot offload, else it loads."""
    import llama_cpp

    from bayesrc.errors import InputError

    card_text = CARD.read_text().replace("n_gpu_layers = 0 ", "n_gpu_layers = -1 ")
    card_text = card_text.replace('path = "gemma-3-270m-q4_k_m.gguf"', f'path = "{resolve_model(load_card(CARD))}"')
    gpu_card = tmp_path / "gpu.toml"
    gpu_card.write_text(card_text)
    assert load_card(gpu_card).n_gpu_layers == -1
    if llama_cpp.llama_supports_gpu_offload():
        assert collect(gpu_card, bank8, tmp_path / "g", k=1).n_trials == 8
        return
    with pytest.raises(InputError) as err:
        collect(gpu_card, bank8, tmp_path / "g", k=1)
    msg = str(err.value)
    assert "\n" not in msg and "field 'runtime.n_gpu_layers'" in msg and "cannot offload" in msg and "make gpu" in msg
    assert not (tmp_path / "g" / "run.json").exists()


# -- fit grids ----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def manifest(tmp_path_factory):
    from bayesrc.data import simulate_pair

    d = tmp_path_factory.mktemp("pairs")
    rows = []
    # one pair (seed 4: some items change): a default change fit on a 1-CPU Ray node takes minutes here
    for name, seed in (("pair-a", 4),):
        sim = simulate_pair(60, 10, models=(f"{name}-v1", f"{name}-v2"), seed=seed)
        sim.trials_v1.to_parquet(d / f"{name}-v1.parquet", index=False)
        sim.trials_v2.to_parquet(d / f"{name}-v2.parquet", index=False)
        rows.append(f"{name},{name}-v1.parquet,{name}-v2.parquet")
    (d / "pairs.csv").write_text("name,v1,v2\n" + "\n".join(rows) + "\n")
    return d / "pairs.csv"


PRIOR = {"pi_a": 1.0, "pi_b": 9.0}  # not the default prior: the prior-grid test below reuses these fits


def _fit_kwargs():
    from bayesrc.bayes import SamplerConfig

    return {"model": "change", "prior": PRIOR, "config": SamplerConfig(seed=7)}  # the defaults a user gets


def _n_devices() -> int:
    from bayesrc.bayes.samplers import _jax

    return _jax().local_device_count()  # Ray tasks use the driver's count: same chain rounds, same draws


@pytest.fixture(scope="session")
def serial_fits(manifest, tmp_path_factory):
    """``fit_many`` in this process: the reference for fit-many and the prior grid on Ray."""
    from bayesrc.scale import fit_many

    out = tmp_path_factory.mktemp("fits") / "serial"
    return out, fit_many(manifest, out, fit_kwargs=_fit_kwargs(), n_devices=_n_devices())


def test_fit_many_on_ray_equals_serial(ray_cluster, manifest, serial_fits, tmp_path):
    from bayesrc.scale import fit_many, ray_map

    serial_dir, serial = serial_fits
    on_ray = fit_many(manifest, tmp_path / "ray", fit_kwargs=_fit_kwargs(), n_devices=_n_devices(), mapper=ray_map)
    assert list(serial["name"]) == ["pair-a"] and (tmp_path / "ray" / "summary.csv").exists()
    drop = ["runtime_s", "fit_dir"]
    pd.testing.assert_frame_equal(serial.drop(columns=drop), on_ray.drop(columns=drop))
    for name in serial["name"]:
        a = pd.read_parquet(serial_dir / name / "items.parquet")
        b = pd.read_parquet(tmp_path / "ray" / name / "items.parquet")
        pd.testing.assert_frame_equal(a, b)
    assert serial["improved"].sum() + serial["deteriorated"].sum() > 0  # the simulated pairs do change
    has = serial["rci_estimated_fdp"].notna()  # each fit's 90% interval of RCI's FDP beside its estimate
    assert (serial.loc[has, "rci_estimated_fdp_lo90"] <= serial.loc[has, "rci_estimated_fdp_hi90"]).all()


def test_prior_grid_on_ray_equals_serial(ray_cluster, manifest, serial_fits):
    """One prior refitted as a Ray task against the same fit made serially (fit-many's pair-a,
    given as ``result``: its row is computed from that fit, nothing refitted)."""
    import bayesrc
    from bayesrc.bayes.change import prior_settings
    from bayesrc.data import load_counts
    from bayesrc.scale import ray_map
    from bayesrc.sensitivity import prior_sensitivity

    d = manifest.parent
    counts = load_counts([d / "pair-a-v1.parquet", d / "pair-a-v2.parquet"])
    grid = {"pi ~ Beta(1, 9)": PRIOR}  # one fit: the mapping is what is tested
    cfg = _fit_kwargs()["config"]
    serial_fit = bayesrc.load(serial_fits[0] / "pair-a")
    assert serial_fit.params["prior"] == prior_settings(PRIOR)  # so prior_sensitivity reuses it, not refits
    serial = prior_sensitivity(counts, grid=grid, config=cfg, seed=7, result=serial_fit)
    on_ray = prior_sensitivity(counts, grid=grid, config=cfg, seed=7, mapper=ray_map, reweight=False)  # refitted there
    pd.testing.assert_frame_equal(serial, on_ray)


def test_fit_many_bad_manifest_one_line_nothing_written(manifest, tmp_path, capsys):
    from bayesrc.cli import main

    bad = tmp_path / "bad.csv"
    bad.write_text("name,v1,v2\na,pair-a-v1.parquet,missing.parquet\n")
    shutil.copy(manifest.parent / "pair-a-v1.parquet", tmp_path)
    assert main(["fit-many", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.csv:2: field 'v2'" in err and "not found" in err
    assert not (tmp_path / "o").exists()
