"""Hosts on a private network of their own: one network namespace each, cut with nftables.

Each host gets a namespace with one veth link to a bridge, and an address 10.231.K.<host> of
a /24 that only this host's kernel knows: the namespaces have no default route, so nothing
in them reaches past the bridge. The bridge lives in a namespace of its own rather than in
the root one, so that everything a run creates hangs off its namespaces: deleting them
deletes every link, address and rule, also after a crash, and the root namespace keeps only
one veth end (the clients' link, address 10.231.K.254), which the kernel removes with its
peer. Processes of the root namespace (a harness and its clients) so reach every host at
its own address, and a cut can tell a client from a host by its source address.

A cut is a set of nftables drop rules in a host's namespace, by peer address: what arrives
from some addresses (input) and what leaves for some (output). A one-way cut drops IP
packets one way only, so a TCP connection across it carries nothing new either way (its
acknowledgements are lost) while what was in flight still lands: a one-way partition as a
network has it, coarser than the TCP proxy's, which forwards one direction of a working
connection. Healing flushes the rules; connections that waited resume.

`start` returns only once the network carries packets: every link UP, every bridge port
forwarding, every address in place, and a TCP connect from the root namespace to each host
answered. The commands that build it return before the kernel has brought its links up: a
veth's carrier, its operational state and a bridge port's move to forwarding follow in the
kernel's link-watch work, which may run a while later (on a fresh machine, the first bridge
and veths it ever made). A packet sent meanwhile is dropped; for the first connect that is
its ARP request, which Linux sends again only a second later (neigh retrans_time_ms), so a
connect with a shorter timeout failed although everything was configured.

Names carry the creating process's id (`zlj-<pid>-<n>-...`), so a later run finds the
namespaces of a process that died without cleaning up and deletes them (`remove_stale`).
Everything here needs root, `ip` and `nft`; `unavailable_reason` says what is missing.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Final

import psutil

PREFIX: Final = "zlj"
BRIDGE_HOST: Final = "net"  # the bridge namespace's suffix
CLIENT_HOST_BYTE: Final = 254  # the root namespace's (the clients') address in the /24
SUBNET_SECOND_BYTE: Final = 231  # 10.231.K.0/24, K free on this host
TABLE: Final = "zlog_faults"
COMMAND_TIMEOUT_S: Final = 10.0
READY_TIMEOUT_S: Final = 30.0  # how long `start` waits for the kernel to bring links up
READY_CHECK_INTERVAL_S: Final = 0.02
PROBE_PORT: Final = 9  # nothing listens there in a new namespace: a reachable host refuses
PROBE_TIMEOUT_S: Final = 0.2
_STALE: Final = re.compile(rf"^{PREFIX}-(\d+)-\d+-\w+$")
_runs = itertools.count()


class NamespaceError(RuntimeError):
    """An `ip` or `nft` command failed: its words and what it printed."""


def run_command(command: Sequence[str], *, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NamespaceError(f"{' '.join(command)}: {error}") from None
    if done.returncode != 0:
        raise NamespaceError(f"{' '.join(command)} exited {done.returncode}: "
                             f"{done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def namespace_name(pid: int, run: int, host: str) -> str:
    return f"{PREFIX}-{pid}-{run}-{host}"


def stale_namespaces(listed: str, alive: Collection[int]) -> list[str]:
    """The harness's namespaces in `ip netns list` output whose creating process is not in
    `alive` (lines are "name" or "name (id: N)")."""
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    return [name for name in names
            if (found := _STALE.match(name)) and int(found.group(1)) not in alive]


def remove_stale() -> list[str]:
    """Delete the namespaces (and so the links) that a dead harness process left behind."""
    listed = run_command(["ip", "netns", "list"])
    candidates = {int(m.group(1)) for line in listed.splitlines()
                  if line.strip() and (m := _STALE.match(line.split()[0]))}
    stale = stale_namespaces(listed, {pid for pid in candidates if psutil.pid_exists(pid)})
    for name in stale:
        with contextlib.suppress(NamespaceError):
            run_command(["ip", "netns", "delete", name])
    return stale


def unavailable_reason() -> str | None:
    """Why namespaces cannot be used here, or None when they can (a namespace is made, given
    an nftables table and deleted, so a kernel without either says so)."""
    if os.geteuid() != 0:
        return "not root"
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed"
    probe = namespace_name(os.getpid(), next(_runs), "probe")
    try:
        run_command(["ip", "netns", "add", probe])
        try:
            run_command(["ip", "netns", "exec", probe, "nft", "-f", "-"],
                        stdin=table_script())
        finally:
            run_command(["ip", "netns", "delete", probe])
    except NamespaceError as error:
        return str(error)
    return None


def table_script() -> str:
    """The table a host's cuts go in: both chains accept what no rule drops."""
    return (f"table inet {TABLE} {{\n"
            "  chain input { type filter hook input priority filter; policy accept; }\n"
            "  chain output { type filter hook output priority filter; policy accept; }\n"
            "}\n")


