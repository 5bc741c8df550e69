"""docs/operations.md's configuration reference is the one zlog/broker/config_reference.py
renders from BrokerConfig: a key added, renamed, or given another default or description
fails here until the doc is regenerated
(`python -m zlog.broker.config_reference docs/operations.md`)."""

from __future__ import annotations

from pathlib import Path

from zlog.broker.config import KEYS, env_name, flag_name
from zlog.broker.config_reference import BEGIN, END, render, rewritten

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def test_the_reference_in_the_doc_is_the_generated_one() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert rewritten(text) == text, (
        "docs/operations.md's configuration reference is stale: run "
        "`python -m zlog.broker.config_reference docs/operations.md`")


def test_the_reference_names_every_key_in_its_three_spellings() -> None:
    rows = [line for line in render().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(KEYS)
    for key, row in zip(KEYS, rows, strict=True):
        assert f"`{env_name(key)}`" in row and f"`{flag_name(key)}`" in row
