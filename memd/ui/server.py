"""The viewer's HTTP server: the standard library's ThreadingHTTPServer on loopback, Jinja2 pages.

Safety (docs/ui.md, "Safety model"), checked on every request before anything is read:
- bound to 127.0.0.1 only, and the ``Host`` header must be one, ``127.0.0.1:<port>`` or ``localhost:<port>``
  (a DNS-rebinding page reaches the port under its own name, and is refused; two are refused, 400);
- a request must be whole within ``REQUEST_DEADLINE_S`` however slowly it trickles (slots are few);
- a random token per start: given once in the URL (``?token=``), then kept in a cookie (HttpOnly,
  SameSite=Strict) and the URL redirected without it; a request with neither is refused;
- no CORS headers at all; a strict Content-Security-Policy (nothing but this origin's own style and
  script, no inline script, no framing) and ``X-Content-Type-Options: nosniff`` on every answer;
- GET and HEAD read; POST only to an action (``Viewer.actions``: undo a run, retry parked catch-up
  spans, accept what sync holds, each behind a confirmation page), and only when, on top of the Host and
  token checks: the request is not cross-site (an ``Origin`` header that is not this viewer's, or a
  ``Sec-Fetch-Site`` other than ``same-origin``: 403), the body is ``application/x-www-form-urlencoded``
  (415) of a given length of at most ``MAX_FORM`` bytes (411, 413), and its ``csrf`` field is this
  start's CSRF token (``csrf_ok``, constant time; 403). A refused POST changes nothing. Every other
  method is refused (405).
"""

from __future__ import annotations

import contextvars
import hmac
import html
import io
import secrets
import shlex
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

HOST = "127.0.0.1"
COOKIE = "memd_ui_token"  # then "_<port>": cookies are per host, not per port, so two viewers keep theirs
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
STATIC = {"ui.css": "text/css; charset=utf-8",
          # the charts (memd.ui.charts): uPlot, vendored (docs/ui.md names its version and sha256)
          "uPlot.iife.min.js": "text/javascript; charset=utf-8", "uPlot.min.css": "text/css; charset=utf-8",
          "charts.js": "text/javascript; charset=utf-8", "charts.css": "text/css; charset=utf-8"}
MAX_FORM = 4096  # bytes of a POST's form: the actions' forms carry the CSRF token and nothing else
TIMEOUT_S = 20.0  # a client silent this long (a request or form never finished) is dropped: its thread ends
# A request (its line, headers and form) must be whole this long after the server starts waiting for it,
# however it trickles: a client sending a header line every few seconds is never silent for TIMEOUT_S, and
# MAX_CLIENTS of them held every slot for ever (the owner locked out). An idle keep-alive connection goes too.
REQUEST_DEADLINE_S = 10.0
MAX_CLIENTS = 32  # connections served at once; one more is closed unanswered, so no client starves the process
FORM = "application/x-www-form-urlencoded"

# A page is (template name, its values); a renderer is given the path's parts after the first.
Pages = dict[str, Callable[[list[str]], tuple[str, dict[str, Any]] | None]]
# The request's query (``?before=`` of a timeline's older page), for the renderer that wants it (``query()``):
# set by the handler's thread for the request it serves.
_QUERY: contextvars.ContextVar[dict[str, list[str]] | None] = contextvars.ContextVar("memd_ui_query", default=None)


def query(name: str) -> str | None:
    """The request's query parameter ``name`` (its first value), for a renderer; None when absent."""
    got = (_QUERY.get() or {}).get(name)
    return got[0] if got else None


_ONWARD = ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
           '<meta http-equiv="refresh" content="0;url={url}"><title>memd</title></head>\n'
           '<body><p><a href="{url}">Open the viewer</a></p></body></html>\n')


class Refused(Exception):
    def __init__(self, status: HTTPStatus, why: str) -> None:
        super().__init__(why)
        self.status = status


