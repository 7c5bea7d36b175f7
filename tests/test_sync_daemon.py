"""The daemon's sync job (issue 15): every interval, on `memd trigger sync`, run by the worker."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from memd.clock import ManualClock
from memd.config import Config, SyncConfig
from memd.daemon import control
from memd.daemon.server import Daemon
from tests.plugins.daemon import Recorder
from tests.plugins.sync import Machine, topic


def _daemon(m: Machine, tmp_path: Path, **sync: Any) -> tuple[Daemon, ManualClock, Recorder]:
    clock = ManualClock(datetime(2026, 6, 1, 12, 0, tzinfo=ZoneInfo("UTC")), ZoneInfo("UTC"))
    rec = Recorder()
    cfg = Config(sync=SyncConfig(**({"remote": m.config.sync.remote, "machine": m.name} | sync)))
    d = Daemon(config=cfg, load_config=lambda: cfg, claude_dir_for=lambda c: m.claude, state_dir=m.state_dir,
               tz=ZoneInfo("UTC"), clock=clock, log=rec)
    d.open()
    d.setup_schedule()
    return d, clock, rec


def _queued(rec: Recorder) -> list[dict[str, Any]]:
    return [e for e in rec.named("job.queued") if e["job"] == "sync"]


def test_the_daemon_syncs_every_interval_and_on_trigger(machines: Any, tmp_path: Path) -> None:
    a: Machine = machines("ma")
    b: Machine = machines("mb")
    a.write("x.md", topic("x", "from a\n"))
    a.sync("app")
    d, clock, rec = _daemon(b, tmp_path, interval_minutes=30)
    try:
        d.tick()
        assert [e["reason"] for e in _queued(rec)] == ["interval"]
        assert d.worker.run_queued(d.state) == 1  # the worker runs the sync job
        finished = [e for e in rec.named("job.finish") if e["job"] == "sync"]
        assert finished and finished[0]["outcome"] == "changed", rec.events
        assert b.read("x.md") == a.read("x.md")
        d.drain()  # the worker's job_started and job_done
        clock.advance(10 * 60)
        d.tick()
        assert len(_queued(rec)) == 1
        clock.advance(25 * 60)
        d.tick()
        assert len(_queued(rec)) == 2
        assert d.worker.run_queued(d.state) == 1
        d.drain()
        # `memd trigger sync --project P`: a request file and SIGUSR2; the catch-up is not started
        control.write_request(b.state_dir, "sync", [b.project().name])
        d.handle_SIGUSR2()
        assert _queued(rec)[-1]["projects"] == [b.project().name]
        assert not [e for e in rec.named("job.queued") if e["job"] == "catchup"]
        d.handle_SIGUSR2()  # a bare signal is still the catch-up
        assert [e for e in rec.named("job.queued") if e["job"] == "catchup"]
    finally:
        d.close()


def test_sync_off_means_no_sync_job(machines: Any, tmp_path: Path) -> None:
    m: Machine = machines("ma")
    m.config = Config()
    d, clock, rec = _daemon(m, tmp_path, remote="")
    try:
        d.tick()
        clock.advance(3600)
        d.tick()
        assert not _queued(rec)
    finally:
        d.close()
