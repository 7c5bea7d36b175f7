"""`memd ui`'s actions (issue 26): undo a run, retry parked catch-up spans, accept held sync files, each
behind a confirmation page and a POST with the CSRF token that runs the CLI's own code.

The POST's safety with a plain HTTP client (no CSRF token, a wrong one, another site's Origin or
Sec-Fetch-Site, an oversize or non-form body: refused, nothing changed; the same request with the token
changes); the actions in a real headless Chromium, their results compared with what the CLI does (`memd
undo --dry-run`'s plan, `memd catchup --retry`'s state, `memd status`'s held lines).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from memd.cli import Context
from memd.commands.ui import pages, posts
from memd.ui.server import COOKIE, MAX_FORM, Running, Viewer
from tests import test_ui
from tests.plugins.memory_folders import ROOT, topic, write_tree
from tests.test_ui import HOSTILE, _ctx, _open

browser = test_ui.browser  # the headless Chromium fixture, shared

P = "-home-u-app"


@pytest.fixture
def serve() -> Iterator[Any]:
    """serve(ctx) -> (the viewer's URL with its token, the viewer), with its actions."""
    running: list[Running] = []

    def start(ctx: Context) -> tuple[str, Viewer]:
        v = Viewer(pages(ctx), actions=posts(ctx))
        r = Running(v)
        running.append(r)
        return r.__enter__(), v

    yield start
    for r in running:
        r.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def _memd(claude: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(claude), *args], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _applied_run(claude: Path, name: str = P) -> tuple[Path, dict[str, bytes], str]:
    """A real applied run: `memd dream --force` without a key repairs an index line whose file is gone
    (the memory folder, its files before the run, the run's id)."""
    from memd import history, layout

    mem = claude / "projects" / name / "memory"
    kept = ["deploy", "tests", "style", "review", "release"]
    files: dict[str, str | bytes] = {f"{k}.md": topic(k, f"how we {k}", "project", f"The {k} rule.\n") for k in kept}
    files["MEMORY.md"] = ("# Memory\n" + "".join(f"- [{k}]({k}.md) — how we {k}\n" for k in kept)
                          + "- [Gone](gone.md) — a file that is not there\n")
    write_tree(mem, files)
    before = {p.name: p.read_bytes() for p in mem.iterdir()}
    _memd(claude, "dream", name, "--force")
    assert (mem / "MEMORY.md").read_bytes() != before["MEMORY.md"]
    (rec,) = history.list_runs(layout.state_dir(""), name)
    return mem, before, rec.run


def _files(mem: Path) -> dict[str, bytes]:
    return {str(p.relative_to(mem)): p.read_bytes() for p in sorted(mem.rglob("*")) if p.is_file()}


def _request(url: str, method: str, path: str, *, cookie: str | None, body: bytes = b"",
             headers: dict[str, str] | None = None) -> tuple[int, str]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=60)
    h = {"Host": u.netloc, **(headers or {})}
    if cookie is not None:
        h["Cookie"] = f"{COOKIE}_{u.port}={cookie}"
    conn.request(method, path, body=body if method == "POST" else None, headers=h)
    resp = conn.getresponse()
    text = resp.read().decode("utf-8", "replace")
    conn.close()
    return resp.status, text


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


# ---- POST safety, with a plain HTTP client ---------------------------------------------------------

def test_a_post_without_its_csrf_token_or_from_another_site_is_refused_and_changes_nothing(
        claude_home: Path, serve: Any) -> None:
    from memd import history, layout

    mem, _, run = _applied_run(claude_home)
    url, viewer = serve(_ctx(claude_home))
    token = url.split("token=", 1)[1]
    origin = f"http://127.0.0.1:{urlsplit(url).port}"
    path = f"/undo/{P}/{run}"
    # the confirmation page carries the CSRF token in its form
    status, page = _request(url, "GET", path, cookie=token)
    assert status == 200
    (csrf,) = re.findall(r'name="csrf" value="([^"]+)"', page)
    assert csrf == viewer.csrf
    good = f"csrf={csrf}".encode()
    files = _files(mem)
    runs = history.list_runs(layout.state_dir(""), P)
    refused = [
        ("no CSRF token", b"", FORM | {"Origin": origin}, 403),
        ("a wrong CSRF token", b"csrf=" + csrf[:-2].encode() + b"xx", FORM | {"Origin": origin}, 403),
        ("the token as the CSRF token", f"csrf={token}".encode(), FORM, 403),
        ("another site's Origin", good, FORM | {"Origin": "http://evil.example"}, 403),
        ("another port's Origin", good, FORM | {"Origin": f"http://127.0.0.1:{urlsplit(url).port + 1}"}, 403),
        ("a cross-site fetch", good, FORM | {"Sec-Fetch-Site": "cross-site"}, 403),
        ("a same-site fetch", good, FORM | {"Sec-Fetch-Site": "same-site"}, 403),
        ("an oversize form", good + b"&pad=" + b"x" * MAX_FORM, FORM, 413),
        ("a JSON body", json.dumps({"csrf": csrf}).encode(), {"Content-Type": "application/json"}, 415),
        ("a multipart body", good, {"Content-Type": "multipart/form-data; boundary=x"}, 415),
    ]
    for why, body, headers, want in refused:
        status, text = _request(url, "POST", path, cookie=token, body=body, headers=headers)
        assert status == want, (why, status, text)
        assert text.startswith("refused:"), (why, text)
    assert _request(url, "POST", path, cookie=None, body=good, headers=FORM)[0] == 403  # no viewer token
    assert _request(url, "POST", "/", cookie=token, body=good, headers=FORM)[0] == 405  # not an action
    for method in ("PUT", "DELETE", "PATCH"):
        assert _request(url, method, path, cookie=token)[0] == 405
    assert _files(mem) == files  # nothing changed: not a file, not the history
    assert history.list_runs(layout.state_dir(""), P) == runs
    # the same request with its token, from the viewer's own page: it runs
    status, text = _request(url, "POST", path, cookie=token, body=good,
                            headers=FORM | {"Origin": origin, "Sec-Fetch-Site": "same-origin"})
    assert status == 200 and 'data-outcome="changed"' in text, text
    assert _files(mem) != files


