"""Malformed and truncated inputs for every reader the CLI uses (tests/test_fuzz.py and
benchmarks/faults.py).

Each :class:`Reader` writes a small valid seed input, mutates it with a Hypothesis strategy
(byte-level: truncation, deleted / inserted / replaced bytes, dropped or repeated lines;
structural: a JSON value replaced by another or deleted, a CSV cell, a TOML value or a
Parquet column changed) and feeds it to the reader the way the CLI does. :func:`try_input`
says what happened: ``ok`` (still valid), ``input error`` (an :class:`~bayesrc.errors.InputError`
or CLI exit 2 whose one line names the file), or a fault: ``traceback`` (any other exception),
``unnamed`` (the error does not name the file), ``wrote`` (output left behind by a failure).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import functools
import io
import json
import random
import shutil
import tempfile
import traceback
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import bayesrc
from bayesrc.cli import main
from bayesrc.collect import builtin_bank, load_bank, load_card
from bayesrc.data import load_exact, load_trials, open_counts, write_exact_run
from bayesrc.datasets import path as data_path
from bayesrc.errors import InputError
from bayesrc.importers import read_inspect, read_lm_eval
from bayesrc.importers.examples import example_trials, write_inspect_example, write_lm_eval_example

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "gemma-3-270m-q4_k_m.toml"
EVAL_LOG = Path(__file__).resolve().parent / "data" / "inspect" / "v1.eval"
FAULTS = ("traceback", "unnamed", "wrote", "bad exit")

# -- mutations -------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=4,
)
TOML_VALUES = (
    '""',
    '"x"',
    "0",
    "-1",
    "1e400",
    "nan",
    "true",
    "[]",
    "[1, 2]",
    "{}",
    "{a = 1}",
    '"""\n"""',
    "1979-05-27",
    "'",
    "= =",
    "",
)


@st.composite
def byte_mutation(draw, data: bytes) -> bytes:
    """Truncate, delete, insert or replace bytes; drop or repeat a line (1-3 times)."""
    for _ in range(draw(st.integers(1, 3))):
        n = len(data)
        op = draw(st.sampled_from(["truncate", "delete", "insert", "replace", "drop_line", "repeat_line"]))
        i = draw(st.integers(0, n))
        if op == "truncate":
            data = data[:i]
        elif op == "delete":
            data = data[:i] + data[i + draw(st.integers(1, 64)) :]
        elif op == "insert":
            data = (
                data[:i]
                + draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b"\n", b"{", b'"', b",", b"\xff", b"\x00"]))
                + data[i:]
            )
        elif op == "replace" and n:
            data = data[: min(i, n - 1)] + draw(st.binary(min_size=1, max_size=1)) + data[min(i, n - 1) + 1 :]
        else:
            lines = data.splitlines(keepends=True)
            if lines:
                j = draw(st.integers(0, len(lines) - 1))
                lines[j : j + 1] = [] if op == "drop_line" else [lines[j], lines[j]]
                data = b"".join(lines)
    return data


def _slots(doc: object, path: tuple = ()) -> list[tuple]:
    """Every (container path, key) in a JSON document, shallow ones first."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((*path, key))
        out.extend(_slots(value, (*path, key)))
    return out


