"""Typed outcomes, the one consolidation rule, and the jobs reading time through JobContext.clock."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import pytest

from memd.clock import ManualClock
from memd.config import Config
from memd.jobs import OUTCOMES, JobContext, Outcome, ProjectOutcome, counts_as_consolidation, runner
from memd.jobs import gates as G
from memd.jobs.modelrun import IDLE_WARNING, note_idle
from memd.layout import Project
from memd.state import StateStore

T0 = datetime(2026, 3, 5, 3, 0, tzinfo=UTC)


@pytest.fixture
def state(tmp_path: Path) -> Any:
    with StateStore.open(tmp_path / "state") as st:
        yield st


def test_outcomes_are_the_run_log_strings() -> None:
    assert OUTCOMES == get_args(Outcome) == (
        "changed", "unchanged", "proposed", "refused", "partial", "skipped", "failed")


def test_old_run_rows_read_in_the_new_names(tmp_path: Path) -> None:
    """State schema 3 rows said "ok" whether or not files changed; the migration reads their counts."""
    import sqlite3

    from memd.state import FILENAME, MIGRATIONS

    db = tmp_path / "state" / FILENAME
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    for i, sql in enumerate(MIGRATIONS[:3]):
        conn.executescript(sql)
        conn.execute(f"PRAGMA user_version = {i + 1}")
    for outcome, added in [("ok", 2), ("ok", 0), ("noop", 0), ("rejected", 0), ("review", 1), ("failed", 0)]:
        conn.execute("INSERT INTO runs (job, project, started, outcome, added) VALUES ('dream', '-p', 1.0, ?, ?)",
                     (outcome, added))
    conn.commit()
    conn.close()
    with StateStore.open(tmp_path / "state") as st:
        got = sorted(r.outcome for r in st.runs(limit=10))
    assert got == sorted(["changed", "unchanged", "unchanged", "refused", "proposed", "failed"])


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_one_consolidation_rule(outcome: str) -> None:
    # a review applied nothing: not a consolidation (issue 11)
    assert counts_as_consolidation("dream", outcome, dry_run=False) == (outcome in ("changed", "unchanged"))
    assert not counts_as_consolidation("dream", outcome, dry_run=True)
    assert not counts_as_consolidation("catchup", outcome, dry_run=False)
    # without the model only the index is rebuilt: never a consolidation, whatever it changed
    assert not counts_as_consolidation("dream", outcome, dry_run=False, model_off=True)


def test_runner_reads_time_and_marks_consolidation_through_the_clock(tmp_path: Path, state: Any) -> None:
    d = tmp_path / "claude" / "projects" / "-p"
    (d / "memory").mkdir(parents=True)
    p = Project("-p", d, d / "memory")
    clock = ManualClock(T0)
    jc = JobContext(config=Config(), claude_dir=tmp_path / "claude", state_dir=tmp_path / "state", state=state,
                    clock=clock, force=True)

    def work(jc: JobContext, q: Project) -> ProjectOutcome:
        clock.advance(90)  # the work takes a minute and a half
        return ProjectOutcome(q.name, "changed")

    res = runner.run_job("dream", jc, [p], work)
    assert res.duration_s == pytest.approx(90)
    row = state.runs(project="-p")[0]
    assert (row.started, row.ended, row.outcome) == (T0.timestamp(), T0.timestamp() + 90, "changed")
    assert state.project("-p").last_consolidation == T0.timestamp() + 90
    # Claude Code's lock was taken at the clock's "now" and kept (a consolidation)
    assert G.read_lock(p.memory_dir).exists
    # the gate reads the same clock: an hour later is too early for the next dream
    clock.advance(3600)
    jc2 = JobContext(config=Config(), claude_dir=tmp_path / "claude", state_dir=tmp_path / "state",
                     state=state, clock=clock)
    assert G.check_dream(jc2, p).gate == "min_hours"


def test_a_review_dream_neither_gates_the_next_dream_nor_moves_the_lock(tmp_path: Path, state: Any) -> None:
    """``dream.apply = "review"`` proposes and applies nothing: memd's last consolidation stays unset
    and Claude Code's ``.consolidate-lock`` keeps the mtime of the last real consolidation."""
    d = tmp_path / "claude" / "projects" / "-p"
    (d / "memory").mkdir(parents=True)
    p = Project("-p", d, d / "memory")
    lock = p.memory_dir / G.LOCK_NAME
    lock.write_text("")
    old = T0.timestamp() - 3 * 86400  # consolidated three days ago
    os.utime(lock, (old, old))
    clock = ManualClock(T0)
    jc = JobContext(config=Config(), claude_dir=tmp_path / "claude", state_dir=tmp_path / "state", state=state,
                    clock=clock, force=True)
    res = runner.run_job("dream", jc, [p], lambda jc, q: ProjectOutcome(q.name, "proposed", "proposed +0 ~1 -0"))
    assert [o.outcome for o in res.outcomes] == ["proposed"]
    assert state.project("-p").last_consolidation is None
    assert lock.stat().st_mtime == old
    clock.advance(3600)  # an hour later the next dream is not held back by the 24 h gate
    jc2 = JobContext(config=Config(), claude_dir=tmp_path / "claude", state_dir=tmp_path / "state",
                     state=state, clock=clock)
    assert G.check_dream(jc2, p).gate != "min_hours"


