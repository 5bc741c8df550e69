"""docs/architecture.md §4.2 states the import rules that tests/test_layering.py enforces.

The page is what a reader trusts before changing code, and the layering test is what the code
is held to; a rule changed in one and not the other would mislead the reader or go unchecked.
So the two tables of §4.2 are read here, cell by cell, and compared with the rules' one home,
the data of tests/test_layering.py. A cell lists backticked names separated by commas,
"nothing", or "`x` only from `path`" for an import one module alone may make; clauses are
separated by semicolons. Anything else in a cell fails, so that a table cannot state a rule
this test does not compare.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layering import ALLOWED, ONLY_FROM, REPOSITORY_ALLOWED, SHARED

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
SECTION = "### 4.2 Who may import whom"
BACKTICKED = re.compile(r"`([^`]+)`")

Table = list[list[str]]
Imports = dict[str, set[str]]


def _level(heading: str) -> int:
    return len(heading) - len(heading.lstrip("#"))


def _section(text: str, heading: str) -> str:
    """The lines under `heading`, up to the next heading of the same or a higher level."""
    lines = text.splitlines()
    assert heading in lines, f"docs/architecture.md has no heading {heading!r}"
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines))
                if lines[i].startswith("#") and _level(lines[i]) <= _level(heading)), len(lines))
    return "\n".join(lines[start:end])


def _tables(section: str) -> list[Table]:
    """Each Markdown table of the section, as rows of stripped cells, the rule line dropped."""
    tables: list[Table] = []
    current: Table = []
    for line in [*section.splitlines(), ""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def _table(tables: list[Table], first_header: str) -> Table:
    found = [table for table in tables if table[0][0] == first_header]
    assert len(found) == 1, (f"docs/architecture.md §4.2 needs one table whose first column is "
                             f"{first_header!r}; found {len(found)}")
    return found[0]


def _names(text: str) -> list[str]:
    names = BACKTICKED.findall(text)
    rest = re.sub(r",|\band\b", "", BACKTICKED.sub("", text)).strip()
    assert names and not rest, f"docs/architecture.md §4.2: cannot read {text!r} as names"
    return names


def _read_rows(table: Table, prefix: str) -> tuple[Imports, dict[tuple[str, str], str]]:
    """Each row's importers -> what they may import (`prefix` + name), and the imports that
    one module alone may make, (importer, import) -> that module's path under `prefix`."""
    allowed: Imports = {}
    only_from: dict[tuple[str, str], str] = {}
    for row in table[1:]:
        assert len(row) == 2, f"docs/architecture.md §4.2: a row needs two cells: {row}"
        importers = _names(row[0])
        imports: set[str] = set()
        for clause in (part.strip() for part in row[1].split(";")):
            if clause == "nothing":
                continue
            restricted, _, only = clause.partition(" only from ")
            names = {prefix + name for name in _names(restricted)}
            imports |= names
            if only:
                [path] = _names(only)
                only_from.update({(importer, name): f"zlog/{path}"
                                  for importer in importers for name in names})
        for importer in importers:
            assert importer not in allowed, f"docs/architecture.md §4.2: two rows for {importer}"
            allowed[importer] = imports
    return allowed, only_from


def _differences(doc: Imports, enforced: Imports, what: str) -> list[str]:
    differences: list[str] = []
    for key in sorted(doc.keys() | enforced.keys()):
        if key not in enforced:
            differences.append(f"the doc has a row for {what} `{key}`; the layering test none")
        elif key not in doc:
            differences.append(f"the layering test has a rule for {what} `{key}`; the doc no row")
        elif doc[key] != enforced[key]:
            differences.append(
                f"{what} `{key}`: the doc lets it import {sorted(doc[key]) or 'nothing'}, the "
                f"layering test {sorted(enforced[key]) or 'nothing'}")
    return differences


def _section_tables() -> list[Table]:
    return _tables(_section(DOC.read_text(), SECTION))


def test_the_package_table_states_the_enforced_rules() -> None:
    table = _table(_section_tables(), "package")
    shared = {f"zlog.{name}" for name in BACKTICKED.findall(table[0][1])}
    allowed, only_from = _read_rows(table, "zlog.")
    differences = _differences(allowed, ALLOWED, "package")
    if shared != SHARED:
        differences.append(f"shared modules: the doc names {sorted(shared)}, the layering test "
                           f"{sorted(SHARED)}")
    if only_from != ONLY_FROM:
        differences.append(f"imports from one module only: the doc says {only_from}, the "
                           f"layering test {ONLY_FROM}")
    assert not differences, ("docs/architecture.md §4.2 and tests/test_layering.py differ:\n"
                             + "\n".join(differences))


def test_the_repository_table_states_the_enforced_rules() -> None:
    allowed, only_from = _read_rows(_table(_section_tables(), "directory"), "")
    differences = _differences(allowed, REPOSITORY_ALLOWED, "directory")
    if only_from:
        differences.append(f"the layering test restricts no directory to one module: {only_from}")
    assert not differences, ("docs/architecture.md §4.2 and tests/test_layering.py differ:\n"
                             + "\n".join(differences))