@st.composite
def json_mutation(draw, doc: object) -> object:
    """Replace 1-3 values of a JSON document by random JSON or delete them."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(doc)
        if not slots:
            return draw(json_values)
        *parent_path, key = draw(st.sampled_from(slots))
        parent = doc
        for k in parent_path:
            parent = parent[k]
        if draw(st.booleans()):
            parent[key] = draw(json_values)
        else:
            del parent[key]
    return doc


def json_bytes(doc: object) -> st.SearchStrategy[bytes]:
    return json_mutation(doc).map(lambda d: json.dumps(d).encode())


def json_file_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    return byte_mutation(data) | json_bytes(json.loads(data))


def jsonl_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    return byte_mutation(data) | jsonl_record_mutation(data)


@st.composite
def jsonl_record_mutation(draw, data: bytes) -> bytes:
    """One record of a JSONL file mutated structurally."""
    lines = data.decode().splitlines()
    j = draw(st.integers(0, len(lines) - 1))
    lines[j] = json.dumps(draw(json_mutation(json.loads(lines[j]))))
    return ("\n".join(lines) + "\n").encode()


@st.composite
def csv_mutation(draw, data: bytes) -> bytes:
    """A cell of a CSV file replaced by random text (quotes, commas and newlines included)."""
    df = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    i, j = draw(st.integers(0, len(df) - 1)), draw(st.integers(0, df.shape[1] - 1))
    df.iat[i, j] = draw(st.text(max_size=6) | st.sampled_from(["", "nan", "True", "yes", "-1", "1e400", "1.5"]))
    if draw(st.booleans()):
        df = df.drop(columns=df.columns[draw(st.integers(0, df.shape[1] - 1))])
    return df.to_csv(index=False).encode()


@st.composite
def toml_mutation(draw, data: bytes) -> bytes:
    """The value of a ``key = value`` line replaced by another TOML literal (or garbage)."""
    lines = data.decode().splitlines()
    keyed = [j for j, line in enumerate(lines) if "=" in line and not line.lstrip().startswith("#")]
    j = draw(st.sampled_from(keyed))
    key = lines[j].split("=", 1)[0]
    lines[j] = f"{key}= {draw(st.sampled_from(TOML_VALUES) | st.text(max_size=6).map(json.dumps))}"
    return ("\n".join(lines) + "\n").encode()


@st.composite
def parquet_mutation(draw, data: bytes) -> bytes:
    """A column of a Parquet table dropped, nulled, retyped or filled with text; rows dropped or repeated."""
    df = pd.read_parquet(io.BytesIO(data))
    col = df.columns[draw(st.integers(0, df.shape[1] - 1))]
    op = draw(st.sampled_from(["drop", "null", "text", "float", "negate", "rows", "repeat"]))
    if op == "drop":
        df = df.drop(columns=col)
    elif op == "null":
        df[col] = None
    elif op == "text":
        df[col] = draw(st.text(max_size=4))
    elif op == "float":
        df[col] = draw(st.floats(allow_nan=True, allow_infinity=True))
    elif op == "negate":
        df[col] = -pd.to_numeric(df[col], errors="coerce")
    elif op == "rows":
        df = df.iloc[: draw(st.integers(0, len(df)))]
    else:
        df = pd.concat([df, df.iloc[:1]], ignore_index=True)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def parquet_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    return byte_mutation(data) | parquet_mutation(data)


@st.composite
def zip_member_mutation(draw, data: bytes) -> bytes:
    """One JSON member of a zip (.eval) mutated structurally and the zip rewritten (deflate)."""
    from bayesrc.importers.inspect_log import read_zip_member

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {i.filename: read_zip_member(zf, i) for i in zf.infolist()}
    names = sorted(members)[:4]  # the header and the first samples
    name = draw(st.sampled_from(names))
    members[name] = draw(json_bytes(json.loads(members[name])) | byte_mutation(members[name]))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, content in members.items():
            zf.writestr(n, content)
    return buf.getvalue()


# -- readers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reader:
    """A reader under test: its seed input, its mutations and how the CLI calls it.

    ``seed(folder)`` writes a valid input into ``folder`` and returns the file to mutate;
    ``mutate(seed bytes)`` is the strategy; ``run(file, out)`` reads the file as the CLI does
    (returning the exit status; Python readers return 0 or raise InputError), ``out`` being
    a path it may write to only on success.
    """

    name: str
    seed: Callable[[Path], Path]
    mutate: Callable[[bytes], st.SearchStrategy[bytes]]
    run: Callable[[Path, Path], int]
    slow_seed: bool = False  # the seed needs a NUTS fit: benchmarks/faults.py only


def _cli(argv: list[str]) -> int:
    """Run the CLI in-process; exit 2 becomes an InputError carrying its error line."""
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    if code == 2:
        lines = [line for line in err.getvalue().splitlines() if line.startswith("bayesrc: error: ")]
        raise InputError(lines[-1] if len(lines) == 1 else f"exit 2 with {len(lines)} error lines: {err.getvalue()!r}")
    return code


def _trials(folder: Path, fmt: str) -> Path:
    t1, t2 = example_trials(n_items=6, k=4, seed=1)
    other = folder / "v2.parquet"
    t2.to_parquet(other, index=False)
    target = folder / f"v1.{fmt}"
    if fmt == "jsonl":
        t1.to_json(target, orient="records", lines=True)
    elif fmt == "csv":
        t1.to_csv(target, index=False)
    else:
        t1.to_parquet(target, index=False)
    return target


def _power(path: Path, out: Path) -> int:
    return _cli(["power", str(path), str(path.parent / "v2.parquet"), "--out", str(out)])


def _lm_eval_seed(folder: Path) -> Path:
    """A samples file of repeats records and one multiple-choice (loglikelihood) record."""
    files = write_lm_eval_example(example_trials(n_items=6, k=4, seed=1)[0], folder / "lm")
    for extra in files[1:]:
        extra.unlink()
    lls = [-2.5, -0.5, -3.0]
    mc = {
        "doc_id": 1000,
        "target": 1,
        "filter": "custom-extract",
        "metrics": ["acc"],
        "resps": [[[ll, False]] for ll in lls],
        "filtered_resps": [[ll, False] for ll in lls],
        "acc": 1.0,
    }
    with files[0].open("a", encoding="utf-8") as f:
        f.write(json.dumps(mc) + "\n")
    return files[0]


def _inspect_seed(folder: Path) -> Path:
    return write_inspect_example(example_trials(n_items=6, k=4, seed=1)[0], folder / "log.json")


def _eval_seed(folder: Path) -> Path:
    return Path(shutil.copy(EVAL_LOG, folder / "log.eval"))


def _import(kind: str) -> Callable[[Path, Path], int]:
    def run(path: Path, out: Path) -> int:
        extra = ["--model", "m"] if kind == "lm-eval" else []
        return _cli(["import", kind, str(path), *extra, "--out", str(out.with_suffix(".parquet"))])

    return run


def _bank_seed(folder: Path) -> Path:
    return builtin_bank(folder / "bank.jsonl", n_items=5, seed=1)


def _card_seed(folder: Path) -> Path:
    return Path(shutil.copy(CARD, folder / "card.toml"))


def _exact_seed(folder: Path) -> Path:
    run = load_exact(data_path("exact_gemma/q4"))
    keep = run.items["item_id"].iloc[:4]
    dist = run.dist[run.dist["item_id"].isin(keep)]
    unresolved = dict(zip(run.items["item_id"], run.items["p_unresolved"]))
    write_exact_run(folder / "exact", dist, label="q4", p_unresolved={k: unresolved[k] for k in keep})
    return folder / "exact" / "dist.parquet"


def _exact_items(folder: Path) -> Path:
    _exact_seed(folder)
    return folder / "exact" / "items_exact.parquet"


def _third_version(folder: Path) -> Path:
    """A third version of :func:`_trials`' items (a family of three), as ``v3.parquet``."""
    t3 = example_trials(n_items=6, k=4, seed=2)[1].assign(model="example-v3")
    t3.to_parquet(folder / "v3.parquet", index=False)
    return folder / "v3.parquet"


