# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BUILD  ?= build
JOBS   ?= 2

.PHONY: demo test check-paraview install install-test bench clean

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

# Each also compiles the runtime's numba kernels into their cache (a minute the first time, a few
# seconds when they are cached), so that no first run pauses for it (docs/design/first-run.md).
install: $(VENV)/.installed
	$(VENV)/bin/fieldgen compile-kernels
install-test: $(VENV)/.installed-test
	$(VENV)/bin/fieldgen compile-kernels

# Build every example of assets/manifest.toml into build/ (only what changed) and validate them.
demo: install
	$(VENV)/bin/fieldgen batch assets/manifest.toml --output-dir $(BUILD) -j $(JOBS)
	$(VENV)/bin/fieldgen validate $(BUILD)/*.vtu

test: install-test
	$(PY) -m pytest -n $(JOBS) -q

# The ParaView scripts (inspect --paraview, simulate -o, contact --paraview) run in real ParaView,
# judged by their screenshots, which are kept in $(BUILD)/paraview-check/ to look at.
# Needs: apt-get install paraview python3-paraview xvfb xauth (Debian/Ubuntu).
check-paraview: install-test
	@command -v pvpython >/dev/null || { echo "pvpython not found: apt-get install paraview python3-paraview xvfb xauth"; exit 1; }
	FIELDGEN_REQUIRE_PARAVIEW=1 FIELDGEN_PARAVIEW_PICTURES=$(BUILD)/paraview-check \
		$(PY) -m pytest tests/test_paraview.py -q -rA

# Seconds per build stage and peak memory at 10k/100k/1M tets and on the real parts (a few minutes);
# e.g. make bench BENCH_ARGS="--sizes 10k,100k --no-parts --json bench.json".
bench: install-test
	$(PY) benchmarks/build_stages.py $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) .pytest_cache
