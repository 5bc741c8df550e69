"""The controller's connect check (zlog/broker/control/port_check.py), on real sockets: only
a refused connect says that nothing listens at a broker's control port."""

from __future__ import annotations

import socket

from zlog.broker.control.port_check import CHECK_TIMEOUT_MS, PortCheck
from zlog_testbed.waiting import wait_until


def _outcome(endpoint: str) -> str:
    check = PortCheck.start(endpoint, 0)
    assert check is not None
    outcomes: list[str] = []

    def ended() -> bool:
        outcome = check.outcome(0, wait_ms=10)
        if outcome is not None:
            outcomes.append(outcome)
        return outcome is not None

    wait_until(ended, what="the connect to end")
    check.close()
    return outcomes[0]


def test_a_listening_port_is_open_and_a_closed_one_refuses() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.7", 0))
        server.listen()
        endpoint = f"tcp://127.0.0.7:{server.getsockname()[1]}"
        assert _outcome(endpoint) == "open"
    assert _outcome(endpoint) == "refused"


def test_a_connect_still_pending_at_its_deadline_proves_nothing() -> None:
    """A full accept queue drops SYNs, as a frozen host's would: the connect neither ends nor
    is refused, and after the deadline the check says it learnt nothing."""
    with socket.socket() as server:
        server.bind(("127.0.0.7", 0))
        server.listen(0)
        endpoint = f"tcp://127.0.0.7:{server.getsockname()[1]}"
        fillers = [socket.create_connection(server.getsockname(), timeout=5)]  # fills it
        check = PortCheck.start(endpoint, 0)
        assert check is not None
        try:
            assert check.outcome(0, wait_ms=50) is None
            assert check.outcome(CHECK_TIMEOUT_MS) == "unknown"
        finally:
            check.close()
            for filler in fillers:
                filler.close()


def test_names_and_other_transports_are_not_checked() -> None:
    assert PortCheck.start("tcp://broker-1.example:7400", 0) is None
    assert PortCheck.start("ipc:///run/zlog/control", 0) is None
    assert PortCheck.start("tcp://127.0.0.1:not-a-port", 0) is None