def _result_seed(kind: str, main_file: str) -> Callable[[Path], Path]:
    def seed(folder: Path) -> Path:
        a = _trials(folder, "parquet")
        quick = ["--splits", "50", "--permutations", "50"]
        argv = {
            "rci": ["rci", "--pair", "A", str(a), str(folder / "v2.parquet"), *quick],
            "pairwise": ["rci", "--family", str(a), str(folder / "v2.parquet"), str(_third_version(folder)), *quick],
            "power": ["power", str(a), str(folder / "v2.parquet")],
        }[kind]
        assert _cli([*argv, "--out", str(folder / "res")]) == 0
        return folder / "res" / main_file

    return seed


def _analysis_seed(name: str, main_file: str) -> Callable[[Path], Path]:
    """A result folder written by the analysis's own code (small settings), for the results the
    suite cannot make through a quick CLI run; returns its file ``main_file``."""

    def seed(folder: Path) -> Path:
        _ANALYSES[name](folder / "res")
        return folder / "res" / main_file

    return seed


def _small_counts():
    from bayesrc.data import item_counts, simulate_pair

    sim = simulate_pair(30, 6, models=("v1", "v2"), seed=5)
    return item_counts(sim.trials_v1, sim.trials_v2)


def _sensitivity(out: Path) -> None:
    from bayesrc.sensitivity import SensitivityTable, run_sensitivity_analyses

    SensitivityTable.from_tables(run_sensitivity_analyses(_small_counts(), ("threshold",), seed=0)).save(out)


def _switch(out: Path) -> None:
    from bayesrc.switch import analyse_switch, simulate_switch

    analyse_switch(simulate_switch(3, 20, seed=5).data, n_boot=50, backends=()).save(out)


def _plan(out: Path) -> None:
    from bayesrc.power.planner import plan_k_n

    plan_k_n(
        0.35, k_grid=(4,), n_grid=(50,), replicates=1, seed=3, n_splits=20, cache_dir=out.parent / "plan-cache"
    ).save(out)


def _truth(out: Path) -> None:
    from bayesrc.data import letter_shift_truth
    from bayesrc.truth import truth

    t = letter_shift_truth(10, seed=3)
    runs = []
    for v, col in (("v1", "p_v1"), ("v2", "p_v2")):
        rows = [
            (
                r.item_id,
                r.domain,
                x,
                getattr(r, col) if x == r.correct_answer else (1 - getattr(r, col)) / 2,
                x == r.correct_answer,
            )
            for r in t.itertuples()
            for x in "ABC"
        ]
        runs.append(
            write_exact_run(
                out.parent / f"exact-{v}",
                pd.DataFrame(rows, columns=["item_id", "domain", "answer", "prob", "is_correct"]),
                label=f"sim-{v}",
            )
        )
    truth(*runs, k=3, replicates=1, seed=1, methods=()).save(out)


def _family_truth(out: Path) -> None:
    """A family's truth scored by RCI alone (the bundled exact Q4_K_M, Q3_K_M and prompt runs, K = 3): no fit."""
    from bayesrc.truth import family_truth

    family_truth(
        [data_path(f"exact_gemma/{v}") for v in ("q4", "q3", "q4-prompt2")], k=3, replicates=1, seed=1, methods=()
    ).save(out)


@functools.cache
def _compare_folders() -> Path:
    """One real ``compare`` (a NUTS fit, about 90 s on 2 cores) and its fit, written once per process."""
    from bayesrc.bayes import SamplerConfig
    from bayesrc.compare import compare

    root = Path(tempfile.mkdtemp(prefix="fuzz-fit-"))
    atexit.register(shutil.rmtree, root, True)
    res = compare(
        _small_counts(), config=SamplerConfig(seed=1, chains=2, draws=50, tune=50, max_draws=50, progress=False)
    )
    res.save(root / "compare")
    res.fit.save(root / "fit")
    return root


def _joint(out: Path) -> None:
    """A joint fit of three simulated versions (short chains: the fields, not the gate, are under test)."""
    from bayesrc.bayes import GateConfig, SamplerConfig, fit_joint
    from bayesrc.data import simulate_family

    fam = simulate_family(30, 6, versions=3, shifts=[0.6, -0.6], seed=5)
    fit_joint(
        fam.counts,
        config=SamplerConfig(seed=1, chains=2, draws=50, tune=50, max_draws=50, progress=False),
        gate=GateConfig(escalate=False),
    ).save(out)


