"""The job runner, dream gates and Claude Code's .consolidate-lock, the check-in report, status info."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memd import config as C
from memd.clock import ManualClock
from memd.config import Config
from memd.jobs import JobContext, ProjectOutcome, checkin, runner
from memd.jobs import gates as G
from memd.layout import Project
from memd.state import StateStore
from tests.plugins.daemon import Recorder

UUID = "0b5c3f4e-1111-2222-3333-4444555566{:02d}"


def project(tmp_path: Path, name: str = "-home-u-app", memory: bool = True) -> Project:
    d = tmp_path / "claude" / "projects" / name
    d.mkdir(parents=True, exist_ok=True)
    if memory:
        (d / "memory").mkdir(exist_ok=True)
        (d / "memory" / "MEMORY.md").write_text("- [A](a.md) — a\n")
    return Project(name, d, d / "memory")


@pytest.fixture
def state(tmp_path: Path) -> Any:
    with StateStore.open(tmp_path / "state") as st:
        yield st


def ctx(tmp_path: Path, state: Any, cfg: Config | None = None, **kw: Any) -> JobContext:
    return JobContext(config=cfg or Config(), claude_dir=tmp_path / "claude", state_dir=tmp_path / "state",
                      state=state, log=kw.pop("log", Recorder()), **kw)


def old(path: Path, hours: float) -> None:
    t = time.time() - hours * 3600
    os.utime(path, (t, t))


# ----------------------------------------------------------------------------- gates


def test_gates_cheapest_first(tmp_path: Path, state: Any) -> None:
    p = project(tmp_path)
    jc = ctx(tmp_path, state)
    now = time.time()
    assert G.check_dream(jc, project(tmp_path, "-nomem", memory=False)).gate == "memory_folder"
    state.mark_consolidated(p.name, now - 3600)
    assert G.check_dream(jc, p).gate == "min_hours"
    state.mark_consolidated(p.name, now - 30 * 3600)
    r = G.check_dream(jc, p)
    assert r.gate == "min_sessions" and "0 sessions" in r.reason
    for i in range(5):
        state.touch_session(p.name, UUID.format(i), now - 3600)
    state.touch_session(p.name, "not-a-uuid", now - 3600)  # only UUID-named sessions count
    assert G.check_dream(jc, p).passed
    # an active session (written within transcripts.active_minutes)
    s = p.dir / f"{UUID.format(9)}.jsonl"
    s.write_text("{}\n")
    assert G.check_dream(jc, p).gate == "active_session"
    old(s, 2)
    assert G.check_dream(jc, p).passed
    # --force waives hours and sessions, never the active session or the lock
    state.mark_consolidated(p.name, now - 60)
    assert G.check_dream(replace(jc, force=True), p).passed
    s.write_text("{}\n{}\n")
    assert G.check_dream(replace(jc, force=True), p).gate == "active_session"


def test_claude_codes_own_consolidation_counts_as_the_last_one(tmp_path: Path, state: Any) -> None:
    p = project(tmp_path)
    lock = p.memory_dir / G.LOCK_NAME
    lock.write_text("999999")  # a dead holder; its mtime says "consolidated an hour ago"
    old(lock, 1)
    assert G.check_dream(ctx(tmp_path, state), p).gate == "min_hours"


def test_each_gate_is_configurable(tmp_path: Path, state: Any) -> None:
    p = project(tmp_path)
    cfg = Config()
    cfg = C.replace(cfg, dream=C.replace(cfg.dream, min_hours=0, min_sessions=0, require_idle=False))
    (p.dir / f"{UUID.format(1)}.jsonl").write_text("{}\n")
    state.mark_consolidated(p.name, time.time())
    assert G.check_dream(ctx(tmp_path, state, cfg), p).passed


def test_lock_stale_rules_and_rollback(tmp_path: Path) -> None:
    p = project(tmp_path)
    path = p.memory_dir / G.LOCK_NAME
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        path.write_text(str(holder.pid))
        lk = G.ConsolidateLock(p.memory_dir)
        ok, why = lk.acquire()
        assert not ok and str(holder.pid) in why
        old(path, 2)  # older than 60 minutes: stale even with a live holder
        before = path.stat().st_mtime
        ok, _ = lk.acquire()
        assert ok and path.read_text() == str(os.getpid())
        # while we hold it, a second taker in this process is refused
        assert not G.ConsolidateLock(p.memory_dir).acquire()[0]
        lk.release(success=False)  # a failed run: the old lock comes back, mtime and all
        assert path.read_text() == str(holder.pid) and path.stat().st_mtime == before
    finally:
        holder.kill()
        holder.wait()
    # holder dead: free; success leaves our pid and a fresh mtime (the time of this consolidation)
    path.write_text(str(holder.pid))
    lk = G.ConsolidateLock(p.memory_dir)
    assert lk.acquire()[0]
    lk.release(success=True)
    assert path.read_text() == str(os.getpid()) and time.time() - path.stat().st_mtime < 60
    # and our own leftover does not block our next run
    assert G.ConsolidateLock(p.memory_dir).acquire()[0]
    G.release_all_held()
    # no lock before, failed run: no lock after
    path.unlink()
    lk = G.ConsolidateLock(p.memory_dir)
    assert lk.acquire()[0]
    lk.release(success=False)
    assert not path.exists()


def test_a_lock_naming_an_impossible_pid_has_no_holder(tmp_path: Path, state: Any) -> None:
    p = project(tmp_path)
    (p.memory_dir / G.LOCK_NAME).write_text("9" * 30)  # os.kill would overflow on it
    assert G.read_lock(p.memory_dir).pid is None
    assert G.check_dream(ctx(tmp_path, state, force=True), p).passed
    assert G.ConsolidateLock(p.memory_dir).acquire()[0]
    G.release_all_held()


# ----------------------------------------------------------------------------- runner


def test_runner_events_run_log_and_failures(tmp_path: Path, state: Any) -> None:
    a, b, c = project(tmp_path, "-a-x"), project(tmp_path, "-b-x"), project(tmp_path, "-c-x")
    rec = Recorder()
    jc = ctx(tmp_path, state, log=rec, force=True)

    def work(jc: JobContext, p: Project) -> ProjectOutcome:
        assert (p.memory_dir / G.LOCK_NAME).read_text() == str(os.getpid())  # held while working
        if p.name == "-b-x":
            raise RuntimeError("model said no")
        return ProjectOutcome(p.name, "changed", "merged", changed=2, tokens_in=100, cost_usd=0.01)

    res = runner.run_job("dream", jc, [a, b, c], work)
    assert [o.outcome for o in res.outcomes] == ["changed", "failed", "changed"]
    assert res.failed
    fin = rec.named("job.finish")
    assert [(f["project"], f["outcome"]) for f in fin] == [("-a-x", "changed"), ("-b-x", "failed"), ("-c-x", "changed")]
    assert all(isinstance(f["duration_s"], float) for f in fin)
    assert "RuntimeError: model said no" in fin[1]["error"]
    runs = {r.project: r for r in state.runs(job="dream")}
    assert runs["-a-x"].outcome == "changed" and runs["-a-x"].changed == 2 and runs["-a-x"].cost_usd == 0.01
    assert runs["-b-x"].outcome == "failed" and not (b.memory_dir / G.LOCK_NAME).exists()  # rolled back
    assert state.project("-a-x").last_consolidation is not None
    assert state.project("-b-x").last_consolidation is None
    last = json.loads(state.get("job.dream.last"))
    assert last["counts"] == {"changed": 2, "failed": 1}


def test_runner_skips_on_gates_and_stops_between_projects(tmp_path: Path, state: Any) -> None:
    a, b = project(tmp_path, "-a-x"), project(tmp_path, "-b-x")
    rec = Recorder()
    stop = threading.Event()
    jc = ctx(tmp_path, state, log=rec, stop=stop)
    calls: list[str] = []

    def work(jc: JobContext, p: Project) -> ProjectOutcome:
        calls.append(p.name)
        stop.set()
        return ProjectOutcome(p.name, "unchanged")

    res = runner.run_job("dream", jc, [a, b], work)  # min_sessions gate: nobody runs
    assert calls == [] and set(res.skipped) == {"-a-x", "-b-x"}
    assert {s["gate"] for s in rec.named("job.skip")} == {"min_sessions"}
    assert state.runs(job="dream") == []
    res = runner.run_job("catchup", jc, [a, b], work)  # catch-up has no gates; stop after the first
    assert calls == ["-a-x"] and res.abandoned
    assert rec.named("job.abandoned")


def test_runner_imports_without_the_jobs_and_dry_run_takes_no_lock(tmp_path: Path, state: Any) -> None:
    p = project(tmp_path)
    jc = ctx(tmp_path, state, force=True, dry_run=True)
    seen: list[bool] = []

    def work(jc: JobContext, q: Project) -> ProjectOutcome:
        seen.append((q.memory_dir / G.LOCK_NAME).exists())
        return ProjectOutcome(q.name, "changed")

    runner.run_job("dream", jc, [p], work)
    assert seen == [False] and not (p.memory_dir / G.LOCK_NAME).exists()
    assert state.project(p.name).last_consolidation is None
    assert callable(runner.load_project_job("dream")) and callable(runner.load_project_job("catchup"))


def test_job_lock_is_exclusive(tmp_path: Path) -> None:
    with runner.job_lock(tmp_path):
        code = ("import sys; from pathlib import Path; from memd.jobs.runner import job_lock\n"
                "try:\n    job_lock(Path(sys.argv[1])).__enter__()\nexcept Exception as e:\n"
                "    print(type(e).__name__)\n")
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
        assert out.stdout.strip() == "MemdError"
    with runner.job_lock(tmp_path):  # free again once the holder has let go
        pass


# ----------------------------------------------------------------------------- check-in


def test_checkin_report_and_no_change_warning(tmp_path: Path, state: Any) -> None:
    now = time.time()
    for i in range(5):
        rid = state.start_run("dream", "-idle-x", now - 3600 * (i + 1))
        state.finish_run(rid, outcome="unchanged", ended=now - 3600 * (i + 1) + 5)
    rid = state.start_run("catchup", "-busy-x", now - 600)
    state.finish_run(rid, outcome="changed", ended=now - 590, added=3, tokens_in=1000, tokens_out=200, cost_usd=0.25)
    rid = state.start_run("dream", "-busy-x", now - 500)
    state.finish_run(rid, outcome="failed", ended=now - 490, error="RuntimeError: boom")
    state.set_warning("-busy-x", "budget", "over", {"lines": 230, "chars": 9000})
    rec = Recorder()
    jc = ctx(tmp_path, state, log=rec, clock=ManualClock(datetime.fromtimestamp(now).astimezone()))
    path = checkin.run_checkin(jc)
    assert path is not None and path == checkin.latest_report(tmp_path / "state")
    text = path.read_text()
    assert "-busy-x | changed | +3 ~0 -0 | 1000/200 | $0.2500" in text
    assert "RuntimeError: boom" in text
    assert "-busy-x: budget over (lines 230, chars 9000)" in text
    assert "- -idle-x" in text.split("## Runs that change nothing")[1]
    ev = rec.named("checkin.report")[0]
    assert ev["runs"] == 7 and ev["cost_usd"] == 0.25 and ev["open_warnings"] == 1
    assert rec.named("checkin.no_changes")[0]["project"] == "-idle-x"
    assert [w.kind for w in state.warnings("-idle-x")] == ["no_changes"]
    # the next check-in covers only what happened since
    later = now + 60
    jc2 = ctx(tmp_path, state, log=Recorder(), clock=ManualClock(datetime.fromtimestamp(later).astimezone()))
    p2 = checkin.run_checkin(jc2)
    assert p2 is not None and "0 project runs" in p2.read_text()


# ----------------------------------------------------------------------------- status info


def test_status_info_without_and_with_a_daemon(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from memd.daemon import info, pidfile

    tz = ZoneInfo("Europe/Berlin")
    sd = tmp_path / "state"
    now = datetime(2026, 6, 1, 12, 0, tzinfo=tz)
    d = info.daemon_status(sd, Config(), now=now, tz=tz)
    assert d["running"] is False
    assert d["jobs"]["dream"]["at"] is None  # not picked before the first start
    text = info.render(d)
    assert "not running" in text and "picked on first start" in text
    with StateStore.open(sd) as st:
        st.set("schedule.dream.pick", json.dumps({"minute": 137, "window": "01:00-04:59"}))
        st.set("schedule.dream.last_slot", datetime(2026, 5, 30, 2, 17, tzinfo=tz).isoformat())
        st.set("schedule.catchup.last_slot", datetime(2026, 6, 1, 12, 0, tzinfo=tz).isoformat())
        st.set("job.dream.last", json.dumps({"ended": now.timestamp(), "counts": {"changed": 2}}))
        st.set_warning("-p-x", "budget", "over", {"lines": 230, "chars": 1})
    with pidfile.PidLock(sd):
        pidfile.write_heartbeat(sd, {"pid": os.getpid(), "started": now.timestamp() - 60, "watching": True},
                                time.time())
        d = info.daemon_status(sd, Config(), now=now, tz=tz)
    assert d["running"] and d["pid"] == os.getpid()
    assert d["jobs"]["dream"]["at"] == "02:17"
    assert d["jobs"]["dream"]["next"].startswith("now (missed at 2026-06-01T02:17")
    assert d["jobs"]["catchup"]["next"] == "2026-06-01T14:00+02:00"
    text = info.render(d)
    assert "daily at 02:17" in text and "changed 2" in text and "-p-x: budget over" in text
