"""Every bound on a queue, a frame, a batch, a message or a count, with its unit in its name.

Anything read from the wire or from disk is checked against these before memory is
allocated for it, so a corrupt length can produce an error but never an allocation storm;
anything queued is bounded by one of them, so a slow or dead peer costs bounded memory. The
storage defaults sit beside the bounds they are checked against. Timeouts, intervals and
tuning (how many ids a block of producer ids holds, when a request leaves) stay with the code
they tune. The asserts at the end tie together the bounds that depend on each other.
"""

from __future__ import annotations

# Record batches (zlog/record): what one RecordBatch v2 may hold.
BATCH_SIZE_BYTES_MAX = 64 * 1024 * 1024  # the largest batch we accept at all
BATCH_RECORDS_MAX = 16 * 1024 * 1024  # a batch of 1-byte records still fits BATCH_SIZE_BYTES_MAX
RECORD_SIZE_BYTES_MAX = BATCH_SIZE_BYTES_MAX  # a record is never larger than its batch
HEADERS_PER_RECORD_MAX = 65_536  # bounds the work of decoding one record's headers
DECOMPRESSED_BATCH_BYTES_MAX = 256 * 1024 * 1024  # cap on LZ4 expansion of one batch

# Shared-memory ring (zlog/shm_segments/ring.py).
# One ring per partition, in /dev/shm; a batch over half a ring goes straight to the segment.
RING_SIZE_BYTES_DEFAULT = 64 * 1024 * 1024
RING_SIZE_BYTES_MIN = 64 * 1024  # the smallest a broker may configure; tests use it

# Segments and indexes (zlog/shm_segments).
SEGMENT_BYTES_DEFAULT = 1024 * 1024 * 1024  # Kafka's default for segment.bytes
SEGMENT_BYTES_MIN = 14  # Kafka's own lower bound for segment.bytes
SEGMENT_BYTES_MAX = 2**31 - 1  # index positions are uint32; Kafka's own bound is int32
INDEX_INTERVAL_BYTES_DEFAULT = 4096  # Kafka's default for index.interval.bytes
SEGMENT_MS_DEFAULT = 7 * 24 * 3600 * 1000  # Kafka's default for segment.ms: a week

# Retention (zlog/shm_segments/retention.py).
RETENTION_MS_DEFAULT = 7 * 24 * 3600 * 1000  # Kafka's default for retention.ms: a week
DELETE_RETENTION_MS_DEFAULT = 24 * 3600 * 1000  # Kafka's default for delete.retention.ms: a day

# Topics (zlog/broker/topic_configs.py): what one CreateTopics entry may ask for.
TOPIC_NAME_CHARS_MAX = 249  # Kafka's own bound, so a Kafka tool's topic names all work here
PARTITIONS_PER_TOPIC_MAX = 65_536  # a bound on one request's metadata and worker load
REPLICATION_FACTOR_MAX = 32  # far above any sane value; bounds replica lists

# The wire (zlog/transport): frames a socket accepts, messages it queues.
# A JSON body larger than this is refused before parsing: metadata for thousands of
# partitions is a few MiB, so this leaves room while bounding the parser's work.
JSON_BODY_BYTES_MAX = 16 * 1024 * 1024
# A server receives frames of at most one batch (produce) or one JSON body, plus a header.
SERVER_FRAME_BYTES_MAX = max(BATCH_SIZE_BYTES_MAX, JSON_BODY_BYTES_MAX) + 1024
# A client receives fetch chunks: up to max_bytes of batches, and always at least one whole
# batch even if that batch alone exceeds max_bytes, as in Kafka.
CLIENT_FRAME_BYTES_MAX = 2 * BATCH_SIZE_BYTES_MAX

# The Kafka-protocol listener (zlog/kafka): a request frame past this is refused and its
# connection closed (Kafka's own socket.request.max.bytes default); a Produce still carries
# the largest batch zlog accepts.
KAFKA_REQUEST_BYTES_MAX = 100 * 1024 * 1024
# Messages queued per peer in each direction before sends fail with EAGAIN: a client's
# connection pipelines requests to a server, while a client has at most its in-flight
# requests outstanding (64 by default, `rpc.IN_FLIGHT_DEFAULT`).
SERVER_HWM_MESSAGES = 10_000
CLIENT_HWM_MESSAGES = 1_000
# Messages taken from a socket in one drain, so one busy socket cannot starve a loop.
DRAIN_MESSAGES_MAX = 1_024
# Requests one RpcClient may have in flight: bounds its map of pending requests, and so its
# search for a free correlation id.
IN_FLIGHT_REQUESTS_MAX = 4_096

