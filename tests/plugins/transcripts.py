"""Builders of Claude Code transcript lines, in the shapes real files have (facts.md section 4).

Import the builders (``from tests.plugins.transcripts import user, assistant, ...``) or use the
``transcript`` fixture, which writes sessions into a Claude folder::

    def test_x(claude_home, transcript):
        path = transcript.session(claude_home, "/home/dev/app", [user("hi"), assistant("hello")])
"""

from __future__ import annotations

import itertools
import json
import uuid as _uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memd.layout import sanitize

_counter = itertools.count()
BASE_TS = "2026-03-05T10:00:00.000Z"


def _ts(i: int | None = None) -> str:
    n = next(_counter) if i is None else i
    return f"2026-03-05T10:{(n // 60) % 60:02d}:{n % 60:02d}.000Z"


def _common(kind: str, cwd: str, session: str, ts: str | None, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "parentUuid": None, "isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": session,
        "version": "2.1.37", "gitBranch": "main", "type": kind, "uuid": str(_uuid.uuid4()),
        "timestamp": ts or _ts(),
    }
    rec.update(extra)
    return rec


def user(text: str | list[Any], *, cwd: str = "/home/dev/app", session: str = "s", ts: str | None = None,
         **extra: Any) -> dict[str, Any]:
    return _common("user", cwd, session, ts, message={"role": "user", "content": text}, **extra)


def tool_result(tool_use_id: str, content: str | list[Any], *, is_error: bool = False, cwd: str = "/home/dev/app",
                session: str = "s", ts: str | None = None) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error}
    return _common("user", cwd, session, ts, message={"role": "user", "content": [block]},
                   toolUseResult=content if isinstance(content, str) else {"content": content})


def assistant(*blocks: str | dict[str, Any], message_id: str | None = None, cwd: str = "/home/dev/app",
              session: str = "s", ts: str | None = None, **extra: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
    msg = {"id": message_id or f"msg_{_uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
           "model": "claude-sonnet-4-5", "content": content, "stop_reason": None,
           "usage": {"input_tokens": 10, "output_tokens": 5}}
    return _common("assistant", cwd, session, ts, message=msg, requestId="req_1", **extra)


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id or f"toolu_{_uuid.uuid4().hex[:20]}", "name": name, "input": input}


def thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": "EtECCkYICxgCKkAP5muZ"}


def system(subtype: str, *, cwd: str = "/home/dev/app", session: str = "s", ts: str | None = None,
           **extra: Any) -> dict[str, Any]:
    return _common("system", cwd, session, ts, subtype=subtype, **extra)


def lines(records: Sequence[dict[str, Any] | str | bytes]) -> bytes:
    """JSONL bytes: dicts are dumped; str/bytes are written verbatim (malformed lines)."""
    out = bytearray()
    for r in records:
        if isinstance(r, dict):
            out += json.dumps(r, separators=(",", ":")).encode()
        elif isinstance(r, str):
            out += r.encode()
        else:
            out += r
        out += b"\n"
    return bytes(out)


class TranscriptWriter:
    def session(self, claude: Path, cwd: str, records: Sequence[dict[str, Any] | str | bytes],
                session_id: str | None = None, *, folder: str | None = None) -> Path:
        sid = session_id or str(_uuid.uuid4())
        d = claude / "projects" / (folder or sanitize(cwd))
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{sid}.jsonl"
        p.write_bytes(lines(records))
        return p

    def append(self, path: Path, records: Sequence[dict[str, Any] | str | bytes]) -> None:
        with open(path, "ab") as f:
            f.write(lines(records))


@pytest.fixture
def transcript() -> TranscriptWriter:
    return TranscriptWriter()