def cut_script(drop_from: Collection[str], drop_to: Collection[str]) -> str:
    """Rules dropping every packet from `drop_from` and to `drop_to` (IPv4 addresses)."""
    lines = []
    if drop_from:
        lines.append(f"add rule inet {TABLE} input ip saddr {{ {', '.join(sorted(drop_from))} }}"
                     " drop")
    if drop_to:
        lines.append(f"add rule inet {TABLE} output ip daddr {{ {', '.join(sorted(drop_to))} }}"
                     " drop")
    return "".join(line + "\n" for line in lines)


def link_problems(listed: str, expected: Mapping[str, str | None]) -> list[str]:
    """What keeps links from carrying packets, from one namespace's `ip -details -json
    address show`: each link of `expected` (with the IPv4 address it must have, or None)
    missing, not UP (its operational state, which the kernel sets once the link has a
    carrier: a veth once both ends are up), a bridge port not forwarding, or its address
    missing or tentative."""
    links = {link["ifname"]: link for link in json.loads(listed or "[]")}
    problems: list[str] = []
    for name, address in expected.items():
        link = links.get(name)
        if link is None:
            problems.append(f"{name}: no such link")
            continue
        operstate = str(link.get("operstate", "unknown"))
        if operstate != "UP":
            problems.append(f"{name}: {operstate.lower()}")
        info = link.get("linkinfo", {})
        port_state = info.get("info_slave_data", {}).get("state")
        if info.get("info_slave_kind") == "bridge" and port_state != "forwarding":
            problems.append(f"{name}: bridge port {port_state}")
        if address is not None and not any(
                found.get("family") == "inet" and found.get("local") == address
                and not found.get("tentative") for found in link.get("addr_info", [])):
            problems.append(f"{name}: no address {address}")
    return problems


