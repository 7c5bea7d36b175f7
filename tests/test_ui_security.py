"""`memd ui` under attack (issue 26, docs/ui.md "Safety model"): the real server (``Running``) driven with
raw sockets and http.client as a hostile web page, a hostile memory text and a hostile local process
would drive it. Each test names the hole it closes (failing before its fix) or the check it proves holds.
"""

from __future__ import annotations

import html
import html.parser
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from markupsafe import escape

from memd.ui import server as ui_server
from memd.ui.server import COOKIE, Running, Viewer
from tests import test_ui
from tests.plugins.memory_folders import ROOT, topic, write_tree
from tests.test_ui import _get

serve = test_ui.serve  # the fixtures: the real pages on a Claude folder; headless Chromium
browser = test_ui.browser

KEY = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4 + "-AbCdEfGhAA"


class Synthetic:
    """A viewer with one page, one page that fails quoting a secret and one counting action: the
    server's own checks, with nothing else in the way."""

    def __init__(self) -> None:
        self.ran: list[list[str]] = []
        pages = {"": lambda rest: ("error.html", {"message": "the page"}),
                 "boom": self._boom}
        self.viewer = Viewer(pages, actions={"act": self._act})
        self.running = Running(self.viewer)
        self.url = self.running.__enter__()
        self.port = self.viewer.port
        self.token = self.viewer.token

    def _boom(self, rest: list[str]) -> tuple[str, dict[str, Any]]:
        raise ValueError(f"the line 'token = {KEY}' is not an index entry")

    def _act(self, rest: list[str]) -> tuple[str, dict[str, Any]]:
        self.ran.append(rest)
        return "error.html", {"message": "done"}

    def raw(self, request: bytes, *, wait: float = 10.0) -> bytes:
        """Send ``request`` as is and read the answer until the server closes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=wait) as s:
            s.sendall(request)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out

    def post(self, path: str, body: str, **headers: str) -> int:
        h = {"Host": f"127.0.0.1:{self.port}", "Cookie": f"{self.viewer.cookie}={self.token}",
             "Content-Type": "application/x-www-form-urlencoded", "Content-Length": str(len(body)), **headers}
        req = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n" + body
        return _status(self.raw(req.encode()))


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _header(answer: bytes, name: str) -> list[str]:
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return [v.strip() for k, _, v in (h.partition(":") for h in head) if k.lower() == name.lower()]


@pytest.fixture
def syn() -> Iterator[Synthetic]:
    s = Synthetic()
    yield s
    s.running.__exit__(None, None, None)


# ---- a hostile local process: slow and many clients -------------------------------------------------

def test_a_silent_client_is_dropped_and_never_holds_the_others(syn: Synthetic,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Hole: no socket timeout, so a request never finished (headers or a form's body) held its thread
    for ever. Now ``Handler.timeout`` drops it; the other clients are served meanwhile."""
    assert ui_server.Handler.timeout == ui_server.TIMEOUT_S and 0 < ui_server.TIMEOUT_S <= 60  # (was None)
    monkeypatch.setattr(ui_server.Handler, "timeout", 1.0)  # the same drop, sooner
    host = f"Host: 127.0.0.1:{syn.port}\r\n".encode()
    half_headers = socket.create_connection(("127.0.0.1", syn.port), timeout=10)
    half_headers.sendall(b"GET / HTTP/1.1\r\n" + host)
    half_body = socket.create_connection(("127.0.0.1", syn.port), timeout=10)
    half_body.sendall(b"POST /act/x HTTP/1.1\r\n" + host + f"Cookie: {syn.viewer.cookie}={syn.token}\r\n".encode()
                      + b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\ncsrf=")
    assert _get(syn.url, "/", cookie=syn.token).status == 200  # served while the two hang
    t0 = time.monotonic()
    for s in (half_headers, half_body):
        with s:
            try:
                got = s.recv(65536)
            except ConnectionResetError:
                got = b""
            assert got == b""  # closed by the server (recv raises TimeoutError after our own 10 s)
    assert time.monotonic() - t0 < 8
    assert syn.ran == []


def test_clients_trickling_headers_lose_their_slot_at_the_deadline(syn: Synthetic,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Hole: the silence timeout restarts at every byte, so 40 connections of the owner's own account that
    each sent a header line every 4 s (never silent for TIMEOUT_S) held all MAX_CLIENTS slots for ever
    and the owner's browser got every connection closed unanswered. Now a request must be whole within
    ``REQUEST_DEADLINE_S`` of the server starting to wait for it (here 2 s, a header line every 0.5 s)."""
    assert 0 < ui_server.REQUEST_DEADLINE_S < ui_server.TIMEOUT_S  # the deadline comes first
    assert ui_server.REQUEST_DEADLINE_S <= 4 * 3  # the trickle (a line every 4 s) gets 3 lines at most
    monkeypatch.setattr(ui_server.Handler, "request_deadline", 2.0, raising=False)
    host = f"Host: 127.0.0.1:{syn.port}\r\n".encode()
    socks = [socket.create_connection(("127.0.0.1", syn.port), timeout=10) for _ in range(40)]
    closed: dict[int, float] = {}
    t0 = time.monotonic()
    stop = threading.Event()

    def trickle() -> None:
        for s in socks:
            s.sendall(b"GET / HTTP/1.1\r\n" + host)
        n = 0
        while not stop.wait(0.5):
            n += 1
            for i, s in enumerate(socks):
                if i in closed:
                    continue
                try:
                    s.sendall(b"X-Slow-%d: %d\r\n" % (n, n))
                except OSError:
                    closed[i] = time.monotonic() - t0

    worker = threading.Thread(target=trickle, daemon=True)
    worker.start()
    try:
        time.sleep(3.0)  # past the deadline; the tricklers are still sending (never silent for 0.5 s)
        assert _get(syn.url, "/", cookie=syn.token).status == 200  # the owner gets a slot
        for s in socks:  # every trickler was dropped, unanswered (its request never finished)
            s.settimeout(5)
            try:
                got = s.recv(65536)
            except ConnectionResetError:
                got = b""
            assert got == b""  # closed by the server (our own 5 s would raise TimeoutError)
        assert time.monotonic() - t0 < 12
    finally:
        stop.set()
        worker.join(timeout=5)
        for s in socks:
            s.close()
    assert syn.ran == []


def test_connections_past_the_cap_cost_no_thread(syn: Synthetic) -> None:
    """Hole: a thread per connection without bound, so a local process opening connections by the
    thousand made the daemon that serves the viewer start a thread for each. Now at most MAX_CLIENTS."""
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", syn.port), timeout=10)
            for _ in range(ui_server.MAX_CLIENTS + 20)]
    try:
        time.sleep(1.0)
        assert threading.active_count() - before <= ui_server.MAX_CLIENTS
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 10  # the slots come back as the idle ones go
    while _get(syn.url, "/", cookie=syn.token).status != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_huge_header_or_too_many_is_refused_and_the_server_goes_on(syn: Synthetic) -> None:
    host = f"Host: 127.0.0.1:{syn.port}\r\n".encode()
    long_line = syn.raw(b"GET / HTTP/1.1\r\n" + host + b"X-A: " + b"a" * 70_000 + b"\r\n\r\n")
    many = syn.raw(b"GET / HTTP/1.1\r\n" + host + b"".join(b"X-%d: 1\r\n" % i for i in range(150)) + b"\r\n")
    assert _status(long_line) in (400, 431) and _status(many) in (400, 431)
    assert _get(syn.url, "/", cookie=syn.token).status == 200


# ---- Host, request target, token and cookie -----------------------------------------------------------

def test_other_spellings_of_the_host_are_refused(syn: Synthetic) -> None:
    p = syn.port
    for host in (f"LOCALHOST:{p}", f"Localhost:{p}", f"127.0.0.1.:{p}", f"localhost.:{p}", f"[::1]:{p}",
                 f"[::ffff:127.0.0.1]:{p}", f"127.1:{p}", f"2130706433:{p}", f"0x7f000001:{p}",
                 f"127.0.0.1:0{p}", f"127.0.0.1:{p}@evil.example", f"evil.example#127.0.0.1:{p}"):
        assert _get(syn.url, f"/?token={syn.token}", host=host).status == 403, host
        assert _get(syn.url, "/", host=host, cookie=syn.token).status == 403, host


def test_two_host_headers_are_refused_in_either_order(syn: Synthetic) -> None:
    """Hole: the first Host header decided, so the good one first and an evil one after was answered
    (a proxy or cache in between may key on the other one). Now two are refused (400) whatever the order."""
    p = syn.port
    cookie = f"Cookie: {syn.viewer.cookie}={syn.token}\r\n"
    for first, second in ((f"127.0.0.1:{p}", "evil.example"), ("evil.example", f"127.0.0.1:{p}"),
                          (f"127.0.0.1:{p}", f"127.0.0.1:{p}"), (f"localhost:{p}", f"127.0.0.1:{p}")):
        for req in (f"GET / HTTP/1.1\r\nHost: {first}\r\nHost: {second}\r\n{cookie}\r\n",
                    f"GET /?token={syn.token} HTTP/1.1\r\nHost: {first}\r\nHost: {second}\r\n\r\n",
                    f"HEAD / HTTP/1.1\r\nHost: {first}\r\n{cookie}Host: {second}\r\n\r\n"):
            answer = syn.raw(req.encode())
            assert _status(answer) == 400, (first, second, req.split()[0])
            assert b"Set-Cookie" not in answer
    form = "csrf=" + syn.viewer.csrf
    assert syn.post("/act/x", form, Host=f"127.0.0.1:{p}") == 200  # one Host: the action runs
    two = (f"POST /act/y HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nHost: evil.example\r\n{cookie}"
           f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(form)}\r\n\r\n{form}")
    assert _status(syn.raw(two.encode())) == 400
    assert syn.ran == [["x"]]
    assert _get(syn.url, "/", cookie=syn.token).status == 200


def test_an_absolute_form_target_is_refused(syn: Synthetic) -> None:
    """Hole: ``GET http://evil.example/?token=T`` was answered as ``/`` (the token taken, the cookie set)
    though the target names another host; a page is asked by its path only."""
    for target in (f"http://evil.example/?token={syn.token}", f"http://127.0.0.1:{syn.port}/?token={syn.token}",
                   "*"):
        answer = syn.raw(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{syn.port}\r\n\r\n".encode())
        assert _status(answer) == 400, target
        assert not _header(answer, "Set-Cookie")


def test_a_decoy_cookie_from_another_port_does_not_lock_the_user_out(syn: Synthetic) -> None:
    """Hole: cookies are per host, not per port, so a page on another port of 127.0.0.1 can set a cookie
    of the viewer's name; listed first, it hid the viewer's own and every page answered 403."""
    answer = syn.raw(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{syn.port}\r\n"
                     f"Cookie: {syn.viewer.cookie}=decoy; {syn.viewer.cookie}={syn.token}\r\n\r\n".encode())
    assert _status(answer) == 200
    wrong = syn.raw(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{syn.port}\r\n"
                    f"Cookie: {syn.viewer.cookie}=decoy; {COOKIE}_{syn.port + 1}={syn.token}\r\n\r\n".encode())
    assert _status(wrong) == 403  # the token under another port's cookie name is not this viewer's


def test_the_token_redirect_keeps_the_path_and_injects_nothing(syn: Synthetic) -> None:
    """Hole: the redirect that drops ``?token=`` quoted the path again, so ``/project/a%20b?token=T``
    went to ``/project/a%2520b`` (a page that does not exist). Checked too: no header injected from the
    path, no redirect off the host (``//evil``, ``/\\evil``), the cookie holding the token only."""
    def redirect(path: str) -> bytes:
        answer = syn.raw(f"GET {path}?token={syn.token} HTTP/1.1\r\nHost: 127.0.0.1:{syn.port}\r\n\r\n".encode())
        assert _status(answer) == 303, path
        return answer

    assert _header(redirect("/project/a%20b"), "Location") == ["/project/a%20b"]
    assert _header(redirect("/project/-home-u-%22%3E%3Cx"), "Location") == ["/project/-home-u-%22%3E%3Cx"]
    crlf = redirect("/%0d%0aSet-Cookie:%20evil=1")
    assert len(_header(crlf, "Set-Cookie")) == 1 and "evil" not in _header(crlf, "Set-Cookie")[0]
    for path in ("//evil.example/", "/\\evil.example/", "/%2F%2Fevil.example/", "/%5Cevil.example"):
        loc = _header(redirect(path), "Location")[0]
        assert loc.startswith("/") and not loc.startswith(("//", "/\\")), (path, loc)
    assert _header(redirect("/"), "Set-Cookie") == [
        f"{syn.viewer.cookie}={syn.token}; HttpOnly; SameSite=Strict; Path=/"]


def test_a_token_url_opened_from_another_site_goes_on_from_the_viewers_own_page(syn: Synthetic) -> None:
    """Hole (found in Chromium, below): opened from another site (``--open``'s file:// page, a link in a
    web mail), the 303 kept the navigation cross-site and Chromium sent no SameSite=Strict cookie with
    it: 403. Now such a request gets the cookie and a page of this origin that goes on (same-origin)."""
    answer = syn.raw(f"GET /project/a%22b?token={syn.token} HTTP/1.1\r\nHost: 127.0.0.1:{syn.port}\r\n"
                     f"Sec-Fetch-Site: cross-site\r\n\r\n".encode())
    assert _status(answer) == 200 and not _header(answer, "Location")
    assert _header(answer, "Set-Cookie") == [f"{syn.viewer.cookie}={syn.token}; HttpOnly; SameSite=Strict; Path=/"]
    assert b'content="0;url=/project/a%22b"' in answer and syn.token.encode() not in answer.split(b"\r\n\r\n")[1]


# ---- POST checks ---------------------------------------------------------------------------------------

def test_post_checks_hold_against_every_forgery(syn: Synthetic) -> None:
    ok = f"csrf={syn.viewer.csrf}"
    assert syn.post("/act/x", ok, Origin="null") == 403  # a sandboxed frame or a data: URL
    assert syn.post("/act/x", ok, Origin=f"http://127.0.0.1:{syn.port + 1}") == 403  # another port
    assert syn.post("/act/x", ok, **{"Sec-Fetch-Site": "same-site"}) == 403  # another port's page, new browser
    assert syn.post("/act/x", ok, **{"Sec-Fetch-Site": "none"}) == 403
    previous = Viewer({}, token=syn.token)  # a CSRF token of another start (even with this token)
    assert syn.post("/act/x", f"csrf={previous.csrf}") == 403
    assert syn.post("/act/x", f"csrf={syn.viewer.csrf[:-1]}") == 403
    assert syn.ran == []
    # method overrides are no POST: GET and HEAD to an action's path run nothing
    for method in ("GET", "HEAD"):
        answer = syn.raw(f"{method} /act/x HTTP/1.1\r\nHost: 127.0.0.1:{syn.port}\r\n"
                         f"Cookie: {syn.viewer.cookie}={syn.token}\r\nX-HTTP-Method-Override: POST\r\n"
                         f"X-Method-Override: POST\r\n\r\n".encode())
        assert _status(answer) == 404
    assert syn.post("/act/x?_method=DELETE", "_method=PUT") == 403  # (no CSRF token: the form is refused)
    assert syn.ran == []
    # an old browser sends neither Origin nor Sec-Fetch-Site: the CSRF token alone decides
    assert syn.post("/act/x", ok) == 200 and syn.ran == [["x"]]


# ---- what reaches a page ---------------------------------------------------------------------------------

def test_an_error_page_masks_a_secret_in_its_reason(syn: Synthetic) -> None:
    """Hole: a page that cannot be shown printed its reason as raised, and a reason may quote memory
    text (a line, a path): a secret in it reached the page unmasked."""
    answer = syn.raw(f"GET /boom HTTP/1.1\r\nHost: 127.0.0.1:{syn.port}\r\n"
                     f"Cookie: {syn.viewer.cookie}={syn.token}\r\n\r\n".encode())
    assert _status(answer) == 400
    assert KEY.encode() not in answer and b"redacted]" in answer


def test_static_paths_serve_the_listed_files_only(syn: Synthetic) -> None:
    for path in ("/static/..%2Fserver.py", "/static/%2e%2e/server.py", "/static/../server.py",
                 "/static/ui.css/..", "/static/ui.css%00.py", "/static//etc/passwd", "/static/__init__.py"):
        assert _get(syn.url, path, cookie=syn.token).status == 404, path


class _Attrs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[tuple[str, str, str]] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        if tag == "script":
            self.scripts.append(dict(attrs).get("src") or dict(attrs).get("id") or "inline")


HOSTILE_NAMES = ('-home-u-"><svg onload=alert(1)>', "javascript:alert(1)", "-home-u-%2F..%2F..", "..%2F..",
                 "-home-u-a'b c&d?x=1#y", "\\evil.example", "-home-u-\u202enl\tx",
                 "-home-u-<!--<script>'\"&")


def _page(url: str, path: str) -> str:
    import http.client

    u = urlsplit(url)
    conn = http.client.HTTPConnection("127.0.0.1", u.port, timeout=60)
    conn.request("GET", path, headers={"Host": u.netloc, "Cookie": f"{COOKIE}_{u.port}={url.split('token=')[1]}"})
    resp = conn.getresponse()
    body = resp.read().decode("utf-8")
    conn.close()
    assert resp.status == 200, (path, body[:300])
    return body


def test_hostile_folder_names_stay_text_and_every_link_stays_on_the_viewer(claude_home: Path, serve: Any) -> None:
    """A project folder name is attacker text: in an href, a data-* attribute and the page text it is
    escaped, its link leads back to its own page, and no link or script leaves the viewer's origin
    (so no Referer is ever sent elsewhere). Held before this review; kept as its proof."""
    for name in HOSTILE_NAMES:
        write_tree(claude_home / "projects" / name / "memory", {
            "MEMORY.md": "# Memory\n- [Note](note.md) — <script>alert(1)</script>\n",
            "note.md": topic("note", "a note", "project", "javascript:alert(1) <img src=x onerror=alert(1)>\n")})
    url = serve(claude_home)
    first = _page(url, "/")
    parsed = _Attrs()
    parsed.feed(first)
    assert {v for _, k, v in parsed.attrs if k == "data-project"} == set(HOSTILE_NAMES)
    pages = [first]
    for name in HOSTILE_NAMES:  # its link on the first screen leads to its own page, which names it
        link = "/project/" + quote(name, safe="/")
        assert ("a", "href", link) in parsed.attrs, name
        body = _page(url, link)
        assert str(escape(name)) in body and ("details", "data-rel", "note.md") in _parse(body).attrs
        pages.append(body)
    for body in pages:
        p = _parse(body)
        assert not [k for _, k, _ in p.attrs if k.startswith("on")]
        assert set(p.scripts) <= {"/static/uPlot.iife.min.js", "/static/charts.js", "chart-data", "spark-data"}
        for tag, k, v in p.attrs:
            if k in ("href", "src", "action"):
                assert v.startswith(("/", "#")) and not v.startswith(("//", "/\\")), (tag, k, v)
        assert "<svg" not in body and "<img" not in body and "<script>alert" not in body


def _parse(body: str) -> _Attrs:
    p = _Attrs()
    p.feed(body)
    return p


def test_a_command_to_paste_takes_a_hostile_folder_name_as_one_word(claude_home: Path, serve: Any) -> None:
    """Hole: the commands a page tells the user to run (``memd undo P RUN``, ``memd catchup P --retry``,
    ``memd sync --keep-local P``) printed the folder name as is, and a folder named ``-home-u-$(touch X)``
    (a clone's folder name: no slash needed) made the pasted command run the attacker's. Now each name
    is shell-quoted (``shlex.quote``): the shell sees it as one word."""
    import shlex

    from memd import history, layout
    from memd.sync import held

    name = "-home-u-$(touch PWNED);`id`"
    mem = write_tree(claude_home / "projects" / name / "memory", {
        "MEMORY.md": "# Memory\n- [Old](old.md) — the old hook\n", "old.md": topic("old", "old one", "project")})
    state = layout.state_dir("")
    before = history.snapshot_before(state, name, mem, "dream", run="dream-20261202-0300")
    new_index = b"# Memory\n- [Old](old.md) \xe2\x80\x94 a sharper hook\n"
    (mem / "MEMORY.md").write_bytes(new_index)
    history.record_after(state, name, before, {"MEMORY.md": new_index}, "dream", "dream-20261202-0300", "d")
    url = serve(claude_home)
    commands = []
    for path in ("/project/" + quote(name, safe=""), "/undo/" + quote(name, safe="") + "/dream-20261202-0300",
                 "/retry/" + quote(name, safe="")):
        body = _page(url, path)
        commands += [html.unescape(c) for c in re.findall(r"<code>(memd [^<]*)</code>", body) if "PWNED" in c]
    assert {c.split()[1] for c in commands} >= {"undo", "catchup"}, commands
    for c in commands:
        words = shlex.split(c)
        assert name in words, c  # the name, whole, as one word
    line = held.undone_line(name, ["a.md"])  # memd status's words (and the held page's) too
    assert f"memd sync --keep-local {shlex.quote(name)}" in line and f"--take-remote {shlex.quote(name)}" in line


def test_a_topic_file_symlinked_out_of_the_folder_is_not_shown(claude_home: Path, serve: Any,
                                                               tmp_path: Path) -> None:
    """memfolder's confinement holds for the viewer: a topic file that is a symlink leaving the memory
    folder is not read (its content never reaches the page); one inside the folder is."""
    outside = tmp_path / "private.md"
    outside.write_text(topic("priv", "private", "user", "OUTSIDE-SECRET-TEXT\n"))
    mem = write_tree(claude_home / "projects" / "-home-u-link" / "memory", {
        "MEMORY.md": "# Memory\n- [Leak](leak.md) — a link\n- [In](in.md) — inside\n",
        "real.md": topic("real", "real", "project", "INSIDE-TEXT\n")})
    (mem / "leak.md").symlink_to(outside)
    (mem / "in.md").symlink_to(mem / "real.md")
    body = _page(serve(claude_home), "/project/-home-u-link")
    assert "OUTSIDE-SECRET-TEXT" not in body
    assert "INSIDE-TEXT" in body


# ---- the token never in another process's view ------------------------------------------------------------

def test_memd_ui_open_keeps_the_token_off_the_browsers_command_line(claude_home: Path, tmp_path: Path) -> None:
    """Hole: ``memd ui --open`` handed the URL with its token to the browser as an argument, and a
    process's command line is readable by every user of the machine (/proc/PID/cmdline, ps). Now the
    browser is given a file only the user can read (mode 0600, in memd's state folder) that sends it on;
    the file goes when the viewer stops."""
    record = tmp_path / "browser-argv"
    browser = tmp_path / "browser.sh"
    # the browser is still running when the viewer is stopped (the stop lands while memd waits for it)
    browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}.tmp && mv {record}.tmp {record}\nsleep 2\n")
    browser.chmod(0o755)
    env = dict(os.environ, BROWSER=str(browser))
    proc = subprocess.Popen([sys.executable, "-m", "memd", "--claude-dir", str(claude_home), "ui", "--open",
                             "--here"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        token = line.strip().split("token=", 1)[1]
        deadline = time.monotonic() + 30
        while not record.exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        argv = record.read_text().splitlines()
        assert argv and not [a for a in argv if token in a], argv
        given = argv[-1].removeprefix("file://")
        assert stat.S_IMODE(os.stat(given).st_mode) == 0o600
        assert token in Path(given).read_text()
    finally:
        # SIGTERM, as `kill` or a service manager stops it (SIGINT is ignored by a child of a background
        # job of a non-interactive shell, as CI may run this): the page holding the token goes too
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert not Path(given).exists()


def test_a_secret_in_a_file_name_is_masked_on_the_page(claude_home: Path, serve: Any) -> None:
    """Hole: the page masked the secrets in a file's text but printed its name as is (a topic file's
    name in its summary and its ``data-rel``), so a key in a file name reached the page."""
    mem = write_tree(claude_home / "projects" / "-home-u-named" / "memory", {
        "MEMORY.md": f"# Memory\n- [Key]({KEY}.md) — named for it\n",
        f"{KEY}.md": topic("key", "a key", "reference", "the body\n")})
    assert (mem / f"{KEY}.md").exists()
    body = _page(serve(claude_home), "/project/-home-u-named")
    assert KEY not in body and "the body" in body


# ---- a hostile local process of another user ----------------------------------------------------------------

_CLIENT = """
import socket, sys, time
port, cookie, hold = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
held = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(hold)]
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(f"GET / HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\nCookie: {cookie}\\r\\n\\r\\n".encode())
try:
    got = s.recv(4096)
except ConnectionResetError:
    got = b""
print(got.split(b" ", 2)[1].decode() if got else "closed", flush=True)
if hold:
    time.sleep(float(sys.argv[4]))
"""


def test_another_users_process_is_refused_even_with_the_token(syn: Synthetic) -> None:
    """Hole: the token was the only thing between the viewer and every user of the machine, and it leaks
    where the viewer cannot stop it (the browser sends the cookie to every port of 127.0.0.1: a page of
    another user's server there gets it). Now the kernel is asked whose the connecting socket is
    (memd.ui.peer): another user's process is closed unanswered with the right token, before it takes a
    slot (its connections held open starve no one); the user's own is served."""
    if os.getuid() != 0 or not Path("/proc/net/tcp").exists():
        pytest.skip("needs root (to run a client as user nobody) and Linux's /proc/net/tcp")
    cookie = f"{syn.viewer.cookie}={syn.token}"

    def as_nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    python = "/usr/bin/python3"
    mine = subprocess.run([python, "-c", _CLIENT, str(syn.port), cookie, "0"], capture_output=True, text=True,
                          timeout=60, check=True)
    assert mine.stdout.strip() == "200"
    hog = subprocess.Popen([python, "-c", _CLIENT, str(syn.port), cookie, str(ui_server.MAX_CLIENTS + 8), "15"],
                           stdout=subprocess.PIPE, text=True, preexec_fn=as_nobody, cwd="/")
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "closed"
        # its MAX_CLIENTS + 8 connections are still open: the user's own request is served all the same
        assert _get(syn.url, "/", cookie=syn.token).status == 200
    finally:
        hog.kill()
        hog.wait()


def test_the_kernel_names_the_owner_of_a_loopback_connection() -> None:
    from memd.ui import peer

    if not Path(peer.TCP_TABLE).exists():
        pytest.skip("no /proc/net/tcp here (not Linux): the token alone decides")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            conn, _ = listener.accept()
            with conn:
                me, there = client.getsockname(), listener.getsockname()
                assert peer.owner(me, there) == os.getuid()
                assert peer.diag_owner(me, there) == os.getuid()  # sock_diag, one socket
                assert peer.owner_in(Path(peer.TCP_TABLE).read_text(), me, there) == os.getuid()  # the table
                assert peer.diag_owner(there, me) == os.getuid()  # (the viewer's own end)
                with pytest.raises(peer.Unknown):  # a connection that is not there
                    peer.owner(("127.0.0.1", 1), there)
                assert peer.diag_owner(("127.0.0.1", 1), there) is None
    table = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
             "   0: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000  0 1 1\n"
             "   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  65534  0 2 1\n")
    if sys.byteorder == "little":  # (the table writes the address in the machine's order)
        assert peer.owner_in(table, ("127.0.0.1", 0xD431), ("127.0.0.1", 0x1F90)) == 65534
        assert peer.owner_in(table, ("127.0.0.1", 0x1F90), ("127.0.0.1", 0xD431)) == 1000


# ---- in a real browser ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_open_page_takes_chromium_to_the_viewer(syn: Synthetic, browser: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``--open``'s page (memd.ui.opener) leads a real browser from file:// to the viewer, which keeps
    the token as its cookie and drops it from the address, as the printed URL does."""
    import webbrowser

    from selenium.webdriver.common.by import By

    from memd.ui.opener import open_browser

    given: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda u, *a, **k: given.append(u) or True)
    page = open_browser(syn.url, tmp_path / "state", syn.port)
    assert given == [page.as_uri()] and syn.token not in given[0]
    browser.get(given[0])
    deadline = time.monotonic() + 20
    while not browser.current_url.startswith(f"http://127.0.0.1:{syn.port}/"):
        assert time.monotonic() < deadline, browser.current_url
        time.sleep(0.1)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.ID, "error"), message=browser.page_source[:500])
    assert "token=" not in browser.current_url
    assert browser.find_element(By.ID, "error").text == "the page"  # (the synthetic viewer's first page)


@pytest.mark.slow
def test_chromium_sends_the_viewers_cookie_to_another_port(syn: Synthetic, browser: Any) -> None:
    """Why the kernel is asked whose a connection is (memd.ui.peer): cookies are per host, not per port,
    so once the viewer is open, a page of another server on 127.0.0.1 gets the viewer's token. (A fact of
    the browser this test keeps true; the viewer's answer to it is the test above, with user nobody.)"""
    seen: list[str] = []
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]

        def answer() -> None:
            conn, _ = other.accept()
            with conn:
                seen.append(conn.recv(65536).decode("latin-1"))
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        browser.get(syn.url)  # the viewer: its cookie set
        browser.get(f"http://127.0.0.1:{port}/")
        t.join(timeout=20)
    assert seen and f"{syn.viewer.cookie}={syn.token}" in seen[0]


@pytest.mark.slow
def test_hostile_folder_names_run_nothing_in_chromium(claude_home: Path, serve: Any, browser: Any) -> None:
    """The folder names of the plain-HTTP test above, in a real browser: the first screen and each
    project's page (reached by clicking its link) create no element of theirs and run nothing."""
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    for name in HOSTILE_NAMES:
        write_tree(claude_home / "projects" / name / "memory", {
            "MEMORY.md": "# Memory\n- [Note](note.md) — <script>window.__pwned = 1</script>\n",
            "note.md": topic("note", "a note", "project", "<img src=x onerror='window.__pwned = 2'>\n")})
    url = serve(claude_home)
    test_ui._open(browser, url)
    names = [a.get_attribute("data-project") for a in browser.find_elements(By.CSS_SELECTOR, "tr.project")]
    assert sorted(names) == sorted(HOSTILE_NAMES)
    for i in range(len(HOSTILE_NAMES)):
        browser.get(url.split("?")[0])
        row = browser.find_elements(By.CSS_SELECTOR, "tr.project")[i]
        name = row.get_attribute("data-project")
        row.find_element(By.CSS_SELECTOR, "td a").click()
        assert browser.find_element(By.TAG_NAME, "h1").text.endswith(name) or name in browser.page_source
        assert browser.current_url.startswith(url.split("?")[0] + "project/")
        counts = browser.execute_script(
            "return ['script:not([src^=\"/static/\"]):not(#chart-data)', 'img', 'svg', '[onerror]', '[onload]']"
            ".map(s => document.querySelectorAll(s).length)")
        assert counts == [0, 0, 0, 0, 0], name
        assert browser.execute_script("return window.__pwned") is None
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018 (reading it raises when there is none)
