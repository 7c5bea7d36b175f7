"""Transcripts as Claude Code 2.1.328 writes them (facts.md section 4): a memory write a hook denied
is not the session writing memory, and the record types new in 2.1.328 are never turns."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from memd import layout
from memd.config import Config
from memd.state import StateStore
from memd.transcripts import records as rec
from memd.transcripts.render import render
from memd.transcripts.scan import read_span, scan_project
from memd.transcripts.sessions import Writes
from tests.plugins.transcripts import TranscriptWriter, assistant, tool_result, tool_use, user

CFG = Config()
SID = "21111111-2222-4333-8444-555555555555"
DENIAL = "PreToolUse:Write hook error: memd: this memory write holds a secret (aws-access-key); not saved"


def _denied_write(mem: Path, ts: str = "2026-03-05T12:02:00Z") -> list[dict[str, Any]]:
    use = tool_use("Write", {"file_path": str(mem / "creds.md"), "content": "AKIA..."}, id="toolu_denied1")
    return [assistant(use, ts=ts), tool_result("toolu_denied1", DENIAL, is_error=True, ts=ts)]


def _new_records(mem: Path) -> list[dict[str, Any]]:
    """Records shaped like those 2.1.328 wrote in the oracle runs (facts.md section 4)."""
    write = {"type": "tool_use", "id": "toolu_blob1", "name": "Write",
             "input": {"file_path": str(mem / "MEMORY.md"), "content": "- [A](a.md)"}}
    common = {"parentUuid": None, "isSidechain": False, "userType": "external", "entrypoint": "sdk-cli",
              "cwd": "/nowhere/app", "sessionId": SID, "timestamp": "2026-03-05T12:00:00Z", "uuid": "u-att"}
    return [
        {"type": "atis-latch", "atis": "x", "sessionId": SID},
        {"type": "api-request-shape", "sessionId": SID, "shapeHash": "h", "timestamp": "2026-03-05T12:00:00Z",
         "version": "2.1.328", "shape": {"system": [], "tools": []}},
        {"type": "api-request-blob", "sessionId": SID, "hash": "b1",
         "message": {"role": "user", "content": [{"type": "text", "text":
                     "<system-reminder>\nContents of /m/MEMORY.md (user's auto-memory, persists across "
                     "conversations):\nBLOB-USER-TEXT</system-reminder>"}]}},
        {"type": "api-request-blob", "sessionId": SID, "hash": "b2",
         "message": {"role": "system", "content": [{"type": "text", "text": "BLOB-SYSTEM-TEXT"}]}},
        {"type": "api-request-blob", "sessionId": SID, "hash": "b3",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "BLOB-ASSISTANT-TEXT"}, write]}},
        {"type": "api-request", "sessionId": SID, "id": "r1", "timestamp": "2026-03-05T12:00:00Z",
         "version": "2.1.328", "querySource": "repl_main_thread", "shapeHash": "h", "params": {}, "keep": 0,
         "tail": [{"role": "user", "content": "BLOB-TAIL-TEXT"}], "cacheControl": {}},
        {"type": "tools-used", "tools": ["Write"], "sessionId": SID},
        {"type": "cost-state", "sessionId": SID, "totalCostUSD": 0.1, "modelUsage": {}},
        *({**common, "type": "attachment", "uuid": f"u-{kind}",
           "attachment": {"type": kind, "content": f"ATTACHMENT-{kind}", "hookName": "PostToolUse:Write"},
           "rendered": f"RENDERED-{kind}", "renderedRole": "user"}
          for kind in ("instructions", "hook_additional_context", "hook_success", "prompt_snapshot")),
        {"type": "some-type-from-2.1.400", "message": {"role": "user", "content": "FUTURE-TEXT"}},
        {"type": "attachment", "attachment": "not even a dict", "message": 3},
    ]


def test_denied_memory_write_is_not_a_memory_write_in_a_span(claude_home: Path,
                                                              transcript: TranscriptWriter) -> None:
    mem = claude_home / "projects" / "-nowhere-app" / "memory"
    p = transcript.session(claude_home, "/nowhere/app", [user("remember my key"), *_denied_write(mem),
                                                         assistant("it was refused")], SID)
    span = read_span(p, 0, CFG, memory_dir=mem, project_name="-nowhere-app")
    assert not span.wrote_memory
    ok = tool_use("Write", {"file_path": str(mem / "user.md"), "content": "x"}, id="toolu_ok1")
    transcript.append(p, [assistant(ok), tool_result("toolu_ok1", "File created successfully")])
    assert read_span(p, 0, CFG, memory_dir=mem, project_name="-nowhere-app").wrote_memory


def test_any_error_result_cancels_that_write_only(tmp_path: Path) -> None:
    mem = tmp_path / "memory"
    w = Writes()
    a = tool_use("Edit", {"file_path": str(mem / "a.md")}, id="toolu_a")
    b = tool_use("Edit", {"file_path": str(mem / "b.md")}, id="toolu_b")
    w.feed(assistant(a, b))
    w.feed(tool_result("toolu_a", "String to replace not found in file.", is_error=True))
    assert [fp for _, fp in w.effective()] == [str(mem / "b.md")]
    # a result not yet written (the span ends between the lines): the write stands
    w2 = Writes()
    w2.feed(assistant(a))
    assert w2.effective()
    # an error for a sidechain's tool use does not cancel the main agent's
    w2.feed(tool_result("toolu_a", "denied", is_error=True) | {"isSidechain": True})
    assert w2.effective()


def test_scan_does_not_count_a_denied_memory_write(claude_home: Path, transcript: TranscriptWriter,
                                                  tmp_path: Path) -> None:
    mem = claude_home / "projects" / "-nowhere-app" / "memory"
    p = transcript.session(claude_home, "/nowhere/app", [user("hi"), *_denied_write(mem)], SID)
    proj = layout.project_for_folder(claude_home, p.parent)
    with StateStore.open(tmp_path) as store:
        assert scan_project(proj, store, CFG, now=time.time()).sessions[0].memory_write_at is None


def test_new_record_types_are_never_turns(claude_home: Path, transcript: TranscriptWriter) -> None:
    mem = claude_home / "projects" / "-nowhere-app" / "memory"
    p = transcript.session(claude_home, "/nowhere/app",
                           [user("real words"), *_new_records(mem), assistant("real reply")], SID)
    span = read_span(p, 0, CFG, memory_dir=mem, project_name="-nowhere-app")
    assert span.bad_lines == 0 and not span.wrote_memory  # the blob's copied Write is not the agent's
    kinds = [type(r).__name__ for r in span.records]
    assert kinds == ["UserTurn", "AssistantTurn"]
    text = render(span.records)
    assert "real words" in text and "real reply" in text
    for marker in ("BLOB-", "ATTACHMENT-", "RENDERED-", "FUTURE-TEXT"):
        assert marker not in text


def test_new_record_types_parse_alone_to_nothing() -> None:
    recs = rec.parse(enumerate(_new_records(Path("/m"))))
    assert recs == []


def test_scan_ignores_the_copied_write_in_a_blob(claude_home: Path, transcript: TranscriptWriter,
                                                 tmp_path: Path) -> None:
    mem = claude_home / "projects" / "-nowhere-app" / "memory"
    p = transcript.session(claude_home, "/nowhere/app", [user("hi"), *_new_records(mem)], SID)
    proj = layout.project_for_folder(claude_home, p.parent)
    with StateStore.open(tmp_path) as store:
        s = scan_project(proj, store, CFG, now=time.time()).sessions[0]
        assert s.memory_write_at is None and s.bad_lines == 0
