# provisioner: `make run` runs the demo daemon, `make test` runs every test.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCH  := $(VENV)/.bench-installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/provisioner run $(ARGS)

test: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache   # the layers of the house (pyproject.toml)
	$(VENV)/bin/mypy   # the lower floors: states and fact kinds are checked names (pyproject.toml)
	$(PY) -m pytest -n 2   # two workers: the Slurm drills mostly wait on Slurm's timers

# The bench extra (scipy: the LP bound of packing) is for benchmarks only, not the daemon.
$(BENCH): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH)

bench: $(BENCH)
	$(PY) -m bench

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache bench-results.json
