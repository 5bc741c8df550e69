"""The small types and constants that several packages share, each defined once.

A Kafka sentinel or a partition key that the client, the wire and the broker each define for
themselves can drift apart one edit at a time, and the drift shows up only between processes.
Everything here is a value of the protocol (or of its client API) that more than one package
has to agree on. Pure: the standard library and zlog.errors only.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class TopicPartition(NamedTuple):
    """One partition of one topic: the key of every per-partition table, client and broker.

    A NamedTuple, so it is a `tuple[str, int]`: a plain `("orders", 0)` compares and hashes
    equal to `TopicPartition("orders", 0)`, works wherever one is expected and finds the same
    dictionary entry. Clients get the names Kafka's clients use (`tp.topic`, `tp.partition`).
    """

    topic: str
    partition: int


LATEST_TIMESTAMP: Final = -1
"""ListOffsets sentinel for the high watermark: the next offset to be written and visible.

Kafka's number, so the wire, the broker, the client and the Spark options (`"latest"`, -1 in
offset JSON) all mean the same thing by it."""

EARLIEST_TIMESTAMP: Final = -2
"""ListOffsets sentinel for the log start offset (Kafka's number, as in Spark's offset JSON).

Every real timestamp is >= 0, and anything below this sentinel is an invalid request."""

MAX_TIMESTAMP: Final = -3
"""ListOffsets sentinel for the first record of the largest timestamp (Kafka's number, KIP-734,
from ListOffsets 7): its offset and timestamp, or -1 and -1 when there is no record. Kafka
clients ask it; zlog's own wire keeps EARLIEST_TIMESTAMP as its lower bound."""

DELETE_TO_HIGH_WATERMARK: Final = -1
"""DeleteRecords' offset meaning "every record below the high watermark" (Kafka's
DeleteRecordsRequest.HIGH_WATERMARK); any other negative offset is out of range."""

NO_LEADER_EPOCH: Final = -1
"""A committed offset, or a record, that names no leader epoch (Kafka's -1)."""

NO_TIMESTAMP: Final = -1
"""A record without a timestamp (Kafka's RecordBatch.NO_TIMESTAMP): the only negative
CreateTime a broker accepts."""

NO_GENERATION: Final = -1
"""A group member that has no generation yet, or a commit made outside any (Kafka's -1): the
group requests, the consumer protocol's subscription and the client's member all start here."""

NO_LEADER: Final = -1
"""A partition that no replica leads (Kafka's LeaderAndIsr.NoLeader): what the controller
writes into the metadata, and what every reader of a partition's leader compares against."""

BROKER_ID_MAX: Final = 2**31 - 1
"""The largest broker id: an int32 on the wire (Kafka's), so the metadata commands and the
worker protocol refuse anything larger."""

ACKS_ALL: Final = -1
"""Produce acks meaning "every in-sync replica": the producer's setting, the Produce request's
field and the broker's rule for when to answer all use this one number (Kafka's)."""

CONSUMER_REPLICA_ID: Final = -1
"""The replica id a consumer's Fetch carries (Kafka's). Followers fetch with their broker id
(>= 0) and the leader reads any negative id as a consumer's, which sees the log only up to the
high watermark."""

SEQUENCE_MODULUS: Final = 2**31
"""Produce sequences are int32 on the wire and wrap to 0 after 2^31 - 1 (Kafka's rule): the
idempotent producer numbers its batches with it and the broker checks them with it."""

DEFAULT_BOOTSTRAP: Final = "tcp://127.0.0.1:7400"
"""Where a client looks for a broker when told nothing: the control endpoint of a broker
started with its defaults (`make run`). The client library, the command line and the Spark
options all fall back to it."""

TOPIC_ID_CHARS: Final = 32
NO_TOPIC_ID: Final = ""
"""A topic id as zlog writes it everywhere (metadata, the partition directory's
`partition.metadata`, replica fetches): a uuid4's 32 lowercase hex digits (KIP-516). "" is
none: an assign or a fetch from before topic ids, checked against nothing."""


def valid_topic_id(text: str) -> bool:
    """32 lowercase hex digits, not all zero (Kafka's ZERO_UUID is no topic)."""
    return (len(text) == TOPIC_ID_CHARS and not text.strip("0123456789abcdef")
            and text != "0" * TOPIC_ID_CHARS)
