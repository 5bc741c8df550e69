"""The `zlog` command line without a broker: help, --version, where options may go, and the
usage an unknown option gets.

Spec: every option and subcommand has help text; --bootstrap and --request-timeout-ms work
before and after the command's name; an unknown option prints the usage of the command it
was given to (exit 2), not the top-level one.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

import zlog
from zlog.broker import serve
from zlog.cli import build_parser, main, parse_arguments
from zlog.types import DEFAULT_BOOTSTRAP


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def _undocumented(parser: argparse.ArgumentParser) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            missing += [f"{parser.prog} {choice.dest}" for choice in action._choices_actions
                        if not choice.help]
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_and_command_has_help_text() -> None:
    serve_parser = argparse.ArgumentParser(prog="zlog serve")
    serve.add_arguments(serve_parser)
    parsers = [*_parsers(build_parser()), serve_parser]
    assert len(parsers) > 10
    assert [name for parser in parsers for name in _undocumented(parser)] == []
    for parser in parsers:
        assert parser.format_help()  # every help renders (argparse %-formats help text)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"zlog {zlog.__version__}\n"


@pytest.mark.parametrize(
    "arguments",
    [
        ["--bootstrap", "tcp://h:1", "--request-timeout-ms", "5", "topic", "list"],
        ["topic", "list", "--bootstrap", "tcp://h:1", "--request-timeout-ms", "5"],
        ["--bootstrap", "tcp://h:1", "topic", "list", "--request-timeout-ms", "5"],
        ["--bootstrap", "tcp://other:1", "topic", "list", "--bootstrap", "tcp://h:1",
         "--request-timeout-ms", "5"],  # after the command wins, as the later option
    ],
)
def test_client_options_go_before_or_after_the_command(arguments: list[str]) -> None:
    args = parse_arguments(build_parser(), arguments)
    assert (args.bootstrap, args.request_timeout_ms) == ("tcp://h:1", 5)


def test_client_options_default_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZLOG_BOOTSTRAP", raising=False)
    args = parse_arguments(build_parser(), ["offsets", "t"])
    assert (args.bootstrap, args.request_timeout_ms) == (DEFAULT_BOOTSTRAP, 10_000)
    monkeypatch.setenv("ZLOG_BOOTSTRAP", "tcp://env:1")
    assert parse_arguments(build_parser(), ["offsets", "t"]).bootstrap == "tcp://env:1"


@pytest.mark.parametrize(
    ("arguments", "usage"),
    [
        (["topic", "list", "--bogus"], "usage: zlog topic list "),
        (["consume", "t", "--from-begining"], "usage: zlog consume "),
        (["--bogus", "cluster", "status"], "usage: zlog cluster status "),
        (["produce", "t", "--header", "novalue"], "usage: zlog produce "),
        (["consume", "t", "--json", "--print-key"], "usage: zlog consume "),
        (["topic", "alter", "t"], "usage: zlog topic alter "),
        (["topic"], "usage: zlog topic "),
    ],
)
def test_a_bad_command_line_shows_that_commands_usage(
    arguments: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith(usage), stderr
    assert "Traceback" not in stderr
