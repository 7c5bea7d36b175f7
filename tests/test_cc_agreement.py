"""Issue 23: memd agrees with the Claude Code people run today (unit side; the real CLI's side is
tests/realcc). Each test failed before its fix."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from memd import layout

Cli = Callable[..., subprocess.CompletedProcess[str]]


def _repo(tmp_path: Path, settings: dict[str, object], name: str = "settings.json") -> Path:
    repo = tmp_path / "work" / "app"
    (repo / ".git").mkdir(parents=True)
    (repo / ".claude").mkdir()
    (repo / ".claude" / name).write_text(json.dumps(settings))
    return repo


def _project_with_session(claude: Path, repo: Path) -> Path:
    """The project folder Claude Code makes for a session in repo, with a transcript naming its cwd
    and a small memory folder."""
    folder = claude / "projects" / layout.folder_for_cwd(repo)
    (folder / "memory").mkdir(parents=True)
    (folder / "memory" / "MEMORY.md").write_text("# Memory\n- [A](a.md) — a\n")
    (folder / "memory" / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\n\nbody\n")
    rec = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "0b0e6b2e-9a53-4a4e-8c39-5ad0c6c2d3a1",
           "cwd": str(repo), "version": "2.1.332", "timestamp": "2026-12-01T10:00:00Z",
           "message": {"role": "user", "content": "hello"}}
    session = folder / "0b0e6b2e-9a53-4a4e-8c39-5ad0c6c2d3a1.jsonl"
    session.write_text(json.dumps(rec) + "\n")
    old = time.time() - 7200  # not an active session
    os.utime(session, (old, old))
    return folder


def test_check_says_memory_is_off_by_a_project_settings_file(tmp_path: Path, claude_home: Path,
                                                              memd_cli: Cli) -> None:
    for name in ("settings.json", "settings.local.json"):
        repo = _repo(tmp_path / name, {"autoMemoryEnabled": False}, name)
        _project_with_session(claude_home, repo)
        out = memd_cli("check", ".", cwd=repo)
        assert "auto memory is off" in out.stdout + out.stderr, out.stdout + out.stderr
        assert str(repo / ".claude" / name) in out.stdout


def test_jobs_leave_a_project_whose_memory_is_off_alone(tmp_path: Path, claude_home: Path, memd_cli: Cli) -> None:
    repo = _repo(tmp_path, {"autoMemoryEnabled": False})
    folder = _project_with_session(claude_home, repo)
    (folder / "memory" / "b.md").write_text("---\nname: B\ndescription: b\ntype: user\n---\n\nbody\n")  # an orphan
    before = (folder / "memory" / "MEMORY.md").read_bytes()
    for job in ("dream", "catchup"):
        out = memd_cli(job, folder.name, *(["--force"] if job == "dream" else []))
        assert "Traceback" not in out.stderr
        assert "memory_off" in out.stdout + out.stderr, out.stdout + out.stderr
    assert (folder / "memory" / "MEMORY.md").read_bytes() == before  # the orphan was not indexed
    # the same project with memory on: the keyless dream repairs the index
    (repo / ".claude" / "settings.json").write_text("{}")
    out = memd_cli("dream", folder.name, "--force")
    assert "b.md" in (folder / "memory" / "MEMORY.md").read_text(), out.stdout + out.stderr


def test_the_loaded_view_follows_the_claude_code_version_of_the_project(tmp_path: Path, claude_home: Path,
                                                                         memd_cli: Cli) -> None:
    """A comment and ten link reference definitions at the top of a 205-line index: Claude Code 2.1.328
    drops the definitions (194 lines: nothing hidden); 2.1.330 and later keep them (204: 4 hidden)."""
    index = ("<!-- links -->\n" + "".join(f"[l{i}]: https://x.example/{i}\n" for i in range(10))
             + "".join(f"- [Note {i}](note_{i}.md) — hook {i}\n" for i in range(194)))
    for version, hidden in (("2.1.328", 0), ("2.1.332", 4), ("", 4)):
        repo = _repo(tmp_path / (version or "none"), {})
        folder = _project_with_session(claude_home, repo)
        (folder / "memory" / "MEMORY.md").write_text(index)
        session = next(folder.glob("*.jsonl"))
        if version:
            session.write_text(session.read_text().replace('"2.1.332"', f'"{version}"'))
        else:
            session.unlink()  # no session: the newest behaviour
        for cmd in (("check", folder.name, "--format", "json"), ("status", folder.name, "--format", "json")):
            out = memd_cli(*cmd)
            assert "Traceback" not in out.stderr, out.stderr
            report = json.loads(out.stdout)
            row = report[0] if isinstance(report, list) else report["projects"][0]
            text = json.dumps(row)
            assert (f'"hidden_entries": {hidden}' in text) or (f'"hidden": {hidden}' in text), (version, cmd, text)


def test_the_hooks_measure_with_the_sessions_version(tmp_path: Path) -> None:
    from memd.config import Config
    from memd.hooks.tool_use import refdefs_for

    text = "<!-- c -->\n[r]: https://x.example/r\n- [A](a.md) — a\n"
    cfg = Config()
    for version, keep in (("2.1.328", False), ("2.1.329", False), ("2.1.330", True), ("2.1.332", True)):
        t = tmp_path / f"{version}.jsonl"
        t.write_text(json.dumps({"type": "user", "version": version}) + "\n")
        assert refdefs_for(text, {"transcript_path": str(t)}, cfg) is keep
    assert refdefs_for(text, {}, cfg) is True  # unknown: the newest behaviour
    assert refdefs_for("- [A](a.md)\n", {"transcript_path": str(tmp_path / "2.1.328.jsonl")}, cfg) is True


# --------------------------------------------------------------------------- item 1: moved by a project's settings

AWS_KEY = "AKIA" + "Q3EXAMPLEZ7Y4BQW"  # built at run time: no secret-shaped literal in the repo


def _moved_project(tmp_path: Path, claude: Path, name: str = "settings.json") -> tuple[Path, Path]:
    moved = tmp_path / "team-notes"
    moved.mkdir(parents=True)
    repo = _repo(tmp_path / name, {"autoMemoryDirectory": str(moved)}, name)
    _project_with_session(claude, repo)
    return repo, moved


def test_the_hook_guards_a_memory_folder_moved_by_project_settings(tmp_path: Path, claude_home: Path) -> None:
    from tests.plugins.hooks import run_hook

    for name in ("settings.json", "settings.local.json"):
        repo, moved = _moved_project(tmp_path / name, claude_home, name)
        content = f"---\nname: k\ndescription: k\ntype: reference\n---\nthe deploy key is {AWS_KEY}\n"
        ev = {"session_id": "s", "transcript_path": str(tmp_path / "x.jsonl"), "cwd": str(repo),
              "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Write",
              "tool_input": {"file_path": str(moved / "aws.md"), "content": content}, "tool_use_id": "t"}
        run = run_hook(ev)
        assert run.rc == 0, run.err
        assert run.answer["hookSpecificOutput"]["permissionDecision"] == "deny", run.out
        # the same write from a session of another folder is no memory write of this project
        other = dict(ev, cwd=str(tmp_path))
        assert run_hook(other).out.strip() in ("", "{}")


def test_hooks_install_covers_it_and_status_names_a_folder_the_rules_miss(tmp_path: Path, claude_home: Path,
                                                                          memd_cli: Cli) -> None:
    from memd import settings_merge as sm

    assert memd_cli("hooks", "install").returncode == 0
    _repo_dir, moved = _moved_project(tmp_path, claude_home)  # moved after the install
    out = memd_cli("hooks", "status")
    assert out.returncode == 1
    assert f"not guarded: the memory folder {moved}" in out.stdout, out.stdout
    assert memd_cli("hooks", "install").returncode == 0
    rules = [r.rule for r in sm.installed(json.loads((claude_home / "settings.json").read_text()))]
    assert any(r and str(moved).lstrip("/") in r for r in rules), rules
    out = memd_cli("hooks", "status")
    assert out.returncode == 0 and "not guarded" not in out.stdout, out.stdout


def test_refresh_rules_keeps_the_installed_start_and_adds_the_moved_folder(tmp_path: Path, claude_home: Path,
                                                                           memd_cli: Cli) -> None:
    from memd import settings_merge as sm

    assert memd_cli("hooks", "install").returncode == 0
    before = sm.installed(json.loads((claude_home / "settings.json").read_text()))
    state = tmp_path / "state"
    assert sm.refresh_rules(claude_home, state) is None  # every folder reached: nothing to do
    _repo_dir, moved = _moved_project(tmp_path, claude_home)
    change = sm.refresh_rules(claude_home, state)
    assert change is not None and change.changed
    after = sm.installed(json.loads((claude_home / "settings.json").read_text()))
    assert {(r.command, tuple(r.args or [])) for r in after} == {(r.command, tuple(r.args or [])) for r in before}
    assert any(r.rule and str(moved).lstrip("/") in r.rule for r in after)
    assert sm.refresh_rules(claude_home, state) is None
    assert memd_cli("hooks", "status").returncode == 0


def test_the_daemon_keeps_the_rules_current(tmp_path: Path, run_daemon: Callable[..., object]) -> None:
    d: object = run_daemon(start=False)
    from typing import Any

    dp: Any = d
    assert dp.memd("hooks", "install").returncode == 0
    _repo_dir, moved = _moved_project(tmp_path, dp.claude)
    dp.start()
    ev = dp.wait_for("hooks.rules_updated")
    assert ev["rules"] > 2
    assert str(moved).lstrip("/") in (dp.claude / "settings.json").read_text()
    assert dp.stop() == 0


def test_status_reports_a_project_whose_memory_is_off(tmp_path: Path, claude_home: Path, memd_cli: Cli) -> None:
    repo = _repo(tmp_path, {"autoMemoryEnabled": False})
    folder = _project_with_session(claude_home, repo)
    out = memd_cli("status", folder.name)
    assert "auto memory is off here" in out.stdout and "settings.json" in out.stdout, out.stdout
    doc = json.loads(memd_cli("status", folder.name, "--format", "json").stdout)
    assert "autoMemoryEnabled is false" in doc["projects"][0]["memory_off"]
