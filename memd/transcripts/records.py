"""Transcript lines as typed values (facts.md section 4).

Only what memd uses is kept: user and assistant turns (assistant lines grouped by
``message.id``), tool uses and results, compaction summaries and boundaries, api errors and the
session's title summaries. Unknown record types, unknown block types and unknown fields are
skipped without error: Claude Code adds new ones with every release. Records come from an
untrusted file, so every field is checked for its type before use.

Long texts are cut when parsed (``text_cap``), keeping their full length, so a span of a session
with megabyte tool results stays small in memory; rendering cuts much shorter anyway.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

TEXT_CAP = 65_536


@dataclass
class Text:
    text: str
    length: int  # full length before any cut


@dataclass
class Thinking:
    text: str
    length: int


@dataclass
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]

    @property
    def file_path(self) -> str | None:
        """The file a file-writing tool aims at (Write/Edit/MultiEdit/NotebookEdit)."""
        for k in ("file_path", "notebook_path", "path"):
            v = self.input.get(k)
            if isinstance(v, str) and v:
                return v
        return None


@dataclass
class ToolResult:
    tool_use_id: str
    text: str  # text parts joined; images dropped
    length: int
    is_error: bool
    images: int = 0


Block = Text | Thinking | ToolUse


@dataclass
class UserTurn:
    offset: int
    uuid: str
    timestamp: float | None
    text: str  # the user's words (string content or text blocks joined)
    length: int
    tool_results: list[ToolResult] = field(default_factory=list)
    images: int = 0
    is_meta: bool = False  # injected by Claude Code (skill text, caveats), not typed by the user
    sidechain: bool = False
    cwd: str | None = None
    tail: str = ""  # the end of a text cut when parsed (``text`` is then its start): a paste's last words


@dataclass
class AssistantTurn:
    offset: int  # offset of the first line of the reply
    message_id: str
    timestamp: float | None
    model: str
    blocks: list[Block] = field(default_factory=list)
    sidechain: bool = False
    cwd: str | None = None
    line_uuids: set[str] = field(default_factory=set, repr=False)

    @property
    def tool_uses(self) -> list[ToolUse]:
        return [b for b in self.blocks if isinstance(b, ToolUse)]

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks if isinstance(b, Text))


@dataclass
class CompactSummary:
    """The summary a compaction left in place of the conversation before it."""

    offset: int
    timestamp: float | None
    text: str
    length: int


@dataclass
class CompactBoundary:
    offset: int
    timestamp: float | None
    trigger: str
    pre_tokens: int | None
    micro: bool = False


@dataclass
class ApiError:
    offset: int
    timestamp: float | None
    status: int | None
    message: str
    retry_attempt: int | None = None
    max_retries: int | None = None


@dataclass
class Summary:
    """A session title summary (``type: summary``)."""

    offset: int
    text: str
    leaf_uuid: str


Record = UserTurn | AssistantTurn | CompactSummary | CompactBoundary | ApiError | Summary


def parse_time(value: Any) -> float | None:
    """An ISO-8601 timestamp (``2026-02-08T09:18:21.441Z``) as epoch seconds; None when absent or bad."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:  # Claude Code writes UTC ("Z"); a naive time is taken as UTC too
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _cut(text: str, cap: int) -> tuple[str, int]:
    n = len(text)
    return (text if n <= cap else text[:cap]), n


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _result_text(content: Any, cap: int) -> tuple[str, int, int]:
    """(text, full length, images) of a tool_result's content: a string or a list of blocks."""
    if isinstance(content, str):
        t, n = _cut(content, cap)
        return t, n, 0
    parts: list[str] = []
    images = 0
    if isinstance(content, list):
        for b in content:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text":
                parts.append(_str(b.get("text")))
            elif kind == "image":
                images += 1
    text = "\n".join(parts)
    t, n = _cut(text, cap)
    return t, n, images


def _trim_input(inp: dict[str, Any], cap: int) -> dict[str, Any]:
    """A tool's input with long strings cut (a Write of a megabyte file keeps its path, not its body)."""
    out: dict[str, Any] = {}
    for k, v in inp.items():
        if isinstance(v, str) and len(v) > cap:
            v = v[:cap]
        elif isinstance(v, (list, dict)) and len(repr(v)) > 4 * cap:
            v = f"[{type(v).__name__} of {len(v)} items]"
        out[k] = v
    return out


