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
JEPSEN_ARGS ?=

.PHONY: all setup run cluster test test-unit test-sim test-integration lint fmt typecheck soak bench clean \
        bench-peers bench-suite java bench-spark jepsen nftables promtool systemd-tools system-packages \
        kafka-clients

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

# Byte-compiled once here: where PYTHONDONTWRITEBYTECODE is set, Python would otherwise compile
# zlog again in every process it starts (each broker, worker and client process of the tests).
setup: $(DEV_STAMP)
	@$(PY) -m compileall -q -j 0 zlog zlog_testbed zlog_jepsen tests bench >/dev/null

# Ctrl-C in a terminal signals the whole foreground process group, make included, and make then
# dies of that SIGINT itself (status 130) however cleanly the broker stopped. So when make runs in
# the terminal's foreground, the broker (make's child, by exec) takes the terminal in a process
# group of its own, as a job-control shell starts a job: Ctrl-C then reaches the broker and its
# workers alone, which stop gracefully and exit 0, and so does make. SIGTERM to make still reaches
# the broker, which make passes it on to. Ctrl-Z is ignored: make would not stop with the broker,
# and the terminal would hang; stop the broker with Ctrl-C. Anywhere else (no terminal, or
# `make run &`) the broker simply replaces this script.
define FOREGROUND_EXEC
import os, signal, sys
try:
    tty = os.open("/dev/tty", os.O_RDWR)
    foreground = os.tcgetpgrp(tty) == os.getpgrp()
except OSError:
    foreground = False
if foreground:
    os.setpgid(0, 0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # taking the terminal from the background
    os.tcsetpgrp(tty, os.getpgrp())
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    signal.signal(signal.SIGTSTP, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])
endef
export FOREGROUND_EXEC

run: $(RUN_STAMP)
	@exec $(PY) -c "$$FOREGROUND_EXEC" $(VENV)/bin/zlog serve

cluster: $(RUN_STAMP)
	@exec $(PY) -c "$$FOREGROUND_EXEC" $(VENV)/bin/zlog dev-cluster --brokers 3

lint: setup
	$(VENV)/bin/ruff check .

fmt: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: setup
	$(VENV)/bin/mypy zlog zlog_testbed zlog_jepsen

# The Debian packages `make test` uses, each target below checking for its own: on a fresh
# machine they come in one `apt-get update` and one install here (every update reads the whole
# archive's index again, which four of them did), and the targets below then find them. Never
# fails: a target whose package is still missing says so itself.
TEST_PACKAGES := java:default-jre-headless nft:nftables kcat:kcat openssl:openssl
system-packages:
	@missing=""; \
	for pair in $(TEST_PACKAGES); do \
	    command -v $${pair%%:*} >/dev/null || missing="$$missing $${pair#*:}"; \
	done; \
	command -v systemd-analyze >/dev/null || missing_bare="systemd"; \
	if [ -z "$$missing$$missing_bare" ]; then \
	    true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update || true; \
	    [ -z "$$missing" ] || apt-get install -y $$missing || true; \
	    [ -z "$$missing_bare" ] || apt-get install -y --no-install-recommends $$missing_bare || true; \
	fi

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

# The harness's partitions (docs/reliability.md §9.5) put brokers in network namespaces cut
# with nftables: Debian's nft, with apt, when missing and root. Never fails: without nft (or
# root) the harness falls back to its TCP fault proxy and says so.
nftables:
	@if command -v nft >/dev/null; then \
	    true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update && apt-get install -y nftables) || \
	        echo "nftables: not installed; network faults go through the TCP fault proxy"; \
	else \
	    echo "nftables: nft is missing (sudo apt-get install -y nftables); network faults go through the TCP fault proxy"; \
	fi

# tests/integration/test_systemd_unit.py verifies systemd/'s units with systemd-analyze: Debian's
# systemd package, with apt, when missing and root. Never fails: without it that test skips.
systemd-tools:
	@if command -v systemd-analyze >/dev/null; then \
	    true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update && apt-get install -y --no-install-recommends systemd) || \
	        echo "systemd-tools: not installed; the unit files' test skips"; \
	else \
	    echo "systemd-tools: systemd-analyze is missing (sudo apt-get install -y systemd); the unit files' test skips"; \
	fi