def reachable(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connect to `address`:PROBE_PORT is answered, refused or accepted: the
    SYN got there and the answer came back (ARP resolved both ways)."""
    try:
        with socket.create_connection((address, PROBE_PORT), timeout_s):
            return True
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def free_subnet(start: int, routes: str) -> str:
    """The first 10.231.K (K from `start`, wrapping) that no route of `ip -4 route` output
    mentions."""
    for step in range(CLIENT_HOST_BYTE):
        prefix = f"10.{SUBNET_SECOND_BYTE}.{(start + step) % CLIENT_HOST_BYTE}"
        if f"{prefix}." not in routes:
            return prefix
    raise NamespaceError(f"no free 10.{SUBNET_SECOND_BYTE}.K.0/24 on this host")


class NamespaceNetwork:
    """Hosts 1..`hosts`, each in its own namespace on one bridge, with the root namespace on
    it too; `close` deletes it all. Nothing exists until `start`."""

    def __init__(self, hosts: int) -> None:
        self.pid = os.getpid()
        self.run = next(_runs)
        self.hosts = range(1, hosts + 1)
        # Chosen now, so that the hosts' addresses are known before their namespaces exist.
        self.subnet = free_subnet(self.pid + self.run, run_command(["ip", "-4", "route"]))
        self.started = False

    def namespace(self, host: int | str) -> str:
        return namespace_name(self.pid, self.run, str(host))

    @property
    def client_link(self) -> str:
        """The clients' veth end in the root namespace (a link name has at most 15 bytes)."""
        return f"{PREFIX}{self.pid:x}c{self.run % 256:x}"

    def address(self, host: int) -> str:
        return f"{self.subnet}.{host}"

    @property
    def client_address(self) -> str:
        return self.address(CLIENT_HOST_BYTE)

    def exec_prefix(self, host: int) -> list[str]:
        """What runs a command in `host`'s namespace as the same process (`ip netns exec`
        execs, it does not fork: a signal to the pid reaches the command itself)."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def start(self) -> None:
        remove_stale()
        self.started = True
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    def _create(self) -> None:
        bridge = self.namespace(BRIDGE_HOST)
        in_bridge = ["ip", "-n", bridge]
        run_command(["ip", "netns", "add", bridge])
        run_command([*in_bridge, "link", "add", "br0", "type", "bridge"])
        run_command([*in_bridge, "link", "set", "br0", "up"])
        for host in self.hosts:
            namespace = self.namespace(host)
            inside = ["ip", "-n", namespace]
            run_command(["ip", "netns", "add", namespace])
            run_command([*inside, "link", "set", "lo", "up"])
            run_command([*inside, "link", "add", "eth0", "type", "veth",
                         "peer", "name", f"h{host}", "netns", bridge])
            run_command([*inside, "addr", "add", f"{self.address(host)}/24", "dev", "eth0"])
            run_command([*inside, "link", "set", "eth0", "up"])
            run_command([*in_bridge, "link", "set", f"h{host}", "master", "br0", "up"])
            self._nft(host, table_script())
        run_command(["ip", "link", "add", self.client_link, "type", "veth",
                     "peer", "name", "clients", "netns", bridge])
        run_command(["ip", "addr", "add", f"{self.client_address}/24", "dev", self.client_link])
        run_command(["ip", "link", "set", self.client_link, "up"])
        run_command([*in_bridge, "link", "set", "clients", "master", "br0", "up"])
        self.wait_ready()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the network carries packets (see the module docstring): every link UP, every
        bridge port forwarding, every address in place, then every host answering a connect
        from the root namespace. NamespaceError naming what is still missing after
        `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            problems = self._link_problems()
            if not problems:
                problems = [f"host {host}: no answer from {self.address(host)}"
                            for host in self.hosts if not reachable(self.address(host))]
            if not problems:
                return
            if time.monotonic() > deadline:
                raise NamespaceError(f"the network is not up after {timeout_s} s: "
                                     + "; ".join(problems))
            time.sleep(READY_CHECK_INTERVAL_S)

    def _link_problems(self) -> list[str]:
        bridge = self.namespace(BRIDGE_HOST)
        listings: list[tuple[str, list[str], dict[str, str | None]]] = [
            (self.namespace(host), ["-n", self.namespace(host)], {"eth0": self.address(host)})
            for host in self.hosts]
        listings.append((bridge, ["-n", bridge], {
            "br0": None, "clients": None, **{f"h{host}": None for host in self.hosts}}))
        listings.append(("the root namespace", [], {self.client_link: self.client_address}))
        problems: list[str] = []
        for where, namespace, expected in listings:
            listed = run_command(["ip", *namespace, "-details", "-json", "address", "show"])
            problems.extend(f"{where}: {problem}"
                            for problem in link_problems(listed, expected))
        return problems

    def cut(self, host: int, drop_from: Collection[str] = (),
            drop_to: Collection[str] = ()) -> None:
        """In `host`'s namespace, drop what comes from `drop_from` and what goes to
        `drop_to` (addresses), on top of the cuts in force."""
        script = cut_script(drop_from, drop_to)
        if script:
            self._nft(host, script)

    def heal(self) -> None:
        """Every cut gone, in every namespace."""
        for host in self.hosts:
            self._nft(host, f"flush table inet {TABLE}\n")

    def rules(self, host: int) -> str:
        return run_command(["ip", "netns", "exec", self.namespace(host),
                            "nft", "list", "table", "inet", TABLE])

    def _nft(self, host: int, script: str) -> None:
        run_command([*self.exec_prefix(host), "nft", "-f", "-"], stdin=script)

    def close(self) -> None:
        """Delete every namespace of this network (their links go with them); idempotent,
        and never raises: a leftover is found by the next run's `remove_stale`."""
        if not self.started:
            return
        self.started = False
        with contextlib.suppress(NamespaceError):
            run_command(["ip", "link", "delete", self.client_link])
        for name in self._namespaces():
            with contextlib.suppress(NamespaceError):
                run_command(["ip", "netns", "delete", name])

    def _namespaces(self) -> Iterator[str]:
        yield from (self.namespace(host) for host in self.hosts)
        yield self.namespace(BRIDGE_HOST)
