# zlog: `make run` starts a single-node broker, `make test` sets up and runs the tests.
# Every target sets up its own environment, so a fresh clone needs nothing else.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# What is installed in $(VENV): zlog and its runtime dependencies (enough for `make run`), or
# that plus the dev extra (tests, lint, types, Spark). The dev install is a superset, so it
# renews both stamps and `make run` after `make test` installs nothing.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PYTEST_ARGS ?=

.PHONY: all setup run test test-unit test-sim test-integration lint fmt typecheck soak bench clean \
        bench-peers bench-suite java bench-spark

all: test

# The recipe's first lines for either stamp: the virtualenv, with a current pip.
define CREATE_VENV
@test -x $(PY) || $(PYTHON) -m venv $(VENV)
$(PY) -m pip install --quiet --upgrade pip
endef

$(RUN_STAMP): pyproject.toml
	$(CREATE_VENV)
	$(PY) -m pip install --quiet -e .
	@touch $@

$(DEV_STAMP): pyproject.toml
	$(CREATE_VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@ $(RUN_STAMP)

setup: $(DEV_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/zlog serve

lint: setup
	$(VENV)/bin/ruff check .

fmt: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: setup
	$(VENV)/bin/mypy zlog

# Spark (tests/spark, bench-spark) needs a Java runtime: Debian's, with apt, when none is found.
java:
	@if command -v java >/dev/null; then \
	    true; \
	elif [ "$$(id -u)" = 0 ]; then \
	    apt-get update && apt-get install -y default-jre-headless; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
	    sudo apt-get update && sudo apt-get install -y default-jre-headless; \
	else \
	    echo "java: Spark needs a Java runtime and installing one needs root: sudo apt-get install -y default-jre-headless"; \
	    exit 1; \
	fi

test: setup lint java
	$(PY) -m pytest -m 'not soak' $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-sim: setup
	$(PY) -m pytest tests/sim $(if $(SEED),--seed $(SEED)) $(PYTEST_ARGS)

test-integration: setup
	$(PY) -m pytest tests/integration tests/fault $(PYTEST_ARGS)

soak: setup
	$(PY) -m pytest -m soak $(PYTEST_ARGS)

bench: setup java
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/storage_bench.py --json bench/results/storage.json
	$(PY) bench/raft_bench.py --json bench/results/raft.json
	$(PY) bench/broker_bench.py --json bench/results/broker.json
	$(PY) bench/spark_bench.py --json bench/results/spark.json
	$(PY) -m bench --json bench/results/suite-zlog.json --out-dir bench/results/suite-zlog

# The Spark connector: foreachPartition sink vs the plain Producer, batch reads, Parquet.
bench-spark: setup java
	$(PY) bench/spark_bench.py --json bench/results/spark.json

# The side-by-side suite's peers: Debian's redis-server and nats-server (apt, needs root or
# passwordless sudo) and the bench extra (redis[hiredis], nats-py, hdrhistogram, matplotlib, tqdm).
bench-peers: setup
	@if command -v redis-server >/dev/null && command -v nats-server >/dev/null; then \
	    echo "bench-peers: redis-server and nats-server are installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
	    apt-get update && apt-get install -y redis-server nats-server; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
	    sudo apt-get update && sudo apt-get install -y redis-server nats-server; \
	else \
	    echo "bench-peers: redis-server and/or nats-server are missing, and installing them needs root:"; \
	    echo "    sudo apt-get install -y redis-server nats-server"; \
	    exit 1; \
	fi
	$(PY) -m pip install --quiet -e '.[dev,bench]'

# zlog side by side with Redis Streams, NATS JetStream, raw ZeroMQ and the ZeroMQ relay floor
# (see bench/README.md); `make bench` runs the same suite with zlog alone.
bench-suite: setup
	$(PY) -m bench --peers --json bench/results/suite.json --plots-dir docs/img $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
