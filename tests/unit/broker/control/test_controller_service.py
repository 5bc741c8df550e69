"""The controller's sessions (zlog/broker/control/controller_service.py): which brokers a round
fences, by session timeout or because their control endpoint dropped and they went silent.

Spec: docs/replication.md §4 (fencing). Time is the `now_ms` handed in; proposals are applied
to a state machine at once, as a committed round would be.
"""

from __future__ import annotations

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller_service import (
    CONTROLLER_ROUND_MS,
    ControllerService,
    ControllerSettings,
)
from zlog.broker.control.metadata import MetadataStateMachine
from zlog.broker.control.metadata_commands import (
    Command,
    Done,
    RegisterBroker,
)
from zlog.transport.cluster_messages import BrokerHeartbeatRequestV0

HEARTBEAT_MS = 250
SESSION_MS = 1_500


def _service() -> tuple[ControllerService, MetadataStateMachine]:
    fsm = MetadataStateMachine()
    for node in (1, 2, 3):
        apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                          incarnation_id=f"i{node}"))

    def propose(command: Command, done: Done) -> None:
        done(apply_command(fsm, command), None)

    service = ControllerService(1, ControllerSettings(HEARTBEAT_MS, SESSION_MS, 300_000,
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


def test_a_silent_broker_is_fenced_once_its_session_ran_out() -> None:
    service, fsm = _service()
    _run(service, 0, 1_000)
    _run(service, 1_050, 2_500, heartbeats_from=(1, 2))
    assert _fenced(fsm) == set()  # broker 3's last heartbeat at 1000: not yet 1500 ms silent
    _run(service, 2_550, 2_600, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}


def test_an_unreachable_broker_silent_since_is_fenced_after_a_heartbeat_interval() -> None:
    service, fsm = _service()
    _run(service, 0, 1_000)
    service.set_unreachable({3: 1_010})
    _run(service, 1_050, 1_200, heartbeats_from=(1, 2))
    assert _fenced(fsm) == set()
    _run(service, 1_250, 1_300, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}


def test_an_unreachable_broker_that_still_heartbeats_is_not_fenced() -> None:
    """Only the controller's probe lost its connection: the broker's own one still works."""
    service, fsm = _service()
    _run(service, 0, 1_000)
    service.set_unreachable({3: 1_010})
    _run(service, 1_050, 5_000)
    assert _fenced(fsm) == set()


def test_a_new_controller_fences_a_broker_its_probe_never_reached() -> None:
    """Taking over, it gives every broker a fresh session; one its probe has not reached since
    (and that does not heartbeat) is fenced a heartbeat interval later, not a session later."""
    service, fsm = _service()
    service.set_unreachable({3: 0})
    _run(service, 0, 200, heartbeats_from=(1, 2))
    assert _fenced(fsm) == set()
    _run(service, 250, 300, heartbeats_from=(1, 2))
    assert _fenced(fsm) == {3}


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
