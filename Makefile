# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BUILD  ?= build
JOBS   ?= 2

.PHONY: demo test install install-test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Build every example of assets/manifest.toml into build/ (only what changed) and validate them.
demo: install
	$(VENV)/bin/fieldgen batch assets/manifest.toml --output-dir $(BUILD) -j $(JOBS)
	$(VENV)/bin/fieldgen validate $(BUILD)/*.vtu

test: install-test
	$(PY) -m pytest -n $(JOBS) -q

# Seconds per build stage and peak memory at 10k/100k/1M tets and on the real parts (a few minutes);
# e.g. make bench BENCH_ARGS="--sizes 10k,100k --no-parts --json bench.json".
bench: install-test
	$(PY) benchmarks/build_stages.py $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) .pytest_cache
