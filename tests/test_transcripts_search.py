"""The bounded transcript search (``memd.transcripts.search``) the dream's tool reads through."""

from __future__ import annotations

import json
import os
from pathlib import Path

from memd.transcripts.search import search


def rec(type_: str, text: str, session: str = "abcdef0123", **kw: object) -> str:
    return json.dumps({"type": type_, "sessionId": session, "timestamp": "2026-03-01T09:30:00Z",
                       "message": {"role": type_, "content": text}, **kw}) + "\n"


def test_bounds_lines_and_bytes(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_text(rec("user", "x" * 5000 + " needle in a huge line")  # over max_line_bytes: streamed past
                 + rec("user", "the needle is here")
                 + rec("user", "needle but meta", isMeta=True)
                 + rec("system", "needle in a system line")
                 + rec("assistant", "Ünïcode NEEDLE too")
                 + '{"type": "user", "message": {"content": "needle cut mid-wri')  # no newline: never read
    found, cut = search([a], ["needle"], limit=10, max_bytes=1 << 20, max_line_bytes=2000)
    assert [(m.role, m.snippet) for m in found] == [("user", "the needle is here"),
                                                    ("assistant", "Ünïcode NEEDLE too")]
    assert not cut and found[0].session == "abcdef01" and found[0].when == "2026-03-01 09:30"
    assert search([a], ["ünïcode"], limit=10, max_bytes=1 << 20, max_line_bytes=2000)[0][0].role == "assistant"
    # the byte bound stops the search and says so; newest file first
    b = tmp_path / "b.jsonl"
    b.write_text("".join(rec("user", f"needle {i}", session="bbbbbbbbbb") for i in range(100)))
    os.utime(a, (1, 1))
    found, cut = search([a, b], ["needle"], limit=500, max_bytes=1000, max_line_bytes=2000)
    assert cut and 0 < len(found) < 100 and all(m.session == "bbbbbbbb" for m in found)


def test_snippets_are_redacted(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_text(rec("user", "the db is postgres://app:Sup3rS3cret@db.internal:5432/app"))
    found, _ = search([a], ["postgres"], limit=5, max_bytes=1 << 20, max_line_bytes=2000)
    assert found and "Sup3rS3cret" not in found[0].snippet
