"""The worker's command line: the supervisor builds it, but a bad value is still refused
with a sentence (argparse's exit 2), never a traceback or a bind to a nonsense port."""

from __future__ import annotations

import pytest

from zlog.broker.data.worker import parse_arguments

REQUIRED = ["--worker-id", "0", "--supervisor", "ipc:///tmp/s.sock", "--data-dir", "/tmp/d",
            "--ring-dir", "/tmp/r", "--host", "127.0.0.1"]


def test_the_replaced_workers_port_is_passed_on() -> None:
    options, _level = parse_arguments([*REQUIRED, "--preferred-port", "40859"])
    assert options.preferred_port == 40859
    assert parse_arguments(REQUIRED)[0].preferred_port == 0, "none by default"


@pytest.mark.parametrize("port", ["-1", "65536", "x"])
def test_a_preferred_port_that_is_no_port_is_refused(
        port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_arguments([*REQUIRED, "--preferred-port", port])
    assert exited.value.code == 2
    assert "--preferred-port" in capsys.readouterr().err
