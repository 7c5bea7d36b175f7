"""Issue 12 (the soak): the run log is pruned. Skipped rows that called no model go after 48 hours;
any other finished row after 400 days, except the newest of each (project, job) pair; never a
``running`` row. The check-in prunes after its report has read the rows, the daemon prunes at start,
and a prune that cannot write (a busy or full state file) is logged and fails neither.
Time comes from a ManualClock or explicit timestamps: nothing sleeps for the retention periods."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memd import state as st
from memd.clock import ManualClock
from memd.config import Config
from memd.jobs import JobContext, runner
from memd.jobs.checkin import LAST_KEY, latest_report, run_checkin
from memd.state import RUNS_KEEP_S, SKIPPED_KEEP_S, StateError, StateStore
from tests.plugins.daemon import Recorder
from tests.test_state_busy import Holder

T0 = datetime(2026, 12, 1, 7, 30, tzinfo=UTC)
NOW = T0.timestamp()
H = 3600.0
DAY = 86_400.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(tmp_path / "state") as s:
        yield s


def row(s: StateStore, job: str, project: str | None, ended: float, outcome: str = "unchanged",
        tokens: int = 0) -> int:
    rid = s.start_run(job, project, ended - 60)
    if outcome != "running":
        s.finish_run(rid, outcome=outcome, ended=ended, tokens_in=tokens)
    return rid


def ids(s: StateStore) -> set[int]:
    return {r.id for r in s.runs(limit=1_000_000)}


def test_the_retention_periods() -> None:
    assert SKIPPED_KEEP_S == 48 * H and RUNS_KEEP_S == 400 * DAY


def test_skipped_rows_without_a_model_call_go_after_48_hours(store: StateStore) -> None:
    kept = {row(store, "catchup", "-p", NOW - 47 * H, "skipped"),
            row(store, "catchup", "-p", NOW - 1, "skipped"),
            # a catch-up stopped by a shutdown mid-run spent tokens: kept as long as any finished run
            row(store, "catchup", "-p", NOW - 49 * H, "skipped", tokens=900),
            row(store, "catchup", "-q", NOW - 10 * DAY, "unchanged")}
    gone = {row(store, "catchup", "-p", NOW - 49 * H, "skipped"),
            row(store, "dream", "-q", NOW - 30 * DAY, "skipped"),
            row(store, "catchup", None, NOW - 49 * H, "skipped")}
    assert store.prune_runs(NOW) == len(gone)
    assert ids(store) == kept
    assert store.prune_runs(NOW) == 0  # nothing more to do


def test_old_finished_rows_go_except_the_newest_of_each_project_and_job(store: StateStore) -> None:
    old = NOW - RUNS_KEEP_S
    gone = {row(store, "dream", "-a", old - 100 * DAY, "changed"),
            row(store, "dream", "-a", old - 50 * DAY, "failed"),
            row(store, "catchup", "-a", old - 1, "changed"),
            row(store, "checkin", None, old - 30 * DAY)}
    kept = {row(store, "dream", "-a", old - 1 * DAY, "unchanged"),  # the newest dream of -a, however old
            row(store, "catchup", "-a", NOW - 10 * DAY, "unchanged"),  # the newest catch-up of -a
            row(store, "dream", "-b", old - 200 * DAY, "changed"),  # -b's only dream
            row(store, "checkin", None, old - 2 * DAY),  # the check-in's rows are the pair (NULL, checkin)
            row(store, "catchup", "-c", old + 1 * H, "changed"),  # younger than 400 days
            # -d's last real catch-up is old; its skipped ones since are no runs of the job
            row(store, "catchup", "-d", old - 10 * DAY, "changed"),
            row(store, "catchup", "-d", NOW - 1 * H, "skipped"),
            # -e's newest row is running: the last finished one stays beside it
            row(store, "dream", "-e", old - 10 * DAY, "failed"),
            row(store, "dream", "-e", NOW, "running"),
            # a running row is never deleted, however old (the daemon closes orphans at start)
            row(store, "catchup", "-f", old - 300 * DAY, "running"),
            row(store, "catchup", "-f", NOW - 1 * H, "changed")}
    assert store.prune_runs(NOW) == len(gone)
    assert ids(store) == kept
    # the last run of each pair, as `memd status` and the check-in read it
    assert [r.outcome for r in store.runs(job="dream", project="-a")] == ["unchanged"]
    assert [r.outcome for r in store.runs(job="checkin")] == ["unchanged"]


def test_the_newest_of_two_rows_started_together_is_the_later_id(store: StateStore) -> None:
    old = NOW - RUNS_KEEP_S - DAY
    a = store.start_run("dream", "-a", old)
    b = store.start_run("dream", "-a", old)
    for rid in (a, b):
        store.finish_run(rid, outcome="unchanged", ended=old)
    assert store.prune_runs(NOW) == 1
    assert ids(store) == {b}


def test_prune_deletes_in_batches_one_transaction_each(store: StateStore) -> None:
    skipped = [row(store, "catchup", f"-p{i % 3}", NOW - 3 * DAY - i, "skipped") for i in range(12)]
    old = [row(store, "dream", "-a", NOW - RUNS_KEEP_S - DAY - i * H, "unchanged") for i in range(8)]
    newest = row(store, "dream", "-a", NOW - 5 * H, "changed")
    young = row(store, "catchup", "-p0", NOW - H, "skipped")
    commits: list[str] = []
    store._conn.set_trace_callback(lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
    try:
        assert store.prune_runs(NOW, batch=5) == len(skipped) + len(old)
    finally:
        store._conn.set_trace_callback(None)
    assert ids(store) == {newest, young}
    # 12 skipped rows in batches of 5 (5, 5, 2) and 8 old ones (5, 3): five transactions
    assert len(commits) == 5


def test_one_prune_deletes_at_most_max_rows_the_next_goes_on(store: StateStore) -> None:
    gone = [row(store, "catchup", "-p", NOW - 3 * DAY - i, "skipped") for i in range(9)]
    gone += [row(store, "dream", "-a", NOW - RUNS_KEEP_S - DAY - i, "unchanged") for i in range(4)]
    newest = row(store, "dream", "-a", NOW, "changed")
    assert store.prune_runs(NOW, batch=5, max_rows=7) == 7
    assert len(ids(store)) == len(gone) + 1 - 7
    assert store.prune_runs(NOW, batch=5, max_rows=7) == 6  # the 2 skipped left, then the 4 old ones
    assert ids(store) == {newest}


def test_a_capped_prune_says_there_is_more(store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from memd.jobs.checkin import prune_run_log

    monkeypatch.setattr(st, "PRUNE_MAX_ROWS", 3)
    for i in range(5):
        row(store, "catchup", "-p", NOW - 3 * DAY - i, "skipped")
    log = Recorder()
    assert prune_run_log(store, NOW, log) == 3 and prune_run_log(store, NOW, log) == 2
    assert log.named("state.pruned") == [{"rows": 3, "more": True}, {"rows": 2}]


def test_note_idle_reads_model_runs_past_many_skipped_catchups(tmp_path: Path, store: StateStore) -> None:
    """The last model runs changed nothing, with a day of skipped catch-ups (and runs that called no
    model) between each: the streak is seen (a fixed window of the newest rows held only skipped ones)."""
    from memd.jobs import ProjectOutcome
    from memd.jobs.modelrun import IDLE_STREAK, IDLE_WARNING, note_idle

    jc = JobContext(config=Config(), claude_dir=tmp_path, state_dir=tmp_path / "state", state=store,
                    clock=ManualClock(T0))
    t = NOW - 30 * DAY
    for _ in range(IDLE_STREAK - 1):
        row(store, "catchup", "-p", t, "unchanged", tokens=800)
        for _ in range(15):
            t += 2 * H
            row(store, "catchup", "-p", t, "skipped")
            row(store, "catchup", "-p", t + 1, "unchanged")  # no tokens: model work was off
    row(store, "catchup", "-p", NOW, "running")  # this run's own row
    note_idle(jc, "catchup", ProjectOutcome("-p", "unchanged", "nothing to extract", model_called=True))
    [w] = store.warnings("-p")
    assert w.kind == IDLE_WARNING and w.details["runs"] == IDLE_STREAK


# ----------------------------------------------------------------------------- the check-in


def _checkin(tmp_path: Path, store: StateStore, log: Recorder, clock: ManualClock) -> str:
    jc = JobContext(config=Config(), claude_dir=tmp_path / "claude", state_dir=store.path.parent, state=store,
                    clock=clock, log=log)
    return runner.run_whole("checkin", jc, lambda j: str(run_checkin(j) or ""))


def test_the_checkin_reports_the_rows_before_pruning_them(tmp_path: Path, store: StateStore) -> None:
    clock = ManualClock(T0)
    store.set(LAST_KEY, repr(NOW - 3 * DAY))  # the check-in missed two mornings
    for i in range(30):  # 60 hours of skipped catch-ups over one project
        row(store, "catchup", "-p", NOW - 60 * H + i * 2 * H, "skipped")
    changed = row(store, "catchup", "-p", NOW - 55 * H, "changed", tokens=1000)
    log = Recorder()
    assert _checkin(tmp_path, store, log, clock) == "unchanged"
    [rep] = log.named("checkin.report")
    assert rep["runs"] == 31 and rep["outcomes"] == {"skipped": 30, "changed": 1}
    report = latest_report(store.path.parent)
    assert report is not None and "31 project runs (changed 1, skipped 30)" in report.read_text()
    # then the rows older than 48 hours went: 60 h .. 50 h ago, every 2 hours
    assert log.named("state.pruned") == [{"rows": 6}]
    left = store.runs(job="catchup", limit=100)
    assert len(left) == 25 and changed in {r.id for r in left}
    assert min(r.ended or 0 for r in left if r.outcome == "skipped") >= NOW - SKIPPED_KEEP_S
    assert [r.outcome for r in store.runs(job="checkin")] == ["unchanged"]


def test_a_dry_run_checkin_prunes_nothing(tmp_path: Path, store: StateStore) -> None:
    row(store, "catchup", "-p", NOW - 3 * DAY, "skipped")
    jc = JobContext(config=Config(), claude_dir=tmp_path / "claude", state_dir=store.path.parent, state=store,
                    clock=ManualClock(T0), dry_run=True, log=Recorder())
    run_checkin(jc)
    assert len(store.runs()) == 1 and jc.log.named("state.pruned") == []


def test_a_busy_state_fails_the_prune_not_the_checkin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = StateStore.open(tmp_path / "state", timeout=0.3)
    holders: list[Holder] = []
    real = StateStore.prune_runs

    def held(self: StateStore, now: float, **kw: Any) -> int:
        # another process takes the write lock between the report and the prune, and keeps it
        holders.append(Holder(self.path))
        try:
            return real(self, now, **kw)
        finally:
            holders[-1].release()

    monkeypatch.setattr(StateStore, "prune_runs", held)
    try:
        old = row(store, "catchup", "-p", NOW - 3 * DAY, "skipped")
        log = Recorder()
        assert _checkin(tmp_path, store, log, ManualClock(T0)) == "unchanged"
        assert len(holders) == 1
        [failed] = log.named("state.prune_failed")
        assert "the state database is busy" in failed["reason"], failed
        assert log.named("state.pruned") == [] and len(log.named("checkin.report")) == 1
        assert latest_report(tmp_path / "state") is not None
        assert old in ids(store)  # nothing deleted; the next check-in tries again
        assert [r.outcome for r in store.runs(job="checkin")] == ["unchanged"]
        assert store.prune_runs.__name__ == "held"
        monkeypatch.undo()
        assert store.prune_runs(NOW) == 1
    finally:
        for h in holders:
            h.release()
        store.close()


# ----------------------------------------------------------------------------- the daemon's start


def _start_and_stop(tmp_path: Path) -> Recorder:
    """``Daemon._run`` in-process under a ManualClock: a SIGTERM is queued before it starts, so its
    loop stops at once and the start-up steps (orphans, prune, schedule, threads) run once."""
    from memd.daemon.server import Daemon

    rec = Recorder()
    daemon = Daemon(config=Config(), load_config=Config, claude_dir_for=lambda c: tmp_path / "claude",
                    state_dir=tmp_path / "state", tz=UTC, clock=ManualClock(T0), log=rec)
    daemon.queue.put(("signal", signal.SIGTERM))
    assert daemon._run() == 0
    assert rec.named("daemon.stop")
    return rec


def test_the_daemon_prunes_at_start(tmp_path: Path, no_thread_leaks: None) -> None:
    with StateStore.open(tmp_path / "state") as s:
        for i in range(7):
            row(s, "catchup", f"-p{i}", NOW - 3 * DAY, "skipped")
        kept = row(s, "catchup", "-p0", NOW - H, "skipped")
        orphan = row(s, "dream", "-p0", NOW - 30 * DAY, "running")  # left by a daemon that died
    rec = _start_and_stop(tmp_path)
    assert rec.named("state.pruned") == [{"rows": 7}]
    with StateStore.open(tmp_path / "state") as s:
        assert ids(s) == {kept, orphan}
        assert s.run(orphan).outcome == "failed"  # type: ignore[union-attr]  # closed first, then kept


def test_a_failed_prune_does_not_stop_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 no_thread_leaks: None) -> None:
    def full(self: StateStore, now: float, **kw: Any) -> int:
        raise StateError("cannot write the state file: no space left on device", path=str(self.path))

    monkeypatch.setattr(StateStore, "prune_runs", full)
    rec = _start_and_stop(tmp_path)
    [failed] = rec.named("state.prune_failed")
    assert "no space left on device" in failed["reason"]
    assert rec.named("daemon.ready") and rec.named("daemon.error") == []



def test_the_daemon_closes_every_orphan_however_many_rows_came_after(tmp_path: Path, no_thread_leaks: None) -> None:
    with StateStore.open(tmp_path / "state") as s:
        orphan = row(s, "dream", "-p0", NOW - 2 * H, "running")  # left by a daemon that died mid-dream
        for i in range(300):  # the catch-ups that ran after it (a foreground `memd catchup`, say)
            row(s, "catchup", f"-p{i}", NOW - H, "unchanged")
    _start_and_stop(tmp_path)
    with StateStore.open(tmp_path / "state") as s:
        assert s.running() == []
        closed = s.run(orphan)
        assert closed is not None and closed.outcome == "failed" and "abandoned" in (closed.error or "")