# The supervisor (zlog/broker/control) and its workers.
WORKERS_MAX = 1024  # each worker is a process with its own sockets and rings
# One message of the worker protocol either way; an assignment with its configs is far smaller.
WORKER_MESSAGE_BYTES_MAX = 1024 * 1024
WORKER_CHANNEL_HWM_MESSAGES = 1_000  # a worker's queue to its supervisor; past it, dropped
WORKER_CHANNEL_BATCH_MESSAGES_MAX = 1024  # per supervisor turn, so workers cannot starve clients
CONTROL_BATCH_MESSAGES_MAX = 256  # client requests per supervisor turn; the rest wait one turn
PRODUCER_ID_WAITERS_MAX = 10_000  # InitProducerId requests waiting for ids; then throttled
PRODUCER_IDS_PER_COMMAND_MAX = 1_000_000  # ids one metadata command may allocate
# A broker's ISR changes sent to the controller and not answered yet; past it, answered
# NOT_CONTROLLER at once (the worker proposes again later).
ALTER_ISR_IN_FLIGHT_MAX = 1_000
ISR_REQUESTS_MAX = 10_000  # AlterPartition requests queued at the controller; beyond, refused
# One message on the fork server's channel, either way: a start request carries an environment.
FORK_SERVER_MESSAGE_BYTES_MAX = 1024 * 1024

# The data plane (zlog/broker/data), per worker and per partition.
DELAYED_PRODUCES_MAX = 10_000  # acks=all requests waiting for the HW; beyond it they time out
DELAYED_DELETES_MAX = 1_000  # DeleteRecords waiting for followers; beyond it they time out
PARKED_FETCHES_MAX = 10_000  # long polls per worker; beyond it a fetch is answered at once
# A consumer's subscription (Fetch v2) ends this long after it began; its consumer subscribes
# again. A consumer that vanished without a word costs its worker no more than this.
SUBSCRIPTION_LIFETIME_MS = 30_000
# Batches remembered per producer for deduplication: Kafka's number, which is why clients keep
# max.in.flight <= 5 (KAFKA-17926).
CACHED_BATCHES_PER_PRODUCER = 5
PRODUCERS_PER_PARTITION_MAX = 100_000  # the least recently active is forgotten first
RECENT_BATCHES_BYTES_MAX = 64 * 1024  # copies kept per partition: a few hundred small batches
RECENT_BATCHES_MAX = 256  # copies kept per partition, whatever their size

# The client (zlog/client).
IDEMPOTENT_IN_FLIGHT_BATCHES_MAX = 5  # per partition: what the broker can deduplicate

# The Raft metadata log (zlog/raft, zlog/transport/raft_peers.py). The codec's bounds sit far
# above what zlog's metadata needs, and far below what would let a corrupt length allocate the
# machine away.
RAFT_CONFIG_MEMBERS_MAX = 1024  # a metadata quorum is a handful of nodes; bounds decode work
# A header, then per member its id (8), directory id (16) and Raft endpoint (2 + up to 255).
RAFT_CONFIG_BYTES_MAX = 8 + (8 + 16 + 2 + 255) * RAFT_CONFIG_MEMBERS_MAX
RAFT_BLOCK_PAYLOAD_BYTES_MAX = 16 * 1024 * 1024  # sixteen largest commands
RAFT_APPEND_BLOCKS_MAX = 4096  # blocks in one Append message
RAFT_SNAPSHOT_BYTES_MAX = 256 * 1024 * 1024  # a whole snapshot, sent in one InstallSnapshot
RAFT_COMMAND_BYTES_MAX = 1024 * 1024  # one metadata command; a larger CreateTopics is refused
RAFT_BATCH_COMMANDS_MAX = 65_536  # commands one CMD block may carry
RAFT_STORAGE_RECORD_BYTES_MAX = 1024 * 1024 * 1024  # one checkpoint of the largest allowed store
# The proposal queue of one runner, and what one block takes from it; all configurable. A
# full queue refuses a proposal at once instead of holding memory for it.
RAFT_QUEUED_COMMANDS_MAX_DEFAULT = 65_536  # sixteen blocks' worth of proposals
RAFT_QUEUED_BYTES_MAX_DEFAULT = 64 * 1024 * 1024  # sixty-four blocks' worth of command bytes
RAFT_BATCH_COMMANDS_MAX_DEFAULT = 4096  # proposals that share one block
RAFT_BATCH_BYTES_MAX_DEFAULT = 1024 * 1024  # their command bytes (one command may be larger)
RAFT_QUEUED_READS_MAX_DEFAULT = 65_536  # reads waiting for a ReadIndex; as many as proposals
RAFT_READIES_PER_TURN_MAX = 64  # then back to the sockets; the rest waits one turn
RAFT_PEER_SEND_QUEUE_MESSAGES_MAX = 1000  # per peer: about one election timeout of traffic
RAFT_RECEIVE_BATCH_MESSAGES_MAX = 1024  # per socket per turn, so no source starves

