"""The KV state machine that the process tests and the Raft benchmark replicate.

Spec: docs/raft.md §4.8 Apply (deterministic, in committed order) and §4.10 Snapshot
(restore replaces the state): what zlog.raft.fsm.StateMachine asks of every state machine, and
what docs/benchmarks.md ("Chained Raft") says the benchmark's state machine keeps.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.raft_kv import BAD_COMMAND, KvOp, KvStateMachine, decode_list, kv_command, kv_incr

keys = st.binary(min_size=1, max_size=4)
commands = st.one_of(
    st.builds(lambda k, v: kv_command(KvOp.SET, k, v), keys, st.binary(max_size=8)),
    st.builds(kv_incr, keys, st.integers(-1000, 1000)),
    st.builds(lambda k, v: kv_command(KvOp.APPEND, k, v), keys, st.binary(max_size=8)),
    st.builds(lambda k: kv_command(KvOp.GET, k), keys),
    st.binary(max_size=6),  # mostly malformed
)


@given(st.lists(commands, max_size=40))
def test_same_commands_give_same_state_and_results(batch: list[bytes]) -> None:
    """§4.8 Apply: determinism is what lets every replica reach the same state."""
    first, second = KvStateMachine(), KvStateMachine()
    assert [first.apply(c) for c in batch] == [second.apply(c) for c in batch]
    assert first.snapshot() == second.snapshot()


@given(st.lists(commands, max_size=40), st.lists(commands, max_size=10))
def test_restore_then_apply_equals_apply_all(head: list[bytes], tail: list[bytes]) -> None:
    """§4.10 Snapshot: a node restored from a snapshot goes on exactly like one that applied."""
    original = KvStateMachine()
    for command in head:
        original.apply(command)
    restored = KvStateMachine()
    restored.restore(original.snapshot())
    assert restored.snapshot() == original.snapshot()
    assert [original.apply(c) for c in tail] == [restored.apply(c) for c in tail]
    assert restored.digest() == original.digest()


def test_kv_operations() -> None:
    fsm = KvStateMachine()
    assert fsm.apply(kv_command(KvOp.SET, b"k", b"v1")) == b""
    assert fsm.apply(kv_command(KvOp.SET, b"k", b"v2")) == b"v1"
    assert fsm.query(kv_command(KvOp.GET, b"k")) == b"v2"
    assert fsm.apply(kv_incr(b"n", 5)) == b"5"
    assert fsm.apply(kv_incr(b"n", -2)) == b"3"
    assert fsm.apply(kv_command(KvOp.APPEND, b"l", b"a")) == b"1"
    assert fsm.apply(kv_command(KvOp.APPEND, b"l", b"a")) == b"2"
    assert decode_list(fsm.query(kv_command(KvOp.LIST, b"l"))) == [b"a", b"a"]
    assert decode_list(fsm.query(kv_command(KvOp.LIST, b"none"))) == []


def test_bad_commands_give_the_same_error_result_and_change_nothing() -> None:
    fsm = KvStateMachine()
    fsm.apply(kv_command(KvOp.SET, b"k", b"v"))
    before = fsm.values.copy()
    for command in (b"", b"\x09\x00\x00", b"\x01\xff\xff", kv_command(KvOp.INCR, b"k", b"x")):
        assert fsm.apply(command) == BAD_COMMAND
    assert fsm.values == before
