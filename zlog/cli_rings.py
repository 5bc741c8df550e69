"""`zlog rings list` and `zlog rings clean`: this host's ring directories, and removing those
whose broker and data are gone (zlog/shm_segments/ring_dirs.py says which may go, and why).

They act on this host's shared memory, not on a cluster: no broker is asked anything. The
storage modules (and numpy) load only when one of them runs, not for every `zlog` command.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zlog.shm_segments.ring_dirs import RingDir

_MIB = 1 << 20


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rings = commands.add_parser(
        "rings", help="this host's shared-memory ring directories",
        description="this host's shared-memory ring directories: whose they are, and removing "
                    "those no broker will open again")
    actions = rings.add_subparsers(dest="rings_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every ring directory, its owner and its verdict",
                                 description="every ring directory, its owner and whether "
                                             "`zlog rings clean` would remove it")
    listing.set_defaults(handler=list_rings, command_parser=listing)
    clean = actions.add_parser(
        "clean", help="remove the ring directories no broker uses and nothing needs",
        description="remove the rings no process writes to and whose every batch is in the "
                    "segment files (or whose data dir is gone, with --discard-unflushed)")
    clean.add_argument("--discard-unflushed", action="store_true",
                       help="also remove rings holding batches never flushed, when their data "
                            "dir is gone or unknown (those batches are lost)")
    clean.set_defaults(handler=clean_rings, command_parser=clean)
    for parser in (listing, clean):
        parser.add_argument("--shm-dir", type=Path, default=None, metavar="DIR",
                            help="where ring directories live (default: where brokers put "
                                 "them, /dev/shm)")


def _mib(size_bytes: int) -> str:
    return f"{size_bytes / _MIB:.1f}"


def _row(ring_dir: RingDir, verdict: str) -> str:
    owner = str(ring_dir.data_dir) if ring_dir.data_dir is not None else "?"
    return (f"{ring_dir.path}\t{owner}\t{len(ring_dir.rings)}\t{_mib(ring_dir.allocated_bytes)}"
            f"\t{_mib(ring_dir.unflushed_bytes)}\t{verdict}")


def _ring_dirs(args: argparse.Namespace) -> list[RingDir]:
    from zlog.shm_segments.ring import RING_DIRECTORY_DEFAULT  # noqa: PLC0415
    from zlog.shm_segments.ring_dirs import find_ring_dirs  # noqa: PLC0415

    return find_ring_dirs(args.shm_dir or RING_DIRECTORY_DEFAULT)


def list_rings(args: argparse.Namespace) -> int:
    print("ring_dir\tdata_dir\trings\tmib\tunflushed_mib\tverdict")
    for ring_dir in _ring_dirs(args):
        removable, why = ring_dir.verdict()
        print(_row(ring_dir, ("removable: " if removable else "kept: ") + why))
    return 0


def clean_rings(args: argparse.Namespace) -> int:
    from zlog.shm_segments.ring_dirs import remove_ring_dir  # noqa: PLC0415

    freed = removed = 0
    for ring_dir in _ring_dirs(args):
        removable, why = ring_dir.verdict(discard_unflushed=args.discard_unflushed)
        if not removable:
            print(f"kept {ring_dir.path}: {why}")
            continue
        freed += remove_ring_dir(ring_dir, discard_unflushed=args.discard_unflushed)
        removed += 1
        print(f"removed {ring_dir.path}: {why}")
    print(f"{removed} ring director{'y' if removed == 1 else 'ies'} removed, "
          f"{_mib(freed)} MiB freed")
    return 0
