"""The controller's sessions (zlog/broker/control/controller/service.py): which brokers a round
fences, by session timeout or because their process is gone, and never before the lease its
heartbeat answers gave them certainly ran out.

Spec: docs/replication.md §4.1 (fencing, the lease). Time is the `now_ms` handed in; proposals
are applied to a state machine at once, as a committed round would be, unless a test holds
them back to look at what the controller answers while one commits.
"""

from __future__ import annotations

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller.service import (
    CONTROLLER_ROUND_MS,
    ControllerService,
    ControllerSettings,
)
from zlog.broker.control.metadata.commands import (
    Command,
    CreateTopic,
    Done,
    RegisterBroker,
)
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode
from zlog.transport.messages import Response
from zlog.transport.messages.cluster import (
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
)

HEARTBEAT_MS = 250
SESSION_MS = 1_500


def _service(held: list[tuple[Command, Done]] | None = None
             ) -> tuple[ControllerService, MetadataStateMachine]:
    """Brokers 1-3 and a topic "t" whose one partition broker 3 leads (ISR 3, 1, 2); a round's
    change commits at once, or waits in `held` when that is given (`_commit`)."""
    fsm = MetadataStateMachine()
    for node in (1, 2, 3):
        apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                          incarnation_id=f"i{node}"))
    apply_command(fsm, CreateTopic("t", 1, 3, {}, ((3, 1, 2),)))

    def propose(command: Command, done: Done) -> None:
        if held is None:
            done(apply_command(fsm, command), None)
        else:
            held.append((command, done))

    service = ControllerService(1, ControllerSettings(SESSION_MS, 300_000,
                                                      auto_leader_rebalance=False),
                                lambda: fsm.state, propose)
    service.set_active(True, 0)
    return service, fsm


def _run(service: ControllerService, start_ms: int, end_ms: int,
         heartbeats_from: tuple[int, ...] = (1, 2, 3)) -> None:
    """Rounds every CONTROLLER_ROUND_MS, the brokers heartbeating every HEARTBEAT_MS."""
    for now_ms in range(start_ms, end_ms + 1, CONTROLLER_ROUND_MS):
        if now_ms % HEARTBEAT_MS == 0:
            for node in heartbeats_from:
                epoch = service.state().brokers[node].broker_epoch
                service.heartbeat(BrokerHeartbeatRequestV0(node, epoch, ("",)), now_ms)
        service.tick(now_ms)


def _fenced(fsm: MetadataStateMachine) -> set[int]:
    return {node for node, broker in fsm.state.brokers.items() if broker.fenced}


def _leader(fsm: MetadataStateMachine) -> int:
    partition = fsm.state.partition("t", 0)
    assert partition is not None
    return partition.leader


def _heartbeat(service: ControllerService, node: int, now_ms: int) -> BrokerHeartbeatResponseV0:
    epoch = service.state().brokers[node].broker_epoch
    answer = service.heartbeat(BrokerHeartbeatRequestV0(node, epoch, ("",)), now_ms)
    assert isinstance(answer, BrokerHeartbeatResponseV0)
    return answer


def _commit(fsm: MetadataStateMachine, held: list[tuple[Command, Done]]) -> None:
    """The rounds held back commit now, in order."""
    while held:
        command, done = held.pop(0)
        done(apply_command(fsm, command), None)


def test_a_silent_broker_is_fenced_once_its_session_ran_out() -> None:
    service, fsm = _service()
    _run(service, 0, 1_000)
    _run(service, 1_050, 2_500, heartbeats_from=(1, 2))
    assert _fenced(fsm) == set()  # broker 3's last heartbeat at 1000: not yet 1500 ms silent
    _run(service, 2_550, 2_600, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}


def test_a_broker_whose_connection_dropped_keeps_its_leaderships_until_its_lease_ran_out(
) -> None:
    """Its control connection dropped and it went silent, but its port still accepts: it may
    be alive behind a network that resets connections, its workers leading on the lease its
    last answered heartbeat (at 1000) gave it. Nobody else leads before that lease has
    certainly run out, a session after the heartbeat arrived."""
    service, fsm = _service()
    _run(service, 0, 1_000)
    service.set_unreachable({3: 1_010})
    _run(service, 1_050, 2_500, heartbeats_from=(1, 2))
    assert _fenced(fsm) == set()
    assert _leader(fsm) == 3
    _run(service, 2_550, 2_600, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}
    assert _leader(fsm) == 1


