"""The data path of a partition worker: request frames in, reply frames out, no sockets here.

`DataPlane.handle(identity, frames, now_ms)` decodes one request from a client's DEALER,
applies it to the partitions this worker owns, and returns the replies to send, each as
(peer identity, frames). Replies may answer other peers too: an append wakes the long polls
parked on its partition. The worker's loop moves the frames; keeping sockets out of here lets
the whole data path be driven by hand in tests.

Zero copy both ways: produced batches are memoryviews of the received frames until the log
copies them into the ring, and fetch replies carry the log's memoryviews of segment pages as
frames. The one exception is a consumer reading the last few small batches of a partition
(`recent_batches`): it gets the partition's copies of them, the same bytes, because finding
them in the segment would cost more than the copy. Records are never decoded or re-encoded.

Bad input never takes the worker down: requests arrive through the one server request path
(`zlog.transport.server`), which answers undecodable requests and bugs with their codes, and a
refused batch gets its Kafka code in its entry. A failed assertion is different: an invariant
of zlog itself is broken, so the worker crashes (docs/reliability.md §2.1); the supervisor
restarts it and the ring gives back every acknowledged batch.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from zlog import __version__, limits
from zlog.broker.data.data_security import DataSecurity
from zlog.broker.data.delete_records import DeleteRecordsWaits
from zlog.broker.data.fetch_waiters import (
    EntryRead,
    FetchWaiters,
    collect_fetch,
    fetch_is_complete,
)
from zlog.broker.data.partition import VALID_ACKS, Partition, ProduceOutcome
from zlog.broker.data.planted_bug import ACKS_ALL_AT_APPEND
from zlog.broker.data.replica_requests import (
    epoch_answers,
    replica_fetch_is_complete,
    replica_fetch_reads,
)
from zlog.broker.log_lines import log_failure
from zlog.broker.worker_metrics import BYTES_IN, BYTES_OUT, WorkerMetrics
from zlog.clock import Clock, SystemClock
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.coordinator import error_response
from zlog.record.header import next_offset_after
from zlog.transport.api import DATA_APIS, SUPPORTED_VERSIONS
from zlog.transport.codec import Frame, RequestHeader, TranslatedHeader, encode_response
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    ApiVersionRange,
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
)
from zlog.transport.messages.cluster import OffsetForLeaderEpochRequestV0
from zlog.transport.messages.data import (
    DeleteRecordsRequestV0,
    FetchEntry,
    FetchRequestV0,
    FetchRequestV1,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV1,
    FetchResponseV2,
    FetchResult,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ListOffsetsResult,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
)
from zlog.transport.messages.groups import (
    GROUP_REQUEST_TYPES,
    GroupRequest,
)
from zlog.transport.messages.security import ANONYMOUS
from zlog.transport.server import Reply, RequestPath, ServerStats
from zlog.types import ACKS_ALL, TopicPartition

log = logging.getLogger(__name__)

REQUEST_PATH: Final = RequestPath(
    apis=DATA_APIS,
    served_elsewhere="the control endpoint, not a worker",
    internal_error_message="internal error in the partition worker; see its log",
    log=log,
    crash_on_assertion=True,
)

_INTERNAL_ERROR: Final = REQUEST_PATH.internal_error_message
_HELD_ORDER: Final = itertools.count()  # ties between held replies go in order

GroupHandler = Callable[[bytes, RequestHeader, GroupRequest, int], list[Reply]]


ConsumerFetch = FetchRequestV0 | FetchRequestV2


@dataclass(frozen=True, slots=True)
class _ParkedFetch:
    identity: bytes
    header: RequestHeader
    request: FetchRequestV0 | FetchRequestV1 | FetchRequestV2
    sent_bytes: int = 0  # a subscription's: what its answers carried so far
    ends_ms: int = 0  # a subscription's: when its lifetime ends
    principal: str = ANONYMOUS  # whose fetch quota its answers count against


@dataclass(slots=True)
class _DelayedProduce:
    """An acks=all request whose batches are appended but not yet covered by the HW."""

    identity: bytes
    header: RequestHeader
    results: list[ProduceResult]
    waiting: dict[int, tuple[TopicPartition, int]]  # entry index -> (tp, required offset)
    deadline_ms: int


@dataclass(slots=True)
class DataPlane:
    """Produce, Fetch, ListOffsets, DeleteRecords and ApiVersions over the partitions in
    `partitions`.

    `partitions` is the worker's own table, shared: assign and unassign change it, and must
    call `partition_removed` after removing one so that its waiters are answered.
    """

    partitions: Mapping[TopicPartition, Partition]
    clock: Clock = field(default_factory=SystemClock)  # wall time for timestamp bounds
    waiters: FetchWaiters[_ParkedFetch] = field(default_factory=FetchWaiters)
    delayed: list[_DelayedProduce] = field(default_factory=list)
    stats: ServerStats = field(default_factory=ServerStats)
    lease_until_ms: int | None = None  # leaderships stand until then (worker_protocol.Lease)
    supervisor_gone: Callable[[], bool] = lambda: False  # then none stands (supervisor_lifeline)
    group_requests: GroupHandler | None = None  # the worker's coordinators (group_host.py)
    # Subscriptions with more to read than their last answer held: answered again on the
    # next turn of the worker's loop, so one consumer catching up never holds the others up.
    push_now: list[_ParkedFetch] = field(default_factory=list)
    stopping: bool = False  # drain(): subscriptions end with their next answer
    metrics: WorkerMetrics | None = None  # bytes in and out per partition (worker_metrics.py)
    security: DataSecurity | None = None  # security on: ACLs checked, quotas enforced
    held: list[tuple[int, int, Reply]] = field(default_factory=list)  # (due ms, seq, reply)
    serving: str = ANONYMOUS  # the principal of the request being handled
    deletes: DeleteRecordsWaits = field(init=False)  # DeleteRecords waiting for followers

    def __post_init__(self) -> None:
        self.deletes = DeleteRecordsWaits(self.partitions)

    # ------------------------------------------------------------------ entry points

    def handle(self, identity: bytes, frames: Sequence[Frame], now_ms: int,
               principal: str = ANONYMOUS) -> list[Reply]:
        """Apply one request; returns every reply it causes (its own and woken long polls).
        With security on, `principal` must be allowed it, and its answer waits out the
        principal's quotas (data_security.py)."""
        self.serving = principal
        return REQUEST_PATH.serve(identity, frames, self._dispatcher(principal, now_ms),
                                  self.stats)

    def _dispatcher(self, principal: str,
                    now_ms: int) -> Callable[[bytes, RequestHeader, Request], list[Reply]]:
        """Requests of `principal` applied: checked and throttled first with security on."""
        security = self.security

        def dispatch(peer: bytes, header: RequestHeader, request: Request) -> list[Reply]:
            if security is None:
                return self._dispatch(peer, header, request, now_ms)
            security.check(principal, request)
            replies = self._dispatch(peer, header, request, now_ms)
            delay_ms = security.throttle_ms(principal, request, peer, replies, now_ms)
            return self._hold(peer, replies, now_ms, delay_ms, header) if delay_ms > 0 \
                else replies

        return dispatch

    def _hold(self, peer: bytes, replies: list[Reply], now_ms: int, delay_ms: int,
              header: RequestHeader) -> list[Reply]:
        """Keep `peer`'s replies for `delay_ms`, saying so in them where the protocol that
        asked has the field; the others go now."""
        throttled = header.throttled if isinstance(header, TranslatedHeader) else None
        for identity, frames in replies:
            if identity == peer:
                held = (identity, throttled(frames, delay_ms) if throttled else frames)
                heapq.heappush(self.held, (now_ms + delay_ms, next(_HELD_ORDER), held))
        return [reply for reply in replies if reply[0] != peer]

    def _release_held(self, now_ms: int | None) -> list[Reply]:
        """The held replies due by `now_ms` (None: all of them)."""
        released: list[Reply] = []
        while self.held and (now_ms is None or self.held[0][0] <= now_ms):
            released.append(heapq.heappop(self.held)[2])
        return released
    def handle_translated(self, identity: bytes, header: RequestHeader, request: Request,
                          now_ms: int, principal: str = ANONYMOUS) -> list[Reply]:
        """Apply one request that another protocol's port decoded and translated (the Kafka
        port, kafka_port.py) for `principal`, as `handle` applies its own; its header's own
        encoder answers it (codec.TranslatedHeader)."""
        self.serving = principal
        return REQUEST_PATH.call(identity, header, request, self._dispatcher(principal, now_ms),
                                 self.stats)

    def on_timer(self, now_ms: int) -> list[Reply]:
        """Answer the long polls and acks=all waits whose time is up, the subscriptions left
        with more to read, and the throttled answers now due."""
        replies = self._answer_fetches(self.waiters.expire(now_ms), now_ms)
        if self.push_now:
            tokens, self.push_now = self.push_now, []
            replies.extend(self._answer_fetches(tokens, now_ms))
        if self.held:
            replies.extend(self._release_held(now_ms))
        if self.delayed:
            for delayed in [d for d in self.delayed if d.deadline_ms <= now_ms]:
                replies.append(self._finish_delayed(delayed, ErrorCode.REQUEST_TIMED_OUT))
        if self.deletes.parked:
            replies.extend(self.deletes.expire(now_ms))
        return replies

    def lease_holds(self, now_ms: int) -> bool:
        """Whether this broker's leaderships still stand (worker_protocol.Lease): past the
        lease, or once the supervisor is gone (the controller may take that for the whole
        broker gone), another broker may lead its partitions, so nothing may be written or
        answered as their leader."""
        return not self.supervisor_gone() and (self.lease_until_ms is None
                                               or now_ms < self.lease_until_ms)

    def lease_refusal(self, now_ms: int) -> str | None:
        """Why this broker's leaderships may no longer stand (`lease_holds`), or None."""
        if self.lease_holds(now_ms):
            return None
        return ("its supervisor is gone" if self.supervisor_gone() else
                "it has not heard from the controller within its session")

    def lease_remaining_ms(self) -> int | None:
        """How long the lease still stands (0 or less: it ran out; None: no lease)."""
        if self.supervisor_gone():
            return 0
        if self.lease_until_ms is None:
            return None
        return self.lease_until_ms - self.clock.monotonic_ms()

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of a parked fetch or acks=all wait (None: nothing waits);
        0, long past, while a subscription has more to send at once."""
        if self.push_now:
            return 0
        fetch_deadline_ms = self.waiters.next_deadline_ms()
        if not self.delayed and not self.held and not self.deletes.parked:
            return fetch_deadline_ms
        deadlines = [d.deadline_ms for d in self.delayed]
        delete_deadline_ms = self.deletes.next_deadline_ms()
        if delete_deadline_ms is not None:
            deadlines.append(delete_deadline_ms)
        if self.held:
            deadlines.append(self.held[0][0])
        if fetch_deadline_ms is not None:
            deadlines.append(fetch_deadline_ms)
        return min(deadlines)

    def partition_removed(self, tp: TopicPartition) -> list[Reply]:
        """A partition left this worker: its waiters hear NOT_LEADER_OR_FOLLOWER now."""
        assert tp not in self.partitions
        replies = self._answer_fetches(self.waiters.wake_partition(tp))
        for delayed in [d for d in self.delayed if any(w[0] == tp for w in d.waiting.values())]:
            replies.append(self._finish_delayed(delayed, ErrorCode.NOT_LEADER_OR_FOLLOWER))
        replies.extend(self.deletes.settle([tp]))
        return replies

    def drain(self) -> list[Reply]:
        """Shutdown: answer every parked request with what there is now."""
        self.stopping = True
        tokens, self.push_now = [*self.waiters.drain(), *self.push_now], []
        replies = self._answer_fetches(tokens)
        replies.extend(self._release_held(None))
        for delayed in list(self.delayed):
            replies.append(self._finish_delayed(delayed, ErrorCode.REQUEST_TIMED_OUT))
        replies.extend(self.deletes.expire(None))
        return replies

    # ------------------------------------------------------------------ dispatch

    def _dispatch(
        self, identity: bytes, header: RequestHeader, request: Request, now_ms: int
    ) -> list[Reply]:
        if isinstance(request, ProduceRequestV0):
            return self._produce(identity, header, request, now_ms)
        if isinstance(request, FetchRequestV0 | FetchRequestV2):
            return self._fetch(identity, header, request, now_ms)
        if isinstance(request, FetchRequestV1):
            return self._replica_fetch(identity, header, request, now_ms)
        if isinstance(request, ListOffsetsRequestV0):
            return [_reply(identity, header, self._list_offsets(request))]
        if isinstance(request, OffsetForLeaderEpochRequestV0):
            return [_reply(identity, header, epoch_answers(self.partitions, request))]
        if isinstance(request, DeleteRecordsRequestV0):
            return self._delete_records(identity, header, request, now_ms)
        if isinstance(request, GROUP_REQUEST_TYPES):
            if self.group_requests is None:
                return [_reply(identity, header, error_response(
                    request, ErrorCode.NOT_COORDINATOR, "this worker coordinates no group"))]
            return self.group_requests(identity, header, request, now_ms)
        assert isinstance(request, ApiVersionsRequestV0), "REQUEST_PATH passes DATA_APIS only"
        return [_reply(identity, header, _api_versions())]

    # ------------------------------------------------------------------ produce

    def append_batch(self, tp: TopicPartition, batch: bytes) -> tuple[ProduceOutcome, list[Reply]]:
        """Append one batch of the worker's own (a coordinator's records) as a produce with
        acks=all would, and wake the fetches waiting for it; the caller waits for the HW."""
        outcome = self._produce_entry(ProduceEntry(tp.topic, tp.partition, (batch,)), ACKS_ALL,
                                      self.clock.monotonic_ms(), built_here=True)
        return outcome, self._on_progress(tp, outcome.appended_bytes, outcome.committed_bytes)

    def _produce(
        self, identity: bytes, header: RequestHeader, request: ProduceRequestV0, now_ms: int
    ) -> list[Reply]:
        if request.acks not in VALID_ACKS:
            message = f"acks must be 0, 1 or -1 (all), not {request.acks}"
            refused = [
                ProduceResult(e.topic, e.partition, ErrorCode.INVALID_REQUIRED_ACKS, -1, -1, -1,
                              message)
                for e in request.entries
            ]
            return [_reply(identity, header, ProduceResponseV0(tuple(refused)))]
        replies: list[Reply] = []
        results: list[ProduceResult] = []
        waiting: dict[int, tuple[TopicPartition, int]] = {}
        for index, entry in enumerate(request.entries):
            tp = TopicPartition(entry.topic, entry.partition)
            outcome = self._produce_entry(entry, request.acks, now_ms)
            if outcome.appended_bytes and self.metrics is not None:
                self.metrics.add(entry.topic, entry.partition, BYTES_IN,
                                 outcome.appended_bytes)
            if outcome.appended_bytes or outcome.committed_bytes:
                replies.extend(
                    self._on_progress(tp, outcome.appended_bytes, outcome.committed_bytes,
                                      now_ms)
                )
            results.append(
                ProduceResult(entry.topic, entry.partition, outcome.error_code,
                              outcome.base_offset, -1, outcome.log_start_offset,
                              outcome.error_message)
            )
            if request.acks == ACKS_ALL and outcome.error_code == ErrorCode.NONE:
                partition = self.partitions.get(tp)
                assert partition is not None
                status = (ErrorCode.NONE if ACKS_ALL_AT_APPEND
                          else partition.acks_status(outcome.required_offset))
                if status is None:
                    waiting[index] = (tp, outcome.required_offset)
                else:
                    _set_entry_error(results, index, status)
        if any(result.error_code for result in results):
            self.stats.entry_errors += 1
        if request.acks == 0:
            return replies
        if not waiting:  # acks=1, or acks=all already covered by the HW: answer now
            replies.append(_reply(identity, header, ProduceResponseV0(tuple(results))))
            return replies
        delayed = _DelayedProduce(identity, header, results, waiting,
                                  now_ms + max(request.timeout_ms, 0))
        if request.timeout_ms <= 0 or len(self.delayed) >= limits.DELAYED_PRODUCES_MAX:
            replies.append(
                self._finish_delayed(delayed, ErrorCode.REQUEST_TIMED_OUT, parked=False)
            )
        else:
            self.delayed.append(delayed)
        return replies

    def _produce_entry(self, entry: ProduceEntry, acks: int, now_ms: int, *,
                       built_here: bool = False) -> ProduceOutcome:
        partition = self.partitions.get(TopicPartition(entry.topic, entry.partition))
        if partition is None:
            return ProduceOutcome(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, _not_here(entry.topic, entry.partition)
            )
        why = self.lease_refusal(now_ms)
        if why is not None:
            return ProduceOutcome(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1,
                f"{entry.topic}-{entry.partition}: this broker may have been replaced as "
                f"leader: {why}")
        try:
            return partition.produce(entry.batches, acks, self.clock.wall_ms(),
                                     built_here=built_here)
        except ZlogError as error:
            return ProduceOutcome(error.code, -1, partition.log.log_start_offset, error.message)
        except AssertionError:
            raise
        except Exception as error:
            log_failure(log, error, "produce to %s-%d failed", entry.topic, entry.partition)
            self.stats.internal_errors += 1
            return ProduceOutcome(ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, _INTERNAL_ERROR)

    def _on_progress(
        self, tp: TopicPartition, appended_bytes: int, committed_bytes: int,
        now_ms: int | None = None,
    ) -> list[Reply]:
        """Bytes were appended to `tp` and/or the HW moved: wake who waited for that."""
        replies: list[Reply] = []
        if appended_bytes:
            replies.extend(self._answer_fetches(self.waiters.on_appended(tp, appended_bytes),
                                                now_ms))
        if committed_bytes:
            replies.extend(self._answer_fetches(self.waiters.on_committed(tp, committed_bytes),
                                                now_ms))
            if self.delayed:
                replies.extend(self._settle_delayed(tp))
        return replies

    def _settle_delayed(self, tp: TopicPartition) -> list[Reply]:
        """Answer the acks=all waits on `tp` that the HW now covers (or that cannot succeed)."""
        replies: list[Reply] = []
        partition = self.partitions.get(tp)
        for delayed in list(self.delayed):
            for index, (waited_tp, required_offset) in list(delayed.waiting.items()):
                if waited_tp != tp or partition is None:
                    continue
                status = partition.acks_status(required_offset)
                if status is not None:
                    _set_entry_error(delayed.results, index, status)
                    del delayed.waiting[index]
            if not delayed.waiting:
                replies.append(self._finish_delayed(delayed, ErrorCode.NONE))
        return replies

    def _finish_delayed(
        self, delayed: _DelayedProduce, code: ErrorCode, *, parked: bool = True
    ) -> Reply:
        """Reply to a produce; entries still waiting get `code`."""
        for index in delayed.waiting:
            _set_entry_error(delayed.results, index, code)
        delayed.waiting.clear()
        if parked:
            self.delayed.remove(delayed)
        response = ProduceResponseV0(tuple(delayed.results))
        return _reply(delayed.identity, delayed.header, response)

    # ------------------------------------------------------------------ fetch

    def _fetch(
        self, identity: bytes, header: RequestHeader, request: ConsumerFetch, now_ms: int
    ) -> list[Reply]:
        token = _ParkedFetch(identity, header, request,
                             ends_ms=now_ms + limits.SUBSCRIPTION_LIFETIME_MS,
                             principal=self.serving)
        if request.replica_id >= 0:
            return [self._fetch_reply(token, _replica_id_refused(request), more=False)]
        if isinstance(request, FetchRequestV2) and not request.entries:
            self._cancel_subscriptions(identity)
            return []
        results = self._read_fetch(request)
        if fetch_is_complete(results, request.min_bytes, request.max_wait_ms):
            return self._answer(token, results, now_ms)
        parked = self.waiters.park(
            token,
            [(TopicPartition(e.topic, e.partition), e.partition_max_bytes)
             for e in request.entries],
            min_bytes=request.min_bytes,
            available_bytes=sum(result.size_bytes for result in results),
            now_ms=now_ms,
            max_wait_ms=request.max_wait_ms,
            reads_log_end=False,
        )
        if not parked:
            return [self._fetch_reply(token, results, more=False)]
        return []

    def _answer(self, token: _ParkedFetch, results: list[EntryRead], now_ms: int) -> list[Reply]:
        """Answer a consumer's fetch; a subscription stays, at the offsets after this answer.

        It is parked again when this answer took all there was, or answered again on the next
        turn when there is more (`push_now`). It ends (its last answer says no more follow)
        when a partition failed, when its answers reached its max_bytes, at the end of its
        lifetime, when the worker stops, or when it cannot be parked (the table is full).
        """
        request = token.request
        if not isinstance(request, FetchRequestV2):
            return [self._fetch_reply(token, results)]
        sent_bytes = token.sent_bytes + sum(result.size_bytes for result in results)
        if (self.stopping or request.max_wait_ms <= 0 or sent_bytes >= request.max_bytes
                or now_ms >= token.ends_ms
                or any(result.error_code != ErrorCode.NONE for result in results)):
            return [self._fetch_reply(token, results, more=False)]
        entries: list[FetchEntry] = []
        caught_up = True
        for entry, result in zip(request.entries, results, strict=True):
            next_offset = next_offset_after(result.chunks, entry.fetch_offset)
            caught_up = caught_up and next_offset >= result.high_watermark
            entries.append(replace(entry, fetch_offset=next_offset))
        following = replace(token, request=replace(request, entries=tuple(entries)),
                            sent_bytes=sent_bytes)
        if not caught_up:
            self.push_now.append(following)
        elif not self.waiters.park(
            following,
            [(TopicPartition(e.topic, e.partition), e.partition_max_bytes) for e in entries],
            min_bytes=max(request.min_bytes, 1), available_bytes=0, now_ms=now_ms,
            max_wait_ms=request.max_wait_ms, reads_log_end=False,
        ):
            return [self._fetch_reply(token, results, more=False)]
        return [self._fetch_reply(token, results, more=True)]

    def _fetch_reply(self, token: _ParkedFetch, results: Sequence[EntryRead], *,
                     more: bool = False) -> Reply:
        """A consumer's fetch answered: counted as an error if any partition failed, and its
        bytes out of each partition."""
        if any(result.error_code for result in results):
            self.stats.entry_errors += 1
        if self.metrics is not None:
            assert isinstance(token.request, FetchRequestV0 | FetchRequestV2)
            for entry, result in zip(token.request.entries, results, strict=True):
                size_bytes = result.size_bytes
                if size_bytes:
                    self.metrics.add(entry.topic, entry.partition, BYTES_OUT, size_bytes)
        return _fetch_reply(token, results, more=more)

    def _cancel_subscriptions(self, identity: bytes) -> None:
        """A consumer ends its subscriptions (it sought elsewhere, paused, closed): they are
        dropped without a word, since it has already forgotten them."""
        self.waiters.remove_where(
            lambda token: token.identity == identity and isinstance(token.request,
                                                                    FetchRequestV2))
        self.push_now = [token for token in self.push_now if token.identity != identity]

    def _read_fetch(self, request: ConsumerFetch, sent_bytes: int = 0) -> list[EntryRead]:
        """Read for a fetch, within its max_bytes less what its earlier answers sent (a
        subscription's max_bytes bounds all its answers together)."""
        def read(entry: FetchEntry, limit_bytes: int, at_least_one: bool) -> EntryRead:
            partition = self.partitions.get(TopicPartition(entry.topic, entry.partition))
            if partition is None:
                message = _not_here(entry.topic, entry.partition)
                return EntryRead(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, (), message)
            try:
                return partition.read(
                    entry.fetch_offset, limit_bytes, replica_id=request.replica_id,
                    at_least_one=at_least_one,
                )
            except Exception as error:
                log_failure(log, error, "fetch from %s-%d failed", entry.topic, entry.partition)
                self.stats.internal_errors += 1
                return EntryRead(ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, (), _INTERNAL_ERROR)

        return collect_fetch(
            request.entries, max(request.max_bytes - sent_bytes, 0),
            lambda entry: entry.partition_max_bytes, read,
        )

    def _answer_fetches(self, tokens: Iterable[_ParkedFetch], now_ms: int | None = None,
                        ) -> list[Reply]:
        """Answer parked fetches (woken, timed out, or subscriptions with more to read)."""
        if now_ms is None:
            now_ms = self.clock.monotonic_ms()
        replies: list[Reply] = []
        for token in tokens:
            request = token.request
            if isinstance(request, FetchRequestV1):
                reads = replica_fetch_reads(self.partitions, request, now_ms)
                replies.append(_reply(token.identity, token.header,
                                      FetchResponseV1(tuple(read.result for read in reads))))
            else:
                results = self._read_fetch(request, token.sent_bytes)
                replies.extend(self._throttled(token, self._answer(token, results, now_ms),
                                               now_ms))
        return replies

    def _throttled(self, token: _ParkedFetch, answers: list[Reply], now_ms: int) -> list[Reply]:
        """With security on, a consumer's answer settled now is held for as long as its fetch
        quota says (its bytes are known only now)."""
        security = self.security
        if security is None or not security.quotas.active or not answers:
            return answers
        delay_ms = security.fetch_throttle_ms(token.principal, answers, now_ms)
        return (self._hold(answers[0][0], answers, now_ms, delay_ms, token.header)
                if delay_ms > 0 else answers)

    # ------------------------------------------------------------------ followers

    def _replica_fetch(
        self, identity: bytes, header: RequestHeader, request: FetchRequestV1, now_ms: int
    ) -> list[Reply]:
        """A follower's fetch: its position may move the HW (answer what that settles), and
        a fetch that finds nothing waits for the next append, as a consumer's does."""
        replies: list[Reply] = []
        reads = replica_fetch_reads(self.partitions, request, now_ms)
        for entry, read in zip(request.entries, reads, strict=True):
            if read.committed_bytes:
                replies.extend(self._on_progress(TopicPartition(entry.topic, entry.partition),
                                                 0, read.committed_bytes))
        if self.deletes.parked:  # the followers' log starts came with their positions
            replies.extend(self.deletes.settle(
                TopicPartition(entry.topic, entry.partition) for entry in request.entries))
        token = _ParkedFetch(identity, header, request)
        if replica_fetch_is_complete(reads, request) or not self.waiters.park(
            token,
            [(TopicPartition(e.topic, e.partition), e.partition_max_bytes)
             for e in request.entries],
            min_bytes=max(request.min_bytes, 1), available_bytes=0, now_ms=now_ms,
            max_wait_ms=request.max_wait_ms, reads_log_end=True,
        ):
            replies.append(_reply(identity, header,
                                  FetchResponseV1(tuple(read.result for read in reads))))
        return replies

    def refresh_high_watermarks(self) -> list[Reply]:
        """After the ISR check: a HW that no longer waits for a follower outside the ISR
        (isr.py) moves with no append or fetch to move it; answer what that settles."""
        replies: list[Reply] = []
        for tp, partition in self.partitions.items():
            committed_bytes = partition.refresh_high_watermark()
            if committed_bytes:
                replies.extend(self._on_progress(tp, 0, committed_bytes))
        return replies

    def partition_changed(self, tp: TopicPartition, committed_bytes: int,
                          role_changed: bool) -> list[Reply]:
        """An assign moved the HW or changed the role: answer the waits it settles. A replica
        that stops leading answers every wait on the partition now (NOT_LEADER_OR_FOLLOWER)."""
        replies = self._on_progress(tp, 0, committed_bytes) if committed_bytes else []
        if role_changed:
            replies.extend(self._answer_fetches(self.waiters.wake_partition(tp)))
            if self.delayed:
                replies.extend(self._settle_delayed(tp))
        if self.deletes.parked:  # a new role, or an ISR without a lagging follower
            replies.extend(self.deletes.settle([tp]))
        return replies

    # ------------------------------------------------------------------ delete records

    def _delete_records(self, identity: bytes, header: RequestHeader,
                        request: DeleteRecordsRequestV0, now_ms: int) -> list[Reply]:
        """DeleteRecords (delete_records.py): the followers' parked fetches are answered at
        once, so that they take the new log start and report it with their next fetch."""
        replies, moved = self.deletes.handle(identity, header, request,
                                             self.lease_refusal(now_ms), now_ms)
        for tp in moved:
            replies.extend(self._answer_fetches(self.waiters.wake_partition(tp), now_ms))
        return replies

    # ------------------------------------------------------------------ list offsets

    def _list_offsets(self, request: ListOffsetsRequestV0) -> ListOffsetsResponseV0:
        results: list[ListOffsetsResult] = []
        for wanted in request.partitions:
            partition = self.partitions.get(TopicPartition(request.topic, wanted.partition))
            if partition is None:
                message = _not_here(request.topic, wanted.partition)
                results.append(ListOffsetsResult(
                    wanted.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER, message, -1, -1
                ))
                continue
            try:
                offset, timestamp_ms = partition.list_offset(wanted.timestamp)
            except ZlogError as error:
                results.append(
                    ListOffsetsResult(wanted.partition, error.code, error.message, -1, -1)
                )
                continue
            results.append(ListOffsetsResult(wanted.partition, 0, "", offset, timestamp_ms))
        return ListOffsetsResponseV0(request.topic, tuple(results))


# ---------------------------------------------------------------------------------- helpers


def _reply(identity: bytes, header: RequestHeader, response: Response) -> Reply:
    return identity, encode_response(header, response)


def _fetch_reply(token: _ParkedFetch, results: Sequence[EntryRead], *, more: bool = False,
                 ) -> Reply:
    """A consumer's fetch answered: Fetch v0's response, or one answer of a subscription."""
    assert isinstance(token.request, FetchRequestV0 | FetchRequestV2)
    entries = tuple(
        FetchResult(
            entry.topic, entry.partition, result.error_code, result.high_watermark,
            result.high_watermark, result.log_start_offset, result.chunks, result.error_message,
        )
        for entry, result in zip(token.request.entries, results, strict=True)
    )
    if isinstance(token.request, FetchRequestV2):
        return _reply(token.identity, token.header, FetchResponseV2(entries, more))
    return _reply(token.identity, token.header, FetchResponseV0(entries))



def _replica_id_refused(request: ConsumerFetch) -> list[EntryRead]:
    """A consumer's fetch that names a replica: a follower's position moves the HW, so it
    comes only with the epochs that fence a stale or wiped follower (Fetch v1, KIP-320 and
    KIP-903), never from a fetch anyone may send."""
    message = (f"replica_id {request.replica_id}: Fetch v0 is a consumer's fetch (replica_id "
               "-1); a follower fetches with Fetch v1, which carries its broker and leader "
               "epochs")
    return [EntryRead(ErrorCode.INVALID_REQUEST, -1, -1, (), message) for _ in request.entries]


def _set_entry_error(results: list[ProduceResult], index: int, code: ErrorCode) -> None:
    if code == ErrorCode.NONE:
        return
    old = results[index]
    message = f"{code.name.lower().replace('_', ' ')} while waiting for the in-sync replicas"
    results[index] = ProduceResult(
        old.topic, old.partition, code, -1, -1, old.log_start_offset, message
    )


def _not_here(topic: str, partition: int) -> str:
    return f"{topic}-{partition} is not led by this worker; refresh metadata"


def _api_versions() -> ApiVersionsResponseV0:
    ranges = tuple(
        ApiVersionRange(int(key), *SUPPORTED_VERSIONS[key]) for key in sorted(DATA_APIS)
    )
    return ApiVersionsResponseV0(ranges, f"zlog {__version__}")
