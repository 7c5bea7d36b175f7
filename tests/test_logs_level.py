"""One key for severity in memd's log: `level`, whoever wrote the line (daemon, stdlib loggers, hooks)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from memd import logs
from memd.config import Config
from memd.hooks import log as hook_log


def _lines(state: Path) -> list[dict[str, object]]:
    for h in logging.getLogger().handlers:
        h.flush()
    return [json.loads(x) for x in (state / "memd.log").read_text().splitlines()]


def test_select_level_error_finds_every_error(tmp_path: Path) -> None:
    logs.setup(tmp_path, level="info", console=False)
    try:
        logs.get_logger("memd.test").error("job.failed", job="dream", error="boom")
        logs.get_logger("memd.test").warning("budget.warning", project="-p", budget_level="over")
        logs.get_logger("memd.test").info("odd.event", level="near")  # an event's own "level" never wins
        logging.getLogger("watchdog.observers").error("observer died")
        hook_log.append(str(tmp_path), "error", "hook.failed", hook_event="PreToolUse", error="ValueError: x")
        lines = _lines(tmp_path)
    finally:
        logs.reset()
    errors = [ln["event"] for ln in lines if ln.get("level") == "error"]  # jq 'select(.level=="error")'
    assert errors == ["job.failed", "observer died", "hook.failed"]
    assert all("severity" not in ln for ln in lines)
    budget = next(ln for ln in lines if ln["event"] == "budget.warning")
    assert budget["level"] == "warning" and budget["budget_level"] == "over"
    odd = next(ln for ln in lines if ln["event"] == "odd.event")
    assert odd["level"] == "info" and odd["event_level"] == "near"
    assert list(lines[0])[:3] == ["timestamp", "level", "event"]


def test_the_budget_monitor_logs_budget_level(tmp_path: Path) -> None:
    from memd.daemon.budget import BudgetMonitor
    from memd.layout import Project
    from memd.state import StateStore

    mem = tmp_path / "projects" / "-p" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("".join(f"- [e{i}](e{i}.md) — x\n" for i in range(230)))
    logs.setup(tmp_path / "state", level="info", console=False)
    try:
        with StateStore.open(tmp_path / "state") as st:
            BudgetMonitor(Config(), st, logs.get_logger("memd.daemon")).check(
                Project("-p", mem.parent, mem))
        lines = _lines(tmp_path / "state")
    finally:
        logs.reset()
    ev = next(ln for ln in lines if ln["event"] == "budget.warning")
    assert ev["level"] == "warning" and ev["budget_level"] == "over"


def test_transcript_appends_are_visible_at_debug_level(tmp_path: Path) -> None:
    from memd.layout import Project
    from memd.state import StateStore
    from memd.transcripts.scan import scan_project

    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    sid = "0b0c6a52-5d8e-4c1e-9a53-1f2e3d4c5b6a"
    rec = {"type": "user", "uuid": "u1", "sessionId": sid, "cwd": "/p", "timestamp": "2026-11-30T10:00:00Z",
           "message": {"role": "user", "content": "hi"}}
    (folder / f"{sid}.jsonl").write_text(json.dumps(rec) + "\n")
    state = tmp_path / "state"
    for level, seen in (("info", False), ("debug", True)):
        logs.setup(state, level=level, console=False)
        try:
            with StateStore.open(state) as st:
                st_project = Project("-p", folder, folder / "memory")
                scan_project(st_project, st, Config(), now=0.0, dry_run=True)
            lines = _lines(state)
        finally:
            logs.reset()
        got = [ln for ln in lines if ln["event"] == "transcript.appended"]
        assert bool(got) == seen
    assert got[0]["level"] == "debug" and got[0]["project"] == "-p" and got[0]["bytes"] > 0
    assert got[0]["session"] == sid


def test_readable_lines_go_to_stdout_when_not_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`memd run` under launchd printed nothing to its out log: the same lines now go to stdout."""
    import io
    import sys

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    logs.setup(tmp_path, level="info", console=True)
    try:
        logs.get_logger("memd.daemon").info("daemon.ready", watching=True)
    finally:
        logs.reset()
    assert "daemon.ready" in out.getvalue() and err.getvalue() == ""
    monkeypatch.setenv("JOURNAL_STREAM", "8:1")  # journald reads stderr
    logs.setup(tmp_path, level="info", console=True)
    try:
        logs.get_logger("memd.daemon").info("daemon.stop")
    finally:
        logs.reset()
    assert "daemon.stop" in err.getvalue() and "daemon.stop" not in out.getvalue()


def test_memd_run_asks_for_readable_lines_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from memd import cli
    from memd.daemon import server

    seen: dict[str, object] = {}

    class FakeDaemon:
        exit_now = False

        def __init__(self, **kw: object) -> None:
            seen.update(kw)

        def run(self) -> int:
            return 0

    monkeypatch.setattr(server, "Daemon", FakeDaemon)
    assert cli.main(["run"]) == 0 and seen["console"] is True  # auto, not on a terminal
    assert cli.main(["run", "--console", "no"]) == 0 and seen["console"] is False