def test_an_unreachable_broker_that_still_heartbeats_is_not_fenced() -> None:
    """Only the controller's probe lost its connection: the broker's own one still works."""
    service, fsm = _service()
    _run(service, 0, 1_000)
    service.set_unreachable({3: 1_010})
    _run(service, 1_050, 5_000)
    assert _fenced(fsm) == set()


def test_a_new_controller_waits_a_session_from_its_takeover_for_a_silent_broker() -> None:
    """Taking over, it cannot know when the old controller last renewed a broker's lease: it
    gives every broker a fresh session, and one that stays silent, its probe down but its
    port not refusing, keeps its leaderships until that session ran out."""
    service, fsm = _service()
    service.set_unreachable({3: 0})
    _run(service, 0, 1_500, heartbeats_from=(1, 2))
    assert _fenced(fsm) == set()
    assert _leader(fsm) == 3
    _run(service, 1_550, 1_600, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}
    assert _leader(fsm) == 1


def test_a_broker_whose_port_refuses_connections_is_fenced_in_the_next_round() -> None:
    """Its process is gone (the host answered the connect with a reset): no grace."""
    service, fsm = _service()
    _run(service, 0, 1_000)
    service.set_unreachable({3: 1_010}, refused=frozenset({3}))
    service.tick(1_011)
    assert _fenced(fsm) == {3}


def test_a_refused_port_does_not_fence_a_broker_that_heartbeats_since() -> None:
    """A refusal seen before a heartbeat that came later (a restart in between) fences no one."""
    service, fsm = _service()
    _run(service, 0, 1_000)
    service.set_unreachable({3: 900}, refused=frozenset({3}))
    _run(service, 1_050, 2_000)
    assert _fenced(fsm) == set()


def test_a_new_controller_fences_at_once_a_broker_whose_port_refuses() -> None:
    """A broker that died with the old controller: nothing listens at its port any more."""
    service, fsm = _service()
    service.set_unreachable({3: 0}, refused=frozenset({3}))
    service.tick(0)
    assert _fenced(fsm) == {3}
    assert _leader(fsm) == 1


def test_a_heartbeat_arriving_while_its_fence_commits_is_answered_fenced() -> None:
    """The round that fences broker 3 (and elects another leader) is committing when its
    heartbeat arrives: answered unfenced, the broker would renew its lease past the new
    leader's election."""
    held: list[tuple[Command, Done]] = []
    service, fsm = _service(held)
    _run(service, 0, 1_000)
    _run(service, 1_050, 2_550, heartbeats_from=(1, 2))
    assert len(held) == 1 and _fenced(fsm) == set()  # the fence is proposed, not committed
    assert _heartbeat(service, 3, 2_560).fenced
    assert not _heartbeat(service, 2, 2_560).fenced
    _commit(fsm, held)
    assert _fenced(fsm) == {3}
    assert _leader(fsm) == 1
    assert _heartbeat(service, 3, 2_600).fenced  # as the metadata says now


def test_a_refused_port_fences_in_a_round_whose_heartbeats_are_answered_fenced() -> None:
    held: list[tuple[Command, Done]] = []
    service, fsm = _service(held)
    _run(service, 0, 1_000)
    service.set_unreachable({3: 1_010}, refused=frozenset({3}))
    service.tick(1_011)
    assert len(held) == 1
    assert _heartbeat(service, 3, 1_020).fenced
    _commit(fsm, held)
    assert _fenced(fsm) == {3}


def test_a_stall_of_the_controllers_loop_fences_nobody_that_heartbeats() -> None:
    """A loop that did not turn for most of a session (a stall the controller hands off only
    past `controller_stall_timeout_ms`) saw no heartbeat meanwhile: the brokers sent theirs,
    which wait in its socket. The time it did not look is not their silence."""
    service, fsm = _service()
    _run(service, 0, 1_200)  # the last heartbeats came at 1,000 ms, the next are due at 1,250
    resumed_ms = 1_200 + 1_350  # a stall shorter than a session, longer than its rest
    service.tick(resumed_ms)  # the loop turns before it reads what waited in its socket
    assert _fenced(fsm) == set()
    _run(service, resumed_ms, resumed_ms + 2 * HEARTBEAT_MS)
    assert _fenced(fsm) == set() and _leader(fsm) == 3


