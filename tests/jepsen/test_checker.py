"""Each anomaly on a hand-written history that has it, and on a near twin that does not.

Key 1 throughout; values are written 10, 11, 12, ... at offsets 0, 1, 2, ...
"""

from __future__ import annotations

import pytest

from tests.jepsen.histories import History
from zlog_jepsen.checker import Anomaly, CheckConfig, CheckResult, check
from zlog_jepsen.history import FinalRead, HistoryFormatError

FINAL: FinalRead = {1: [(0, 10), (1, 11), (2, 12)]}


def _written(h: History | None = None) -> History:
    """Three acknowledged sends by process 0, then process 1 assigned to key 1."""
    h = h or History()
    for offset in range(3):
        h.send(0, 1, [(offset, 10 + offset)])
    return h.assign(1, [1])


def _read_all(h: History, final: FinalRead = FINAL) -> History:
    """A fresh consumer reads every key from the beginning, as the final drain does."""
    return h.assign(9, list(final), seek=True).poll(9, final)


def _only(result: CheckResult, anomaly: Anomaly) -> dict[str, object]:
    """The anomaly's single example, checking it is the only thing wrong."""
    assert result.counts[anomaly] == 1, result.to_json()
    assert not result.valid and result.failed_by == (anomaly,), result.to_json()
    return result.examples[anomaly][0]


def _clean(result: CheckResult) -> None:
    assert result.valid, result.to_json()
    assert not any(result.counts.values()), result.to_json()


def test_a_history_that_reads_everything_written_is_valid() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11)]}).poll(1, {1: [(2, 12)]})
    _clean(check(h.events, FINAL))
    _clean(check(h.events))


def test_inconsistent_offset_two_values_at_one_offset() -> None:
    h = _written().send(2, 1, [(None, 20)], done="info").poll(1, {1: [(0, 10), (1, 11)]})
    h.poll(3, {1: [(1, 20)]})  # another consumer saw 20 where 11 is
    final = {1: [(0, 10), (1, 11), (2, 12)]}
    result = check(h.events, final)
    assert result.examples[Anomaly.INCONSISTENT_OFFSET] == [
        {"key": 1, "offset": 1, "index": 1, "values": [11, 20]}
    ]
    assert result.counts[Anomaly.INCONSISTENT_OFFSET] == 1 and not result.valid


def test_duplicate_one_value_at_two_offsets_is_an_error_only_when_idempotent() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11), (2, 12), (3, 12)]})
    example = _only(check(h.events, {1: [(0, 10), (1, 11), (2, 12), (3, 12)]}),
                    Anomaly.DUPLICATE)
    assert example == {"key": 1, "value": 12, "offsets": [2, 3]}
    counted = check(h.events, {1: [(0, 10), (1, 11), (2, 12), (3, 12)]},
                    CheckConfig(idempotent=False))
    assert counted.valid and counted.counts[Anomaly.DUPLICATE] == 1


def test_lost_write_a_value_before_the_furthest_read_that_no_ok_read_returned() -> None:
    h = _written().poll(1, {1: [(2, 12)]})  # a first poll: no skip, but 10 and 11 never read
    result = check(h.events)
    assert [e["value"] for e in result.examples[Anomaly.LOST_WRITE]] == [10, 11]
    assert result.examples[Anomaly.LOST_WRITE][0]["key"] == 1
    assert Anomaly.LOST_WRITE in result.failed_by
    # an info send nobody read may not have happened: not lost
    h2 = History().send(0, 1, [(None, 10)], done="info").send(0, 1, [(1, 11)]).assign(1, [1])
    _clean(check(h2.poll(1, {1: [(1, 11)]}).events))


