"""The supervisor's lifeline (zlog/broker/supervisor_lifeline.py): a worker's watch reads it
cut once the supervisor's write ends are closed, and the second write end lies above every
descriptor open when it is made, so that a dying supervisor's port never refuses before a
pipe is cut, whichever order the kernel releases its files in.

Real pipes in this process; tests/integration/test_supervisor_lifeline.py kills a broker's
supervisor.
"""

from __future__ import annotations

import os
import socket

from zlog.broker.supervisor_lifeline import Lifeline, LifelineWatch


def test_the_watch_reads_the_lifeline_cut_once_the_supervisor_closes_it() -> None:
    lifeline = Lifeline()
    try:
        lifeline.bracket()
        watch = LifelineWatch(lifeline.read_fds)
        assert not watch.cut()
        lifeline.cut()
        assert watch.cut()
        assert watch.cut()  # it stays so
    finally:
        lifeline.close()


def test_either_pipe_cut_is_enough() -> None:
    """The kernel may release the lower write end first or the higher one."""
    for cut_first in (0, 1):
        lifeline = Lifeline()
        try:
            lifeline.bracket()
            watch = LifelineWatch(lifeline.read_fds)
            os.close(lifeline._write_fds.pop(cut_first))  # as the dying process's kernel would
            assert watch.cut()
        finally:
            lifeline.close()


def test_the_pipes_bracket_the_control_port() -> None:
    """One write end made before the listening socket, one above it once it is bound."""
    lifeline = Lifeline()
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            lifeline.bracket()
            below, above = lifeline._write_fds
            assert below < listener.fileno() < above
    finally:
        lifeline.close()
