# zlog: `make run` starts a single-node broker, `make test` sets up and runs the tests.
# Every target sets up its own environment, so a fresh clone needs nothing else.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all setup run test test-unit test-sim test-integration lint fmt typecheck soak bench clean

all: test

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

run: setup
	$(VENV)/bin/zlog serve

lint: setup
	$(VENV)/bin/ruff check .

fmt: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: setup
	$(VENV)/bin/mypy zlog

test: setup lint
	$(PY) -m pytest -m 'not soak' $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-sim: setup
	$(PY) -m pytest tests/sim $(if $(SEED),--seed $(SEED)) $(PYTEST_ARGS)

test-integration: setup
	$(PY) -m pytest tests/integration tests/fault $(PYTEST_ARGS)

soak: setup
	$(PY) -m pytest -m soak $(PYTEST_ARGS)

bench: setup
	$(PY) bench/storage_bench.py --json bench/results/storage.json
	$(PY) bench/raft_bench.py --json bench/results/raft.json
	$(PY) bench/broker_bench.py --json bench/results/broker.json

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
