"""A loopback stand-in of the Messages API for the real Claude Code CLI.

It builds on ``tests/plugins/stub_api.StubAPI`` (the stub the Python SDK tests use: recording,
scripted replies, errors) and adds what the CLI needs:

- Streaming: Claude Code always sends ``stream: true``; a scripted message is sent as the SSE event
  sequence the API uses (``message_start``, ``content_block_start``/``_delta``/``_stop`` per block,
  ``message_delta`` with the stop reason, ``message_stop``). Non-stream requests get the plain JSON.
- Main turns and side queries: the CLI also sends small side queries of its own (the recall selector
  over the memory manifest, titles, ...). Only requests that look like the main agent loop (they
  carry the ``Write`` tool, or memd's ``mcp__memd__`` tools) take the next scripted turn; every other
  request gets ``side_reply(rec)``
  (default: an empty JSON selection ``{"selected_memories": []}`` as text, harmless for any
  side query). When the script is exhausted the main loop gets a plain "done." text turn.
- Every other route (``/v1/messages/count_tokens``, anything unknown) answers something harmless
  with 200 so the CLI never retries or stalls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.plugins.stub_api import Recorded, Reply, StubAPI, estimate_tokens

Turn = dict[str, Any]


def is_main_turn(body: Any) -> bool:
    """True for a request of the main agent loop: it offers the Write tool, or memd's own tools (a job of
    the claude-plan backend, which has no built-in tool: tests/realcc/test_plan_jobs.py)."""
    if not isinstance(body, dict):
        return False
    return any(isinstance(t, dict) and (t.get("name") == "Write" or str(t.get("name", "")).startswith("mcp__memd__"))
               for t in body.get("tools") or [])


def user_texts(body: Any) -> list[str]:
    """Every text the request's user messages carry (text blocks and tool_result contents), in order."""
    out: list[str] = []
    for msg in (body or {}).get("messages") or []:
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                out.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, str):
                    out.append(inner)
                else:
                    out.extend(str(b.get("text", "")) for b in inner or [] if isinstance(b, dict))
    return out


def tool_results(body: Any) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last user message."""
    msgs = (body or {}).get("messages") or []
    if not msgs or not isinstance(msgs[-1].get("content"), list):
        return []
    return [b for b in msgs[-1]["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def sse_stream(msg: dict[str, Any]) -> bytes:
    """A full message as the API streams it."""
    usage = msg.get("usage") or {"input_tokens": 1, "output_tokens": 1}
    start = {**msg, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(msg.get("content") or []):
        if block.get("type") == "tool_use":
            head = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input") or {})}
        else:
            head = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block.get("text", "")}
        out.append(_sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": head}))
        out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(_sse("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": None},
                                      "usage": {"output_tokens": usage.get("output_tokens", 1)}}))
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


class CliStub(StubAPI):
    """The Messages API as the Claude Code CLI sees it (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.side_reply: Callable[[Recorded], str] = lambda rec: '{"selected_memories": []}'

    # ------------------------------------------------------------------ views of what was recorded

    @property
    def messages(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/v1/messages" and isinstance(r.body, dict)]

    @property
    def main(self) -> list[Recorded]:
        """The main agent loop's requests, in order."""
        return [r for r in self.messages if is_main_turn(r.body)]

    @property
    def side(self) -> list[Recorded]:
        return [r for r in self.messages if not is_main_turn(r.body)]

    def turns(self, *turns: Turn) -> None:
        """Script the main loop's replies, one per main request."""
        self.script(*turns)

    # ------------------------------------------------------------------ serving

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts, body, rec = self._record(h)
        if parts.path == "/v1/messages/count_tokens":
            self._send(h, Reply(body={"input_tokens": estimate_tokens(body if isinstance(body, dict) else {})}))
            return
        if parts.path != "/v1/messages" or h.command != "POST":
            self._send(h, Reply(body={}))
            return
        if is_main_turn(body):
            with self._lock:
                reply = self._queue.pop(0) if self._queue else None
            if reply is None:
                reply = Reply(body=self.message(self.text("done.")))
        else:
            reply = Reply(body=self.message(self.text(self.side_reply(rec))))
        if reply.before is not None:
            reply.before()
        if reply.status != 200 or not isinstance(reply.body, dict) or reply.body.get("type") != "message":
            self._send(h, reply)
            return
        out = dict(reply.body)
        out.setdefault("usage", {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                                 "cache_read_input_tokens": 0})
        if isinstance(body, dict) and body.get("model"):
            out["model"] = body["model"]
        rec.usage = dict(out["usage"])
        if isinstance(body, dict) and body.get("stream"):
            self._send_stream(h, sse_stream(out))
        else:
            self._send(h, Reply(body=out))

    @staticmethod
    def _send_stream(h: BaseHTTPRequestHandler, data: bytes) -> None:
        try:
            h.send_response(200)
            h.send_header("content-type", "text/event-stream")
            h.send_header("cache-control", "no-cache")
            h.send_header("content-length", str(len(data)))
            h.send_header("request-id", "req_stub")
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
