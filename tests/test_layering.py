"""Imports follow docs/architecture.md §4.2, and the pure modules stay pure.

Data moves client -> transport -> broker -> shm_segments; `record`, `raft` and `transport`
import nothing else of zlog but the small shared modules, which import nothing of zlog at all,
and `shm_segments` only `record`. The client reads the ring directly in one module only,
`client/local_ring.py`. The pure group modules (assignors, the ConsumerProtocol bytes) are
shared by the coordinator and the client, as `record` is by the producer and the broker. Pure
modules (the Raft core, the record format, the ring layout, retention, the producer's
accumulator, ...) import no I/O, clocks or sockets, so they can be tested deterministically.

The repository's own packages layer the same way: `zlog` imports none of them, the testbed
(`zlog_testbed`: real brokers and the faults put on them) only `zlog`, the fault harness and
the benchmarks `zlog` and the testbed. Only `tests/` imports `tests` or a test framework, so
that everything else runs without the test suite, and the wheel, which holds `zlog` alone,
imports (tests/integration/test_wheel.py installs it).

The rules are the data below, in one place: tests/test_architecture_doc.py holds the tables of
docs/architecture.md §4.2 to them. A path a rule names must exist: a rule about a file that
moved would otherwise pass without checking anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "zlog"
REPOSITORY = ROOT.parent
SHARED = {"zlog.errors", "zlog.limits", "zlog.clock", "zlog.types"}

# package (or shared module) -> zlog packages it may import (besides itself and SHARED)
ALLOWED: dict[str, set[str]] = {
    "errors": set(), "limits": set(), "clock": set(), "types": set(),
    "record": set(),
    "shm_segments": {"zlog.record"},
    "raft": set(),
    "transport": set(),
    "groups": {"zlog.transport"},
    "client": {"zlog.record", "zlog.transport", "zlog.shm_segments", "zlog.groups"},
    "kafka": {"zlog.record", "zlog.transport"},
    # The gateway decides who may do what as the native listener does: the same pure rules.
    "kafka_gateway": {"zlog.kafka", "zlog.client", "zlog.transport", "zlog.broker.log_lines",
                      "zlog.broker.authorizer", "zlog.broker.request_acls",
                      "zlog.broker.quotas"},
    "broker": {"zlog.record", "zlog.shm_segments", "zlog.raft", "zlog.groups", "zlog.transport",
               "zlog.kafka"},
    "spark": {"zlog.client"},
}
# (package, zlog package it imports) -> the one module of the package that may import it
ONLY_FROM: dict[tuple[str, str], str] = {
    ("client", "zlog.shm_segments"): "zlog/client/local_ring.py",
}
PURE_MODULES = {
    "zlog/raft/rawnode.py", "zlog/raft/chain.py", "zlog/raft/quorum.py", "zlog/raft/messages.py",
    "zlog/shm_segments/ring_layout.py", "zlog/shm_segments/ring_header.py",
    "zlog/shm_segments/retention.py",
    "zlog/record/header.py", "zlog/record/compression.py", "zlog/record/records.py",
    "zlog/record/arrays.py", "zlog/record/starts.py", "zlog/record/pieces.py",
    "zlog/record/small.py", "zlog/record/varint.py", "zlog/errors.py", "zlog/limits.py",
    "zlog/types.py",
    "zlog/raft/codec.py", "zlog/raft/fsm.py", "zlog/raft/proposals.py",
    "zlog/raft/state.py", "zlog/raft/append_entries.py", "zlog/raft/election.py",
    "zlog/raft/progress.py", "zlog/raft/errors.py", "zlog/raft/status.py",
    "zlog/raft/links.py",
    "zlog/broker/control/metadata/state_machine.py", "zlog/broker/control/placement.py",
    "zlog/broker/topic_configs.py", "zlog/broker/control/control_plane.py",
    "zlog/broker/control/producer_ids.py", "zlog/broker/control/disk_budget.py",
    "zlog/broker/data/partition.py", "zlog/broker/data/producer_state.py",
    "zlog/broker/data/fetch_waiters.py", "zlog/broker/data/isr.py",
    "zlog/broker/worker_protocol.py", "zlog/broker/control/metadata/commands.py",
    "zlog/broker/authorizer.py", "zlog/broker/request_acls.py", "zlog/broker/quotas.py",
    "zlog/broker/control/metadata/security_state.py", "zlog/transport/messages/security.py",
    "zlog/transport/json_fields.py", "zlog/transport/server.py",
    "zlog/spark/offsets.py", "zlog/spark/options.py",
    "zlog/groups/assignors.py", "zlog/groups/config.py",
    "zlog/groups/classic/machine.py", "zlog/groups/classic/group.py",
    "zlog/groups/classic/consumer_protocol.py",
    "zlog/groups/server_side/machine.py", "zlog/groups/server_side/group.py",
    "zlog/groups/server_side/records.py",
    "zlog/groups/coordinator.py", "zlog/groups/describe.py", "zlog/transport/kafka_codec.py",
    "zlog/transport/json_codec.py", "zlog/transport/wire_types.py",
    "zlog/transport/messages/__init__.py", "zlog/transport/messages/admin.py",
    "zlog/transport/messages/cluster.py", "zlog/transport/messages/data.py",
    "zlog/transport/messages/groups.py", "zlog/transport/messages/reassignment.py",
    "zlog/groups/offsets.py", "zlog/groups/output.py",
    "zlog/groups/partitioning.py", "zlog/groups/records.py", "zlog/groups/replay.py",
    "zlog/broker/control/metadata/apply.py", "zlog/broker/control/controller/decisions.py",
    "zlog/broker/control/controller/reassignment.py",
    "zlog/broker/control/controller/replica_moves.py",
    "zlog/broker/data/replica_sync.py", "zlog/broker/data/epoch_cache.py",
    "zlog/broker/data/recent_batches.py", "zlog/raft/membership.py",
    "zlog/client/accumulator.py", "zlog/client/partitioner.py", "zlog/client/fetch_buffer.py",
    "zlog/client/group/classic_member.py", "zlog/client/group/server_side_member.py",
    "zlog/kafka/framing.py", "zlog/kafka/api_versions.py", "zlog/kafka/requests.py",
    "zlog/kafka/responses.py", "zlog/kafka_gateway/topology.py",
}
IMPURE_IMPORTS = {"os", "time", "socket", "zmq", "mmap", "threading", "subprocess", "asyncio",
                  "fcntl", "signal", "select", "multiprocessing", "psutil"}

# top-level directory of the repository -> the repository's packages it may import (besides itself)
REPOSITORY_ALLOWED: dict[str, set[str]] = {
    "zlog": set(),
    "zlog_testbed": {"zlog"},
    "zlog_jepsen": {"zlog", "zlog_testbed"},
    "bench": {"zlog", "zlog_testbed"},
    "examples": {"zlog"},
    "tests": {"zlog", "zlog_testbed", "zlog_jepsen", "bench"},
}
TEST_FRAMEWORKS = {"pytest", "hypothesis"}  # imported by tests/ alone


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _package_of(path: Path) -> str:
    """The package a module belongs to, or a top-level module's own name."""
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def _is_module(dotted: str) -> bool:
    """Whether `zlog.x.y` names a package or a module of the source tree."""
    path = REPOSITORY.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def test_every_path_a_rule_names_exists() -> None:
    """A rule naming a module or package that is gone (moved, renamed) would check nothing."""
    missing = [relative for relative in sorted({*PURE_MODULES, *ONLY_FROM.values()})
               if not (REPOSITORY / relative).is_file()]
    named = {*SHARED, *(f"zlog.{key}" for key in ALLOWED),
             *(name for names in ALLOWED.values() for name in names),
             *(name for _, name in ONLY_FROM)}
    missing += [name for name in sorted(named) if not _is_module(name)]
    assert not missing, f"rules name paths that do not exist: {missing}"


