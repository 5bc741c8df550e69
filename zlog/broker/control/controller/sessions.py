"""Which brokers the controller counts as alive: one session per registered broker.

A session runs from the last heartbeat this controller received at the broker's registered
epoch. A controller that takes over cannot know when its predecessor last renewed anyone's
lease, so it starts every registered broker's session at its takeover (`taken_over`): a broker
is fenced no sooner than a full session from then. That session is time granted, not a sign
of life: only a heartbeat (or a registration answered) marks a session `heard`, and only a
heard session unfences. Otherwise every fenced broker whose port still accepts would be
unfenced by each new controller, and one restarted on an empty disk, under its registration
from before the wipe not yet made again, would be elected with an empty log. For the same
reason a fence forgets what was heard before it (`fencing`), and a broker fenced because its
process is gone (its control port refused connections) is unfenced by no heartbeat at that
registration: one sent by the dead process may still arrive, and a process started since on
the same data directory, or on a wiped one, registers again before it counts. Such a heartbeat
is answered STALE_BROKER_EPOCH, which makes a live broker (a refusal seen wrongly) register
again, and the registration answered is what unfences it. A registration from a new
incarnation (`replaced`) proves the same the moment it arrives: the process that held the
registration is gone, whatever its last heartbeat said, so it is fenced then, before the new
registration commits.

Pure: the time is handed in (milliseconds, or the simulator's ticks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zlog.broker.control.metadata.state import ClusterState


@dataclass(slots=True)
class Session:
    broker_epoch: int
    last_heartbeat_ms: int
    heard: bool = False  # a heartbeat or registration at this epoch reached this controller
    want_shutdown: bool = False
    worker_endpoints: tuple[str, ...] | None = None
    process_gone: bool = False  # fenced as gone: no heartbeat at this epoch counts any more
    worker_kafka_endpoints: tuple[str, ...] | None = None


def taken_over(state: ClusterState, now_ms: int) -> dict[int, Session]:
    """The sessions a controller starts with: a full session each, nobody heard from yet."""
    return {node_id: Session(broker.broker_epoch, now_ms)
            for node_id, broker in state.brokers.items()}


def expired(state: ClusterState, sessions: Mapping[int, Session], now_ms: int,
            session_timeout_ms: int) -> frozenset[int]:
    """Registered brokers with no session, silent past it, or whose process is known gone:
    the round fences them."""
    return frozenset(
        node_id for node_id in state.brokers
        if (session := sessions.get(node_id)) is None or session.process_gone
        or now_ms - session.last_heartbeat_ms > session_timeout_ms)


def heard_from(state: ClusterState, sessions: Mapping[int, Session], now_ms: int,
               session_timeout_ms: int) -> frozenset[int]:
    """Registered brokers that heartbeat to this controller at their registered epoch within
    the session: the round unfences those fenced."""
    return frozenset(
        node_id for node_id, broker in state.brokers.items()
        if (session := sessions.get(node_id)) is not None
        and session.heard and session.broker_epoch == broker.broker_epoch
        and now_ms - session.last_heartbeat_ms <= session_timeout_ms)


def heartbeat(sessions: dict[int, Session], node_id: int, broker_epoch: int, now_ms: int, *,
              want_shutdown: bool = False, worker_endpoints: tuple[str, ...] | None = None,
              worker_kafka_endpoints: tuple[str, ...] | None = None) -> bool:
    """Note a heartbeat at the broker's registered epoch; False (nothing noted) when that
    registration's process was fenced as gone: the broker must register again."""
    session = sessions.get(node_id)
    if session is not None and session.broker_epoch == broker_epoch and session.process_gone:
        return False
    sessions[node_id] = Session(broker_epoch, now_ms, True, want_shutdown, worker_endpoints,
                                worker_kafka_endpoints=worker_kafka_endpoints)
    return True


def fencing(sessions: Mapping[int, Session], node_ids: frozenset[int],
            gone: frozenset[int]) -> None:
    """A round fences `node_ids`, those in `gone` because their process died: what they sent
    before no longer unfences them, and for those gone nothing at this registration will."""
    for node_id in node_ids:
        if (session := sessions.get(node_id)) is not None:
            session.heard = False
            session.process_gone = node_id in gone


def replaced(sessions: Mapping[int, Session], node_id: int, broker_epoch: int) -> None:
    """A new process of `node_id` asks to register: the one registered at `broker_epoch` is
    gone."""
    if (session := sessions.get(node_id)) is not None and session.broker_epoch == broker_epoch:
        session.heard = False
        session.process_gone = True