def test_an_action_while_another_memd_job_runs_is_refused_with_the_reason(claude_home: Path, serve: Any) -> None:
    from memd import layout
    from memd.jobs.runner import job_lock

    _parked(claude_home, P, "Remember: we deploy on Fridays.")
    url, viewer = serve(_ctx(claude_home))
    token = url.split("token=", 1)[1]
    with job_lock(layout.state_dir("")):  # the daemon's catch-up, say
        status, text = _request(url, "POST", f"/retry/{P}", cookie=token, body=f"csrf={viewer.csrf}".encode(),
                                headers=FORM | {"Origin": f"http://127.0.0.1:{urlsplit(url).port}"})
    assert status == 200 and 'id="outcome" data-outcome="refused"' in text, text
    assert "another memd job is running" in text
    assert len(_retry_state(P)[0]) == 1  # the parked span is as it was


def test_a_post_runs_its_action_exactly_when_every_check_holds(claude_home: Path) -> None:
    """Model-based: any mix of a POST's parts (viewer token, Host, CSRF token, Origin, Sec-Fetch-Site,
    Content-Type, size, path), in any order: the action runs once for each POST whose every part is
    right and never otherwise, with the status the model predicts."""
    from hypothesis import settings
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

    ran: list[str] = []

    def act(rest: list[str]) -> tuple[str, dict[str, Any]] | None:
        ran.append("/".join(rest))
        return "error.html", {"message": "done"}

    viewer = Viewer({}, actions={"act": act})
    with Running(viewer) as url:
        port = urlsplit(url).port
        ours = f"127.0.0.1:{port}"

        class Posts(RuleBasedStateMachine):
            def __init__(self) -> None:
                super().__init__()
                self.expected = 0
                ran.clear()

            @rule(token=st.sampled_from(["right", "wrong", "none"]),
                  host=st.sampled_from([ours, f"localhost:{port}", f"evil.example:{port}"]),
                  csrf=st.sampled_from(["right", "wrong", "none", "token"]),
                  origin=st.sampled_from([None, "ours", "localhost", "http://evil.example", "null"]),
                  site=st.sampled_from([None, "same-origin", "same-site", "cross-site", "none"]),
                  ctype=st.sampled_from(["form", "form; charset=utf-8", "json", "text", None]),
                  pad=st.sampled_from([0, 100, MAX_FORM]),
                  path=st.sampled_from(["/act/x", "/act", "/", "/nope/x"]))
            def post(self, token: str, host: str, csrf: str, origin: str | None, site: str | None,
                     ctype: str | None, pad: int, path: str) -> None:
                cookie = {"right": viewer.token, "wrong": viewer.token[:-1] + "x", "none": None}[token]
                given = {"right": viewer.csrf, "wrong": viewer.csrf[:-1] + "x", "none": None,
                         "token": viewer.token}[csrf]
                body = (f"csrf={given}" if given else "note=1").encode() + (b"&p=" + b"x" * pad if pad else b"")
                headers: dict[str, str] = {"Host": host}
                if origin is not None:
                    headers["Origin"] = {"ours": f"http://{ours}", "localhost": f"http://localhost:{port}"}.get(
                        origin, origin)
                if site is not None:
                    headers["Sec-Fetch-Site"] = site
                if ctype is not None:
                    headers["Content-Type"] = {"json": "application/json", "text": "text/plain"}.get(
                        ctype, ctype.replace("form", "application/x-www-form-urlencoded"))
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                if cookie is not None:
                    headers["Cookie"] = f"{COOKIE}_{port}={cookie}"
                conn.request("POST", path, body=body, headers=headers)
                status = conn.getresponse().status
                conn.close()
                want = (403 if host.startswith("evil") or token != "right"
                        else 405 if not path.startswith("/act")
                        else 403 if origin in ("http://evil.example", "null") or site not in (None, "same-origin")
                        else 415 if ctype not in ("form", "form; charset=utf-8")
                        else 413 if len(body) > MAX_FORM
                        else 403 if csrf != "right"
                        else 200)
                assert status == want, (status, want, token, host, csrf, origin, site, ctype, pad, path)
                if want == 200:
                    self.expected += 1

            @invariant()
            def the_action_ran_once_per_accepted_post(self) -> None:
                assert len(ran) == self.expected, (ran, self.expected)

        run_state_machine_as_test(Posts, settings=settings(max_examples=40, stateful_step_count=15, deadline=None))