def test_a_broker_silent_across_a_stall_is_fenced_a_session_after_the_controller_looked_again(
) -> None:
    service, fsm = _service()
    _run(service, 0, 1_200)
    resumed_ms = 1_200 + 1_350
    service.tick(resumed_ms)
    assert _fenced(fsm) == set()
    _run(service, resumed_ms, resumed_ms + SESSION_MS + 2 * CONTROLLER_ROUND_MS,
         heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}


def test_a_controller_taking_over_long_after_its_last_turn_counts_sessions_from_then() -> None:
    """The first turn as controller is no stall, however long ago the service last ticked."""
    service, fsm = _service()
    service.set_active(False, 0)
    start_ms = 3_600_000
    service.set_active(True, start_ms)
    _run(service, start_ms, start_ms + SESSION_MS + 2 * CONTROLLER_ROUND_MS,
         heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}


def test_a_new_controller_unfences_a_fenced_broker_only_once_it_heard_from_it() -> None:
    """The fresh session a takeover gives every broker is not a heartbeat: a broker fenced
    before it (here silent, its process perhaps restarted on an empty disk and not registered
    again yet) stays fenced, and leads nothing, until it heartbeats to this controller at its
    registered epoch."""
    service, fsm = _service()
    _run(service, 0, 1_000)
    _run(service, 1_050, 2_600, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3} and _leader(fsm) == 1
    service.set_active(False, 2_600)
    service.set_active(True, 2_650)
    _run(service, 2_650, 2_650 + SESSION_MS // 2, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}
    _run(service, 2_650 + SESSION_MS // 2 + CONTROLLER_ROUND_MS, 2_650 + SESSION_MS)
    assert _fenced(fsm) == set()


def test_a_broker_fenced_as_gone_is_unfenced_only_by_registering_again() -> None:
    """Broker 3's port refused connections: its process died, and it is fenced. A heartbeat
    the dead process sent still arrives, and its port accepts again (a process started since,
    on a wiped disk perhaps, not registered yet): neither unfences it under its old
    registration. The heartbeat is answered STALE_BROKER_EPOCH, so a live broker registers
    again; the registration answered unfences it."""
    service, fsm = _service()
    _run(service, 0, 1_000)
    service.set_unreachable({3: 1_010}, refused=frozenset({3}))
    service.tick(1_011)
    assert _fenced(fsm) == {3} and _leader(fsm) == 1
    late = _heartbeat(service, 3, 1_020)
    assert late.error_code == ErrorCode.STALE_BROKER_EPOCH and late.fenced
    service.set_unreachable({})
    _run(service, 1_050, 1_800, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}
    answers: list[Response] = []
    service.register(BrokerRegistrationRequestV0(3, "i3-again", "c", "h3", "tcp://h3:7400", 1),
                     answers.append)
    assert isinstance(answers[0], BrokerRegistrationResponseV0)
    assert answers[0].error_code == 0
    _run(service, 1_850, 2_000)
    assert _fenced(fsm) == set()


def test_a_registration_from_a_new_incarnation_fences_the_old_one_at_once() -> None:
    """Broker 3's process was replaced (its last heartbeat still fresh): the process that held
    the registration is gone, so its leaderships move in the round that runs now, before the
    new registration commits."""
    held: list[tuple[Command, Done]] = []
    service, fsm = _service(held)
    _run(service, 0, 1_000)
    _commit(fsm, held)
    service.register(BrokerRegistrationRequestV0(3, "i3-new", "c", "h3", "tcp://h3:7400", 1),
                     lambda response: None)
    service.tick(1_010)
    assert [type(command).__name__ for command, _ in held] == ["RegisterBroker",
                                                               "ClusterChange"]
    del held[0]  # the registration is still on its way
    _commit(fsm, held)
    assert _fenced(fsm) == {3} and _leader(fsm) == 1
