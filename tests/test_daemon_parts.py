"""The daemon's parts in-process: debounce, classify, the watcher (no leaked threads), pid file, notify,
budget crossings, request files, logs."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from memd import logs
from memd.config import Config
from memd.daemon import control, notify, pidfile
from memd.daemon.budget import BudgetMonitor, count_topic_files
from memd.daemon.debounce import Debouncer
from memd.daemon.watch import Watcher, classify
from memd.layout import Project
from memd.state import StateStore
from tests.plugins.daemon import Recorder, over_budget_index


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


# ----------------------------------------------------------------------------- debounce


def test_debounce_quiet_period_and_max_wait() -> None:
    clock = FakeClock()
    d: Debouncer[str] = Debouncer(0.5, 2.0, clock)
    assert d.add("a") is True
    assert d.add("a") is False  # already pending: no second wake-up
    assert d.next_deadline() == 100.5
    clock.t = 100.4
    d.add("a")  # still busy: the quiet period restarts
    assert d.pop_due() == []
    clock.t = 100.9
    assert d.pop_due() == ["a"]
    assert d.next_deadline() is None
    # a path written without pause is handled at the max wait anyway
    clock.t = 200.0
    d.add("b")
    for i in range(1, 30):
        clock.t = 200.0 + i * 0.1
        d.add("b")
        if d.pop_due() == ["b"]:
            break
    assert clock.t == pytest.approx(202.0)


# ----------------------------------------------------------------------------- classify


def test_classify_paths(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    c = lambda rel, is_dir=False: classify(root, str(root / rel) if rel else str(root), is_dir)  # noqa: E731
    assert c("") == ("root", "")
    assert c("-p", True) == ("project", "-p")
    assert c("-p/memory", True) == ("memory", "-p")
    assert c("-p/memory/MEMORY.md") == ("memory", "-p")
    assert c("-p/memory/sub/topic.md") == ("memory", "-p")
    assert c("-p/memory/.memd-MEMORY.md.1.ab.tmp") is None  # our own temp file
    assert c("-p/memory/.consolidate-lock") is None
    assert c("-p/memory/team/MEMORY.md") is None  # synced from a server: not ours
    assert c("-p/memory/notes.txt") is None
    assert c("-p/0b5c3f4e-1111-2222-3333-444455556666.jsonl") == ("transcript", "-p")
    assert c("-p/0b5c3f4e-1111-2222-3333-444455556666/subagents/agent-1.jsonl") == ("transcript", "-p")
    assert c("-p/0b5c3f4e-1111-2222-3333-444455556666/tool-results/x.txt") is None
    assert classify(root, str(tmp_path / "elsewhere"), False) is None


# ----------------------------------------------------------------------------- watcher


def test_watcher_sees_writes_atomic_saves_and_new_folders(tmp_path: Path, no_thread_leaks: None) -> None:
    root = tmp_path / "projects"
    got: list[tuple[str, str]] = []
    cond = threading.Condition()

    def sink(work: tuple[str, str]) -> None:
        with cond:
            got.append(work)
            cond.notify_all()

    def wait_for(work: tuple[str, str]) -> None:
        deadline = time.monotonic() + 30
        with cond:
            while work not in got:
                left = deadline - time.monotonic()
                assert left > 0, f"never saw {work}; saw {got}"
                cond.wait(left)

    w = Watcher(root, sink)
    assert w.start() is False  # the root does not exist yet
    root.mkdir()
    assert w.start() is True
    try:
        assert w.alive()
        mem = root / "-p" / "memory"
        mem.mkdir(parents=True)
        (mem / "MEMORY.md").write_text("x")
        wait_for(("memory", "-p"))
        got.clear()
        tmp = mem / "tmp-save"
        tmp.write_text("y")
        os.replace(tmp, mem / "topic.md")  # an atomic save arrives as a move
        wait_for(("memory", "-p"))
        (root / "-p" / "0b5c3f4e-1111-2222-3333-444455556666.jsonl").write_text("{}\n")
        wait_for(("transcript", "-p"))
        # the root deleted: the watcher reports it and no longer counts as alive
        import shutil

        shutil.rmtree(root)
        deadline = time.monotonic() + 30
        while w.alive():
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        w.stop()
    assert not w.alive()


# ----------------------------------------------------------------------------- pid file, notify


def test_pid_lock_is_exclusive_and_stale_files_do_not_count(tmp_path: Path) -> None:
    assert pidfile.running_pid(tmp_path) is None
    (tmp_path / "memd.pid").write_text("999999\n")  # left by a crashed daemon: not locked by anyone
    assert pidfile.running_pid(tmp_path) is None
    with pidfile.PidLock(tmp_path):
        assert pidfile.running_pid(tmp_path) == os.getpid()
        with pytest.raises(pidfile.AlreadyRunning) as e:
            pidfile.PidLock(tmp_path).acquire()
        assert str(os.getpid()) in str(e.value) and "already running" in str(e.value)
    assert not (tmp_path / "memd.pid").exists()
    assert pidfile.running_pid(tmp_path) is None


def test_sd_notify_sends_datagrams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify.notify("READY=1") is False
    addr = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as srv:
        srv.bind(addr)
        srv.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", addr)
        assert notify.notify("READY=1\nSTATUS=x") is True
        assert srv.recv(100) == b"READY=1\nSTATUS=x"
    monkeypatch.setenv("WATCHDOG_USEC", "120000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert notify.watchdog_interval() == 60.0
    monkeypatch.setenv("WATCHDOG_PID", "1")
    assert notify.watchdog_interval() is None


# ----------------------------------------------------------------------------- budget crossings


def _project(tmp_path: Path) -> Project:
    d = tmp_path / "projects" / "-p"
    (d / "memory").mkdir(parents=True)
    return Project("-p", d, d / "memory")


def test_budget_warns_once_per_crossing_and_clears(tmp_path: Path) -> None:
    p = _project(tmp_path)
    rec = Recorder()
    with StateStore.open(tmp_path / "state") as st:
        mon = BudgetMonitor(Config(), st, rec)
        p.index_path.write_text(over_budget_index(10))
        assert mon.check(p).level == "ok" and not rec.events
        p.index_path.write_text(over_budget_index(170))
        assert mon.check(p).warned
        mon.check(p)  # same level again: nothing new
        p.index_path.write_text(over_budget_index(171))
        assert not mon.check(p).warned
        p.index_path.write_text(over_budget_index(230))
        assert mon.check(p).warned  # near -> over is a new crossing
        p.index_path.write_text(over_budget_index(180))
        assert not mon.check(p).warned  # easing to near says nothing new
        assert [w.level for w in st.warnings("-p")] == ["near"]
        p.index_path.write_text(over_budget_index(5))
        assert mon.check(p).cleared
        assert st.warnings("-p") == []
        # a restart does not re-warn: the level lives in the state store
        p.index_path.write_text(over_budget_index(230))
        assert BudgetMonitor(Config(), st, rec).check(p).warned
        assert not BudgetMonitor(Config(), st, rec).check(p).warned
    warns = rec.named("budget.warning")
    assert [w["budget_level"] for w in warns] == ["near", "over", "over"]
    assert warns[1]["hidden_titles"] == [f"entry {i}" for i in range(200, 230)]
    assert len(rec.named("budget.cleared")) == 1


def test_topic_file_count_warning(tmp_path: Path) -> None:
    p = _project(tmp_path)
    (p.memory_dir / "team").mkdir()
    for i in range(5):
        (p.memory_dir / "team" / f"t{i}.md").write_text("x")  # counted: recall scans team/ too (issue 9)
    (p.memory_dir / "sub").mkdir()
    for i in range(3):
        (p.memory_dir / "sub" / f"s{i}.md").write_text("x")
    (p.memory_dir / "MEMORY.md").write_text("- [a](a.md) — a\n")
    (p.memory_dir / "team" / "MEMORY.md").write_text("- [t](t0.md) — t\n")  # an index: not counted
    assert count_topic_files(p.memory_dir) == 8
    rec = Recorder()
    with StateStore.open(tmp_path / "state") as st:
        from memd.config import replace

        cfg = Config()
        cfg = replace(cfg, budget=replace(cfg.budget, max_topic_files=7))
        BudgetMonitor(cfg, st, rec).check(p)
        BudgetMonitor(cfg, st, rec).check(p)
        assert [w["files"] for w in rec.named("budget.warning")] == [8]
        (p.memory_dir / "sub" / "s0.md").unlink()
        BudgetMonitor(cfg, st, rec).check(p)
        assert rec.named("budget.cleared")[0]["kind"] == "topic_files"


# ----------------------------------------------------------------------------- requests


def test_request_files_union_and_all(tmp_path: Path) -> None:
    assert control.take_requests(tmp_path, "dream").all_projects  # a bare signal means all
    control.write_request(tmp_path, "dream", ["-b"])
    control.write_request(tmp_path, "dream", ["-a", "-b"])
    control.write_request(tmp_path, "catchup", ["-c"])
    r = control.take_requests(tmp_path, "dream")
    assert (r.all_projects, r.projects) == (False, ["-a", "-b"])
    assert control.take_requests(tmp_path, "dream").all_projects  # consumed
    control.write_request(tmp_path, "catchup", None)
    assert control.take_requests(tmp_path, "catchup").all_projects  # one "all" wins


# ----------------------------------------------------------------------------- logs


def test_logs_are_json_lines_and_stdlib_loggers_share_the_format(tmp_path: Path) -> None:
    import logging

    logs.setup(tmp_path, level="info", console=False)
    try:
        log = logs.get_logger("memd.test")
        log.warning("budget.warning", project="-p", budget_level="over", lines=230)
        log.info("job.finish", note="key sk-ant-api03-" + "A" * 90)
        log.info("job.finish", note="x" * 5000, titles=["fine", "token ghp_" + "a" * 36])
        logging.getLogger("apscheduler.scheduler").warning("Run time of job was missed by %d s", 5)
        logging.getLogger("apscheduler.scheduler").info("chatty")  # below the dependency threshold
    finally:
        for h in logging.getLogger().handlers:
            h.flush()
    lines = [json.loads(x) for x in (tmp_path / "memd.log").read_text().splitlines()]
    assert lines[0]["event"] == "budget.warning" and lines[0]["budget_level"] == "over"
    assert lines[0]["level"] == "warning" and lines[0]["timestamp"].endswith("Z")
    assert "sk-ant" not in json.dumps(lines[1]) and "redacted" in lines[1]["note"]
    assert len(lines[2]["note"]) < 600
    assert lines[2]["titles"] == ["fine", "[redacted: looks like a secret]"]
    assert lines[3]["event"] == "Run time of job was missed by 5 s"
    assert lines[3]["logger"] == "apscheduler.scheduler" and lines[3]["level"] == "warning"
    assert len(lines) == 4
    assert os.stat(tmp_path / "memd.log").st_mode & 0o077 == 0
    assert "budget.warning" in logs.render_line(json.dumps(lines[0]))
    assert "WARNING" in logs.render_line(json.dumps(lines[0]))


def test_log_file_moved_away_is_reopened(tmp_path: Path) -> None:
    import logging

    logs.setup(tmp_path, console=False)
    log = logs.get_logger()
    log.info("one")
    os.replace(tmp_path / "memd.log", tmp_path / "memd.log.1")  # logrotate
    log.info("two")
    for h in logging.getLogger().handlers:
        h.flush()
    assert json.loads((tmp_path / "memd.log").read_text())["event"] == "two"
    assert json.loads((tmp_path / "memd.log.1").read_text())["event"] == "one"
