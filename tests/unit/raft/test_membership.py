"""Directory ids in the configuration (docs/raft.md §4.15): the encoding and the leader's
rule for recording them, as pure functions."""

from __future__ import annotations

import pytest

from zlog.raft import codec
from zlog.raft.membership import recorded_dirs_update
from zlog.raft.messages import NO_DIR_ID, AppendResp, BlockId, ConfigState, VoteResp

D1, D2, D3, D4 = (bytes([n]) * 16 for n in (1, 2, 3, 4))


def test_config_with_dirs_and_endpoints_round_trips_and_drops_non_members() -> None:
    config = ConfigState.of([1, 2], [5], {1: D1, 5: D3, 9: D4},
                            {1: "tcp://a:1", 2: "tcp://b:2", 9: "tcp://z:9"})
    assert config.dirs == ((1, D1), (5, D3))
    assert config.endpoints == ((1, "tcp://a:1"), (2, "tcp://b:2"))
    assert ConfigState.decode(config.encode()) == config
    assert config.dir_of(2) == NO_DIR_ID
    assert config.counts(2, D4), "nothing recorded: anyone answering as 2 counts"
    assert config.counts(1, D1) and not config.counts(1, D2)


def test_config_without_details_keeps_the_first_encoding() -> None:
    assert ConfigState.of([1, 2]).encode()[0] == 1
    assert ConfigState.of([1, 2], dirs={1: D1}).encode()[0] == 2


@pytest.mark.parametrize("cut", [1, 10, 30])
def test_truncated_or_padded_detailed_config_is_rejected(cut: int) -> None:
    encoded = ConfigState.of([1, 2], dirs={1: D1}, endpoints={2: "tcp://b:2"}).encode()
    with pytest.raises(ValueError):
        ConfigState.decode(encoded[:-cut])
    with pytest.raises(ValueError):
        ConfigState.decode(encoded + b"\0")


def test_replies_carry_the_directory_id_on_the_wire() -> None:
    vote = VoteResp(3, 2, 1, True, dir_id=D2)
    resp = AppendResp(3, 2, 1, True, BlockId(3, 4), BlockId(3, 4), BlockId(3, 2), 7, D2)
    assert codec.decode_message(codec.encode_message(vote)) == vote
    assert codec.decode_message(codec.encode_message(resp)) == resp


def always(_: int) -> bool:
    return True


def never(_: int) -> bool:
    return False


def test_unknown_directories_are_all_recorded_at_once() -> None:
    config = ConfigState.of([1, 2, 3])
    change = recorded_dirs_update(config, {1: D1, 2: D2, 3: NO_DIR_ID}, never)
    assert change == ConfigState.of([1, 2, 3], dirs={1: D1, 2: D2})
    assert recorded_dirs_update(change, {1: D1, 2: D2}, never) is None


def test_a_voters_new_directory_replaces_the_old_one_only_once_caught_up() -> None:
    config = ConfigState.of([1, 2, 3], dirs={1: D1, 2: D2, 3: D3})
    seen = {1: D1, 2: D4, 3: D3}
    assert recorded_dirs_update(config, seen, never) is None
    change = recorded_dirs_update(config, seen, always)
    assert change == ConfigState.of([1, 2, 3], dirs={1: D1, 2: D4, 3: D3})
    assert change.voters == config.voters


def test_one_voter_is_swapped_per_change_and_learners_any_time() -> None:
    config = ConfigState.of([1, 2, 3], [4], dirs={1: D1, 2: D2, 3: D3, 4: D4})
    change = recorded_dirs_update(config, {2: D3, 3: D2, 4: D1}, never)
    assert change is not None and change.dir_of(4) == D1, "a learner's new directory: at once"
    swapped = recorded_dirs_update(change, {2: D3, 3: D2, 4: D1}, always)
    assert swapped is not None
    assert (swapped.dir_of(2), swapped.dir_of(3)) == (D3, D3), "only the lowest id first"
