"""Transcript lines as typed values: grouping, every record kind, unknown things skipped."""

from __future__ import annotations

import json
from pathlib import Path

from memd.transcripts import records as rec
from memd.transcripts.reader import read_all
from tests.plugins.transcripts import assistant, system, thinking, tool_result, tool_use, user


def _parse(items: list[dict[str, object]]) -> list[rec.Record]:
    return rec.parse(list(enumerate(items)))


def test_assistant_lines_group_by_message_id() -> None:
    a1 = assistant(thinking("let me look"), message_id="m1", ts="2026-03-05T10:00:00Z")
    a2 = assistant(tool_use("Bash", {"command": "ls"}, id="t1"), message_id="m1")
    r1 = tool_result("t1", "a\nb")
    a3 = assistant("done", message_id="m1")
    a3dup = dict(a3)  # the same line twice (resumes write history again)
    out = _parse([user("hi"), a1, a2, r1, a3, a3dup, assistant("next", message_id="m2")])
    kinds = [type(r).__name__ for r in out]
    assert kinds == ["UserTurn", "AssistantTurn", "UserTurn", "AssistantTurn"]
    turn = out[1]
    assert isinstance(turn, rec.AssistantTurn)
    assert [type(b).__name__ for b in turn.blocks] == ["Thinking", "ToolUse", "Text"]
    assert turn.text == "done" and turn.tool_uses[0].input == {"command": "ls"}
    assert turn.timestamp == 1772704800.0 and turn.offset == 1
    res = out[2]
    assert isinstance(res, rec.UserTurn) and res.tool_results[0].text == "a\nb" and res.text == ""


def test_user_content_shapes_and_images() -> None:
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR" * 100}}
    out = _parse([
        user([{"type": "text", "text": "look"}, img]),
        user("meta text", isMeta=True),
        user([img]),
        tool_result("t", [{"type": "text", "text": "out"}, img], is_error=True),
        user([]),  # nothing in it: dropped
    ])
    assert len(out) == 4
    u0, u1, u2, u3 = out
    assert isinstance(u0, rec.UserTurn) and u0.text == "look" and u0.images == 1
    assert isinstance(u1, rec.UserTurn) and u1.is_meta
    assert isinstance(u2, rec.UserTurn) and u2.images == 1 and u2.text == ""
    assert isinstance(u3, rec.UserTurn) and u3.tool_results[0].is_error and u3.tool_results[0].images == 1
    assert "iVBOR" not in repr(out)  # base64 never kept


def test_compaction_errors_and_summaries() -> None:
    out = _parse([
        system("compact_boundary", content="Conversation compacted",
               compactMetadata={"trigger": "auto", "preTokens": 167471}),
        user("This session is being continued...", isCompactSummary=True, isVisibleInTranscriptOnly=True),
        system("microcompact_boundary", microcompactMetadata={"trigger": "auto", "preTokens": 60888}),
        system("api_error", level="error", retryAttempt=1, maxRetries=10,
               error={"status": 529, "error": {"type": "error", "error": {"type": "overloaded_error",
                                                                           "message": "Overloaded"}}}),
        assistant("API Error: 500 boom", isApiErrorMessage=True),
        {"type": "summary", "summary": "Fix the flaky test", "leafUuid": "u"},
        system("turn_duration", durationMs=5),
        system("stop_hook_summary"),
    ])
    assert [type(r).__name__ for r in out] == ["CompactBoundary", "CompactSummary", "CompactBoundary",
                                               "ApiError", "ApiError", "Summary"]
    b, s, m, e, e2, t = out
    assert isinstance(b, rec.CompactBoundary) and b.pre_tokens == 167471 and b.trigger == "auto" and not b.micro
    assert isinstance(s, rec.CompactSummary) and s.text.startswith("This session")
    assert isinstance(m, rec.CompactBoundary) and m.micro
    assert isinstance(e, rec.ApiError) and (e.status, e.message, e.retry_attempt) == (529, "Overloaded", 1)
    assert isinstance(e2, rec.ApiError) and e2.message == "API Error: 500 boom"
    assert isinstance(t, rec.Summary) and t.text == "Fix the flaky test"


def test_unknown_types_fields_and_bad_shapes_are_skipped() -> None:
    weird: list[dict[str, object]] = [
        {"type": "progress", "data": {"x": 1}},
        {"type": "file-history-snapshot", "snapshot": {}},
        {"type": "brand-new-kind", "anything": [1, 2]},
        {"silly": "this"},
        {"type": "user", "message": "error"},
        {"type": "user", "message": {"role": "user", "contenst": []}},
        {"type": "assistant", "message": {"content": [None, 3, {"type": "new_block"}, {"type": "tool_use"}]}},
        {"type": "user", "message": {"content": ["wow error", 5]}},
        {"type": "system", "subtype": "api_error", "error": "plain"},
        {"type": "system", "subtype": "compact_boundary", "compactMetadata": "x"},
        {"type": "user", "timestamp": "not a time", "message": {"content": "ok"}, "newField": {"deep": 1}},
    ]
    out = _parse(weird)
    assert [type(r).__name__ for r in out] == ["AssistantTurn", "UserTurn", "ApiError", "CompactBoundary",
                                               "UserTurn"]
    a = out[0]
    assert isinstance(a, rec.AssistantTurn) and a.blocks == [rec.ToolUse("", "", {})]
    assert isinstance(out[-1], rec.UserTurn) and out[-1].timestamp is None


def test_long_texts_are_cut_when_parsed() -> None:
    out = rec.parse([(0, tool_result("t", "x" * 100_000)), (1, assistant("y" * 50_000))], text_cap=1000)
    u, a = out
    assert isinstance(u, rec.UserTurn) and len(u.tool_results[0].text) == 1000 and u.tool_results[0].length == 100_000
    assert isinstance(a, rec.AssistantTurn)
    blk = a.blocks[0]
    assert isinstance(blk, rec.Text) and len(blk.text) == 1000 and blk.length == 50_000


def test_parse_time() -> None:
    assert rec.parse_time("2026-02-08T09:18:21.441Z") == 1770542301.441
    assert rec.parse_time("2026-02-08T09:18:21") == 1770542301.0
    assert rec.parse_time("yesterday") is None and rec.parse_time(5) is None


def test_every_real_session_parses(claude_data: Path) -> None:
    n = 0
    for f in sorted((claude_data / "projects").rglob("*.jsonl")):
        items, _ = read_all(f)
        out = rec.parse(items)
        n += len(out)
        for r in out:
            if isinstance(r, rec.AssistantTurn):
                assert r.message_id
        json.dumps([type(r).__name__ for r in out])
    assert n > 2000


def test_tool_inputs_and_results_are_cut_separately_from_words() -> None:
    big = {"file_path": "/m/x.md", "content": "z" * 100_000, "edits": [{"old": "a" * 50, "new": "b"}] * 2000}
    out = rec.parse([(0, user("w" * 5000)), (1, assistant(tool_use("Write", big))), (2, tool_result("t", "r" * 9000))],
                    text_cap=10_000, result_cap=1000)
    u, a, r = out
    assert isinstance(u, rec.UserTurn) and len(u.text) == 5000
    assert isinstance(a, rec.AssistantTurn)
    use = a.tool_uses[0]
    assert use.file_path == "/m/x.md" and len(use.input["content"]) == 1000
    assert use.input["edits"] == "[list of 2000 items]"
    assert isinstance(r, rec.UserTurn) and len(r.tool_results[0].text) == 1000 and r.tool_results[0].length == 9000
