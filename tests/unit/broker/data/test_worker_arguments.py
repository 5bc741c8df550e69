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


@pytest.mark.parametrize(("flag", "value"), [
    ("--preferred-port", "-1"), ("--preferred-port", "65536"), ("--preferred-port", "x"),
    ("--supervisor-fd", "-1"), ("--supervisor-fd", "x"),
])
def test_a_port_or_descriptor_that_is_none_is_refused(
        flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_arguments([*REQUIRED, flag, value])
    assert exited.value.code == 2
    assert flag in capsys.readouterr().err


def test_the_supervisors_lifeline_is_passed_on() -> None:
    options, _level = parse_arguments([*REQUIRED, "--supervisor-fd", "5", "--supervisor-fd", "9"])
    assert options.supervisor_fds == (5, 9)
    assert parse_arguments(REQUIRED)[0].supervisor_fds == (), "none by default"
