"""`<partition dir>/partition.metadata`: which topic a partition directory belongs to (KIP-516).

A topic deleted and created again under the same name is another topic, and a broker that was
down meanwhile still holds the old one's directory under the new one's name. Kafka writes the
topic id into each partition directory and refuses to serve a directory whose id is not the
assigned topic's; zlog does the same, in Kafka's file format (`version: 0`, `topic_id: ...`),
with the id as zlog writes it everywhere (`zlog.types.valid_topic_id`).

The file is also what makes a directory zlog's own: the data directory's sweep of partitions no
broker holds any more deletes only directories that carry one, never a file or a directory
that merely has a partition's name.

Written when zlog creates the directory (or adopts one from an older zlog that wrote none), as
every small state file here (`durable_files.replace_durably`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from zlog.shm_segments.durable_files import replace_durably
from zlog.types import valid_topic_id

PARTITION_METADATA_FILE: Final = "partition.metadata"
_VERSION: Final = 0


def encode_partition_metadata(topic_id: str) -> bytes:
    assert valid_topic_id(topic_id), topic_id
    return f"version: {_VERSION}\ntopic_id: {topic_id}\n".encode()


def decode_partition_metadata(data: bytes) -> str | None:
    """The topic id the file names; None for anything that is not such a file."""
    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError:
        return None
    fields = dict(line.partition(": ")[::2] for line in lines)
    if len(lines) != 2 or fields.get("version") != str(_VERSION):
        return None
    topic_id = fields.get("topic_id", "")
    return topic_id if valid_topic_id(topic_id) else None


def read_topic_id(directory: Path) -> str | None:
    """The topic id of a partition directory zlog created; None when `directory` is not a
    directory (a file, a symbolic link, nothing) or carries no readable metadata file."""
    if directory.is_symlink() or not directory.is_dir():
        return None
    try:
        return decode_partition_metadata((directory / PARTITION_METADATA_FILE).read_bytes())
    except OSError:
        return None


def write_topic_id(directory: Path, topic_id: str) -> None:
    """Record the directory's topic, durably: a crash leaves the old file or the new one."""
    replace_durably(directory / PARTITION_METADATA_FILE, encode_partition_metadata(topic_id))
