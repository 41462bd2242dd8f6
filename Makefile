# The README's two commands: `make demo` and `make test`. Both create .venv and
# install the project with all its extras first (llama-cpp-python compiles from
# source the first time, ~7 min on 2 cores; pip's wheel cache makes later installs fast).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test venv browser clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "bayesrc needs Python >= 3.12 (see .python-version); found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[all]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m bayesrc demo --out runs/demo

test: $(STAMP) browser
	$(PY) -m pytest $(PYTEST_ARGS)

# The HTML report is tested in a real headless browser (Debian's chromium).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
	  echo "warning: could not install chromium (needs root and Debian's registry); the browser test will be skipped"

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
