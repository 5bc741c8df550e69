"""Data-driven Raft transcripts in the style of etcd's `testdata/*.txt` (datadriven).

A transcript is a sequence of directives. Each is a command line, a `----` line, and the
expected output up to the next blank line. `#` lines between directives are comments.
`pytest tests/scenarios/raft --rewrite` regenerates the outputs, so a reviewer reads only
the diff. Commands (N is a node id):

    cluster voters=1,2,3 [spares=4,5] [pre-vote=false] [check-quorum=false]
            [max-append=B] [election=E] [heartbeat=H] [compaction=C]
    campaign N            elect-now N           tick N|all [count=K] [settle]
    stabilize             deliver [from=N] [to=N] [type=Append] [newest]
    drop [...filters...]  duplicate [...filters...]
    propose N payload     propose-config N voters=1,2 [learners=3]
    read-index N ctx      reads N               transfer N to=M
    crash N [lose-ready]  restart N             compact N
    isolate N             partition 1,2 3,4,5   heal
    status [N ...]        chain N               pruned N
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.scenarios.raft.harness import Cluster, describe
from zlog.raft.errors import RaftError
from zlog.raft.messages import BlockId, ConfigState, Message
from zlog.raft.rawnode import RaftConfig, RawNode


@dataclass(slots=True)
class Directive:
    command: str
    expected: list[str]
    comments: list[str]


def parse(text: str) -> list[Directive]:
    directives: list[Directive] = []
    lines = text.splitlines()
    index = 0
    comments: list[str] = []
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.startswith("#"):
            comments.append(line)
            continue
        assert index < len(lines) and lines[index] == "----", f"expected ---- after {line!r}"
        index += 1
        expected = []
        while index < len(lines) and lines[index].strip():
            expected.append(lines[index])
            index += 1
        directives.append(Directive(line, expected, comments))
        comments = []
    return directives


def render(directives: list[Directive], outputs: list[list[str]]) -> str:
    parts: list[str] = []
    for directive, output in zip(directives, outputs, strict=True):
        parts.extend(c for c in directive.comments if c.strip())
        parts.extend([directive.command, "----", *output, ""])
    return "\n".join(parts).rstrip("\n") + "\n"


def _id(block_id: BlockId) -> str:
    return f"({block_id.term},{block_id.height})"


def _ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


class Runner:
    """Executes directives against a harness Cluster and renders deterministic output."""

    def __init__(self) -> None:
        self.cluster: Cluster | None = None
        self.handlers: dict[str, Callable[[list[str], dict[str, str]], list[str]]] = {
            "cluster": self.do_cluster,
            "campaign": self.do_campaign,
            "elect-now": self.do_elect,
            "tick": self.do_tick,
            "stabilize": self.do_stabilize,
            "deliver": self.do_deliver,
            "drop": self.do_drop,
            "duplicate": self.do_duplicate,
            "propose": self.do_propose,
            "propose-config": self.do_propose_config,
            "read-index": self.do_read_index,
            "reads": self.do_reads,
            "transfer": self.do_transfer,
            "crash": self.do_crash,
            "restart": self.do_restart,
            "compact": self.do_compact,
            "isolate": self.do_isolate,
            "partition": self.do_partition,
            "heal": self.do_heal,
            "status": self.do_status,
            "chain": self.do_chain,
            "pruned": self.do_pruned,
        }

    @property
    def c(self) -> Cluster:
        assert self.cluster is not None, "start with a `cluster` directive"
        return self.cluster

    def run(self, command: str) -> list[str]:
        words = command.split()
        args = [w for w in words[1:] if "=" not in w]
        options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        output = self.handlers[words[0]](args, options)
        return output or ["ok"]

    # -- handlers ---------------------------------------------------------------------------

    def do_cluster(self, args: list[str], options: dict[str, str]) -> list[str]:
        cfg = RaftConfig(
            election_ticks=int(options.get("election", "10")),
            heartbeat_ticks=int(options.get("heartbeat", "1")),
            max_append_blocks=int(options.get("max-append", "64")),
            pre_vote=options.get("pre-vote", "true") == "true",
            check_quorum=options.get("check-quorum", "true") == "true",
            compaction_threshold_blocks=int(options.get("compaction", "8192")),
        )
        self.cluster = Cluster(_ids(options["voters"]), _ids(options.get("spares", "")), cfg)
        return self.do_status([], {})

    def _new_messages(self, before: int) -> list[str]:
        return [describe(m) for m in self.c.inflight[before:]]

    def do_campaign(self, args: list[str], options: dict[str, str]) -> list[str]:
        before = len(self.c.inflight)
        self.c.campaign(int(args[0]))
        return self._new_messages(before)

    def do_elect(self, args: list[str], options: dict[str, str]) -> list[str]:
        self.c.elect(int(args[0]))
        return self.do_status([args[0]], {})

    def do_tick(self, args: list[str], options: dict[str, str]) -> list[str]:
        """Tick; with `settle`, deliver everything after each round and print nothing."""
        before = len(self.c.inflight)
        nodes = None if args[0] == "all" else [int(args[0])]
        for _ in range(int(options.get("count", "1"))):
            self.c.tick(nodes)
            if "settle" in args:
                self.c.stabilize()
        return [] if "settle" in args else self._new_messages(before)

    def do_stabilize(self, args: list[str], options: dict[str, str]) -> list[str]:
        return self.c.stabilize()

    def _filter(self, options: dict[str, str]) -> Callable[[Message], bool]:
        def match(msg: Message) -> bool:
            if "from" in options and msg.from_ != int(options["from"]):
                return False
            if "to" in options and msg.to != int(options["to"]):
                return False
            return "type" not in options or type(msg).__name__ == options["type"]

        return match

    def do_deliver(self, args: list[str], options: dict[str, str]) -> list[str]:
        """Deliver the matching messages in send order, or only the newest one (reordering)."""
        match = self._filter(options)
        if "newest" in args:
            candidates = [m for m in self.c.inflight if match(m)]
            if not candidates:
                return ["(nothing)"]
            newest = candidates[-1]
            self.c.inflight.reverse()
            self.c.inflight.remove(newest)  # the last occurrence, not an equal earlier copy
            self.c.inflight.reverse()
            return [self.c.step(newest)]
        return self.c.deliver(match) or ["(nothing)"]

    def do_duplicate(self, args: list[str], options: dict[str, str]) -> list[str]:
        copies = [m for m in self.c.inflight if self._filter(options)(m)]
        self.c.inflight.extend(copies)
        return [f"{describe(m)} (copied)" for m in copies] or ["(nothing)"]

    def do_drop(self, args: list[str], options: dict[str, str]) -> list[str]:
        dropped = self.c.drop(self._filter(options))
        return [f"{describe(m)} (dropped)" for m in dropped] or ["(nothing)"]

    def _call(self, node_id: int, action: Callable[[RawNode], object]) -> list[str]:
        before = len(self.c.inflight)
        try:
            result = action(self.c[node_id])
        except RaftError as error:
            return [f"{type(error).__name__}: {error.message}"]
        self.c.drain(node_id)
        shown = _id(result) if isinstance(result, BlockId) else "ok"
        return [shown, *self._new_messages(before)]

    def do_propose(self, args: list[str], options: dict[str, str]) -> list[str]:
        payload = args[1].encode() if len(args) > 1 else b"cmd"
        return self._call(int(args[0]), lambda n: n.propose(payload))

    def do_propose_config(self, args: list[str], options: dict[str, str]) -> list[str]:
        change = ConfigState.of(_ids(options["voters"]), _ids(options.get("learners", "")))
        return self._call(int(args[0]), lambda n: n.propose_config(change))

    def do_read_index(self, args: list[str], options: dict[str, str]) -> list[str]:
        ctx = args[1].encode()
        self.c.checker.read_requested(ctx)
        return self._call(int(args[0]), lambda n: n.read_index(ctx))

    def do_reads(self, args: list[str], options: dict[str, str]) -> list[str]:
        node_id = int(args[0])
        reads = self.c.read_states[node_id]
        for read in reads:
            self.c.checker.observe_read(node_id, read)
        lines = [f"ctx={r.ctx.decode()} index={_id(r.index)}" for r in reads]
        reads.clear()
        return lines or ["(none)"]

    def do_transfer(self, args: list[str], options: dict[str, str]) -> list[str]:
        target = int(options["to"])
        return self._call(int(args[0]), lambda n: n.transfer_leader(target))

    def do_crash(self, args: list[str], options: dict[str, str]) -> list[str]:
        self.c.crash(int(args[0]), lose_ready="lose-ready" in args)
        return ["ok"]

    def do_restart(self, args: list[str], options: dict[str, str]) -> list[str]:
        self.c.restart(int(args[0]))
        return self.do_status([args[0]], {})

    def do_compact(self, args: list[str], options: dict[str, str]) -> list[str]:
        node_id = int(args[0])
        node = self.c[node_id]
        node.compact(node.applied, self.c.snapshot_data(node_id))
        self.c.drain(node_id)
        return [f"base={_id(node.base)}"]

    def do_isolate(self, args: list[str], options: dict[str, str]) -> list[str]:
        self.c.isolate(int(args[0]))
        return ["ok"]

    def do_partition(self, args: list[str], options: dict[str, str]) -> list[str]:
        self.c.partition(*[_ids(group) for group in args])
        return ["ok"]

    def do_heal(self, args: list[str], options: dict[str, str]) -> list[str]:
        self.c.heal()
        return ["ok"]

    def do_status(self, args: list[str], options: dict[str, str]) -> list[str]:
        targets = [int(a) for a in args] or self.c.everyone
        lines = []
        for node_id in targets:
            node = self.c.nodes.get(node_id)
            if node is None:
                lines.append(f"{node_id}: down")
                continue
            config = node.config
            lines.append(
                f"{node_id}: {node.role} term={node.term} vote={node.vote}"
                f" head={_id(node.head)} commit={_id(node.commit)}"
                f" applied={_id(node.applied)} base={_id(node.base)}"
                f" voters={','.join(map(str, config.voters))}"
                f" learners={','.join(map(str, config.learners))}"
            )
        return lines

    def do_chain(self, args: list[str], options: dict[str, str]) -> list[str]:
        node = self.c[int(args[0])]
        lines = [f"{_id(node.base)} base"]
        for block_id in sorted(node.stored_ids(), key=lambda i: (i.height, i.term)):
            block = node.get_block(block_id)
            assert block is not None and block.parent is not None
            where = "path" if node.block_at(block_id.height) == block_id else "dead"
            marks = [where]
            if block_id == node.head:
                marks.append("head")
            if block_id == node.commit:
                marks.append("commit")
            lines.append(
                f"{_id(block_id)} {block.kind.name} parent={_id(block.parent)} {' '.join(marks)}"
            )
        return lines

    def do_pruned(self, args: list[str], options: dict[str, str]) -> list[str]:
        pruned = sorted(self.c.pruned(int(args[0])), key=lambda i: (i.height, i.term))
        return [" ".join(_id(i) for i in pruned) or "(none)"]


def run_file(path: Path, rewrite: bool) -> None:
    directives = parse(path.read_text())
    runner = Runner()
    outputs = []
    for directive in directives:
        try:
            outputs.append(runner.run(directive.command))
        except AssertionError as error:
            raise AssertionError(f"{path.name}: {directive.command!r} failed: {error}") from error
    if rewrite:
        path.write_text(render(directives, outputs))
        return
    for directive, output in zip(directives, outputs, strict=True):
        if output != directive.expected:
            expected = "\n".join(directive.expected)
            actual = "\n".join(output)
            raise AssertionError(
                f"{path.name}: {directive.command!r}\n--- expected\n{expected}\n"
                f"--- actual\n{actual}\n(run with --rewrite to accept)"
            )