def test_lost_acked_final_an_acknowledged_value_missing_or_moved_in_the_final_read() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11), (2, 12)]})
    h.send(0, 1, [(3, 13)]).send(0, 1, [(4, 14)])
    result = check(h.events, {1: [*FINAL[1], (3, 13)]})  # 14 acknowledged at 4, gone
    assert _only(result, Anomaly.LOST_ACKED_FINAL) == {
        "key": 1, "value": 14, "offset": 4, "found_at": [], "writer": h.events[-1].index,
    }
    moved = check(h.events, {1: [*FINAL[1], (3, 13), (5, 14)]})
    assert moved.examples[Anomaly.LOST_ACKED_FINAL][0]["found_at"] == [5]
    whole = check(h.events, {1: [*FINAL[1], (3, 13), (4, 14)]})
    assert whole.valid and whole.counts[Anomaly.LOST_ACKED_FINAL] == 0


def test_phantom_read_a_polled_value_the_final_read_does_not_hold() -> None:
    h = _written().send(2, 1, [(None, 13)], done="info").poll(1, {1: [(0, 10), (1, 11), (2, 12)]})
    h.poll(1, {1: [(3, 13)]})
    result = check(h.events, FINAL)
    assert result.examples[Anomaly.PHANTOM_READ][0] == {
        "key": 1, "value": 13, "reader": h.events[-1].index
    }
    assert Anomaly.PHANTOM_READ in result.failed_by
    _clean(check(h.events, {1: [*FINAL[1], (3, 13)]}))


def test_aborted_read_a_read_of_a_definitely_failed_send() -> None:
    h = _written().send(2, 1, [(None, 13)], done="fail", error="NOT_ENOUGH_REPLICAS")
    h.poll(1, {1: [(0, 10), (1, 11), (2, 12), (3, 13)]})
    example = check(h.events).examples[Anomaly.ABORTED_READ]
    assert example == [{"key": 1, "value": 13, "writer": 9, "reader": 11}]
    assert check(h.events).failed_by == (Anomaly.ABORTED_READ,)
    h2 = _written().send(2, 1, [(None, 13)], done="info", error="REQUEST_TIMED_OUT")
    _clean(check(h2.poll(1, {1: [(0, 10), (1, 11), (2, 12), (3, 13)]}).events))


def test_poll_skip_the_next_poll_starts_past_the_next_value() -> None:
    h = _written().poll(1, {1: [(0, 10)]}).poll(1, {1: [(2, 12)]}).poll(1, {1: [(1, 11)]})
    example = check(h.events).examples[Anomaly.POLL_SKIP][0]
    assert example["key"] == 1 and example["values"] == [10, 12]
    assert example["skipped"] == [11] and example["delta"] == 2


def test_poll_skip_alone() -> None:
    h = _written(History().send(2, 1, [(None, 9)], done="fail"))
    h.poll(1, {1: [(0, 10)]}).poll(1, {1: [(2, 12)]}).poll(3, {1: [(1, 11)]})
    _only(check(h.events), Anomaly.POLL_SKIP)


def test_nonmonotonic_poll_the_next_poll_goes_back() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11)]}).poll(1, {1: [(1, 11), (2, 12)]})
    example = _only(check(h.events, FINAL), Anomaly.NONMONOTONIC_POLL)
    assert example["key"] == 1 and example["values"] == [11, 11] and example["delta"] == 0


def test_assign_with_seek_to_beginning_or_a_crash_restarts_the_position() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11), (2, 12)]})
    h.assign(1, [1], seek=True).poll(1, {1: [(0, 10)]})
    h.crash(1).assign(1, [1]).poll(1, {1: [(2, 12)]})
    _clean(check(h.events, FINAL))
    _clean(check(h.events))
    # an assign that does not name the key forgets it too; one that names it keeps it
    h2 = _written().poll(1, {1: [(0, 10)]}).assign(1, [2]).assign(1, [1]).poll(1, {1: [(2, 12)]})
    _clean(check(_read_all(h2).events))
    h3 = _written().poll(1, {1: [(0, 10)]}).assign(1, [1, 2]).poll(1, {1: [(2, 12)]})
    _only(check(_read_all(h3).events), Anomaly.POLL_SKIP)


def test_under_subscribe_a_jump_across_a_rebalance_of_the_key_is_allowed() -> None:
    h = _written(History()).subscribe(1, [1]).poll(1, {1: [(0, 10)]})
    h.poll(1, {}, rebalanced=[[1]]).poll(1, {1: [(2, 12)]}).poll(1, {1: [(1, 11), (2, 12)]},
                                                                 rebalanced=[[1]])
    result = check(h.events, FINAL)
    _clean(result)
    assert result.allowed[Anomaly.POLL_SKIP] == 1
    assert result.allowed[Anomaly.NONMONOTONIC_POLL] == 1