def _loo_compare(out: Path) -> None:
    """The fuzzing's fit ranked against itself by PSIS-LOO (as ``bayesrc fit --compare`` writes it)."""
    from bayesrc.bayes.model_comparison import compare

    fit = bayesrc.load(_compare_folders() / "fit")
    compare({"change": fit, "change_again": fit}).save(out)


def _fitted(name: str) -> Callable[[Path], None]:
    return lambda out: shutil.copytree(_compare_folders() / name, out)


def _counts_seed(folder: Path) -> Path:
    from bayesrc.data import save_counts

    return save_counts(_small_counts(), folder / "counts.nc")


_ANALYSES: dict[str, Callable[[Path], None]] = {
    "sensitivity": _sensitivity,
    "switch": _switch,
    "plan": _plan,
    "truth": _truth,
    "family_truth": _family_truth,
    "compare": _fitted("compare"),
    "fit": _fitted("fit"),
    "joint": _joint,
    "loo_compare": _loo_compare,
}


def _shard_pair_seed(folder: Path) -> Path:
    """Two shards (items 0:2 and 2:4, K = 2) of a real Gemma collection; the second's run.json is the one mutated."""
    from bayesrc.collect import Model, collect, resolve_model

    card = load_card(CARD)
    model = Model(resolve_model(card), n_ctx=card.n_ctx, n_batch=card.n_batch, n_threads=1, label=card.label)
    bank = load_bank(builtin_bank(folder / "bank.jsonl", n_items=4, seed=7))
    for i in range(2):
        collect(CARD, bank, folder / f"s{i}", k=2, shard=f"{i}/2", model=model, seed_rule="shared")
    return folder / "s1" / "run.json"


def _merge(path: Path, out: Path) -> int:
    """``bayesrc merge`` of the seed's two shards, the mutated one (``path``'s run directory) second."""
    return _cli(["merge", str(path.parent.with_name("s0")), str(path.parent), "--out", str(out)])


def _python(reader: Callable[[Path], object], whole_folder: bool = False) -> Callable[[Path, Path], int]:
    def run(path: Path, out: Path) -> int:
        reader(path.parent if whole_folder else path)
        return 0

    return run


LOAD = _python(bayesrc.load, whole_folder=True)

READERS: dict[str, Reader] = {
    r.name: r
    for r in [
        Reader("trials JSONL", lambda f: _trials(f, "jsonl"), jsonl_mutations, _power),
        Reader("trials CSV", lambda f: _trials(f, "csv"), lambda d: byte_mutation(d) | csv_mutation(d), _power),
        Reader("trials Parquet", lambda f: _trials(f, "parquet"), parquet_mutations, _power),
        Reader("item bank", _bank_seed, jsonl_mutations, _python(load_bank)),
        Reader("model card", _card_seed, lambda d: byte_mutation(d) | toml_mutation(d), _python(load_card)),
        Reader("Inspect .json", _inspect_seed, json_file_mutations, _import("inspect")),
        Reader("Inspect .eval", _eval_seed, lambda d: byte_mutation(d) | zip_member_mutation(d), _import("inspect")),
        Reader("lm-eval samples", _lm_eval_seed, jsonl_mutations, _import("lm-eval")),
        Reader("exact run dist", _exact_seed, parquet_mutations, _python(load_exact, whole_folder=True)),
        Reader("exact run items", _exact_items, parquet_mutations, _python(load_exact, whole_folder=True)),
        Reader("result rci.json", _result_seed("rci", "rci.json"), json_file_mutations, LOAD),
        Reader("result items table", _result_seed("rci", "items_A.parquet"), parquet_mutations, LOAD),
        Reader("result power.json", _result_seed("power", "power.json"), json_file_mutations, LOAD),
        Reader("result sensitivity.json", _analysis_seed("sensitivity", "sensitivity.json"), json_file_mutations, LOAD),
        Reader("result switch.json", _analysis_seed("switch", "switch.json"), json_file_mutations, LOAD),
        Reader("result plan.json", _analysis_seed("plan", "plan.json"), json_file_mutations, LOAD),
        Reader("result plan table", _analysis_seed("plan", "plan_cells.parquet"), parquet_mutations, LOAD),
        Reader("result truth.json", _analysis_seed("truth", "truth.json"), json_file_mutations, LOAD),
        Reader("result truth table", _analysis_seed("truth", "truth_replicates.parquet"), parquet_mutations, LOAD),
        Reader(
            "result family_truth.json", _analysis_seed("family_truth", "family_truth.json"), json_file_mutations, LOAD
        ),
        Reader(
            "exact run run.json",
            lambda f: _exact_seed(f).with_name("run.json"),
            json_file_mutations,
            _python(load_exact, whole_folder=True),
        ),
        Reader("result run.json", lambda f: _exact_seed(f).with_name("run.json"), json_file_mutations, LOAD),
        Reader("merge shard run.json", _shard_pair_seed, json_file_mutations, _merge),
        Reader("counts NetCDF", _counts_seed, byte_mutation, _python(open_counts)),
        Reader(
            "result compare.json", _analysis_seed("compare", "compare.json"), json_file_mutations, LOAD, slow_seed=True
        ),
        Reader("result fit.json", _analysis_seed("fit", "fit.json"), json_file_mutations, LOAD, slow_seed=True),
        Reader("result posterior.nc", _analysis_seed("fit", "posterior.nc"), byte_mutation, LOAD, slow_seed=True),
    ]
}

