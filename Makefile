# Two commands: `make` sets up and runs the main job; `make test` runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: all setup campaign demo test bench clean-results help

all: campaign

help:
	@echo "make          set up (.venv, the three MPI wheels under .mpi/) and run the default campaign"
	@echo "make setup    only the set-up (idempotent; seconds when done)"
	@echo "make demo     one harness run per library (a minute)"
	@echo "make test     run the test suite"
	@echo "make bench    overhead, IMB agreement and scaling benchmarks (about 15 minutes)"

setup: $(STAMP) mpi

# the virtual environment with the harness (editable) and its dependencies, their bytecode
# compiled at install: with PYTHONDONTWRITEBYTECODE set, as on some machines, nothing would be
# compiled later and every process would compile what it imports, every time. compileall
# compiles on every core: this step took 122-129 s against 148-159 s with pip compiling one
# file at a time (2 cores, alternated twice). Like pip, it passes over a file this Python
# cannot compile (torch ships one written for Python 3.12).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-compile -e '.[test,dnn]'
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	touch $@

# the harness's own bytecode (the editable install leaves it to the first import, which
# PYTHONDONTWRITEBYTECODE turns into every import: each rank of every launch)
.PHONY: bytecode
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 harness > /dev/null

# the MPI libraries of harness/data/libraries.yaml, each in its own prefix under .mpi/
.PHONY: mpi
mpi: $(STAMP)
	$(BIN)/harness install

# the default campaign of config/experiments.yaml on this machine (profiles/default); the last
# line counts the failed, timeout and wrong cells, and with any `harness status` exits 3 (and so
# does make) unless the config sets allow_failures: true
campaign: setup bytecode
	$(BIN)/snakemake
	@c=$$($(BIN)/python -c 'from harness.campaign.config import load; print(load().campaign)'); \
	  echo "summary: results/$$c/summary.csv"; \
	  echo "report:  results/$$c/report/index.html"; \
	  $(BIN)/harness status $$c

# a small local demo: one cell per library through `harness run`
demo: setup bytecode
	@for lib in mpich openmpi impi; do \
	  $(BIN)/harness run --campaign demo --library $$lib --algorithm native:auto \
	    --procs 4 --size 1MiB --max-reps 200 || exit 1; \
	done
	@echo "summary: results/demo/summary.csv"

# the tests in parallel (pytest-xdist; tests that share the local Slurm run on one worker),
# the 30 slowest listed, a JUnit report for .ci/run; TEST_WORKERS=0 runs them in one process
TEST_WORKERS ?= 3
TEST_REPORT  ?= .test-report.xml
test: setup bytecode
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=30 \
	  --junitxml=$(TEST_REPORT)

# the benchmarks (benchmarks/all.py): ratios measured in one run, interleaved launches
bench: setup bytecode
	$(BIN)/python benchmarks/all.py

clean-results:
	rm -rf results/adhoc results/demo results/default figures/default
