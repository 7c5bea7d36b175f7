"""`memd ui` (issue 26): the viewer's safety checks with a plain HTTP client, its pages in a real headless
Chromium (the distribution's, with its driver; skipped with the reason where it cannot be had).

The figures a page shows are compared with what the CLI prints for the same folders (`memd status
--format json`, `memd check --format json`), never with numbers of the test's own.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from memd.cli import Context
from memd.commands.ui import pages
from memd.ui.server import COOKIE, Running, Viewer
from tests.plugins.memory_folders import ROOT, topic, write_tree

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
DRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "ui-home"  # (claude_home's HOME is tmp_path/home)
    h.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("XDG_STATE_HOME", str(h / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(h / ".config"))
    return h


def _ctx(claude: Path) -> Context:
    return Context(argparse.Namespace(claude_dir=str(claude)))


@pytest.fixture
def serve() -> Iterator[Any]:
    """serve(claude) -> the viewer's URL with its token (the server runs until the test ends)."""
    running: list[Running] = []

    def start(claude: Path) -> str:
        r = Running(Viewer(pages(_ctx(claude))))
        running.append(r)
        return r.__enter__()

    yield start
    for r in running:
        r.__exit__(None, None, None)


def _cli(claude: Path, *args: str) -> Any:
    proc = subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(claude), *args], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _get(url: str, path: str = "/", *, host: str | None = None, cookie: str | None = None,
         method: str = "GET") -> http.client.HTTPResponse:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30)
    headers = {"Host": host if host is not None else u.netloc}
    if cookie is not None:
        headers["Cookie"] = f"{COOKIE}_{u.port}={cookie}"
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


# ---- safety, with a plain HTTP client ---------------------------------------------------------------

def test_a_wrong_host_or_a_missing_token_is_refused(claude_home: Path, serve: Any) -> None:
    url = serve(claude_home)
    u = urlsplit(url)
    token = url.split("token=", 1)[1]
    port = u.port
    # DNS rebinding: the right port reached under another name, even with the right token
    for host in (f"evil.example:{port}", f"127.0.0.1.nip.io:{port}", "127.0.0.1", f"localhost:{port + 1}", ""):
        assert _get(url, f"/?token={token}", host=host).status == 403, host
        assert _get(url, "/", host=host, cookie=token).status == 403, host
    # no token, a wrong one, a token's prefix
    assert _get(url, "/").status == 403
    assert _get(url, "/?token=nope").status == 403
    assert _get(url, "/", cookie=token[:-1]).status == 403
    assert _get(url, "/static/ui.css").status == 403
    assert _get(url, "/", method="POST").status == 403
    # the token in the URL once: kept as a cookie, dropped from the address
    first = _get(url, f"/?token={token}")
    assert first.status == 303 and first.getheader("Location") == "/"
    cookie = first.getheader("Set-Cookie") or ""
    assert cookie.startswith(f"{COOKIE}_{port}={token};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        ok = _get(url, "/", host=host, cookie=token)
        assert ok.status == 200, host
        csp = ok.getheader("Content-Security-Policy") or ""
        for rule in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'",
                     "frame-ancestors 'none'"):
            assert rule in csp
        assert ok.getheader("X-Content-Type-Options") == "nosniff"
        assert not [h for h, _ in ok.getheaders() if h.lower().startswith("access-control-")]  # no CORS
    # read-only: every state-changing method is refused, even with the token
    for method in ("POST", "PUT", "DELETE"):
        assert _get(url, "/", cookie=token, method=method).status == 405


def test_a_page_that_cannot_be_shown_says_why_with_a_4xx(claude_home: Path, serve: Any) -> None:
    """A run not in the history, an unknown project, a path outside the pages: a clear answer and a
    status that says it failed (not 200), never a traceback."""
    _over_budget(claude_home)
    url = serve(claude_home)
    token = url.split("token=", 1)[1]
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30)
    conn.request("GET", "/undo/-home-u-big/no-such-run", headers={"Host": u.netloc,
                                                                  "Cookie": f"{COOKIE}_{u.port}={token}"})
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    assert r.status == 400 and "no runs in the history of -home-u-big" in body and "Traceback" not in body
    assert _get(url, "/project/-home-u-nobody", cookie=token).status == 404
    assert _get(url, "/static/..%2Fserver.py", cookie=token).status == 404