def test_under_subscribe_a_jump_with_no_rebalance_of_the_key_is_an_error() -> None:
    h = _written(History()).subscribe(1, [1]).poll(1, {1: [(0, 10)]})
    h.poll(1, {}, rebalanced=[[2]]).poll(1, {1: [(2, 12)]})
    assert _only(check(_read_all(h).events), Anomaly.POLL_SKIP)["values"] == [10, 12]
    # under assign, a rebalance log excuses nothing
    h2 = _written().poll(1, {1: [(0, 10)]}).poll(1, {1: [(2, 12)]}, rebalanced=[[1]])
    assert check(h2.events).counts[Anomaly.POLL_SKIP] == 1


def test_int_poll_skip_within_one_poll_unless_it_rebalanced_the_key() -> None:
    h = _written().poll(1, {1: [(0, 10), (2, 12)]}).poll(3, {1: [(1, 11)]})
    example = _only(check(h.events), Anomaly.INT_POLL_SKIP)
    assert example["values"] == [10, 12] and example["skipped"] == [11]
    h2 = _written().poll(1, {1: [(0, 10), (2, 12)]}, rebalanced=[[1]]).poll(3, {1: [(1, 11)]})
    result = check(h2.events)
    _clean(result)
    assert result.allowed[Anomaly.INT_POLL_SKIP] == 1


def test_int_nonmonotonic_poll_within_one_poll() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11), (0, 10)]}).poll(1, {1: [(1, 11), (2, 12)]})
    example = _only(check(h.events, FINAL), Anomaly.INT_NONMONOTONIC_POLL)
    assert example["key"] == 1 and example["values"] == [11, 10] and example["delta"] == -1


def test_nonmonotonic_send_a_later_send_lands_before_an_earlier_one() -> None:
    h = History().send(0, 1, [(1, 11)]).send(0, 1, [(0, 10)]).assign(1, [1])
    h.poll(1, {1: [(0, 10), (1, 11)]})
    example = _only(check(h.events), Anomaly.NONMONOTONIC_SEND)
    assert example["key"] == 1 and example["values"] == [11, 10]
    relaxed = check(h.events, config=CheckConfig(idempotent=False, max_in_flight=5))
    assert relaxed.valid and relaxed.counts[Anomaly.NONMONOTONIC_SEND] == 1
    strict = check(h.events, config=CheckConfig(idempotent=False, max_in_flight=1))
    assert not strict.valid


def test_int_send_skip_another_write_landed_inside_a_batch() -> None:
    h = History().send(0, 1, [(0, 10), (2, 12)]).send(2, 1, [(1, 11)]).assign(1, [1])
    h.poll(1, {1: [(0, 10), (1, 11), (2, 12)]})
    example = _only(check(h.events, FINAL), Anomaly.INT_SEND_SKIP)
    assert example["values"] == [10, 12] and example["skipped"] == [11]


def test_int_nonmonotonic_send_a_batch_landed_backwards() -> None:
    h = History().send(0, 1, [(1, 10), (0, 11)]).assign(1, [1]).poll(1, {1: [(0, 11), (1, 10)]})
    example = _only(check(h.events, {1: [(0, 11), (1, 10)]}), Anomaly.INT_NONMONOTONIC_SEND)
    assert example["values"] == [10, 11] and example["delta"] == -1


def test_batch_tear_part_of_a_batch_is_in_the_final_read() -> None:
    h = History().send(0, 1, [(None, 10), (None, 11)], done="info").assign(1, [1])
    h.poll(1, {1: [(0, 10)]})
    example = _only(check(h.events, {1: [(0, 10)]}), Anomaly.BATCH_TEAR)
    assert example["key"] == 1 and example["values"] == [10, 11] and example["present"] == [10]
    absent = History().send(0, 1, [(None, 10), (None, 11)], done="info")
    _clean(check(absent.events, {1: []}))  # all absent: an info send that did not happen