class Viewer:
    """One start of the viewer: its token, its pages and its templates."""

    def __init__(self, pages: Pages, *, token: str | None = None, actions: Pages | None = None) -> None:
        import jinja2

        self.token = token or secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)  # every action's POST form carries it
        self.pages = pages
        self.actions = actions or {}  # POST /<name>/...: the actions behind the confirmation pages
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("memd.ui", "templates"), autoescape=True,
            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.env.filters["when"] = _when
        self.env.filters["shq"] = shlex.quote  # a name in a command the user may paste: one word, run as none
        self.port = 0

    @property
    def cookie(self) -> str:
        return f"{COOKIE}_{self.port}"

    def allowed_hosts(self) -> set[str]:
        return {f"{HOST}:{self.port}", f"localhost:{self.port}"}

    def allowed_origins(self) -> set[str]:
        return {f"http://{h}" for h in self.allowed_hosts()}

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())

    def render(self, name: str, values: dict[str, Any]) -> bytes:
        return self.env.get_template(name).render(csrf=self.csrf, **values).encode("utf-8")


def _when(t: float | None) -> str:
    import time

    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _cookie_tokens(header: str | None, cookie: str) -> list[str]:
    """Every value of the cookie ``cookie``: a page on another port of 127.0.0.1 can set one of that name
    too (cookies are per host, not per port), and a decoy listed first must not hide the viewer's own."""
    out: list[str] = []
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == cookie:
            out.append(value)
    return out


