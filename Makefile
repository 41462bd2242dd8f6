# The README's two commands: `make demo` and `make test` (`make docs` builds the documentation site). Both create .venv and
# install the project with all its extras first (llama-cpp-python compiles from
# source the first time, ~7 min on 2 cores, into a wheel cache that later installs reuse).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

# llama-cpp-python is built once into a wheel cache keyed by version and build flags.
# Not -march=native: on CPUs that report AMX (Sapphire Rapids and later), ggml's AMX
# matmul kernels segfault in guests that do not grant the AMX tile state (seen on these
# machines). AVX2 + FMA runs on any x86-64-v3 CPU; GPU builds: see the docs (docs/guides/collect.md, "GPU").
LLAMA_CPP_VERSION ?= 0.3.36
LLAMA_CMAKE_ARGS  ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
# CUDA build (`make gpu`, or GPU=cuda on any target): needs nvcc (CUDA toolkit >= 12) on the
# build machine, not a GPU. CUDA_ARCHS: 80 A100, 86 A10/RTX 30, 89 L4/L40/RTX 40, 90 H100/H200.
CUDA_ARCHS ?= 80;86;89;90
LLAMA_CUDA_CMAKE_ARGS ?= -DGGML_CUDA=ON -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCHS)
ifeq ($(GPU),cuda)
LLAMA_CMAKE_ARGS := $(LLAMA_CUDA_CMAKE_ARGS)
endif
# The cache key is the version and a checksum of the flags: CPU and CUDA wheels live side by side.
WHEELS := $(HOME)/.cache/bayesrc/wheels/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(shell echo '$(LLAMA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)

.PHONY: demo test docs lint venv browser clean llama-wheel gpu

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "bayesrc needs Python >= 3.12 (see .python-version); found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	@$(MAKE) --no-print-directory llama-wheel
	$(PY) -m pip install -q --force-reinstall --no-deps $(WHEELS)/llama_cpp_python-*.whl
	$(PY) -m pip install -q -e '.[all]'
	@touch $(STAMP)

# Build llama-cpp-python with LLAMA_CMAKE_ARGS into the wheel cache (once per version and flags).
llama-wheel:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@ls $(WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) (first time only, ~7 min on 2 cores) into $(WHEELS)"; \
	  rm -rf $(WHEELS).tmp; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel -q --no-cache-dir --no-deps -w $(WHEELS).tmp llama-cpp-python==$(LLAMA_CPP_VERSION) && \
	  mv $(WHEELS).tmp $(WHEELS); }

# GPU machines: the CUDA wheel (cached like the CPU one) installed into .venv, then checked.
gpu: $(STAMP)
	@$(MAKE) --no-print-directory llama-wheel GPU=cuda
	$(PY) -m pip install -q --force-reinstall --no-deps $$(ls $(HOME)/.cache/bayesrc/wheels/llama-cpp-python-$(LLAMA_CPP_VERSION)-$$(echo '$(LLAMA_CUDA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)/llama_cpp_python-*.whl)
	$(PY) -c 'import llama_cpp, sys; ok = llama_cpp.llama_supports_gpu_offload(); print("llama.cpp GPU offload: ok") if ok else sys.exit("llama-cpp-python was built but cannot offload to a GPU (no CUDA device or driver?)")'

demo: $(STAMP)
	$(PY) -m bayesrc demo --out runs/demo

# The suite with the docstrings' examples (--doctest-modules over bayesrc) and the docs built first,
# so tests/test_docs.py screenshots the pages `make docs` just wrote instead of building them again.
# Two worker processes, whole files each (--dist loadfile: a file's shared fits stay in one process,
# and the notebooks are the docs build's executed copies). A test that hangs is stopped after 30 min
# with every thread's stack printed (pytest-timeout, pyproject.toml), and a worker that dies ends the
# run (--max-worker-restart=0: with --dist loadfile, xdist's replacement worker can deadlock the run
# until CI's limit): docs/performance.md, "The test suite".
TEST_WORKERS ?= 2
test: $(STAMP) browser lint docs
	BAYESRC_NO_SKIP=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --max-worker-restart=0 --doctest-modules bayesrc tests --durations=30 $(PYTEST_ARGS)

# The documentation site (Sphinx, pydata-sphinx-theme, numpydoc, myst-nb) into docs/_build/html.
# Warnings are errors; the notebooks are executed and cached in docs/_build/.jupyter_cache.
# .built-with-W marks a build that passed: tests/test_docs.py reuses it while it is newer than every source.
docs: $(STAMP)
	rm -f docs/_build/html/.built-with-W
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	@touch docs/_build/html/.built-with-W

# House style (pyproject.toml [tool.ruff]) and the package's layers (pyproject.toml
# [tool.importlinter]: no upward import, inside functions included); tests/test_house_rules.py
# runs the same checks.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# The HTML report is tested in a real headless browser (Debian's chromium).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
	  echo "warning: could not install chromium (needs root and Debian's registry); the browser test will fail"

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info docs/_build docs/jupyter_execute docs/api/generated docs/notebooks