# tests/test_deploy_promql.py checks deploy/'s alert rules and dashboards with Prometheus' own
# promtool, taken out of Debian's prometheus package into $(VENV)/bin (the one binary: nothing
# installed, no service started). Never fails: without it that test skips and says so.
promtool: setup
	@if command -v promtool >/dev/null || [ -x $(VENV)/bin/promtool ]; then \
	    true; \
	elif command -v apt-get >/dev/null && command -v dpkg >/dev/null; then \
	    dir=$$(mktemp -d) && \
	    ( (cd $$dir && (apt-get download prometheus || (apt-get update && apt-get download prometheus)) \
	       && dpkg -x prometheus_*.deb unpacked) >/dev/null 2>&1 \
	      && cp $$dir/unpacked/usr/bin/promtool $(VENV)/bin/promtool ) || \
	        echo "promtool: not available; the PromQL check of deploy/ skips"; \
	    rm -rf $$dir; \
	else \
	    echo "promtool: not available; the PromQL check of deploy/ skips"; \
	fi

# The Kafka clients the Kafka listener's tests drive besides the Python ones (tests/kafka):
# Debian's kcat, with apt, when missing; kafkajs from npm into $(KAFKAJS_DIR) (node runs it);
# and the openssl command the SASL_SSL tests make their certificates with.
# Without root, or without node, the tests that need them are skipped and say why.
KAFKAJS_DIR := .kafka-clients
KAFKAJS_VERSION := 2.2.4
kafka-clients:
	@missing=""; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	if [ -z "$$missing" ]; then \
	    true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update && apt-get install -y $$missing) || \
	        echo "kafka-clients:$$missing not installed"; \
	else \
	    echo "kafka-clients:$$missing missing (sudo apt-get install -y$$missing)"; \
	fi
	@if [ -f $(KAFKAJS_DIR)/node_modules/kafkajs/package.json ]; then \
	    true; \
	elif command -v npm >/dev/null; then \
	    mkdir -p $(KAFKAJS_DIR) && npm install --silent --no-save --prefix $(KAFKAJS_DIR) \
	        kafkajs@$(KAFKAJS_VERSION) || echo "kafka-clients: kafkajs not installed"; \
	else \
	    echo "kafka-clients: npm is missing: the kafkajs tests are skipped"; \
	fi

# The pure tests (no broker, no process of their own) run in two processes, one per core of
# the 2-core machine the suite must finish on within 15 minutes. The tests of real processes
# (brokers, clusters, Kafka clients, the harness) run three modules at a time: each module's
# brokers listen on ports of their own (zlog_testbed/free_ports.py), each harness run on a /24
# of its own (zlog_jepsen/netns.py), and every test waits on a condition with a deadline, never
# on the machine being idle. Those tests mostly wait on timers (elections, sessions, backoffs,
# long polls): two at a time kept the two cores under half busy. Four at a time was one too
# many: on a loaded machine Spark's streaming queries then hung. The longest modules start
# first (LONG_MODULES_FIRST in tests/conftest.py), so no worker runs one alone at the end.
PURE_TESTS := tests/unit tests/sim tests/scenarios
PROCESS_TEST_WORKERS ?= 3

test: setup lint system-packages java nftables systemd-tools promtool kafka-clients
	$(PY) -m pytest -m 'not soak' -n 2 $(PURE_TESTS) $(PYTEST_ARGS)
	$(PY) -m pytest -m 'not soak' -n $(PROCESS_TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	    $(addprefix --ignore=,$(PURE_TESTS)) $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-sim: setup
	$(PY) -m pytest tests/sim $(if $(SEED),--seed $(SEED)) $(PYTEST_ARGS)

test-integration: setup
	$(PY) -m pytest tests/integration tests/fault $(PYTEST_ARGS)

# The Jepsen-style harness (docs/reliability.md §9): `make jepsen` runs the short schedule (about
# two minutes, a fixed seed, three brokers, kills and a partition); JEPSEN_ARGS adds options,
# e.g. JEPSEN_ARGS="--json figures.json". Each run's record goes to jepsen-runs/.
jepsen: setup nftables
	$(PY) -m zlog_jepsen --short $(JEPSEN_ARGS)

# The soak tests, then the harness's full schedule: each configuration (assign, subscribe)
# five runs of ten minutes with every fault kind, stopping at the first failure.
soak: setup nftables
	$(PY) -m pytest -m soak $(PYTEST_ARGS)
	$(PY) -m zlog_jepsen --runs 5 --duration-s 600 --mode assign \
	    --json jepsen-runs/soak-assign.json $(JEPSEN_ARGS)
	$(PY) -m zlog_jepsen --runs 5 --duration-s 600 --mode subscribe \
	    --json jepsen-runs/soak-subscribe.json $(JEPSEN_ARGS)

bench: setup java
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/storage_bench.py --json bench/results/storage.json
	$(PY) bench/raft_bench.py --json bench/results/raft.json
	$(PY) bench/broker_bench.py --json bench/results/broker.json
	$(PY) bench/groups_bench.py --json bench/results/groups.json
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