class _DeadlineReader(io.RawIOBase):
    """The request's bytes, each read bounded by the handler's deadline for the request (and by its
    silence timeout): past the deadline, ``TimeoutError``, which ends the connection
    (``BaseHTTPRequestHandler.handle_one_request``)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        h = self.handler
        wait = h.timeout
        if h.deadline is not None:
            left = h.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request was not whole in time")
            wait = left if wait is None else min(wait, left)
        h.connection.settimeout(wait)
        return int(h.connection.recv_into(buf))


class Handler(BaseHTTPRequestHandler):
    server_version = "memd-ui"
    sys_version = ""
    viewer: Viewer  # set on the subclass made for each server
    timeout = TIMEOUT_S  # the socket's: a slow or silent client is dropped (StreamRequestHandler.setup)
    request_deadline = REQUEST_DEADLINE_S  # a request's line, headers and form must be whole by then
    deadline: float | None = None  # time.monotonic() by which the request being read must be whole
    connection: socket.socket

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own reader: every read goes through the deadline's instead
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def handle_one_request(self) -> None:
        self.deadline = time.monotonic() + self.request_deadline
        try:
            super().handle_one_request()
        finally:
            self.deadline = None

    def send_response(self, code: int, message: str | None = None) -> None:
        self.connection.settimeout(self.timeout)  # the answer is not bound by what was left of the deadline
        super().send_response(code, message)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the terminal shows the URL, not a line per request (which would carry the token)

    def _headers(self, status: HTTPStatus, ctype: str, length: int, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "same-origin")  # no referrer to another site; a form POST keeps its Origin
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _plain(self, status: HTTPStatus, text: str) -> None:
        body = (text + "\n").encode("utf-8")
        self._headers(status, "text/plain; charset=utf-8", len(body))
        if self.command != "HEAD":
            self.wfile.write(body)

    def _check(self) -> str | None:
        """Refuse what is not this viewer's own page asked by its own user; the token given in the URL
        (to set as the cookie), else None."""
        if not self.path.startswith("/"):  # an absolute-form target (a proxy's) or ``*``: not asked of a page
            raise Refused(HTTPStatus.BAD_REQUEST, "refused: a request's target is a path (/...)")
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1:  # which one counts is the reader's guess (a proxy may take the other): none does
            raise Refused(HTTPStatus.BAD_REQUEST, "refused: a request has exactly one Host header")
        if hosts[0] not in self.viewer.allowed_hosts():
            raise Refused(HTTPStatus.FORBIDDEN, "refused: this Host is not the viewer's (127.0.0.1 or localhost "
                                                "with its port)")
        query = parse_qs(urlsplit(self.path).query)
        given = query["token"][0] if query.get("token") else None
        if self.viewer.token_ok(given):
            return given
        if any(self.viewer.token_ok(v) for v in _cookie_tokens(self.headers.get("Cookie"), self.viewer.cookie)):
            return None
        raise Refused(HTTPStatus.FORBIDDEN, "refused: no valid token (open the URL `memd ui` printed)")

    def do_GET(self) -> None:
        try:
            from_url = self._check()
        except Refused as e:
            self._plain(e.status, str(e))
            return
        path = urlsplit(self.path).path
        if from_url is not None:  # keep it as a cookie, and drop it from the address bar and history
            # the path as asked, its escapes kept (``%20`` is not quoted again); anything else quoted
            onward = quote(path, safe="/%")
            cookie = f"{self.viewer.cookie}={from_url}; HttpOnly; SameSite=Strict; Path=/"
            if self.headers.get("Sec-Fetch-Site", "none") not in ("none", "same-origin"):
                # opened from another site (``--open``'s file:// page, a link elsewhere): a redirect would stay
                # cross-site and carry no SameSite=Strict cookie; this origin's own page goes on, same-origin
                body = _ONWARD.format(url=html.escape(onward, quote=True)).encode("utf-8")
                self._headers(HTTPStatus.OK, "text/html; charset=utf-8", len(body), {"Set-Cookie": cookie})
                if self.command != "HEAD":
                    self.wfile.write(body)
                return
            self._headers(HTTPStatus.SEE_OTHER, "text/plain; charset=utf-8", 0,
                          {"Location": onward, "Set-Cookie": cookie})
            return
        self._serve(path)

    def do_HEAD(self) -> None:
        self.do_GET()

    def _refuse_method(self) -> None:
        try:
            self._check()
        except Refused as e:
            self._plain(e.status, str(e))
            return
        self._plain(HTTPStatus.METHOD_NOT_ALLOWED, "refused: the viewer changes nothing but through an "
                                                   "action's confirmation (POST)")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def do_POST(self) -> None:
        parts = [unquote(p) for p in urlsplit(self.path).path.strip("/").split("/") if p]
        try:
            self._check()
            act = self.viewer.actions.get(parts[0]) if parts else None
            if act is None:
                raise Refused(HTTPStatus.METHOD_NOT_ALLOWED, "refused: the viewer changes nothing but through an "
                                                             "action's confirmation (POST)")
            self._check_post()
        except Refused as e:
            self.close_connection = True  # a body not read is not taken for the next request
            self._plain(e.status, str(e))
            return
        self._answer(lambda: act(parts[1:]))

    def _check_post(self) -> None:
        """Refuse a POST another site made, one that is not a small form, or one without this start's
        CSRF token; nothing is read or changed before all of it holds."""
        origin = self.headers.get("Origin")
        if origin is not None and origin not in self.viewer.allowed_origins():
            raise Refused(HTTPStatus.FORBIDDEN, "refused: a request from another site (Origin)")
        fetch_site = self.headers.get("Sec-Fetch-Site")
        if fetch_site is not None and fetch_site != "same-origin":
            raise Refused(HTTPStatus.FORBIDDEN, f"refused: a request from another site (Sec-Fetch-Site: {fetch_site})")
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != FORM:
            raise Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"refused: an action's body is a form ({FORM})")
        length = self.headers.get("Content-Length", "")
        if self.headers.get("Transfer-Encoding") is not None or not length.isdigit():
            raise Refused(HTTPStatus.LENGTH_REQUIRED, "refused: an action's form needs its Content-Length")
        if int(length) > MAX_FORM:
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"refused: an action's form is at most {MAX_FORM} bytes")
        body = self.rfile.read(int(length))
        form = parse_qs(body.decode("ascii", "replace"), max_num_fields=10)
        given = form.get("csrf", [None])[0]
        if not self.viewer.csrf_ok(given):
            raise Refused(HTTPStatus.FORBIDDEN, "refused: no valid CSRF token (open the action from the viewer)")

    def _serve(self, path: str) -> None:
        parts = [unquote(p) for p in path.strip("/").split("/") if p]
        if len(parts) == 2 and parts[0] == "static" and parts[1] in STATIC:
            body = resources.files("memd.ui").joinpath("static", parts[1]).read_bytes()
            self._headers(HTTPStatus.OK, STATIC[parts[1]], len(body))
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        page = self.viewer.pages.get(parts[0] if parts else "")
        _QUERY.set(parse_qs(urlsplit(self.path).query))
        self._answer(lambda: page(parts[1:]) if page is not None else None)

    def _answer(self, make: Callable[[], tuple[str, dict[str, Any]] | None]) -> None:
        status = HTTPStatus.OK
        try:
            got = make()
        except Exception as e:  # one project's bad input fails only its page, with the reason, never a traceback
            from memd.core.secrets import redact
            from memd.errors import MemdError, UsageError

            known = isinstance(e, MemdError | OSError | ValueError)
            message = str(e) if known else f"{type(e).__name__}: {e} (a bug in memd ui)"
            got = ("error.html", {"message": redact(message)})  # the reason may quote memory text
            # what was asked cannot be shown as asked (a run not in the history, a bad ?before=): 400; a file
            # that cannot be read or a bug: 500. The page says why either way.
            bad_request = isinstance(e, UsageError | ValueError) and not isinstance(e, OSError)
            status = HTTPStatus.BAD_REQUEST if bad_request else HTTPStatus.INTERNAL_SERVER_ERROR
        if got is None:
            self._plain(HTTPStatus.NOT_FOUND, "no such page")
            return
        body = self.viewer.render(*got)
        self._headers(status, "text/html; charset=utf-8", len(body))
        if self.command != "HEAD":
            self.wfile.write(body)


class Server(ThreadingHTTPServer):
    """Its own user's processes only (``verify_request``); a thread per connection, at most ``MAX_CLIENTS``
    at once: a local process opening connections by the thousand gets the rest closed unanswered instead
    of a thread each (the daemon that serves the viewer keeps its own threads); each lives at most
    ``TIMEOUT_S`` of silence."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CLIENTS)
        super().__init__(address, handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Another user's process (memd.ui.peer: the kernel says whose the socket is) is closed unanswered,
        before it takes a slot or a thread: the token can leak (the cookie goes to every port of the host)."""
        from memd.ui import peer

        host, port = self.server_address[:2]
        return peer.is_own((str(client_address[0]), int(client_address[1])), (str(host), int(port)))

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer, or stayed silent past ``TIMEOUT_S``, is the client's doing:
        nothing is printed (socketserver prints a traceback to stderr, the daemon's log when it serves
        the viewer). Anything else is one line on stderr, without the request (its URL may hold the token)."""
        import sys

        e = sys.exc_info()[1]
        if isinstance(e, ConnectionError | TimeoutError):
            return
        print(f"memd ui: a request failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


def make_server(viewer: Viewer, port: int = 0) -> ThreadingHTTPServer:
    """The server bound to 127.0.0.1 (``port`` 0: one the system picks); the viewer learns its port."""
    handler = type("BoundHandler", (Handler,), {"viewer": viewer})
    server = Server((HOST, port), handler)
    viewer.port = server.server_address[1]
    return server


def url(viewer: Viewer) -> str:
    return f"http://{HOST}:{viewer.port}/?token={viewer.token}"


class Running:
    """A server in a thread, for tests and the daemon (``memd.ui.service``): ``with Running(viewer) as url``."""

    def __init__(self, viewer: Viewer, port: int = 0) -> None:
        self.server = make_server(viewer, port)
        self.viewer = viewer
        self.thread = threading.Thread(target=self.server.serve_forever, name="memd-ui", daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return url(self.viewer)

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