def test_every_package_of_zlog_has_a_row() -> None:
    """A new package says what it may import before it imports anything."""
    unknown = [path.name for path in sorted(ROOT.iterdir())
               if (path / "__init__.py").is_file() and path.name not in ALLOWED]
    assert not unknown, f"no row in ALLOWED for {unknown}"


def test_packages_import_only_in_the_allowed_direction() -> None:
    wrong: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        package = _package_of(path)
        if package not in ALLOWED:
            continue
        allowed = ALLOWED[package] | SHARED | {f"zlog.{package}"}
        for name in _imports(path):
            if name == "zlog" or not name.startswith("zlog."):
                continue
            if not any(name == a or name.startswith(a + ".") for a in allowed):
                wrong.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_spark_connector() -> None:
    """zlog.spark is an optional extra on top of the client: no other zlog module needs it."""
    wrong = [
        f"{path.relative_to(ROOT.parent)} imports {name}"
        for path in sorted(ROOT.rglob("*.py")) if _package_of(path) != "spark"
        for name in _imports(path) if name == "zlog.spark" or name.startswith("zlog.spark.")
    ]
    assert not wrong, "\n".join(wrong)


def test_restricted_imports_come_from_their_one_module() -> None:
    """The client speaks the wire; reading a leader's ring in place is its one exception."""
    wrong = [
        f"{path.relative_to(REPOSITORY)} imports {name}"
        for (package, imported), only in sorted(ONLY_FROM.items())
        for path in sorted((ROOT / package).rglob("*.py"))
        if str(path.relative_to(REPOSITORY)) != only
        for name in _imports(path) if name == imported or name.startswith(imported + ".")
    ]
    assert not wrong, "\n".join(wrong)


def test_pure_modules_do_no_io() -> None:
    wrong: list[str] = []
    for relative in sorted(PURE_MODULES):
        path = REPOSITORY / relative
        if not path.is_file():
            wrong.append(f"{relative} does not exist")
            continue
        for name in _imports(path):
            if name.split(".")[0] in IMPURE_IMPORTS:
                wrong.append(f"{relative} imports {name}")
    assert not wrong, "\n".join(wrong)


def _python_directories() -> list[Path]:
    """The repository's top-level directories with Python in them (hidden ones, such as the
    virtualenv, aside)."""
    return sorted(path for path in REPOSITORY.iterdir()
                  if path.is_dir() and not path.name.startswith(".") and any(path.glob("*.py")))


def test_every_top_level_python_directory_has_a_row() -> None:
    """A new package says what it may import before it imports anything."""
    unknown = [path.name for path in _python_directories()
               if path.name not in REPOSITORY_ALLOWED]
    assert not unknown, f"no row in REPOSITORY_ALLOWED for {unknown}"


def test_the_repository_packages_import_only_in_the_allowed_direction() -> None:
    """Nothing outside tests/ imports tests (or pytest); zlog imports neither the testbed nor
    the harness nor the benchmarks; the testbed imports only zlog."""
    wrong: list[str] = []
    for directory in _python_directories():
        allowed = REPOSITORY_ALLOWED.get(directory.name, set()) | {directory.name}
        for path in sorted(directory.rglob("*.py")):
            for name in _imports(path):
                top = name.split(".")[0]
                if ((top in REPOSITORY_ALLOWED and top not in allowed)
                        or (top in TEST_FRAMEWORKS and directory.name != "tests")):
                    wrong.append(f"{path.relative_to(REPOSITORY)} imports {name}")
    assert not wrong, "\n".join(wrong)