def test_committed_offset_regression_the_group_position_goes_back() -> None:
    h = _read_all(_written()).commit(1, {1: 2}).committed(2, {1: 1})
    example = _only(check(h.events), Anomaly.COMMITTED_OFFSET_REGRESSION)
    assert example["key"] == 1 and example["offset"] == 1 and example["floor"] == 2
    # an explicit rewind (a commit of a lower offset) makes the lower value legitimate
    rewound = _read_all(_written()).commit(1, {1: 2}).commit(1, {1: 1}).committed(2, {1: 1})
    _clean(check(rewound.events))
    # another group is another position
    other = _read_all(_written()).commit(1, {1: 2}).committed(2, {1: 1}, group="h")
    _clean(check(other.events))


def test_committed_offset_regression_a_commit_above_the_log() -> None:
    h = _read_all(_written()).commit(1, {1: 7})
    example = _only(check(h.events), Anomaly.COMMITTED_OFFSET_REGRESSION)
    assert example["offset"] == 7 and example["log_end"] == 3
    _clean(check(_read_all(_written()).commit(1, {1: 3}).events))


def _handover(first_offset: int) -> History:
    h = _written(History()).subscribe(1, [1]).poll(1, {1: [(0, 10)]}).commit(1, {1: 1})
    h.subscribe(3, [1]).poll(1, {}, rebalanced=[[1]])
    reads = [(o, 10 + o) for o in range(first_offset, 3)]
    return h.poll(3, {1: reads}).poll(4, {1: [(1, 11)]})


def test_group_skip_a_new_owner_starts_past_the_committed_position() -> None:
    h = _handover(2)
    example = _only(check(h.events), Anomaly.GROUP_SKIP)
    new_owner_poll = next(e.index for e in h.events if e.process == 3 and e.type == "ok"
                          and e.f == "poll")
    assert example == {"group": "g", "key": 1, "committed": 1, "first_offset": 2,
                       "skipped": [11], "process": 3, "op": new_owner_poll}
    _clean(check(_handover(1).events))
    _clean(check(_handover(0).events))  # re-delivery is allowed


def test_unseen_acknowledged_but_never_polled() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11)]})
    example = _only(check(h.events), Anomaly.UNSEEN)
    assert example == {"key": 1, "count": 1, "values": [12]}
    # with a final read that holds it, it is late, not lost: counted, not an error
    late = check(h.events, FINAL)
    assert late.valid and late.counts[Anomaly.UNSEEN] == 1


def test_under_acks_1_losses_are_counted_not_errors() -> None:
    h = _written().poll(1, {1: [(0, 10), (1, 11), (2, 12)]}).send(0, 1, [(3, 13)])
    result = check(h.events, FINAL, CheckConfig(acks_all=False))
    assert result.valid and result.counts[Anomaly.LOST_ACKED_FINAL] == 1
    worker_kill = check(h.events, FINAL, CheckConfig(acks_all=False, loss_is_error=True))
    assert worker_kill.failed_by == (Anomaly.LOST_ACKED_FINAL,)


def test_an_operation_that_never_completed_is_indefinite() -> None:
    h = _written().event(2, "invoke", "send", [["send", 1, 13]])
    h.poll(1, {1: [(0, 10), (1, 11), (2, 12), (3, 13)]})
    _clean(check(h.events, {1: [*FINAL[1], (3, 13)]}))


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda h: h.event(0, "ok", "poll", [["poll"]]), "did not invoke"),
        (lambda h: h.event(0, "invoke", "poll", [["poll"]]).event(0, "ok", "send", []),
         "did not invoke"),
        (lambda h: h.event(0, "invoke", "poll", [["poll"]]).event(0, "invoke", "poll",
                                                                  [["poll"]]),
         "has not completed"),
    ],
)
def test_a_history_whose_operations_do_not_pair_is_refused(build: object, reason: str) -> None:
    h = History()
    build(h)  # type: ignore[operator]
    with pytest.raises(HistoryFormatError, match=reason):
        check(h.events)