# Readers whose every field tests/test_fuzz_retyped.py and benchmarks/faults.py retype one at a
# time (retyped()): the Python function behind each (faster than the CLI in-process, whose own
# error line the mutations above already check).
RETYPED: dict[str, Callable[[Path, Path], int]] = {
    "trials JSONL": _python(load_trials),
    "item bank": _python(load_bank),
    "model card": _python(load_card),
    "Inspect .json": _python(read_inspect),
    "Inspect .eval": _python(read_inspect),
    "lm-eval samples": _python(functools.partial(read_lm_eval, model="m")),
    "exact run run.json": READERS["exact run run.json"].run,
    "merge shard run.json": _merge,
    **{name: LOAD for name in READERS if name.startswith("result ") and name.endswith(".json")},
}


# -- every field retyped ---------------------------------------------------------------------
def _schema(slot: tuple) -> tuple:
    """A slot with its list indices collapsed: ``("samples", 3, "scores")`` -> ``("samples", "*", "scores")``."""
    return tuple("*" if isinstance(k, int) else k for k in slot)


def _other_type(value: object) -> object:
    """A value of another JSON type: a number for an object, an object for a list or a scalar."""
    return 1.5 if isinstance(value, dict) else {"x": 1}


def retyped_inputs(
    data: bytes, *, jsonl: bool, values: Callable[[object], list[object]] = lambda v: [_other_type(v)]
) -> list[tuple[str, bytes]]:
    """Every field of a JSON (or JSONL) seed given a value of another type, one at a time: ``(label, input)``.

    A field is retyped where it first occurs (in the first sample of a log, say), once per
    record layout in a JSONL file (a layout being the record's set of fields), so each
    kind of record is covered; ``label`` names the record and the field. ``values(old)`` are
    the replacements tried (default: one of another type).
    """
    docs = [json.loads(line) for line in data.decode().splitlines()] if jsonl else [json.loads(data)]
    out: list[tuple[str, bytes]] = []
    done: set[tuple] = set()
    for i, doc in enumerate(docs):
        slots = _slots(doc)
        layout = frozenset(map(_schema, slots))
        for slot in slots:
            if (layout, _schema(slot)) in done:
                continue
            done.add((layout, _schema(slot)))
            for value in values(_at(doc, slot)):
                new = copy.deepcopy(doc)
                _set(new, slot, value)
                text = (
                    "".join(json.dumps(d) + "\n" for d in [*docs[:i], new, *docs[i + 1 :]])
                    if jsonl
                    else json.dumps(new)
                )
                out.append((f"record {i}: {'.'.join(map(str, slot))} = {json.dumps(value)}", text.encode()))
    return out


def _zip_with(data: bytes, name: str, content: bytes) -> bytes:
    """The zip ``data`` with member ``name`` replaced by ``content`` (deflate), the others unchanged."""
    from bayesrc.importers.inspect_log import read_zip_member

    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, content if info.filename == name else read_zip_member(src, info))
    return buf.getvalue()


def retyped_zip_inputs(data: bytes) -> list[tuple[str, bytes]]:
    """:func:`retyped_inputs` of an Inspect ``.eval`` log's header and its first sample, each in the rewritten zip."""
    from bayesrc.importers.inspect_log import read_zip_member

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = [n for n in ("header.json", "_journal/start.json") if n in zf.namelist()]
        names += sorted(n for n in zf.namelist() if n.startswith("samples/"))[:1]
        members = {n: read_zip_member(zf, zf.getinfo(n)) for n in names}
    return [
        (f"{name}: {label}", _zip_with(data, name, text))
        for name, member in members.items()
        for label, text in retyped_inputs(member, jsonl=False)
    ]