def test_open_without_a_browser_says_so(claude_home: Path) -> None:
    """`--open` where no browser can start (a headless box, over ssh): the URL is printed, and a line
    says the browser did not open instead of saying nothing."""
    env = dict(os.environ, BROWSER="false")  # webbrowser runs it: it fails, as no browser would start
    proc = subprocess.Popen([sys.executable, "-m", "memd", "--claude-dir", str(claude_home), "ui", "--here", "--open"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "no browser" not in seen:  # never blocks past the deadline
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                seen += proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert seen.startswith("memd ui: http://127.0.0.1:"), seen
    assert "no browser could be started here; open the URL above" in seen, seen


def test_a_client_gone_mid_answer_prints_nothing_and_a_failure_one_line(
        claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """socketserver prints a traceback for a client that hung up (the daemon's log when it serves the
    viewer): a hang-up or a silent client prints nothing, another failure one line."""
    from memd.ui.server import make_server

    server = make_server(Viewer(pages(_ctx(claude_home))))
    try:
        for e in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe"),
                  TimeoutError("timed out"), ValueError("odd")):
            try:
                raise e
            except Exception:
                server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines() == ["memd ui: a request failed: ValueError: odd"], err


def test_the_server_listens_on_loopback_only(claude_home: Path) -> None:
    from memd.ui.server import make_server

    viewer = Viewer(pages(_ctx(claude_home)))
    server = make_server(viewer)
    try:
        assert server.server_address[0] == "127.0.0.1" and server.socket.getsockname()[0] == "127.0.0.1"
        assert viewer.port == server.server_address[1] > 0
        assert viewer.allowed_hosts() == {f"127.0.0.1:{viewer.port}", f"localhost:{viewer.port}"}
    finally:
        server.server_close()


def test_memd_ui_prints_its_url_and_serves_it(claude_home: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "memd", "--claude-dir", str(claude_home), "ui"], cwd=ROOT,
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("memd ui: http://127.0.0.1:") and "?token=" in line, line
        url = line.split()[2]
        assert _get(url, "/").status == 403
        assert _get(url, urlsplit(url).path + "?" + urlsplit(url).query).status == 303
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_bad_port_is_a_message_not_a_traceback(claude_home: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(claude_home), "ui", "--port", "70000"],
                          cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "0 to 65535" in proc.stderr


# ---- the pages, in a real headless browser ----------------------------------------------------------

def _first(paths: tuple[str, ...]) -> str | None:
    return next((p for p in paths if os.access(p, os.X_OK)), shutil.which(os.path.basename(paths[0])))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    chromium, driver = _first(CHROMIUM), _first(DRIVER)
    if chromium is None or driver is None:
        pytest.skip("no Chromium with its driver (apt-get install chromium chromium-driver; .ci/run does it "
                    "where allowed)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    d.set_page_load_timeout(60)
    try:
        yield d
    finally:
        d.quit()


def _open(browser: Any, url: str, path: str = "/") -> None:
    browser.delete_all_cookies() if browser.current_url.startswith("http") else None
    browser.get(url)  # the token: kept as the cookie, then the page
    if path != "/":
        u = urlsplit(url)
        browser.get(f"{u.scheme}://{u.netloc}{path}")
    assert "token=" not in browser.current_url


def _rows(browser: Any) -> dict[str, dict[str, str]]:
    from selenium.webdriver.common.by import By

    out = {}
    for tr in browser.find_elements(By.CSS_SELECTOR, "#projects tr.project"):
        keys = ("lines", "max-lines", "chars", "max-chars", "level", "hidden", "errors", "warnings", "infos")
        out[tr.get_attribute("data-project")] = {k: tr.get_attribute(f"data-{k}") for k in keys} | {"text": tr.text}
    return out


@pytest.mark.slow
def test_the_first_screen_lists_the_real_projects_with_statuss_figures(claude_data: Path, home: Path,
                                                                       serve: Any, browser: Any) -> None:
    status = _cli(claude_data, "status", "--format", "json")
    want = {p["project"]: p for p in status["projects"] if p["has_memory"]}
    assert want  # the shared data has projects with memory
    _open(browser, serve(claude_data))
    shown = _rows(browser)
    assert set(shown) == set(want)
    for name, p in want.items():
        ix, f, row = p["index"], p["findings"], shown[name]
        assert (row["lines"], row["max-lines"], row["chars"], row["max-chars"], row["level"], row["hidden"]) == (
            str(ix["lines"]), str(ix["max_lines"]), str(ix["chars"]), str(ix["max_chars"]), ix["level"],
            str(ix["hidden_entries"]))
        assert (row["errors"], row["warnings"], row["infos"]) == tuple(
            str(f.get(k, 0)) for k in ("error", "warning", "info"))
        assert f"{ix['lines']:,}/{ix['max_lines']}" in row["text"]
        assert f"{ix['chars']:,}/{ix['max_chars']:,}" in row["text"]
        within = ix["lines"] <= ix["max_lines"] and ix["chars"] <= ix["max_chars"]
        assert ("past the cut" in row["text"]) == (not within)


def _over_budget(claude: Path, name: str = "-home-u-big") -> Path:
    mem = claude / "projects" / name / "memory"
    lines = ["# Memory", "", "<!-- a comment Claude Code strips -->"]
    files: dict[str, str | bytes] = {}
    for i in range(240):
        lines.append(f"- [Note {i}](note_{i}.md) — what note {i} holds")
        files[f"note_{i}.md"] = topic(f"note {i}", f"note number {i}", "project")
    files["MEMORY.md"] = "\n".join(lines) + "\n"
    write_tree(mem, files)
    return mem


@pytest.mark.slow
def test_a_project_page_draws_the_cut_where_memd_check_puts_it(claude_home: Path, serve: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    mem = _over_budget(claude_home)
    (report,) = _cli(claude_home, "check", "--format", "json", "--", "-home-u-big")
    files = {p: p.stat().st_mtime_ns for p in mem.rglob("*")}
    hidden = sorted(f["line"] for f in report["findings"] if f["code"] == "MEM003")
    (over,) = [f for f in report["findings"] if f["code"] == "MEM001"]
    assert hidden and over["line"] == hidden[0]
    _open(browser, serve(claude_home), "/project/-home-u-big")
    cut = browser.find_element(By.ID, "cut")
    after = int(cut.get_attribute("data-after"))
    marked = sorted(int(li.get_attribute("data-line"))
                    for li in browser.find_elements(By.CSS_SELECTOR, "li.hidden-entry"))
    assert marked == hidden  # the entries check names as never loaded, and no others
    assert after < hidden[0]  # the cut is drawn above the first hidden entry ...
    loaded = [int(li.get_attribute("data-line")) for li in browser.find_elements(By.CSS_SELECTOR, "li.line.loaded")]
    assert max(loaded) == after  # ... right below the last line that loads
    # the line right after the cut in the page is the first line not loaded
    nxt = browser.find_element(By.XPATH, "//li[@id='cut']/following-sibling::li[1]")
    assert int(nxt.get_attribute("data-line")) == after + 1 and "cut" in nxt.get_attribute("class")
    assert report["budget"]["hidden_entries"] == len(marked)
    stripped = browser.find_element(By.CSS_SELECTOR, "li.line[data-line='3']")
    assert "stripped" in stripped.get_attribute("class")  # the comment never loads
    assert {p: p.stat().st_mtime_ns for p in mem.rglob("*")} == files  # nothing in the memory folder changed
    # the first screen marks the cut too, with check's count, and leads to it
    _open(browser, serve(claude_home))
    note = browser.find_element(By.CSS_SELECTOR, "tr.project[data-project='-home-u-big'] a.cut-note")
    assert f"{len(hidden)} entries never load" in note.text
    note.click()
    assert browser.current_url.endswith("/project/-home-u-big#cut")
    assert browser.find_element(By.ID, "cut").is_displayed()


@pytest.mark.slow
def test_a_runs_diff_is_shown(claude_home: Path, serve: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    from memd import history, layout

    mem = claude_home / "projects" / "-home-u-app" / "memory"
    write_tree(mem, {"MEMORY.md": "# Memory\n- [Old](old.md) — the old hook\n",
                     "old.md": topic("old", "old one", "project")})
    state = layout.state_dir("")
    before = history.snapshot_before(state, "-home-u-app", mem, "dream", run="dream-20261202-0300")
    new_index = b"# Memory\n- [Old](old.md) \xe2\x80\x94 a sharper hook\n"
    (mem / "MEMORY.md").write_bytes(new_index)
    history.record_after(state, "-home-u-app", before, {"MEMORY.md": new_index}, "dream", "dream-20261202-0300",
                         "dream: 1 changed")
    assert [r.run for r in history.list_runs(state, "-home-u-app")] == ["dream-20261202-0300"]
    _open(browser, serve(claude_home), "/project/-home-u-app")
    run = browser.find_element(By.CSS_SELECTOR, "details.run[data-run='dream-20261202-0300']")
    assert not run.find_element(By.CSS_SELECTOR, "pre.diff").is_displayed()  # closed until opened
    run.find_element(By.TAG_NAME, "summary").click()
    diff = run.find_element(By.CSS_SELECTOR, "pre.diff")
    assert diff.is_displayed()
    adds = [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.add")]
    dels = [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.del")]
    assert adds == ["+- [Old](old.md) — a sharper hook"] and dels == ["-- [Old](old.md) — the old hook"]
    assert "memd undo -home-u-app dream-20261202-0300" in run.text


HOSTILE = ('<script>window.__pwned = 1; alert(1)</script>'
           '"><img src=x onerror="window.__pwned = 2; alert(2)">'
           "'><svg onload=\"window.__pwned = 3\"></svg>")


@pytest.mark.slow
def test_a_hostile_topic_file_renders_as_text_and_runs_nothing(claude_home: Path, serve: Any,
                                                               browser: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    mem = claude_home / "projects" / "-home-u-evil" / "memory"
    write_tree(mem, {
        "MEMORY.md": f"# Memory\n- [Evil {HOSTILE}](evil.md) — {HOSTILE}\n",
        "evil.md": f"---\nname: evil\ndescription: \"{HOSTILE.replace(chr(34), '')}\"\ntype: project\n---\n\n"
                   f"{HOSTILE}\n",
    })
    _open(browser, serve(claude_home), "/project/-home-u-evil")
    for d in browser.find_elements(By.CSS_SELECTOR, "details"):
        d.find_element(By.TAG_NAME, "summary").click()
    time.sleep(0.3)
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 (reading it raises when there is none)
    assert browser.execute_script("return window.__pwned") is None
    counts = browser.execute_script(  # (the page's own: the charts' data block and /static scripts)
        "return ['script:not([src^=\"/static/\"]):not(#chart-data)', 'img', 'svg', '[onerror]', '[onload]']"
        ".map(s => document.querySelectorAll(s).length)")
    assert counts == [0, 0, 0, 0, 0]
    body = browser.find_element(By.CSS_SELECTOR, "details.topic[data-rel='evil.md'] pre.body").text
    assert "<script>window.__pwned = 1; alert(1)</script>" in body and '<img src=x onerror=' in body
    assert "<script>" in browser.find_element(By.ID, "index").text  # the index line, as text too
    # the overview too: the project's name is the folder's, the rest is figures
    _open(browser, browser.current_url.split("/project/")[0] + "/", "/")
    assert browser.execute_script("return window.__pwned") is None


@pytest.mark.slow
def test_a_secret_in_memory_is_masked_on_the_page(claude_home: Path, serve: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4 + "-AbCdEfGhAA"
    mem = claude_home / "projects" / "-home-u-sec" / "memory"
    write_tree(mem, {"MEMORY.md": "# Memory\n- [Keys](keys.md) — where keys live\n",
                     "keys.md": topic("keys", "the keys", "reference", f"The key was {key} once.\n")})
    _open(browser, serve(claude_home), "/project/-home-u-sec")
    assert key not in browser.page_source
    browser.find_element(By.CSS_SELECTOR, "details.topic summary").click()
    assert "redacted]" in browser.find_element(By.CSS_SELECTOR, "details.topic pre.body").text


@pytest.mark.slow
def test_conflict_blocks_and_held_sync_show_where_check_and_status_put_them(claude_home: Path, serve: Any,
                                                                            browser: Any) -> None:
    from selenium.webdriver.common.by import By

    from memd import layout
    from memd.core import conflict
    from memd.sync import held

    mem = claude_home / "projects" / "-home-u-sync" / "memory"
    block = f"{conflict.begin_line('laptop', '2026-12-01')}\nThe database is MySQL now.\n{conflict.END}\n"
    write_tree(mem, {"MEMORY.md": "# Memory\n- [DB](db.md) — the database\n",
                     "db.md": topic("db", "the database", "project", f"The database is Postgres 16.\n{block}")})
    held.hold_project(layout.state_dir(""), "-home-u-sync", "the remote was rewritten",
                      "`memd sync --adopt -home-u-sync`")
    (report,) = _cli(claude_home, "check", "--format", "json", "--", "-home-u-sync")
    want = sorted((f["path"], f["line"]) for f in report["findings"] if f["code"] == "MEM090")
    assert want
    status = subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(claude_home), "status"], cwd=ROOT,
                            env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False).stdout
    url = serve(claude_home)
    _open(browser, url)
    row = browser.find_element(By.CSS_SELECTOR, "tr.project[data-project='-home-u-sync']")
    assert row.get_attribute("data-conflicts") == str(len(want))
    assert "the remote was rewritten" in row.text and "the remote was rewritten" in status
    _open(browser, url, "/project/-home-u-sync")
    shown = sorted((li.get_attribute("data-path"), int(li.get_attribute("data-line")))
                   for li in browser.find_elements(By.CSS_SELECTOR, "#sync li.conflict"))
    assert shown == want
    assert "memd sync --adopt -home-u-sync" in browser.find_element(By.ID, "sync").text


@pytest.mark.slow
def test_the_morning_report_is_a_page(claude_home: Path, serve: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    from memd import layout
    from memd.jobs.checkin import reports_dir

    url = serve(claude_home)
    _open(browser, url, "/report")
    assert browser.find_element(By.ID, "no-report").is_displayed()
    folder = reports_dir(layout.state_dir(""))
    folder.mkdir(parents=True)
    (folder / "checkin-20261202-0700.md").write_text(f"# memd check-in\n\n- dream: 1 changed {HOSTILE}\n")
    browser.refresh()
    text = browser.find_element(By.ID, "report").text
    assert text.startswith("# memd check-in") and "<script>" in text
    assert browser.execute_script("return document.querySelectorAll('script, img').length") == 0


@pytest.mark.slow
def test_the_first_screen_shows_the_last_catchup_and_dream_and_the_weeks_cost(claude_home: Path, serve: Any,
                                                                               browser: Any) -> None:
    from selenium.webdriver.common.by import By

    from memd import layout
    from memd.state import StateStore

    write_tree(claude_home / "projects" / "-home-u-app" / "memory", {"MEMORY.md": "# Memory\n"})
    now = time.time()
    with StateStore.open(layout.state_dir("")) as st:
        for job, ago, outcome, cost in (("dream", 9 * 86400, "changed", 1.0), ("dream", 3600, "failed", 0.25),
                                        ("catchup", 7200, "changed", 0.125), ("catchup", 600, "skipped", 0.0)):
            rid = st.start_run(job, "-home-u-app", now - ago)
            st.finish_run(rid, outcome=outcome, ended=now - ago + 5, cost_usd=cost, summary=f"{job} {outcome}")
    _open(browser, serve(claude_home))
    row = browser.find_element(By.CSS_SELECTOR, "tr.project[data-project='-home-u-app']")
    assert "failed" in row.find_element(By.CSS_SELECTOR, "td.last-dream").text  # the newest dream
    assert "changed" in row.find_element(By.CSS_SELECTOR, "td.last-catchup").text  # a skipped one never ran
    assert row.find_element(By.CSS_SELECTOR, "td.week-cost").text == "$0.3750"  # the 9-day-old dream is out


def _png_rgb(data: bytes) -> list[tuple[int, int, int]]:
    """Every pixel of an 8-bit RGB(A) PNG (Chromium's screenshots), as (r, g, b): the test's own reader."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    kind = depth = 0
    while pos < len(data):
        (n,), tag = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if tag == b"IHDR":
            width, _, depth, kind = struct.unpack(">IIBB", body[:10])
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and kind in (2, 6)
    bpp = 4 if kind == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    prev, out = bytearray(stride), []
    for at in range(0, len(raw), stride + 1):
        f, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.extend((line[i], line[i + 1], line[i + 2]) for i in range(0, stride, bpp))
        prev = line
    return out


def _hue(rgb: tuple[int, int, int]) -> str:
    r, g, b = rgb
    if r > 150 and g < 90 and b < 90:
        return "red"
    if r > 150 and g > 110 and b < 110:
        return "amber"
    if g > 90 and g > r + 30 and g > b + 30:
        return "green"
    return "other"


@pytest.mark.slow
def test_each_gauge_has_its_levels_colour(claude_home: Path, serve: Any, browser: Any) -> None:
    """Hole: the gauges' ``high`` was 80% of the limit and a meter's value is clamped to its max, so an
    index past the limit (Claude Code cuts it) was drawn in the near-budget colour. Now each gauge's
    colour is its dimension's level: within (green), near (amber), over (red), as Chromium draws it."""
    from selenium.webdriver.common.by import By

    def entries(n: int) -> str:
        return "# Memory\n" + "".join(f"- [N{i}](n{i}.md) — note {i}\n" for i in range(n))

    write_tree(claude_home / "projects" / "-home-u-ok" / "memory", {"MEMORY.md": entries(100)})  # half the lines
    write_tree(claude_home / "projects" / "-home-u-near" / "memory", {"MEMORY.md": entries(170)})
    write_tree(claude_home / "projects" / "-home-u-full" / "memory", {"MEMORY.md": entries(199)})  # 200 lines
    _over_budget(claude_home)  # 243 lines
    _open(browser, serve(claude_home))
    want = {"-home-u-ok": ("ok", "green"), "-home-u-near": ("near", "amber"), "-home-u-full": ("near", "amber"),
            "-home-u-big": ("over", "red")}
    for name, (level, hue) in want.items():
        meter = browser.find_element(By.CSS_SELECTOR, f"tr.project[data-project='{name}'] meter.gauge.lines")
        assert meter.get_attribute("data-level") == level, name
        seen = [_hue(px) for px in _png_rgb(meter.screenshot_as_png)]
        coloured = {h: seen.count(h) for h in ("red", "amber", "green")}
        assert max(coloured, key=lambda h: coloured[h]) == hue, (name, coloured)
        assert coloured[hue] > len(seen) // 8, (name, coloured)  # a bar of that colour, not a few pixels
    # the characters' gauges: all four within 80% of 25,000
    for name in want:
        meter = browser.find_element(By.CSS_SELECTOR, f"tr.project[data-project='{name}'] meter.gauge.chars")
        assert meter.get_attribute("data-level") == "ok"
