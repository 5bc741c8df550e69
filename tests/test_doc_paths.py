"""Every path and section the repository's docs and docstrings cite exists.

A doc that names a file is a map; after files move (packages split into rooms, a module
renamed) a stale name sends the reader nowhere, and code that cites a section of a doc for its
reason cites nothing once the section is renumbered. So the docs (README.md, DESIGN.md,
docs/, bench/) and the Python of every top-level package are read for paths from the
repository's root (`zlog/...`, `tests/...`, `docs/...`, ...) and for sections cited as
`<doc>.md §N`, and each must exist. Only what the repository cannot hold is exempt: the
benchmarks' output (ignored by git) and a placeholder in a naming rule. A package the docs
describe before it is built is named in PLANNED, which fails once the package exists, so the
exemption goes when the package comes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("zlog", "zlog_testbed", "zlog_jepsen", "tests", "bench", "docs", "systemd",
             "examples")
# "@" for systemd's template units (systemd/zlog@.service).
PATH = re.compile(rf"(?<![\w/.\-])((?:{'|'.join(TOP_LEVEL)})/[\w./\-@]*\w)")
SECTION_CITED = re.compile(r"\b((?:docs/)?[\w-]+\.md)[,:]?\s+§\s?(\d+(?:\.\d+)*)")
SECTION_HEADING = re.compile(r"^(?:#+\s+|\*\*)(\d+(?:\.\d+)*)[.\s]", re.MULTILINE)
OUTPUT = ("bench/results",)  # written by `make bench`, ignored by git
PLACEHOLDER = "NNNN"  # docs/adr/NNNN-title.md: how a new record is named
PLANNED: dict[str, str] = {}  # path -> what it will be, for a package the docs describe first


def _sources() -> Iterator[Path]:
    yield REPOSITORY / "README.md"
    yield REPOSITORY / "DESIGN.md"
    yield from sorted((REPOSITORY / "docs").rglob("*.md"))
    yield from sorted((REPOSITORY / "bench").rglob("*.md"))
    for top in TOP_LEVEL:
        yield from sorted(path for path in (REPOSITORY / top).rglob("*.py")
                          if "__pycache__" not in path.parts)


def _where(source: Path, text: str, at: int) -> str:
    return f"{source.relative_to(REPOSITORY)}:{text.count(chr(10), 0, at) + 1}"


@cache
def _sections(doc: Path) -> frozenset[str]:
    return frozenset(SECTION_HEADING.findall(doc.read_text()))


def test_every_path_cited_exists() -> None:
    dangling: list[str] = []
    for source in _sources():
        text = source.read_text()
        for match in PATH.finditer(text):
            path = match.group(1).rstrip(".")
            if (path.startswith(OUTPUT) or PLACEHOLDER in path or path in PLANNED
                    or (REPOSITORY / path).exists()):
                continue
            dangling.append(f"{_where(source, text, match.start())}: {path}")
    assert not dangling, "paths that do not exist:\n" + "\n".join(dangling)


def test_planned_packages_are_not_built_yet() -> None:
    """Once a planned package lands, its exemption goes and the docs describe it as built."""
    built = [f"{path}: {what}" for path, what in PLANNED.items() if (REPOSITORY / path).exists()]
    assert not built, "built, so no longer planned: " + "; ".join(built)


def test_every_section_cited_exists() -> None:
    dangling: list[str] = []
    for source in _sources():
        text = source.read_text()
        for match in SECTION_CITED.finditer(text):
            name, section = match.groups()
            doc = next((d for d in (REPOSITORY / name, REPOSITORY / "docs" / name) if d.is_file()),
                       None)
            if doc is None:
                dangling.append(f"{_where(source, text, match.start())}: no document {name}")
            elif section not in _sections(doc):
                dangling.append(f"{_where(source, text, match.start())}: {name} has no §{section}")
    assert not dangling, "sections that do not exist:\n" + "\n".join(dangling)
