"""The daemon's real methods in-process under a ManualClock: no subprocess, no threads, no sleeping.

``Daemon.open()`` gives the loop's state without signals, threads or the pid file; tests then call the
methods the loop calls (``tick``, ``check_schedule``, ``enqueue``, ``sink`` + ``handle_due``, ``drain``)
and run the worker's queued jobs on the test's thread (``Worker.run_queued``). The subprocess tests in
test_daemon_process.py stay as the end-to-end tier.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memd.clock import ManualClock
from memd.config import Config
from memd.daemon.server import Daemon
from memd.daemon.worker import JobRequest
from tests.plugins.daemon import Recorder, over_budget_index

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
UTC = ZoneInfo("UTC")


class Rig:
    def __init__(self, tmp_path: Path, start: datetime, tz: Any, dream_minute: int | None = None) -> None:
        self.claude = tmp_path / "claude"
        self.clock = ManualClock(start, tz)
        self.rec = Recorder()
        self.daemon = Daemon(config=Config(), load_config=Config, claude_dir_for=lambda c: self.claude,
                             state_dir=tmp_path / "state", tz=tz, clock=self.clock, log=self.rec)
        self.daemon.open()
        if dream_minute is not None:
            self.daemon.state.set("schedule.dream.pick", json.dumps({"minute": dream_minute, "window": "x"}))
        self.daemon.setup_schedule()

    def project(self, name: str, index: str = "- [a](a.md) — a\n") -> Path:
        mem = self.claude / "projects" / name / "memory"
        mem.mkdir(parents=True, exist_ok=True)
        (mem / "a.md").write_text("---\nname: a\ndescription: a\ntype: user\n---\nbody\n")
        (mem / "MEMORY.md").write_text(index)
        return mem

    def due(self, job: str) -> list[dict[str, Any]]:
        return [e for e in self.rec.named("schedule.due") if e["job"] == job]

    def run_until(self, end: datetime, step: timedelta = timedelta(minutes=5)) -> None:
        """Tick the loop every ``step`` of real (UTC) time, letting each queued job finish between ticks."""
        while self.clock.now() < end:
            self.clock.advance(step.total_seconds())
            self.daemon.tick()
            self.finish_jobs()

    def finish_jobs(self) -> None:
        # the worker's messages as if its jobs had run: the loop forgets them (no job runs in these tests)
        for key in list(self.daemon.pending):
            req = JobRequest(key[0], list(key[1]) if key[1] else None, key[2])
            self.daemon.dispatch(("job_started", req))
            self.daemon.dispatch(("job_done", req))


@pytest.fixture
def rigs() -> Iterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for r in made:
        r.daemon.close()


# ----------------------------------------------------------------------------- once a night


def test_dream_once_on_the_repeated_dst_night(tmp_path: Path, rigs: list[Rig]) -> None:
    # 2026-11-01 in New York: 01:00-01:59 happens twice; the dream's minute is 01:30
    r = Rig(tmp_path, datetime(2026, 10, 31, 12, 0, tzinfo=NY), NY, dream_minute=90)
    rigs.append(r)
    r.run_until(datetime(2026, 11, 2, 12, 0, tzinfo=NY), step=timedelta(minutes=10))
    assert [e["slot"][:16] for e in r.due("dream")] == ["2026-11-01T01:30", "2026-11-02T01:30"]
    assert r.daemon.state.get("schedule.dream.last_night") == "2026-11-02"


def test_dream_once_on_the_spring_forward_night(tmp_path: Path, rigs: list[Rig]) -> None:
    # 2026-03-29 in Berlin: 02:00-02:59 does not exist; a 02:30 dream runs at 03:30, once
    r = Rig(tmp_path, datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN), BERLIN, dream_minute=150)
    rigs.append(r)
    r.run_until(datetime(2026, 3, 29, 12, 0, tzinfo=BERLIN))
    assert [e["slot"] for e in r.due("dream")] == ["2026-03-29T03:30:00+02:00"]


def test_a_moved_pick_does_not_dream_twice_in_one_night(tmp_path: Path, rigs: list[Rig]) -> None:
    r = Rig(tmp_path, datetime(2026, 6, 1, 23, 0, tzinfo=NY), NY, dream_minute=90)
    rigs.append(r)
    r.run_until(datetime(2026, 6, 2, 2, 0, tzinfo=NY))
    assert len(r.due("dream")) == 1
    # a reload moves the pick to 03:00 the same night: that slot is skipped
    r.daemon.state.set("schedule.dream.pick", json.dumps({"minute": 180, "window": "x"}))
    r.daemon.setup_schedule()
    r.run_until(datetime(2026, 6, 2, 12, 0, tzinfo=NY))
    assert len(r.due("dream")) == 1
    assert [e["reason"] for e in r.rec.named("schedule.skip")] == ["ran this night already"]


def test_clock_set_back_after_the_dream_does_not_dream_again(tmp_path: Path, rigs: list[Rig]) -> None:
    r = Rig(tmp_path, datetime(2026, 6, 1, 23, 0, tzinfo=NY), NY, dream_minute=90)
    rigs.append(r)
    r.run_until(datetime(2026, 6, 2, 2, 0, tzinfo=NY))
    r.clock.jump(-2 * 3600)  # someone sets the clock back two hours, across 01:30 again
    r.daemon.tick()
    assert r.rec.named("daemon.clock_jump")[0]["wall_s"] == -7200
    r.run_until(datetime(2026, 6, 2, 12, 0, tzinfo=NY))
    assert len(r.due("dream")) == 1


def test_a_restart_the_same_night_does_not_dream_again(tmp_path: Path, rigs: list[Rig]) -> None:
    r = Rig(tmp_path, datetime(2026, 6, 1, 23, 0, tzinfo=NY), NY, dream_minute=90)
    rigs.append(r)
    r.run_until(datetime(2026, 6, 2, 1, 40, tzinfo=NY))
    r.daemon.close()
    again = Rig(tmp_path, r.clock.now(), NY, dream_minute=90)
    rigs.append(again)
    again.run_until(datetime(2026, 6, 2, 12, 0, tzinfo=NY))
    assert len(r.due("dream")) == 1 and again.due("dream") == []


# ----------------------------------------------------------------------------- missed runs


def test_a_suspend_across_the_dream_minute_runs_it_once_on_wake(tmp_path: Path, rigs: list[Rig]) -> None:
    r = Rig(tmp_path, datetime(2026, 6, 1, 23, 50, tzinfo=BERLIN), BERLIN, dream_minute=180)
    rigs.append(r)
    r.run_until(datetime(2026, 6, 2, 0, 5, tzinfo=BERLIN))
    assert r.due("dream") == [] and len(r.due("catchup")) == 1  # midnight's catch-up, before the suspend
    r.rec.events.clear()
    r.clock.jump(6 * 3600)  # the lid closed at 00:05, opened at 06:05: the monotonic clock stood still
    r.daemon.tick()
    assert r.rec.named("daemon.clock_jump")[0]["monotonic_s"] < 600
    dream = r.due("dream")
    assert len(dream) == 1 and dream[0]["caught_up"] and dream[0]["slot"].startswith("2026-06-02T03:00")
    catchup = r.due("catchup")  # 02:00, 04:00 and 06:00 were missed: one run, for the latest
    assert len(catchup) == 1 and catchup[0]["slot"].startswith("2026-06-02T06:00")
    assert [e["job"] for e in r.rec.named("job.queued")] == ["dream", "catchup"]
    r.finish_jobs()
    r.run_until(datetime(2026, 6, 2, 7, 55, tzinfo=BERLIN))
    assert len(r.due("dream")) == 1 and len(r.due("catchup")) == 1


# ----------------------------------------------------------------------------- queue dedupe


def test_two_identical_requests_run_once(tmp_path: Path, rigs: list[Rig]) -> None:
    r = Rig(tmp_path, datetime(2026, 6, 1, 12, 0, tzinfo=UTC), UTC)
    rigs.append(r)
    r.project("-p")
    d = r.daemon
    d.enqueue(JobRequest("relief", ["-p"], reason="auto_relief"))
    d.enqueue(JobRequest("relief", ["-p"], reason="auto_relief"))
    d.enqueue(JobRequest("relief", ["-p"], force=True, reason="signal"))  # another key: its own job
    assert len(r.rec.named("job.already_queued")) == 1
    assert d.worker.run_queued(d.state) == 2
    assert len(r.rec.named("relief.rebuilt")) == 2
    d.drain()
    assert d.pending == [] and d.running is None
    d.enqueue(JobRequest("relief", ["-p"], reason="auto_relief"))  # done: the same request runs again
    assert d.worker.run_queued(d.state) == 1


def test_a_request_for_the_running_job_queues_one_more_run(tmp_path: Path, rigs: list[Rig]) -> None:
    """A trigger that arrives while the same job runs (or between its end and the loop hearing of it)
    is not dropped: it may ask about sessions the running job already looked past. A second one while
    that is still waiting is the same request."""
    r = Rig(tmp_path, datetime(2026, 6, 1, 12, 0, tzinfo=UTC), UTC)
    rigs.append(r)
    r.project("-p")
    d = r.daemon
    req = JobRequest("relief", ["-p"], force=True, reason="signal")
    d.enqueue(req)
    d.dispatch(("job_started", req))  # the worker has taken it
    assert d.running == req and d.pending == []
    d.enqueue(JobRequest("relief", ["-p"], force=True, reason="signal"))
    d.enqueue(JobRequest("relief", ["-p"], force=True, reason="signal"))
    assert len(r.rec.named("job.queued")) == 2 and len(r.rec.named("job.already_queued")) == 1
    assert d.worker.run_queued(d.state) == 2


# ----------------------------------------------------------------------------- busy-project deferral


def test_a_write_to_the_busy_project_is_handled_after_the_job(tmp_path: Path, rigs: list[Rig]) -> None:
    r = Rig(tmp_path, datetime(2026, 6, 1, 12, 0, tzinfo=UTC), UTC)
    rigs.append(r)
    busy, other = r.project("-busy"), r.project("-other")
    d = r.daemon
    d.enqueue(JobRequest("relief", ["-busy"], reason="signal"))
    d.worker.run_queued(d.state)
    # the loop learns of the job and the folder it holds before anything the job writes arrives
    d.dispatch(d.queue.get_nowait())
    d.dispatch(d.queue.get_nowait())
    assert d.running is not None and d.running.job == "relief" and d.busy_project == "-busy"
    (busy / "MEMORY.md").write_text(over_budget_index(230))
    (other / "MEMORY.md").write_text(over_budget_index(230))
    d.sink(("memory", "-busy"))
    d.sink(("memory", "-other"))
    r.clock.advance(d.config.daemon.debounce_quiet_s + 0.1)
    d.handle_due()
    assert [w["project"] for w in r.rec.named("budget.warning")] == ["-other"]  # not the busy one, yet
    assert d.deferred == {"-busy"}
    d.drain()  # after_project, job_done
    assert [w["project"] for w in r.rec.named("budget.warning")] == ["-other", "-busy"]
    assert d.deferred == set() and d.busy_project is None and d.running is None and d.pending == []