# The Spark connector (zlog/spark): one Arrow batch handed to Spark.
ARROW_BATCH_ROWS_MAX = 65_536  # rows per batch; the byte bound below caps large records
ARROW_BATCH_BYTES_MAX = 64 * 1024 * 1024  # well below Arrow's 2 GiB int32 offsets

assert BATCH_SIZE_BYTES_MAX <= 2**31 - 1, "batchLength is an int32 on the wire"
assert RECORD_SIZE_BYTES_MAX <= BATCH_SIZE_BYTES_MAX
assert DECOMPRESSED_BATCH_BYTES_MAX >= BATCH_SIZE_BYTES_MAX
assert RING_SIZE_BYTES_DEFAULT >= RING_SIZE_BYTES_MIN
assert SEGMENT_BYTES_MIN <= SEGMENT_BYTES_DEFAULT <= SEGMENT_BYTES_MAX
# A frame bound holds what travels in one frame.
assert SERVER_FRAME_BYTES_MAX >= BATCH_SIZE_BYTES_MAX, "a produce of one largest batch"
assert SERVER_FRAME_BYTES_MAX >= JSON_BODY_BYTES_MAX, "a request of one largest JSON body"
assert CLIENT_FRAME_BYTES_MAX >= BATCH_SIZE_BYTES_MAX, "a fetch answer of one largest batch"
assert KAFKA_REQUEST_BYTES_MAX >= BATCH_SIZE_BYTES_MAX + 1024, "a Kafka produce of one batch"
assert WORKER_MESSAGE_BYTES_MAX <= JSON_BODY_BYTES_MAX, "the JSON reader takes every message"
# The producer's retries are recognised by the broker only while it remembers the batch.
assert IDEMPOTENT_IN_FLIGHT_BATCHES_MAX <= CACHED_BATCHES_PER_PRODUCER
# What the proposal queue hands the codec, the codec accepts.
assert RAFT_COMMAND_BYTES_MAX <= RAFT_BLOCK_PAYLOAD_BYTES_MAX
assert RAFT_BATCH_COMMANDS_MAX_DEFAULT <= RAFT_BATCH_COMMANDS_MAX
assert RAFT_BATCH_COMMANDS_MAX_DEFAULT <= RAFT_QUEUED_COMMANDS_MAX_DEFAULT
assert RAFT_BATCH_BYTES_MAX_DEFAULT <= RAFT_QUEUED_BYTES_MAX_DEFAULT
# A block takes one command whatever its size, or commands up to the batch bytes; encoded as a
# u32 count, then a u32 length and the bytes of each command, it fits a block's payload.
assert (4 + 4 * RAFT_BATCH_COMMANDS_MAX_DEFAULT
        + max(RAFT_BATCH_BYTES_MAX_DEFAULT, RAFT_COMMAND_BYTES_MAX)) <= RAFT_BLOCK_PAYLOAD_BYTES_MAX
assert RAFT_SNAPSHOT_BYTES_MAX <= RAFT_STORAGE_RECORD_BYTES_MAX, "a checkpoint holds the snapshot"

ACL_DECISIONS_CACHED_MAX = 65_536
"""Authorization decisions an Authorizer remembers (principal, operation, resource) before it
starts over: bounds the memory a principal naming ever new topics can make it hold."""