# ---- the actions, in a real headless browser -------------------------------------------------------

def _confirm(browser: Any) -> str:
    """Press the confirmation's button; the outcome shown."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.find_element(By.ID, "confirm").click()
    WebDriverWait(browser, 120).until(lambda d: d.find_elements(By.ID, "outcome"))
    return str(browser.find_element(By.ID, "outcome").get_attribute("data-outcome"))


@pytest.mark.slow
def test_undo_a_run_through_its_confirmation(claude_home: Path, serve: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    from memd import history, layout

    mem, before, run = _applied_run(claude_home)
    dry = _memd(claude_home, "undo", P, run, "--dry-run").stdout.splitlines()
    url, _ = serve(_ctx(claude_home))
    _open(browser, url, f"/project/{P}")
    link = browser.find_element(By.CSS_SELECTOR, f"details.run[data-run='{run}'] a.undo-link")
    browser.get(link.get_attribute("href"))
    # the confirmation lists what `memd undo --dry-run` lists, and the diff it puts back
    listed = [f"would restore {li.get_attribute('data-file')}"
              for li in browser.find_elements(By.CSS_SELECTOR, "#plan li.restore")]
    listed += [f"would remove {li.get_attribute('data-file')} (added by the run)"
               for li in browser.find_elements(By.CSS_SELECTOR, "#plan li.remove")]
    assert listed == dry and listed == ["would restore MEMORY.md"], (listed, dry)
    diff = browser.find_element(By.ID, "undo-diff")
    adds = [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.add")]
    assert "+- [Gone](gone.md) — a file that is not there" in adds, adds
    assert _files(mem)["MEMORY.md"] != before["MEMORY.md"]  # the confirmation changed nothing
    assert _confirm(browser) == "changed"
    assert _files(mem) == before  # back as it was before the run, as `memd undo` puts it
    runs = history.list_runs(layout.state_dir(""), P)
    assert (runs[0].job, runs[0].run) == ("undo", f"undo-{run}")  # the undo's history entry
    assert "restored MEMORY.md" in browser.find_element(By.ID, "lines").text
    browser.find_element(By.ID, "back").click()
    assert urlsplit(browser.current_url).path == f"/project/{P}"


@pytest.mark.slow
def test_an_undo_of_files_changed_since_is_refused_and_loses_nothing(claude_home: Path, serve: Any,
                                                                      browser: Any) -> None:
    from selenium.webdriver.common.by import By

    mem, _, run = _applied_run(claude_home)
    url, _ = serve(_ctx(claude_home))
    _open(browser, url, f"/undo/{P}/{run}")
    assert [li.get_attribute("data-file") for li in browser.find_elements(By.CSS_SELECTOR, "#plan li.restore")] == [
        "MEMORY.md"]
    # a session writes the index between the confirmation and the click
    mine = (mem / "MEMORY.md").read_text() + "- [Later](later.md) — written by a session since\n"
    (mem / "MEMORY.md").write_text(mine)
    assert _confirm(browser) == "refused"
    part = browser.find_element(By.CSS_SELECTOR, "#parts li.part").text
    assert "changed since the run" in part and "MEMORY.md" in part, part
    assert (mem / "MEMORY.md").read_text() == mine  # the session's words are all there
    # asked again, the confirmation says so and offers nothing
    _open(browser, url, f"/undo/{P}/{quote(run)}")
    assert browser.find_elements(By.ID, "nothing") and not browser.find_elements(By.ID, "confirm")
    assert "changed since the run" in browser.find_element(By.CSS_SELECTOR, "#plan li.skip").text


def _parked(claude: Path, name: str, text: str) -> Path:
    """A project with a session whose span the catch-up parked (as five refused tries leave it)."""
    from memd import layout
    from memd.jobs.catchup import PARKED_WARNING
    from memd.state import StateStore

    write_tree(claude / "projects" / name / "memory", {"MEMORY.md": "# Memory\n"})
    sid = str(uuid.uuid4())
    path = claude / "projects" / name / f"{sid}.jsonl"
    recs = [{"type": "user", "sessionId": sid, "cwd": "/home/u/app", "uuid": str(uuid.uuid4()),
             "timestamp": "2026-12-01T10:00:00Z", "message": {"role": "user", "content": text}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    old = time.time() - 86_400
    os.utime(path, (old, old))
    with StateStore.open(layout.state_dir("")) as st:
        st.note_try(path, project=name, start=0, reason="refused: the guard refused the change", when=old,
                    park_after=1)
        st.set_warning(name, PARKED_WARNING, "warning", {"sessions": 1, "reason": "parked"})
    return path


def _retry_state(name: str) -> tuple[dict[Any, Any], list[str]]:
    from memd import layout
    from memd.state import StateStore

    with StateStore.open(layout.state_dir("")) as st:
        return st.span_tries(name), [w.kind for w in st.warnings(name)]


@pytest.mark.slow
def test_retry_marks_the_parked_spans_as_the_cli_does_and_an_excerpt_runs_nothing(
        claude_home: Path, serve: Any, browser: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    from memd.jobs.catchup import PARKED_WARNING

    words = f"Remember: we deploy on Fridays. {HOSTILE}"
    _parked(claude_home, P, words)
    _parked(claude_home, "-home-u-twin", words)
    assert len(_retry_state(P)[0]) == 1 and PARKED_WARNING in _retry_state(P)[1]
    url, _ = serve(_ctx(claude_home))
    _open(browser, url, f"/project/{P}")
    (span,) = browser.find_elements(By.CSS_SELECTOR, "#spans li.span")
    assert span.get_attribute("data-state") == "parked"
    excerpt = span.find_element(By.CSS_SELECTOR, "pre.excerpt").text
    assert "we deploy on Fridays" in excerpt and "<script>window.__pwned = 1" in excerpt, excerpt
    browser.find_element(By.ID, "retry-link").click()
    assert "<script>" in browser.find_element(By.TAG_NAME, "main").text
    for _ in range(2):  # the project page and the confirmation: text, never a node
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
        assert browser.execute_script("return window.__pwned") is None
        assert browser.execute_script("return document.querySelectorAll('script, img, svg').length") == 0
    outcome = _confirm(browser)
    assert outcome == "changed"
    parts = {li.text.split(":")[0]: li.get_attribute("data-outcome")
             for li in browser.find_elements(By.CSS_SELECTOR, "#parts li.part")}
    assert parts["spans"] == "changed" and parts["catch-up now"] == "skipped", parts  # model work is off
    # the state is what `memd catchup --retry` leaves for the twin project
    _memd(claude_home, "catchup", "-home-u-twin", "--retry", check=False)
    assert _retry_state(P) == _retry_state("-home-u-twin") == ({}, [])


@pytest.mark.slow
def test_accept_a_held_sync_file_keeping_the_remotes_version(machines: Any, serve: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    from memd.maintenance import undo_project
    from memd.sync import held
    from tests.test_sync_guards import shared
    from tests.test_sync_undo import _incoming

    a, b = machines("ma"), machines("mb")
    shared(a, b)
    _incoming(a, b)
    undo_project(b.project(), b.config, b.state_dir, None, dry_run=False)
    b.sync("app")
    assert b.read("x.md") is None
    assert "--take-remote" in held.status_lines(b.state_dir)
    from memd.record import replace

    ctx = Context(argparse.Namespace(claude_dir=str(b.claude)))
    ctx._config = replace(b.config, paths=replace(b.config.paths, state_dir=str(b.state_dir)))
    assert ctx.state_dir == b.state_dir
    name = b.project().name
    url, _ = serve(ctx)
    _open(browser, url, f"/project/{quote(name)}")
    sides = [a_.get_attribute("data-side") for a_ in browser.find_elements(By.CSS_SELECTOR, "#sync .held-action a")]
    assert sides == ["keep-local", "take-remote"]
    browser.find_element(By.CSS_SELECTOR, "#sync .held-action a[data-side='take-remote']").click()
    heading = browser.find_element(By.TAG_NAME, "h1").text
    assert "the remote's version" in heading
    files = [li.get_attribute("data-file") for li in browser.find_elements(By.CSS_SELECTOR, "#held-files li")]
    assert "x.md" in files
    assert _confirm(browser) == "changed"
    assert b.read("x.md") is not None and "corrected on ma" in (b.read("t1.md") or "")
    assert held.status_lines(b.state_dir) == ""  # as `memd status` says: nothing held any more
    assert "sync holds nothing more here" in browser.find_element(By.ID, "lines").text