def toml_value(value: object) -> str:
    """A TOML literal for a JSON-like value (a JSON string is a TOML basic string; objects become inline tables)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return json.dumps(value)


def retyped_toml_inputs(data: bytes) -> list[tuple[str, bytes]]:
    """Every key of a TOML document (a model card) given a value of another type, one at a time.

    The document is written back as top-level keys with inline tables, which TOML reads as
    the same tables as the original's ``[section]`` headers.
    """
    import tomllib

    doc = tomllib.loads(data.decode())
    out = []
    for slot in _slots(doc):
        new = copy.deepcopy(doc)
        value = _other_type(_at(doc, slot))
        _set(new, slot, value)
        text = "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in new.items())
        out.append((f"{'.'.join(map(str, slot))} = {toml_value(value)}", text.encode()))
    return out


def retyped(target: Path, data: bytes) -> list[tuple[str, bytes]]:
    """Every field of a reader's seed input retyped, by the seed's format (JSON, JSONL, ``.eval`` zip or TOML)."""
    if target.suffix == ".eval":
        return retyped_zip_inputs(data)
    if target.suffix == ".toml":
        return retyped_toml_inputs(data)
    return retyped_inputs(data, jsonl=target.suffix == ".jsonl")


def _at(doc: object, slot: tuple) -> object:
    for k in slot:
        doc = doc[k]
    return doc


def _set(doc: object, slot: tuple, value: object) -> None:
    _at(doc, slot[:-1])[slot[-1]] = value


# -- the Python API's options and in-memory frames -------------------------------------------
_CELLS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 5)
    | st.floats()
    | st.text(max_size=3)
    | st.sampled_from(["true", "1", "", "nan"])
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.integers(), max_size=1)
)
_TRIAL_FIELDS = (
    "item_id",
    "item_index",
    "domain",
    "model",
    "k",
    "seed",
    "response",
    "raw_response",
    "raw_text",
    "extracted",
    "extracted_answer",
    "parsed_response",
    "correct_answer",
    "is_correct",
    "is_missing",
    "_line",
)


@st.composite
def trial_frames(draw) -> tuple[pd.DataFrame, dict]:
    """A frame of 0-4 rows with some trial fields (aliases and ``_line`` included) holding any values, and
    :func:`~bayesrc.data.normalise_trials` options (``greedy``, ``fmt``, ``model``)."""
    cols = draw(st.lists(st.sampled_from(_TRIAL_FIELDS), unique=True, max_size=8))
    n = draw(st.integers(0, 4))
    frame = pd.DataFrame({c: pd.Series([draw(_CELLS) for _ in range(n)], dtype=object) for c in cols}, index=range(n))
    options = {
        "greedy": draw(st.sampled_from([None, True, False])),
        "fmt": draw(st.sampled_from(["jsonl", "csv", "parquet"])),
        "model": draw(st.sampled_from([None, "m"])),
    }
    return frame, options


_DOTTED = st.none() | st.sampled_from(
    [
        "doc",
        "doc.category",
        "metadata",
        "metadata.subject",
        "id",
        "target",
        "x.y",
        "",
        ".",
        "resps",
        "input",
        "scores",
        "epoch",
    ]
)

#: reader -> (strategy of keyword options, the Python function taking them): every option a user can pass
OPTIONS: dict[str, tuple[st.SearchStrategy[dict], Callable[..., object]]] = {
    "trials JSONL": (
        st.fixed_dictionaries({"greedy": st.sampled_from([None, True, False]), "model": st.sampled_from([None, "m"])}),
        load_trials,
    ),
    "trials CSV": (st.fixed_dictionaries({"greedy": st.sampled_from([None, True, False])}), load_trials),
    "Inspect .json": (
        st.fixed_dictionaries(
            {
                "scorer": st.none() | st.sampled_from(["choice", "match", "x", ""]),
                "domain_field": _DOTTED,
                "allow_partial": st.booleans(),
                "model": st.sampled_from([None, "m", ""]),
            }
        ),
        read_inspect,
    ),
    "Inspect .eval": (
        st.fixed_dictionaries(
            {
                "scorer": st.none() | st.sampled_from(["choice", "match", "x", ""]),
                "domain_field": _DOTTED,
                "allow_partial": st.booleans(),
            }
        ),
        read_inspect,
    ),
    "lm-eval samples": (
        st.fixed_dictionaries(
            {
                "model": st.sampled_from(["m", ""]),
                "metric": st.none() | st.sampled_from(["acc", "exact_match", "x", "doc", "resps"]),
                "filter": st.none() | st.sampled_from(["custom-extract", "none", "x"]),
                "domain_field": _DOTTED,
                "item_id_field": _DOTTED,
            }
        ),
        read_lm_eval,
    ),
}


def with_options(name: str, options: dict) -> Callable[[Path, Path], int]:
    """The reader's Python function called with ``options`` (for :func:`try_input`)."""
    return _python(functools.partial(OPTIONS[name][1], **options))


def try_frame(frame: pd.DataFrame, options: dict) -> tuple[str, str]:
    """:func:`~bayesrc.data.normalise_trials` of an in-memory frame: ``ok``, ``input error`` (naming the path),
    ``unnamed`` or ``traceback``."""
    from bayesrc.data import normalise_trials

    try:
        normalise_trials(frame, path="frame.jsonl", **options)
    except InputError as exc:
        return ("input error" if "frame.jsonl" in str(exc) else "unnamed"), str(exc)
    except Exception:  # noqa: BLE001 - what the fuzzing looks for
        return "traceback", traceback.format_exc(limit=-3)
    return "ok", ""


@dataclass
class Workspace:
    """A reader's seed input, written once; each input is tried on a fresh copy of it."""

    reader: Reader
    folder: Path
    target: Path
    seed_bytes: bytes

    @classmethod
    def make(cls, reader: Reader, root: Path) -> Workspace:
        folder = root / "seed"
        folder.mkdir(parents=True)
        target = reader.seed(folder)
        return cls(reader, folder, target, target.read_bytes())