class Parser:
    """Turns ``(offset, record dict)`` pairs into typed records, grouping assistant lines."""

    def __init__(self, *, text_cap: int = TEXT_CAP, result_cap: int | None = None,
                 include_sidechain: bool = True) -> None:
        self.text_cap = text_cap  # user and assistant words
        self.result_cap = text_cap if result_cap is None else result_cap  # tool results, thinking, tool inputs
        self.include_sidechain = include_sidechain
        self.out: list[Record] = []
        self._turns: dict[str, AssistantTurn] = {}
        self.cwd: str | None = None  # the first cwd seen
        self.session_id: str | None = None
        self.first_at: float | None = None
        self.last_at: float | None = None

    def feed_all(self, items: Iterable[tuple[int, dict[str, Any]]]) -> list[Record]:
        for off, obj in items:
            self.feed(off, obj)
        return self.out

    def feed(self, off: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        ts = parse_time(obj.get("timestamp"))
        if ts is not None:
            if self.first_at is None or ts < self.first_at:
                self.first_at = ts
            if self.last_at is None or ts > self.last_at:
                self.last_at = ts
        cwd = obj.get("cwd")
        if self.cwd is None and isinstance(cwd, str) and cwd:
            self.cwd = cwd
        sid = obj.get("sessionId")
        if self.session_id is None and isinstance(sid, str) and sid:
            self.session_id = sid
        sidechain = obj.get("isSidechain") is True
        if sidechain and not self.include_sidechain:
            return
        if kind == "user":
            self._user(off, obj, ts, sidechain)
        elif kind == "assistant":
            self._assistant(off, obj, ts, sidechain)
        elif kind == "system":
            self._system(off, obj, ts)
        elif kind == "summary":
            text = _str(obj.get("summary"))
            if text:
                self.out.append(Summary(off, text[: self.text_cap], _str(obj.get("leafUuid"))))

    def _user(self, off: int, obj: dict[str, Any], ts: float | None, sidechain: bool) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return
        content = msg.get("content")
        cwd = obj.get("cwd") if isinstance(obj.get("cwd"), str) else None
        if obj.get("isCompactSummary") is True:
            text = content if isinstance(content, str) else _result_text(content, 1 << 62)[0]
            t, n = _cut(text, self.text_cap)
            self.out.append(CompactSummary(off, ts, t, n))
            return
        texts: list[str] = []
        results: list[ToolResult] = []
        images = 0
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for b in content:
                if isinstance(b, str):
                    texts.append(b)
                    continue
                if not isinstance(b, dict):
                    continue
                kind = b.get("type")
                if kind == "text":
                    texts.append(_str(b.get("text")))
                elif kind == "tool_result":
                    rt, rn, rimg = _result_text(b.get("content"), self.result_cap)
                    results.append(ToolResult(_str(b.get("tool_use_id")), rt, rn, b.get("is_error") is True,
                                              rimg))
                elif kind == "image":
                    images += 1
        else:
            return
        text = "\n".join(t for t in texts if t)
        if not text and not results and not images:
            return
        # the user's words around a long paste matter: a text over the cap keeps its start and its end
        n = len(text)
        half = self.text_cap // 2
        t, tail = (text, "") if n <= self.text_cap else (text[:half], text[n - half:])
        self.out.append(UserTurn(off, _str(obj.get("uuid")), ts, t, n, results, images,
                                 obj.get("isMeta") is True, sidechain, cwd, tail))

    def _assistant(self, off: int, obj: dict[str, Any], ts: float | None, sidechain: bool) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return
        if obj.get("isApiErrorMessage") is True:  # Claude Code's own error text in the reply slot
            text = " ".join(_str(b.get("text")) for b in content if isinstance(b, dict))
            self.out.append(ApiError(off, ts, None, text[:500]))
            return
        mid = _str(msg.get("id")) or _str(obj.get("uuid")) or f"@{off}"
        uuid = _str(obj.get("uuid"))
        turn = self._turns.get(mid)
        if turn is None:
            turn = AssistantTurn(off, mid, ts, _str(msg.get("model")), sidechain=sidechain,
                                 cwd=obj.get("cwd") if isinstance(obj.get("cwd"), str) else None)
            self._turns[mid] = turn
            self.out.append(turn)
        elif uuid and uuid in turn.line_uuids:
            return  # the same line written twice (seen after resumes)
        if uuid:
            turn.line_uuids.add(uuid)
        for b in content:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text":
                t, n = _cut(_str(b.get("text")), self.text_cap)
                if t.strip():
                    turn.blocks.append(Text(t, n))
            elif kind == "thinking":
                t, n = _cut(_str(b.get("thinking")), self.result_cap)
                if t.strip():
                    turn.blocks.append(Thinking(t, n))
            elif kind == "tool_use":
                inp = b.get("input")
                turn.blocks.append(ToolUse(_str(b.get("id")), _str(b.get("name")),
                                           _trim_input(inp, self.result_cap) if isinstance(inp, dict) else {}))

    def _system(self, off: int, obj: dict[str, Any], ts: float | None) -> None:
        sub = obj.get("subtype")
        if sub in ("compact_boundary", "microcompact_boundary"):
            meta = obj.get("compactMetadata") if sub == "compact_boundary" else obj.get("microcompactMetadata")
            meta = meta if isinstance(meta, dict) else {}
            pre = meta.get("preTokens")
            self.out.append(CompactBoundary(off, ts, _str(meta.get("trigger")),
                                            pre if isinstance(pre, int) and not isinstance(pre, bool) else None,
                                            micro=sub == "microcompact_boundary"))
        elif sub == "api_error":
            err = obj.get("error")
            status: int | None = None
            message = ""
            if isinstance(err, dict):
                s = err.get("status")
                status = s if isinstance(s, int) and not isinstance(s, bool) else None
                inner = err.get("error")
                if isinstance(inner, dict):
                    inner2 = inner.get("error")
                    if isinstance(inner2, dict):
                        message = _str(inner2.get("message"))
                    message = message or _str(inner.get("message"))
                message = message or _str(err.get("message"))
            elif isinstance(err, str):
                message = err
            ra, mr = obj.get("retryAttempt"), obj.get("maxRetries")
            self.out.append(ApiError(off, ts, status, message[:500],
                                     ra if isinstance(ra, int) else None, mr if isinstance(mr, int) else None))


def parse(items: Iterable[tuple[int, dict[str, Any]]], *, text_cap: int = TEXT_CAP,
          result_cap: int | None = None, include_sidechain: bool = True) -> list[Record]:
    return Parser(text_cap=text_cap, result_cap=result_cap, include_sidechain=include_sidechain).feed_all(items)
