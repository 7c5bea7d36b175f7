"""The project page's timeline (issue 26): every run of the run log, whatever its outcome, each applied one
opening to its own diff. Real dreams through the runner and the real SDK against the local stub (an applied
one, one the guard refuses, one the API fails), the page in headless Chromium and over plain HTTP."""

from __future__ import annotations

import http.client
import itertools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from memd import history
from memd.clock import ManualClock
from memd.commands.ui import pages
from memd.jobs.dream import dream_project
from memd.jobs.runner import run_project
from memd.layout import Project
from memd.state import StateStore
from memd.ui.server import Running, Viewer
from memd.ui.service import _Live
from memd.ui.timeline import timeline
from tests.test_model_jobs import Env, dup_folder, env  # noqa: F401  (the model jobs' env fixture)
from tests.test_ui import HOSTILE, _open, browser  # noqa: F401  (the module's Chromium)

pytest.importorskip("jinja2")


@pytest.fixture
def url(env: Env) -> Iterator[str]:  # noqa: F811
    """The viewer over the env's Claude folder and state, with its token."""
    r = Running(Viewer(pages(_Live(lambda: env.config, lambda: env.claude, env.state_dir))))  # type: ignore[arg-type]
    yield r.__enter__()
    r.__exit__(None, None, None)


def _page(url: str, path: str) -> tuple[int, str]:
    u = urlsplit(url)
    port = u.port

    def get(target: str, cookie: str = "") -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", target, headers={"Host": f"127.0.0.1:{port}", **({"Cookie": cookie} if cookie else {})})
        return conn.getresponse()

    first = get(f"/?{u.query}")
    cookie = (first.getheader("Set-Cookie") or "").split(";", 1)[0]
    r = get(path, cookie)
    return r.status, r.read().decode("utf-8")


def _entries(html: str) -> list[dict[str, str]]:
    """The timeline's entries as the page lists them: their data attributes, in order."""
    return [dict(re.findall(r'data-([a-z]+)="([^"]*)"', m))
            for m in re.findall(r'<li class="entry" ([^>]*)>', html)]


def _dream(env: Env, p: Project, *script: Any) -> Any:  # noqa: F811
    env.stub.script(*script)
    out = run_project("dream", env.jc(force=True), p, dream_project)
    assert out is not None
    return out