def _listing(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@contextlib.contextmanager
def _fed(ws: Workspace, data: bytes) -> Iterator[tuple[Path, Path, Callable[[], str | None]]]:
    """A copy of the seed's folder with ``data`` in place of the seed file: (that file, an output
    path beside it, what has been written there since, as a call: None when nothing)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        folder = Path(tmp) / "in"
        shutil.copytree(ws.folder, folder)
        path = folder / ws.target.relative_to(ws.folder)
        path.write_bytes(data)
        before = _listing(Path(tmp))

        def written() -> str | None:
            now = _listing(Path(tmp))
            return str(sorted(now - before)) if now != before else None

        yield path, Path(tmp) / "out", written


def try_input(ws: Workspace, data: bytes, run: Callable[[Path, Path], int] | None = None) -> tuple[str, str]:
    """Feed ``data`` (in place of the seed file) to the reader (or to ``run``, e.g. its Python function): (outcome,
    detail)."""
    with _fed(ws, data) as (path, out, written):
        try:
            code = (run or ws.reader.run)(path, out)
        except InputError as exc:
            if left := written():
                return "wrote", left
            named = path.name in str(exc) or path.parent.name in str(exc)
            return ("input error" if named else "unnamed"), str(exc)
        except Exception:  # noqa: BLE001 - what the fuzzing looks for
            return "traceback", traceback.format_exc(limit=-3)
        return ("ok", "") if code == 0 else ("bad exit", f"exit {code}")


def fuzz(
    reader: Reader, n: int, root: Path, attempt: Callable[[Workspace, bytes], tuple[str, str]] | None = None
) -> tuple[Counter, list[tuple[str, str, bytes]]]:
    """Try ``n`` generated inputs (seeded: the same ones every run) with ``attempt`` (default
    :func:`try_input`); count the outcomes, keep the faults."""
    ws = Workspace.make(reader, root)
    outcomes: Counter = Counter()
    faults: list[tuple[str, str, bytes]] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(reader.mutate(ws.seed_bytes))
    def one(data: bytes) -> None:
        outcome, detail = (attempt or try_input)(ws, data)
        outcomes[outcome] += 1
        if outcome in FAULTS:
            faults.append((outcome, detail, data))

    one()
    return outcomes, faults


def try_each(
    ws: Workspace, inputs: list[tuple[str, bytes]], attempt: Callable[[Workspace, bytes], tuple[str, str]]
) -> tuple[Counter, list[tuple[str, str, bytes]]]:
    """Every ``(label, input)`` through ``attempt``: outcome counts and the faults, each detail led by its input's
    label."""
    outcomes: Counter = Counter()
    faults: list[tuple[str, str, bytes]] = []
    for label, data in inputs:
        outcome, detail = attempt(ws, data)
        outcomes[outcome] += 1
        if outcome in FAULTS:
            faults.append((outcome, f"{label}: {detail}", data))
    return outcomes, faults


# -- result fields through ``bayesrc report`` -------------------------------------------------
# A result file that bayesrc.load accepts can still hold values the report cannot show: these
# mutations keep every field's JSON type (or its Parquet column's dtype) and change its value.
HUGE = 1e300
REPORTED = ("ok", "input error")  # a report written, or one line naming the file and the field


def _number_values(value: float) -> list[object]:
    """Values a number field may take in a file that still loads: null, NaN, ±inf, 0, negative, huge."""
    negative = -abs(value) if value else -1
    return [None, float("nan"), float("inf"), float("-inf"), 0, negative, HUGE if isinstance(value, float) else 2**63]


def _field_values(value: object) -> list[object]:
    """The type-valid replacements of one field: numbers as above, an empty or one-element list, an empty object, a
    flipped flag, an empty text."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, (int, float)):
        return _number_values(value)
    if isinstance(value, list):
        return [[], value[:1]] if len(value) > 1 else [[]]
    if isinstance(value, dict):
        return [{}]
    if isinstance(value, str):
        return [""]
    return [0, -1, HUGE]  # a null: a number where there was none


@st.composite
def field_value_mutation(draw, doc: object) -> object:
    """1-3 fields of a JSON document given another value of their type, or deleted (an optional section missing)."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(doc)
        if not slots:
            break
        slot = draw(st.sampled_from(slots))
        choices = _field_values(_at(doc, slot))
        if isinstance(_at(doc, slot[:-1]), dict):
            choices = [*choices, _DELETE]
        value = draw(st.sampled_from(choices))
        if value is _DELETE:
            del _at(doc, slot[:-1])[slot[-1]]
        else:
            _set(doc, slot, value)
    return doc


_DELETE = object()


def report_json_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """:func:`field_value_mutation` of a result file, written back as JSON (NaN and ±inf as Python writes them)."""
    return field_value_mutation(json.loads(data)).map(lambda d: json.dumps(d).encode())


def _column_values(column: pd.Series) -> list[object]:
    """Values of a column's own dtype: NaN, ±inf, 0, negative, huge for floats; 0, negative, huge for integers; flipped
    flags; empty text."""
    if pd.api.types.is_bool_dtype(column):
        return [True, False]
    if pd.api.types.is_integer_dtype(column):
        return [0, -1, 2**62]
    if pd.api.types.is_float_dtype(column):
        return [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, HUGE]
    return [""]


@st.composite
def report_table_mutation(draw, data: bytes) -> bytes:
    """A Parquet table with one column's values changed within its dtype (in every row or one), or cut to no row or one
    row."""
    df = pd.read_parquet(io.BytesIO(data))
    op = draw(st.sampled_from(["column", "cell", "rows"]))
    if op == "rows" or not len(df):
        df = df.iloc[: draw(st.sampled_from([0, 1]))]
    else:
        col = df.columns[draw(st.integers(0, df.shape[1] - 1))]
        value = draw(st.sampled_from(_column_values(df[col])))
        if op == "column":
            df[col] = pd.Series([value] * len(df), index=df.index).astype(df[col].dtype)
        else:
            df.loc[df.index[draw(st.integers(0, len(df) - 1))], col] = value
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def dropped_columns(data: bytes) -> list[tuple[str, bytes]]:
    """A Parquet table without each of its columns in turn: ``(label, input)`` (the one change
    :func:`report_table_mutation` never makes)."""
    df = pd.read_parquet(io.BytesIO(data))
    out = []
    for col in df.columns:
        buf = io.BytesIO()
        df.drop(columns=[col]).to_parquet(buf, index=False)
        out.append((f"without {col}", buf.getvalue()))
    return out


def _report(path: Path, out: Path) -> int:
    """``bayesrc report`` of the run directory holding ``path``, written to ``out`` (HTML: every figure drawn)."""
    return _cli(["report", str(path.parent), "--out", str(out)])


def _with_run_record(folder: Path) -> Path:
    """An RCI result folder with a real run record (an exact run's ``run.json``) beside it: the report's pins
    section."""
    rci = _result_seed("rci", "rci.json")(folder)
    return Path(shutil.copy(_exact_seed(folder).with_name("run.json"), rci.parent / "run.json"))


REPORT_KINDS: dict[str, Reader] = {
    r.name: r
    for r in [
        Reader("rci.json", _result_seed("rci", "rci.json"), report_json_mutations, _report),
        Reader("items_A.parquet", _result_seed("rci", "items_A.parquet"), report_table_mutation, _report),
        Reader("run.json", _with_run_record, report_json_mutations, _report),
        Reader("power.json", _result_seed("power", "power.json"), report_json_mutations, _report),
        Reader("pairwise_rci.json", _result_seed("pairwise", "pairwise_rci.json"), report_json_mutations, _report),
        Reader("switch.json", _analysis_seed("switch", "switch.json"), report_json_mutations, _report),
        Reader("sensitivity.json", _analysis_seed("sensitivity", "sensitivity.json"), report_json_mutations, _report),
        Reader("truth.json", _analysis_seed("truth", "truth.json"), report_json_mutations, _report),
        Reader(
            "truth_replicates.parquet",
            _analysis_seed("truth", "truth_replicates.parquet"),
            report_table_mutation,
            _report,
        ),
        Reader(
            "family_truth.json", _analysis_seed("family_truth", "family_truth.json"), report_json_mutations, _report
        ),
        Reader("fit.json", _analysis_seed("fit", "fit.json"), report_json_mutations, _report, slow_seed=True),
        Reader(
            "fit items.parquet", _analysis_seed("fit", "items.parquet"), report_table_mutation, _report, slow_seed=True
        ),
        Reader("joint.json", _analysis_seed("joint", "joint.json"), report_json_mutations, _report, slow_seed=True),
        Reader(
            "loo_compare.json",
            _analysis_seed("loo_compare", "loo_compare.json"),
            report_json_mutations,
            _report,
            slow_seed=True,
        ),
    ]
}


def try_report(ws: Workspace, data: bytes) -> tuple[str, str]:
    """``bayesrc report`` over the seed's run directory with ``data`` in place of the seed file.

    ``ok``: a report written; ``input error``: exit 2 with one ``bayesrc: error:`` line naming
    the file and a field, nothing written; else a fault (``traceback``, ``unnamed``, ``wrote``, ``bad exit``).
    """
    with _fed(ws, data) as (path, out, written):
        try:
            code = ws.reader.run(path, out)
        except InputError as exc:
            if left := written():
                return "wrote", left
            named = path.name in str(exc) and "field '" in str(exc)
            return ("input error" if named else "unnamed"), str(exc)
        except Exception:  # noqa: BLE001 - what the fuzzing looks for
            return "traceback", traceback.format_exc(limit=-4)
        if code != 0:
            return "bad exit", f"exit {code}"
        return ("ok", "") if any(out.glob("report_*.html")) else ("bad exit", "exit 0 and no report")


def fuzz_report(kind: Reader, n: int, root: Path) -> tuple[Counter, list[tuple[str, str, bytes]]]:
    """``n`` seeded inputs of one result kind through ``bayesrc report``: outcome counts and the faults."""
    return fuzz(kind, n, root, attempt=try_report)


#: what a field of a result file is given in :func:`report_retyped`: each JSON type, a negative and a huge number
WRONG_VALUES = ("x", [1], {"x": 1}, True, None, -1, 1e308)


def _wrong_values(value: object) -> list[object]:
    return [v for v in WRONG_VALUES if json.dumps(v) != json.dumps(value)]


def report_retyped(
    kind: Reader, root: Path, *, sample: int | None = None
) -> tuple[Counter, list[tuple[str, str, bytes]]]:
    """Every field of a JSON result file (in a list, its first entry's) given each of :data:`WRONG_VALUES` in
    turn, through ``bayesrc report``: outcome counts and the faults; ``sample``: that many of them, seeded."""
    ws = Workspace.make(kind, root)
    inputs = retyped_inputs(ws.seed_bytes, jsonl=False, values=_wrong_values)
    if sample is not None:
        inputs = random.Random(0).sample(inputs, min(sample, len(inputs)))
    return try_each(ws, inputs, try_report)


def report_without_each_column(kind: Reader, root: Path) -> tuple[Counter, list[tuple[str, str, bytes]]]:
    """A Parquet result table without each of its columns in turn, through ``bayesrc report``: outcome counts and the
    faults."""
    ws = Workspace.make(kind, root)
    return try_each(ws, dropped_columns(ws.seed_bytes), try_report)
