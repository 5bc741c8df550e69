"""Runs every `tests/scenarios/raft/*.txt` transcript; `--rewrite` regenerates outputs.

Each transcript names, in its opening comment, the rule of docs/raft.md it
shows; the harness checks every invariant of section 6 after every step as well.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.raft.transcript import run_file

TRANSCRIPTS = sorted(Path(__file__).parent.glob("*.txt"))


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(path: Path, rewrite: bool) -> None:
    run_file(path, rewrite)


def test_there_are_transcripts() -> None:
    assert len(TRANSCRIPTS) >= 5
