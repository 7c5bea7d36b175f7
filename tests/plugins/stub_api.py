"""A local stub of Anthropic's Messages API that the real SDK talks to over loopback.

Use the ``stub_api`` fixture::

    def test_x(stub_api):
        stub_api.enqueue(stub_api.message(stub_api.text("hello")))
        client = anthropic.Anthropic(base_url=stub_api.base_url, api_key="test")
        ...
        assert stub_api.requests[0].body["model"] == "claude-haiku-4-5"

Scripting (responses are served in order, one per request; an empty queue answers 500
"nothing scripted" with ``x-should-retry: false`` so a test that makes an unexpected call fails):

- ``message(*blocks, stop_reason=None, usage=None, model=...)``: a Messages API reply body.
  ``stop_reason`` defaults to ``tool_use`` when a block is a tool_use, else ``end_turn``.
  ``usage`` omitted: the stub *estimates* it from the request (see below).
- blocks: ``text(s)``, ``tool_use(name, input, id=None)``, ``memory(command, **fields)`` (a
  ``memory`` tool_use: ``memory("create", path="/memories/x.md", file_text="...")``).
- ``error(status, message="", retry_after=None, type=None)``: an API error reply (429, 529, 500...).
- ``Reply(status, body, headers, delay=, raw=)``: anything else; ``raw`` bytes are sent verbatim
  (malformed bodies); ``delay`` seconds are slept before answering (timeouts); ``before`` is a
  callable run before answering (e.g. "Claude Code writes a file while the model works").
- ``enqueue(reply)`` one, ``script(*replies)`` several; ``fallback`` answers when the queue is empty;
  ``responder`` (a function of the request body returning a reply, or None) answers before
  ``fallback``: a scripted model that reacts to what it is sent (benchmarks, before and after).

Recording: ``requests`` is a list of ``Recorded(method, path, query, headers, body, raw, usage)``;
headers are lower-cased; ``usage`` is what the stub answered with. ``/v1/messages`` is served with or
without ``?beta=true`` (SDK 2.14 sends beta calls to the plain path with an ``anthropic-beta`` header);
``/v1/messages/count_tokens`` answers with the estimate below.

Message Batches (``/v1/messages/batches``: create, retrieve, results as a JSONL stream, cancel), as the
SDK's ``client.beta.messages.batches`` reaches them: each batch follows a ``BatchScript`` (queued with
``batch_script(...)``, else ``batch_default``): ``polls`` retrieves answer ``in_progress`` before it
ends; it ends with every request ``succeeded`` (each answered like a ``/v1/messages`` request, from the
queue, the responder or the fallback, with usage simulated, when the batch ends), ``errored``,
``expired`` or ``canceled``; a cancel before the end cancels its requests (``on_cancel="succeeded"``:
it ended anyway). A succeeded request is recorded in ``requests`` as ``Recorded("BATCH", "/v1/messages",
..., body=its params, usage=...)`` (``batched`` True), so usage tallies see it; ``batches`` holds each
batch's state (``creates``, ``cancels``: how many of each call came). ``batch_caches = False``: batched
requests neither read nor write the simulated cache (Anthropic's caching of batches is best effort).

Usage estimate (for scripted messages without ``usage``): tokens are estimated as characters / 4
of the JSON text of tools, system and messages (an estimate, not Anthropic's tokenizer). Prompt
caching is simulated: every ``cache_control`` breakpoint marks a prefix (tools -> system ->
messages, in the API's order); a prefix seen before (and at least ``min_cache_tokens`` long) is
reported as ``cache_read_input_tokens``, a new one as ``cache_creation_input_tokens``, the rest as
``input_tokens``. ``estimate_tokens(body)`` is exposed for benchmarks.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

DEFAULT_MODEL = "claude-haiku-4-5"


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-serialisable, or None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering
    raw: bytes | None = None  # sent verbatim instead of body (malformed replies)
    before: Callable[[], None] | None = None  # run (in the server thread) before answering


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # parsed JSON, or None when the body was not JSON
    raw: bytes
    usage: dict[str, int] | None = None  # the usage the stub answered with (messages only)

    @property
    def beta(self) -> bool:
        return self.query.get("beta") == ["true"]

    @property
    def batched(self) -> bool:
        """A request answered through a Message Batch (billed at half the list price)."""
        return self.method == "BATCH"


@dataclass
class BatchScript:
    """How one Message Batch goes (the module doc)."""

    result: str = "succeeded"  # succeeded | errored | expired | canceled
    polls: int = 0  # retrieves answered in_progress before the batch ends
    error_type: str = "invalid_request_error"  # of an errored request
    on_cancel: str = "canceled"  # what a cancel before the end makes of the requests
    before_retrieve: Callable[[], None] | None = None  # run before each retrieve is answered


@dataclass
class StubBatch:
    id: str
    script: BatchScript
    requests: list[dict[str, Any]]
    status: str = "in_progress"
    polls: int = 0
    cancelled: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)


def _chars(obj: Any) -> int:
    return len(json.dumps(obj, ensure_ascii=False, sort_keys=True))


def _blocks_in_order(body: dict[str, Any]) -> Iterator[Any]:
    """The request's cacheable units in the API's prefix order: tools, system, messages."""
    yield from body.get("tools") or []
    system = body.get("system")
    if isinstance(system, str):
        yield {"type": "text", "text": system}
    elif isinstance(system, list):
        yield from system
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            yield {"role": msg.get("role"), "text": content}
        elif isinstance(content, list):
            for block in content:
                yield {"role": msg.get("role"), **block} if isinstance(block, dict) else block


def estimate_tokens(body: dict[str, Any]) -> int:
    """Input tokens of a request, estimated as characters / 4 (not Anthropic's tokenizer)."""
    return sum(_chars(b) for b in _blocks_in_order(body)) // 4


class StubAPI:
    def __init__(self, *, min_cache_tokens: int = 1024) -> None:
        self.requests: list[Recorded] = []
        self.fallback: Reply | None = None
        self.responder: Callable[[dict[str, Any]], Reply | dict[str, Any] | None] | None = None
        self.min_cache_tokens = min_cache_tokens
        # per model (matched as a prefix of the request's model), as Anthropic documents them; a model
        # not listed uses ``min_cache_tokens`` (benchmarks set this table; tests keep the one number)
        self.min_cache_by_model: dict[str, int] = {}
        # the cache's lifetime: with a clock (seconds; a benchmark's virtual time) an entry not used
        # for ``cache_ttl_s`` is gone (a read refreshes it); without one, entries never expire
        self.clock: Callable[[], float] | None = None
        self.cache_ttl_s = 300.0
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._cached: dict[str, float] = {}  # prefix key -> when last written or read
        self._ids = itertools.count(1)
        self.batch_default = BatchScript()
        self._batch_queue: list[BatchScript] = []
        self.batches: dict[str, StubBatch] = {}
        # Anthropic caches batched requests on a best-effort basis: False simulates the worst case (a
        # batched request neither reads nor writes the cache; the calls after it write their own)
        self.batch_caches = True
        self.creates = 0
        self.cancels = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # silence
                pass

            def do_POST(self) -> None:
                stub._handle(self)

            def do_GET(self) -> None:
                stub._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=lambda: self._server.serve_forever(poll_interval=0.05),
                                        name="stub-api", daemon=True)
        self._thread.start()
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}"

    # ------------------------------------------------------------------ scripting

    def enqueue(self, reply: Reply | dict[str, Any]) -> None:
        with self._lock:
            self._queue.append(reply if isinstance(reply, Reply) else Reply(body=reply))

    def script(self, *replies: Reply | dict[str, Any]) -> None:
        for r in replies:
            self.enqueue(r)

    def batch_script(self, *scripts: BatchScript) -> None:
        """The next batches' scripts, in order (then ``batch_default``)."""
        with self._lock:
            self._batch_queue.extend(scripts)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @staticmethod
    def text(s: str) -> dict[str, Any]:
        return {"type": "text", "text": s}

    def tool_use(self, name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
        return {"type": "tool_use", "id": id or f"toolu_stub{next(self._ids):04d}", "name": name,
                "input": input}

    def memory(self, command: str, **fields: Any) -> dict[str, Any]:
        return self.tool_use("memory", {"command": command, **fields})

    def message(self, *blocks: dict[str, Any], stop_reason: str | None = None,
                usage: dict[str, int] | None = None, model: str = DEFAULT_MODEL) -> dict[str, Any]:
        if stop_reason is None:
            stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
        msg: dict[str, Any] = {
            "id": f"msg_stub{next(self._ids):04d}", "type": "message", "role": "assistant",
            "model": model, "content": list(blocks), "stop_reason": stop_reason, "stop_sequence": None,
        }
        if usage is not None:
            msg["usage"] = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0, **usage}
        return msg

    @staticmethod
    def error(status: int, message: str = "", retry_after: float | None = None,
              type: str | None = None) -> Reply:
        kind = type or {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                        429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return Reply(status, {"type": "error", "error": {"type": kind, "message": message or kind}}, headers)

    # ------------------------------------------------------------------ usage simulation

    def simulate_usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Usage as the API would report it, caching simulated the way the API documents it: a
        breakpoint writes the prefix up to it; a later request reads the longest cached prefix found
        at a block boundary up to 20 blocks before one of its breakpoints. ``cache_control`` itself is
        not part of the prefix (moving a breakpoint forward still hits the earlier prefix)."""
        sizes: list[int] = []  # cumulative characters at each block boundary
        keys: list[str] = []  # hash of the prefix ending at each block boundary
        marks: list[int] = []  # boundaries that carry a breakpoint
        h = hashlib.sha256()
        total = 0
        for i, block in enumerate(_blocks_in_order(body)):
            plain = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
            total += _chars(plain)  # a breakpoint is not a token of the prompt
            h.update(json.dumps(plain, sort_keys=True, ensure_ascii=False).encode())
            sizes.append(total // 4)
            keys.append(h.copy().hexdigest())
            if isinstance(block, dict) and block.get("cache_control"):
                marks.append(i)
        read = write = 0
        model = str(body.get("model") or "")
        least = next((n for k, n in sorted(self.min_cache_by_model.items(), key=lambda kv: -len(kv[0]))
                      if model.startswith(k)), self.min_cache_tokens)
        now = self.clock() if self.clock is not None else 0.0
        with self._lock:
            if self.clock is not None:
                for k in [k for k, t in self._cached.items() if now - t > self.cache_ttl_s]:
                    del self._cached[k]
            for m in marks:
                for j in range(m, max(-1, m - 21), -1):
                    if keys[j] in self._cached and sizes[j] >= least:
                        if sizes[j] > read:
                            read = sizes[j]
                            self._cached[keys[j]] = now  # a read refreshes the entry's lifetime
                        break
            for m in marks:
                if sizes[m] >= least:
                    self._cached[keys[m]] = now
        if marks and sizes[marks[-1]] >= least and sizes[marks[-1]] > read:
            write = sizes[marks[-1]] - read
        return {"input_tokens": max(0, total // 4 - read - write), "output_tokens": 0,
                "cache_creation_input_tokens": write, "cache_read_input_tokens": read}

    # ------------------------------------------------------------------ serving

    def _record(self, h: BaseHTTPRequestHandler) -> tuple[Any, Any, Recorded]:
        """Read and record one request: its split URL, its JSON body (or None) and the record."""
        parts = urlsplit(h.path)
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec = Recorded(h.command, parts.path, parse_qs(parts.query),
                       {k.lower(): v for k, v in h.headers.items()}, body, raw)
        with self._lock:
            self.requests.append(rec)
        return parts, body, rec

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts, body, rec = self._record(h)
        if parts.path == "/v1/messages/count_tokens" and isinstance(body, dict):
            self._send(h, Reply(body={"input_tokens": estimate_tokens(body)}))
            return
        if parts.path.startswith("/v1/messages/batches"):
            self._send(h, self._batches(h.command, parts.path, body))
            return
        if parts.path != "/v1/messages":
            self._send(h, self.error(404, f"stub: no route {parts.path}"))
            return
        reply = self._answer(body, rec)
        if reply is not None:
            self._send(h, reply)

    def _answer(self, body: Any, rec: Recorded, *, cache: bool = True) -> Reply | None:
        """The reply to one Messages request (None: the stub is closing). ``cache=False``: the request
        neither reads nor writes the simulated cache (all its input uncached)."""
        with self._lock:
            reply = self._queue.pop(0) if self._queue else None
        if reply is None and self.responder is not None and isinstance(body, dict):
            r = self.responder(body)
            reply = r if isinstance(r, Reply) or r is None else Reply(body=r)
        if reply is None:
            reply = self.fallback
        if reply is None:
            err = self.error(500, "stub: nothing scripted for this request")
            err.headers["x-should-retry"] = "false"
            reply = err
        if reply.before is not None:
            reply.before()
        if reply.delay and self._closing.wait(reply.delay):
            return None
        if (reply.status == 200 and reply.raw is None and isinstance(reply.body, dict)
                and reply.body.get("type") == "message"):
            out = dict(reply.body)
            if "usage" not in out:
                usage = (self.simulate_usage(body if isinstance(body, dict) else {}) if cache else
                         {"input_tokens": estimate_tokens(body if isinstance(body, dict) else {}), "output_tokens": 0,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
                usage["output_tokens"] = max(1, _chars(out.get("content")) // 4)
                out["usage"] = usage
            if isinstance(body, dict) and body.get("model"):
                out["model"] = body["model"]
            rec.usage = dict(out["usage"])
            reply = Reply(reply.status, out, reply.headers)
        return reply

    # ------------------------------------------------------------------ Message Batches

    def _batches(self, method: str, path: str, body: Any) -> Reply:
        rest = path[len("/v1/messages/batches"):].strip("/").split("/")
        if method == "POST" and rest == [""]:
            reqs = body.get("requests") if isinstance(body, dict) else None
            if not isinstance(reqs, list) or not reqs or not all(
                    isinstance(r, dict) and isinstance(r.get("custom_id"), str) and isinstance(r.get("params"), dict)
                    for r in reqs):
                return self.error(400, "stub: requests must be a list of {custom_id, params}")
            with self._lock:
                script = self._batch_queue.pop(0) if self._batch_queue else self.batch_default
                b = StubBatch(f"msgbatch_stub{next(self._ids):04d}", script, reqs)
                self.batches[b.id] = b
                self.creates += 1
            return Reply(body=self._batch_body(b))
        b = self.batches.get(rest[0]) if rest and rest[0] else None
        if b is None:
            return self.error(404, "stub: no such batch")
        tail = rest[1:]
        if method == "GET" and not tail:
            if b.script.before_retrieve is not None:
                b.script.before_retrieve()
            if b.status == "in_progress":
                if b.polls >= b.script.polls:
                    self._end(b, b.script.result)
                else:
                    b.polls += 1
            return Reply(body=self._batch_body(b))
        if method == "POST" and tail == ["cancel"]:
            with self._lock:
                self.cancels += 1
            if b.status == "in_progress":
                b.cancelled = True
                self._end(b, b.script.on_cancel)
                return Reply(body={**self._batch_body(b), "processing_status": "canceling"})
            return Reply(body=self._batch_body(b))
        if method == "GET" and tail == ["results"]:
            if b.status != "ended":
                return self.error(400, "stub: the batch has not ended")
            lines = "".join(json.dumps(r) + "\n" for r in b.results)
            return Reply(raw=lines.encode(), headers={"content-type": "application/binary"})
        return self.error(404, f"stub: no route {path}")

    def _end(self, b: StubBatch, result: str) -> None:
        """End a batch: each request's result (a success answered as a Messages request)."""
        b.status = "ended"
        for r in b.requests:
            params = r["params"]
            if result == "succeeded":
                rec = Recorded("BATCH", "/v1/messages", {}, {}, params, b"")
                reply = self._answer(params, rec, cache=self.batch_caches)
                if reply is None or reply.status != 200 or not isinstance(reply.body, dict):
                    status = reply.status if reply is not None else 500
                    res: dict[str, Any] = {"type": "errored", "error": {"type": "error", "error": {
                        "type": "api_error", "message": f"stub: HTTP {status}"}}}
                else:
                    with self._lock:
                        self.requests.append(rec)
                    res = {"type": "succeeded", "message": reply.body}
            elif result == "errored":
                res = {"type": "errored", "error": {"type": "error", "error": {
                    "type": b.script.error_type, "message": "stub: errored"}}}
            else:
                res = {"type": result}
            b.results.append({"custom_id": r["custom_id"], "result": res})

    def _batch_body(self, b: StubBatch) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if b.status == "ended":
            for r in b.results:
                counts[r["result"]["type"]] += 1
        else:
            counts["processing"] = len(b.requests)
        ended = b.status == "ended"
        return {"id": b.id, "type": "message_batch", "processing_status": b.status, "request_counts": counts,
                "created_at": "2026-03-10T09:00:00Z", "expires_at": "2026-03-11T09:00:00Z",
                "ended_at": "2026-03-10T09:01:00Z" if ended else None,
                "cancel_initiated_at": "2026-03-10T09:00:30Z" if b.cancelled else None, "archived_at": None,
                "results_url": f"{self.base_url}/v1/messages/batches/{b.id}/results" if ended else None}

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, reply: Reply) -> None:
        data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        try:
            h.send_response(reply.status)
            h.send_header("content-type", reply.headers.get("content-type", "application/json"))
            h.send_header("content-length", str(len(data)))
            h.send_header("request-id", "req_stub")
            for k, v in reply.headers.items():
                if k != "content-type":
                    h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def __enter__(self) -> StubAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def stub_api() -> Iterator[StubAPI]:
    """A running Messages API stub on 127.0.0.1 (see the module docstring)."""
    stub = StubAPI()
    try:
        yield stub
    finally:
        stub.close()