def test_idle_streak_counts_model_runs_only(tmp_path: Path, state: Any) -> None:
    jc = JobContext(config=Config(), claude_dir=tmp_path, state_dir=tmp_path / "state", state=state)
    t = T0.timestamp()
    for i, (outcome, tokens) in enumerate([("unchanged", 500), ("unchanged", 0), ("skipped", 0), ("unchanged", 700)]):
        rid = state.start_run("dream", "-p", t + i)
        state.finish_run(rid, outcome=outcome, ended=t + i, tokens_in=tokens, summary="whatever the text says")
    # not a model run: no warning whatever the rows say
    note_idle(jc, "dream", ProjectOutcome("-p", "unchanged", "nothing changed", model_called=False))
    assert state.warnings("-p") == []
    # a model run that changed nothing, after two such runs (the rows without tokens are not model runs)
    note_idle(jc, "dream", ProjectOutcome("-p", "unchanged", "nothing to change", model_called=True))
    assert [w.kind for w in state.warnings("-p")] == [IDLE_WARNING]


def test_model_off_outcome_keeps_what_the_project_did_apart() -> None:
    out = ProjectOutcome.without_model("-p", "skipped", "model work is off", "(2 session(s) wait)", sep=" ")
    assert out.message == "model work is off (2 session(s) wait)" and out.model_off
    assert out.detail == "(2 session(s) wait)" and not out.model_called


def test_the_model_off_sentence_is_referred_to_not_repeated() -> None:
    """Issue 25: the 300-character sentence was in every job.finish, report row and status line."""
    from memd.jobs import MODEL_OFF_SHORT

    off = ("Model work is off: no API key or other credential (set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, "
           "Claude Code's apiKeyHelper, CLAUDE_CODE_USE_BEDROCK or CLAUDE_CODE_USE_VERTEX, or model.api_key_file "
           "in the config); only the deterministic parts run.")
    out = ProjectOutcome.without_model("-p", "unchanged", off, "index already fine")
    assert out.message == f"{MODEL_OFF_SHORT}; index already fine" and len(out.message) < 120


def test_a_keyless_dream_that_cannot_fit_says_it_needs_model_work(claude_home: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Hole: with model work off, an index the safe rebuild cannot fit (prose is never dropped) was a red
    "failed" every night, on the viewer's first screen too. Nothing failed: it needs model work. Now the run
    log says ``refused`` with that reason, and the viewer shows the run log's word."""
    from memd import layout
    from memd.config import Config
    from memd.ui.views import overview
    from tests.test_daemon_commands import memd

    mem = claude_home / "projects" / "-home-u-big" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("".join(f"note {n}\n" for n in range(230)))  # 230 prose lines
    code, out, _ = memd(capsys, "dream", "-home-u-big", "--force")
    assert code == 1, out  # it did not do what was asked
    with StateStore.open(layout.state_dir("")) as st:
        (run,) = st.runs(project="-home-u-big", job="dream", limit=5)
    assert run.outcome == "refused", run.summary  # was "failed"
    assert "needs model work" in run.summary and "cannot fit" in run.summary
    assert "refused" in out and "failed" not in out
    view = overview(layout.list_projects(claude_home), Config(), layout.state_dir(""))
    (row,) = [p for p in view.projects if p.name == "-home-u-big"]
    last = row.last["dream"]
    assert last is not None and last.outcome == "refused"
    # the first screen: the run log's word, in its colour class, and what it is on hover
    import http.client
    import re

    from memd.commands.ui import pages
    from memd.ui.server import Running, Viewer
    from tests.test_ui import _ctx

    viewer = Viewer(pages(_ctx(claude_home)))
    with Running(viewer):
        conn = http.client.HTTPConnection("127.0.0.1", viewer.port, timeout=30)
        conn.request("GET", "/", headers={"Host": f"127.0.0.1:{viewer.port}",
                                          "Cookie": f"{viewer.cookie}={viewer.token}"})
        page = conn.getresponse().read().decode()
        conn.close()
    cell = re.search(r'<td class="last-dream">(.*?)</td>', page, re.S)
    assert cell is not None and 'class="outcome-refused"' in cell.group(1) and "failed" not in cell.group(1)
    assert "needs model work" in cell.group(1)
