"""The data plane: what runs in each partition worker process.

A worker (`worker`) owns some partitions (`partition_host`) and is their single writer. Its data
path (`data_plane`) turns request frames into replies through each partition's rules
(`partition`: produce and fetch decisions; `isr`: the high-watermark and in-sync-replica rules),
parks long polls (`fetch_waiters`) and remembers idempotent producers (`producer_state`). A
follower replica will pull from its leader's worker (`fetcher`, to be built).
"""
