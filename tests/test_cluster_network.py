"""Which proxy silences which direction when a proxied cluster cuts a broker off.

Spec: zlog_testbed/cluster_network.py's docstrings. Each connection passes the proxy in front of the
broker it was opened to, and its "forward" direction flows from the broker that opened it: so
cutting what reaches broker 2 silences "forward" on broker 2's own proxies (for the other
brokers' connections) and "backward" on the others' proxies (for broker 2's connections).
No process is started: faults set before `start` are recorded as they will apply.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zlog_testbed.cluster_network import (
    LINKS,
    UNKNOWN_CLIENT,
    Cut,
    Link,
    ProxiedCluster,
    broker_client,
)

CUT_OFF: int = 2
OTHERS: list[str] = sorted({broker_client(1), broker_client(3), UNKNOWN_CLIENT})
RAFT: tuple[Link, ...] = ("raft",)


@pytest.fixture
def cluster() -> Iterator[ProxiedCluster]:
    built = ProxiedCluster(3)
    try:
        yield built
    finally:
        built.close()


def _faults_by_node(cluster: ProxiedCluster) -> dict[int, set[tuple[str, str, str]]]:
    """Per broker, (link, fault, its arguments) of what its proxies were told."""
    return {node: {(link, event.name, repr(sorted(event.args.items())))
                   for link, proxy in proxies.items() for event in proxy.faults}
            for node, proxies in cluster.proxies.items()}


def _told(fault: str, links: tuple[str, ...], **args: object) -> set[tuple[str, str, str]]:
    return {(link, fault, repr(sorted(args.items()))) for link in links}


@pytest.mark.parametrize(("direction", "own", "theirs"), [
    ("in", "forward", "backward"),
    ("out", "backward", "forward"),
])
def test_a_one_way_cut_silences_one_direction_of_every_link_with_the_others(
        cluster: ProxiedCluster, direction: Cut, own: str, theirs: str) -> None:
    cluster.isolate(CUT_OFF, direction=direction)
    told = _faults_by_node(cluster)
    assert told[CUT_OFF] == _told("one_way", LINKS, direction=own, clients=OTHERS)
    for other in (1, 3):
        assert told[other] == _told("one_way", LINKS, direction=theirs,
                                    clients=[broker_client(CUT_OFF)])


def test_a_cut_both_ways_drops_and_some_links_only_spare_the_rest(
        cluster: ProxiedCluster) -> None:
    cluster.isolate(CUT_OFF, RAFT)
    told = _faults_by_node(cluster)
    assert told[CUT_OFF] == _told("drop", RAFT, clients=OTHERS)
    assert told[1] == told[3] == _told("drop", RAFT, clients=[broker_client(CUT_OFF)])


def test_an_unknown_direction_is_refused_before_any_fault(cluster: ProxiedCluster) -> None:
    with pytest.raises(ValueError, match="direction"):
        cluster.isolate(CUT_OFF, direction="sideways")  # type: ignore[arg-type]
    assert not any(_faults_by_node(cluster).values())
