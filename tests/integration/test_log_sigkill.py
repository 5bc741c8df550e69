"""SIGKILL a partition writer at random moments: every append that returned survives."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.storage_helpers import base_offset_of, batch_tags, split_batches
from zlog.shm_segments.log import PartitionLog

_ROOT = Path(__file__).resolve().parents[2]


def _start_writer(
    data_dir: Path, ring_dir: Path, flush_bytes: int, first_tag: int
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.log_writer_main", str(data_dir), str(ring_dir),
         str(flush_bytes), str(first_tag)],
        cwd=_ROOT, stdout=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


@pytest.mark.slow
@pytest.mark.parametrize("flush_bytes", [0, 32 * 1024])
def test_appends_that_returned_survive_sigkill(
    tmp_path: Path, shm_dir: Path, flush_bytes: int
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    acknowledged: dict[int, int] = {}  # tag -> base offset
    next_tag = 0
    replayed_batches = 0
    for _round in range(6):
        writer = _start_writer(tmp_path, shm_dir, flush_bytes, next_tag)
        assert writer.stdout is not None
        wanted = rng.randrange(20, 400)
        for _ in range(wanted):
            tag, base = map(int, writer.stdout.readline().split())
            acknowledged[tag] = base
            next_tag = tag + 1
        time.sleep(rng.random() * 0.01)  # land the kill at an arbitrary point of an append
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        for line in writer.stdout:  # appends that returned before the kill landed
            tag, base = map(int, line.split())
            acknowledged[tag] = base
            next_tag = tag + 1
        writer.stdout.close()
        next_tag += 1  # a tag whose append may or may not have completed is never reused

        with PartitionLog(tmp_path, "kill", 0, ring_dir=shm_dir) as log:
            stored = split_batches(log.read(0, 1 << 30))
            replayed_batches += log.replayed_batches
        found = {batch_tags(b)[0]: base_offset_of(b) for b in stored}
        missing = {t: b for t, b in acknowledged.items() if found.get(t) != b}
        assert not missing, f"seed {seed}: acknowledged appends lost: {sorted(missing)[:10]}"
        tags_in_order = [batch_tags(b)[0] for b in stored]
        assert tags_in_order == sorted(tags_in_order), f"seed {seed}: out of order"
        offsets = [base_offset_of(b) for b in stored]
        assert offsets == sorted(set(offsets)), f"seed {seed}: offsets repeat"
    if flush_bytes:
        # The kills did land while acknowledged batches sat only in the ring.
        assert replayed_batches > 0, f"seed {seed}: nothing was ever recovered from the ring"