def _three_dreams(env: Env) -> tuple[Project, list[Any]]:  # noqa: F811
    """An applied dream (its note hostile), then one the guard refuses, then one the API fails."""
    p = dup_folder(env)
    s = env.stub
    applied = _dream(env, p,
                     s.message(s.memory("str_replace", path="/memories/feedback_tabs.md", old_str="Use tabs.",
                                        new_str="Use tabs, never spaces."),
                               s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
                     s.message(s.text("Merged the tab memories. " + HOSTILE)))
    refused = _dream(env, p,
                     s.message(*(s.memory("delete", path=f"/memories/{f}", reason="dup")
                                 for f in ("feedback_tabs.md", "user_role.md", "project_deploy.md"))),
                     s.message(s.text("Deleted everything.")))
    failed = _dream(env, p, s.message(s.memory("view", path="/memories/user_role.md")), s.error(500), s.error(500))
    assert [o.outcome for o in (applied, refused, failed)] == ["changed", "refused", "failed"]
    return p, [applied, refused, failed]


@pytest.mark.slow
def test_applied_refused_and_failed_runs_show_in_order_and_the_applied_one_opens_to_its_diff(
        env: Env, url: str, browser: Any) -> None:  # noqa: F811
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    p, (applied, refused, failed) = _three_dreams(env)
    _open(browser, url, f"/project/{p.name}")
    items = browser.find_elements(By.CSS_SELECTOR, "#history li.entry")
    assert [li.get_attribute("data-outcome") for li in items] == ["failed", "refused", "changed"]  # newest first
    assert all(li.get_attribute("data-job") == "dream" for li in items)
    f, r, a = items
    assert "HTTP 500" in f.find_element(By.CSS_SELECTOR, ".reason").text  # the failure's reason
    assert not f.find_elements(By.CSS_SELECTOR, "details")  # nothing applied: nothing to open
    assert "the run deletes every memory (3 of 3)" in r.find_element(By.CSS_SELECTOR, ".summary").text  # the guard's
    assert not r.find_elements(By.CSS_SELECTOR, "details")
    # each shows its tokens and cost (the stub's usage, priced)
    for li, out in zip(items, (failed, refused, applied), strict=True):
        assert f"{out.tokens_total:,} tokens" in li.find_element(By.CSS_SELECTOR, ".tokens").text
        assert li.find_element(By.CSS_SELECTOR, ".cost").text == f"${out.cost_usd:.4f}"
    # the applied one, linked to its history record by name, opens to its own diff with its undo
    assert a.get_attribute("data-linked") == "name" and a.get_attribute("data-run") == applied.run_id
    run = a.find_element(By.CSS_SELECTOR, "details.run")
    diff = run.find_element(By.CSS_SELECTOR, "pre.diff")
    assert not diff.is_displayed()
    run.find_element(By.TAG_NAME, "summary").click()
    assert diff.is_displayed()
    adds = [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.add")]
    files = [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.file")]
    assert "+Use tabs, never spaces." in adds and "--- a/feedback_tabs_2.md" in files
    assert f"memd undo {p.name} {applied.run_id}" in run.text
    # the hostile note is text on the page: no node made, nothing run
    assert "<script>window.__pwned = 1; alert(1)</script>" in a.find_element(By.CSS_SELECTOR, ".summary").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#history script, #history img, #history svg")
    assert browser.execute_script("return window.__pwned === undefined")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018


def test_a_hostile_summary_is_escaped_in_the_html(env: Env, url: str) -> None:  # noqa: F811
    p, _ = _three_dreams(env)
    status, html = _page(url, f"/project/{p.name}")
    assert status == 200
    assert "&lt;script&gt;window.__pwned = 1" in html and "<script>window.__pwned" not in html
    assert "onerror=" not in html.replace("onerror=&#34;", "")  # only ever as escaped text


def test_two_runs_in_the_same_second_each_open_to_their_own_diff(env: Env, url: str,  # noqa: F811
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import memd.history

    p = dup_folder(env)
    s = env.stub
    frozen = int(memd.history.time.time())
    # every history commit and every run-log row in the same second
    monkeypatch.setattr(memd.history.time, "time", lambda: float(frozen))
    clock_jc = env.jc(force=True, clock=ManualClock(datetime.fromtimestamp(frozen, UTC)))
    outs = []
    for old, new in (("Use tabs.", "Use tabs, first run."), ("The user is a backend engineer.", "Backend, second.")):
        rel = "feedback_tabs.md" if old.startswith("Use") else "user_role.md"
        s.script(s.message(s.memory("str_replace", path=f"/memories/{rel}", old_str=old, new_str=new)),
                 s.message(s.text(f"edited {rel}")))
        out = run_project("dream", clock_jc, p, dream_project)
        assert out is not None and out.outcome == "changed"
        outs.append(out)
    rows = env.state.runs(project=p.name)
    assert len({r.started for r in rows}) == 1  # the same second, to the fraction
    assert {r.history_run for r in rows} == {o.run_id for o in outs}  # the run log names each run
    tl = timeline(p.name, env.state_dir)
    by_run = {e.history_run: e for e in tl.entries}
    assert set(by_run) == {o.run_id for o in outs} and len(tl.entries) == 2
    first, second = by_run[outs[0].run_id], by_run[outs[1].run_id]
    assert first.linked == second.linked == "name"
    assert "+Use tabs, first run." in first.diff and not any("second" in d for d in first.diff)
    assert "+Backend, second." in second.diff and not any("first run" in d for d in second.diff)
    assert _page(url, f"/project/{p.name}")[0] == 200
    html = _page(url, f"/project/{p.name}")[1]
    assert [(e["run"], e["linked"]) for e in _entries(html)] == [(r.history_run, "name") for r in rows]


def test_old_rows_without_a_name_are_matched_by_time_and_unclaimed_records_still_show(env: Env) -> None:  # noqa: F811
    p = dup_folder(env)
    mem = p.memory_dir
    # an old row (before state schema 9: no history_run) and its history record, made while it ran
    rid = env.state.start_run("rebuild", p.name, 1_000.0)
    before = history.snapshot_before(env.state_dir, p.name, mem, "rebuild", run="rebuild-old")
    history.record_after(env.state_dir, p.name, before, {"MEMORY.md": b"# Memory\n"}, "rebuild", "rebuild-old",
                         "rebuild MEMORY.md")
    rec_time = history.list_runs(env.state_dir, p.name)[0].time
    env.state._exec("UPDATE runs SET started = ? WHERE id = ?", (rec_time - 0.5, rid))
    env.state.finish_run(rid, outcome="changed", ended=rec_time + 0.5, summary="rebuild MEMORY.md")
    # a record no row claims (a run the run log never had)
    b2 = history.snapshot_before(env.state_dir, p.name, mem, "forget", run="forget-x")
    history.record_after(env.state_dir, p.name, b2, {"user_role.md": None}, "forget", "forget-x", "forget: 1 file")
    tl = timeline(p.name, env.state_dir)
    got = {e.history_run: (e.row, e.linked, e.outcome) for e in tl.entries}
    assert got == {"rebuild-old": (rid, "time", "changed"), "forget-x": (None, "", "applied")}
    assert all(e.diff_kind == "applied" and e.diff for e in tl.entries)


def test_paging_the_last_50_runs_with_a_link_to_older_ones(env: Env, url: str) -> None:  # noqa: F811
    p = dup_folder(env)
    ids = []
    for i in range(57):
        rid = env.state.start_run("catchup", p.name, 10_000.0 + i)
        env.state.finish_run(rid, outcome="skipped", ended=10_000.5 + i, summary=f"nothing new {i}")
        ids.append(rid)
    status, html = _page(url, f"/project/{p.name}")
    rows = [int(e["row"]) for e in _entries(html)]
    assert status == 200 and rows == ids[::-1][:50]
    older = re.search(r'class="older" href="([^"]+)"', html)
    assert older is not None and older.group(1) == f"/project/{p.name}?before={ids[7]}"
    status, html2 = _page(url, older.group(1))
    assert [int(e["row"]) for e in _entries(html2)] == ids[::-1][50:]
    assert 'class="older"' not in html2 and 'class="newest"' in html2
    bad = _page(url, f"/project/{p.name}?before=1;drop")
    assert bad[0] == 400 and "expected a run&#39;s number" in bad[1]  # a clear message, not a traceback


def test_a_proposed_dream_opens_to_its_kept_review_diff(env: Env, url: str) -> None:  # noqa: F811
    from memd.config import replace

    p = dup_folder(env)
    env.config = replace(env.config, dream=replace(env.config.dream, apply="review"))
    out = _dream(env, p, env.stub.message(env.stub.memory("str_replace", path="/memories/feedback_tabs.md",
                                                          old_str="Use tabs.", new_str="Use tabs, proposed.")),
                 env.stub.message(env.stub.text("proposing a sharper line")))
    assert out.outcome == "proposed"
    (e,) = timeline(p.name, env.state_dir).entries
    assert e.outcome == "proposed" and e.diff_kind == "proposed" and e.history_run == out.run_id
    assert "+Use tabs, proposed." in e.diff and not e.undo
    status, html = _page(url, f"/project/{p.name}")
    assert status == 200 and 'data-diff="proposed"' in html and "Proposed, not applied" in html


def test_the_first_screen_shows_a_dash_for_the_cost_of_a_project_without_model_runs(env: Env, url: str) -> None:  # noqa: F811
    p = dup_folder(env)
    now = time.time()
    rid = env.state.start_run("catchup", p.name, now - 60)
    env.state.finish_run(rid, outcome="skipped", ended=now - 59)
    status, html = _page(url, "/")
    assert status == 200
    cell = re.search(r'<td class="week-cost">([^<]*)</td>', html)
    assert cell is not None and cell.group(1) == "-"


# ---- the model: any mix of runs, most of them in the same second --------------------------------------------

JOBS = ("dream", "sync")


class TimelineAgreesWithTheRuns(RuleBasedStateMachine):
    """Runs recorded as memd records them (a run-log row; an applied run's history record; a proposed
    run's kept review), one after another as fast as they come (most in the same second). The timeline
    must show every row once, in order; a named row opens to its own diff and no other; an old row (no
    name) that changed files gets a record of its job made while it ran, never a named row's; a run that
    applied nothing opens to nothing; every history record is shown exactly once; pages of 3 add up."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="memd-timeline-"))
        self.state_dir = self.tmp / "state"
        self.mem = self.tmp / "memory"
        self.mem.mkdir()
        (self.mem / "MEMORY.md").write_text("# Memory\n")
        self.st = StateStore.open(self.state_dir)
        self.n = 0
        self.rows: dict[int, tuple[str, str, str, str]] = {}  # row -> (kind, run name, marker, job)
        self.records: dict[str, str] = {}  # every history record: run name -> its marker

    def teardown(self) -> None:
        self.st.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _record(self, job: str) -> tuple[str, str]:
        self.n += 1
        name, marker = f"{job}-{self.n:04d}-{os.urandom(2).hex()}", f"marker {self.n}"
        before = history.snapshot_before(self.state_dir, "p", self.mem, job, run=name)
        history.record_after(self.state_dir, "p", before, {f"n{self.n}.md": f"{marker}\n".encode()}, job, name,
                             f"{job}: 1 added")
        self.records[name] = marker
        return name, marker

    @rule(job=st.sampled_from(JOBS), named=st.booleans())
    def applied(self, job: str, named: bool) -> None:
        rid = self.st.start_run(job, "p", time.time())
        name, marker = self._record(job)
        self.st.finish_run(rid, outcome="changed", ended=time.time(), history_run=name if named else "")
        self.rows[rid] = ("named" if named else "old", name, marker, job)

    @rule(job=st.sampled_from(JOBS), outcome=st.sampled_from(("refused", "failed", "skipped", "unchanged")),
          staged=st.booleans())
    def applied_nothing(self, job: str, outcome: str, staged: bool) -> None:
        self.n += 1
        rid = self.st.start_run(job, "p", time.time())
        # a refused model run has a name (its staging copy's) that no history record has
        self.st.finish_run(rid, outcome=outcome, ended=time.time(), error="why not", summary=HOSTILE,
                           history_run=f"{job}-staged-{self.n}" if staged else "")
        self.rows[rid] = ("nothing", "", "", job)

    @rule()
    def proposed(self) -> None:
        from memd.apply import review_path
        from memd.store import atomic_write, ensure_private_dir

        self.n += 1
        name, marker = f"dream-{self.n:04d}-review", f"proposal {self.n}"
        rid = self.st.start_run("dream", "p", time.time())
        path = review_path(self.state_dir, "p", name)
        ensure_private_dir(path.parent)
        text = f"# dream {name}\n# proposed, not applied\n\n--- a/x.md\n+++ b/x.md\n+{marker}\n"
        atomic_write(path, text, mode=0o600)
        self.st.finish_run(rid, outcome="proposed", ended=time.time(), history_run=name)
        self.rows[rid] = ("proposed", name, marker, "dream")

    @rule(job=st.sampled_from(("forget", "undo")))
    def record_without_a_row(self, job: str) -> None:
        self._record(job)

    @invariant()
    def the_timeline_shows_every_run_with_what_it_did(self) -> None:
        tl = timeline("p", self.state_dir, limit=10_000)
        assert not tl.problems and tl.older is None
        rows = [e for e in tl.entries if e.row is not None]
        assert [e.row for e in rows] == sorted(self.rows, reverse=True)  # newest first (started, then id)
        named = {name for kind, name, _, _ in self.rows.values() if kind == "named"}
        for e in rows:
            kind, name, marker, job = self.rows[e.row]  # type: ignore[index]
            if kind == "named":
                assert (e.linked, e.history_run, e.diff_kind) == ("name", name, "applied")
                assert f"+{marker}" in e.diff and len([d for d in e.diff if d.startswith("+marker")]) == 1
            elif kind == "old":
                assert e.linked == "time" and e.diff_kind == "applied"
                assert e.history_run.startswith(f"{job}-") and e.history_run not in named
            elif kind == "proposed":
                assert e.diff_kind == "proposed" and f"+{marker}" in e.diff and not e.undo
            else:
                assert (e.diff_kind, e.diff, e.linked, e.undo) == ("", [], "", "")
                assert "&lt;" not in e.summary and "<script>" in e.summary  # the page escapes it (autoescape)
        shown = sorted(e.history_run for e in tl.entries if e.diff_kind == "applied")
        assert shown == sorted(self.records)  # every record once: claimed by its row, or on its own
        # pages of 3, each asked with the last one's link, add up to the whole
        paged: list[int] = []
        paged_named: list[str] = []
        before: int | None = None
        while True:
            page = timeline("p", self.state_dir, before=before, limit=3)
            paged += [e.row for e in page.entries if e.row is not None]
            paged_named += [e.history_run for e in page.entries if e.history_run in named and e.diff_kind]
            if page.older is None:
                break
            before = page.older
        assert paged == [e.row for e in rows]
        assert sorted(paged_named) == sorted(named)  # a named run's record once, on its row's page only


def test_the_timeline_agrees_with_the_runs() -> None:
    run_state_machine_as_test(TimelineAgreesWithTheRuns, settings=settings(
        max_examples=40, stateful_step_count=12, deadline=None, database=None))


@settings(max_examples=30, deadline=None, database=None)
@given(steps=st.lists(st.dictionaries(
    st.sampled_from(("MEMORY.md", "a.md", "team/t.md", "team/deep/x.md", "notes/n.md", "notes")),
    st.one_of(st.none(), st.sampled_from((b"one\n", b"two\n", b""))), max_size=4), min_size=1, max_size=5))
def test_changes_between_agrees_with_the_whole_snapshots(steps: list[dict[str, bytes | None]]) -> None:
    """``history.changes_between`` (the timeline's reader: trees compared by id, only changed blobs read)
    says exactly what comparing the two whole snapshots (``files_at``) says, folders and files swapped too."""
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        files: dict[str, bytes] = {}
        commits: list[str] = []
        for step in steps:
            for rel, data in step.items():
                if data is None:
                    files.pop(rel, None)
                else:  # a path and a folder of the same name cannot both be: the newer one wins
                    files = {k: v for k, v in files.items()
                             if not k.startswith(rel + "/") and not rel.startswith(k + "/")}
                    files[rel] = data
            commits.append(history.commit_files(state, "p", dict(files), "step"))
        pairs: list[tuple[str | None, str]] = [(None, commits[0]), *itertools.pairwise(commits)]
        got = history.changes_between(state, "p", pairs)
        for (before, after), changed in zip(pairs, got, strict=True):
            a = history.files_at(state, "p", before) if before else {}
            b = history.files_at(state, "p", after)
            want = {rel: (a.get(rel), b.get(rel)) for rel in set(a) | set(b) if a.get(rel) != b.get(rel)}
            assert changed == want
