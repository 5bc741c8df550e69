"""The follower fetcher: how a replica on this host copies its leader's log (to be built).

A follower partition lives in a worker on the follower's host. That worker pulls from the
leader's worker over DEALER -> ROUTER with a replica fetch (replica id, broker epoch, fetch
offset, leader epoch), appends the leader's batches byte for byte through its own ring and
segments, and learns the high watermark from the responses. One fetch is in flight per pair of
workers, covering every partition they share. Divergent tails are found by leader epoch
(OffsetForLeaderEpoch) and truncated, never by high watermark alone.

The rules it follows are pure and live in `isr.py` (leader side) and beside it; this module
will hold only the I/O loop. docs/architecture.md, "Where things go", has the whole plan.
"""
