"""memd hooks install|uninstall|status against real settings.json files, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memd import settings_merge as sm
from tests.plugins.hooks import ROOT

EXISTING: dict[str, Any] = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"], "deny": []},
    "env": {"FOO": "1"},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write", "timeout": 5}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
    "autoMemoryEnabled": True,
}


def cli(claude: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(claude), "hooks", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.fixture
def settings(claude_home: Path) -> Path:
    p = claude_home / "settings.json"
    p.write_text(json.dumps(EXISTING, indent=2) + "\n")
    return p


def backups(claude_home: Path) -> list[Path]:
    folder = claude_home.parent / ".local" / "state" / "memd" / "backups"
    return sorted(folder.glob("settings.json.*")) if folder.exists() else []


def test_install_keeps_everything_else(claude_home: Path, settings: Path) -> None:
    original = settings.read_bytes()
    proc = cli(claude_home, "install")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(settings.read_text())
    # every other setting, in order, untouched
    assert list(data) == list(EXISTING)
    for k, v in EXISTING.items():
        if k != "hooks":
            assert data[k] == v
    # the user's own hooks are still there, first, and unchanged
    assert data["hooks"]["PostToolUse"][0] == EXISTING["hooks"]["PostToolUse"][0]
    assert data["hooks"]["Stop"] == EXISTING["hooks"]["Stop"]
    rows = sm.installed(data)
    assert sorted(r.event for r in rows) == ["PostToolUse", "PreToolUse", "SessionStart", "UserPromptSubmit"]
    tool_rows = [r for r in rows if r.event in ("PreToolUse", "PostToolUse")]
    assert all(r.matcher == "Write|Edit|MultiEdit" for r in tool_rows)
    exe = rows[0].command.split()[0]
    assert os.path.isabs(exe) and rows[0].command.endswith(" hook")
    # a backup of the original, in memd's state folder (not beside settings.json)
    (bak,) = backups(claude_home)
    assert bak.read_bytes() == original
    assert sorted(p.name for p in claude_home.iterdir()) == ["projects", "settings.json"]


def test_install_is_idempotent(claude_home: Path, settings: Path) -> None:
    assert cli(claude_home, "install").returncode == 0
    after_first = settings.read_bytes()
    stat1 = settings.stat()
    proc = cli(claude_home, "install")
    assert proc.returncode == 0 and "already installed" in proc.stdout
    assert settings.read_bytes() == after_first
    assert settings.stat().st_mtime_ns == stat1.st_mtime_ns  # not even rewritten
    assert len(backups(claude_home)) == 1


def test_install_replaces_entries_of_a_moved_installation(claude_home: Path, settings: Path) -> None:
    old = sm.with_memd(EXISTING, "/old/venv/bin/memd hook")
    settings.write_text(json.dumps(old))
    assert cli(claude_home, "install").returncode == 0
    rows = sm.installed(json.loads(settings.read_text()))
    assert len(rows) == 4 and all(not r.command.startswith("/old/") for r in rows)


def test_uninstall_restores_the_original(claude_home: Path, settings: Path) -> None:
    assert cli(claude_home, "install").returncode == 0
    proc = cli(claude_home, "uninstall")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(settings.read_text()) == EXISTING
    assert "removed 4 memd hook(s)" in proc.stdout
    proc = cli(claude_home, "uninstall")
    assert proc.returncode == 0 and "nothing to remove" in proc.stdout


def test_uninstall_removes_only_memds_hook_from_a_shared_group() -> None:
    data = {"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
        {"type": "command", "command": "/x/bin/memd hook"},
        {"type": "command", "command": "my-guard.sh"}]}]}}
    assert sm.without_memd(data) == {"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
        {"type": "command", "command": "my-guard.sh"}]}]}}


def test_install_into_a_missing_file_and_folder(claude_home: Path) -> None:
    target = claude_home / "sub" / "settings.json"
    proc = cli(claude_home, "install", "--settings", str(target))
    assert proc.returncode == 0, proc.stderr
    assert len(sm.installed(json.loads(target.read_text()))) == 4
    assert target.stat().st_mode & 0o077 == 0
    assert backups(claude_home) == []  # nothing to back up


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"PreToolUse": {}}}',
                                  '{"hooks": {"PreToolUse": [3]}}'])
def test_malformed_settings_are_left_untouched(claude_home: Path, text: str) -> None:
    p = claude_home / "settings.json"
    p.write_text(text)
    for action in ("install", "uninstall", "status"):
        proc = cli(claude_home, action)
        assert proc.returncode == 1, (action, proc)
        assert "Traceback" not in proc.stderr
        assert str(p) in proc.stderr and "left untouched" in proc.stderr
        assert p.read_text() == text
    assert backups(claude_home) == []


def test_a_symlinked_settings_file_stays_a_symlink(claude_home: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"model": "opus"}))
    (claude_home / "settings.json").symlink_to(real)
    assert cli(claude_home, "install").returncode == 0
    assert (claude_home / "settings.json").is_symlink()
    assert len(sm.installed(json.loads(real.read_text()))) == 4


def test_status(claude_home: Path, settings: Path) -> None:
    proc = cli(claude_home, "status")
    assert proc.returncode == 1 and "not installed" in proc.stdout
    cli(claude_home, "install")
    proc = cli(claude_home, "status")
    assert proc.returncode == 0, proc.stdout
    assert "PreToolUse" in proc.stdout and "recall (UserPromptSubmit): off" in proc.stdout
    data = json.loads(cli(claude_home, "status", "--format", "json").stdout)
    assert data["current"] and len(data["installed"]) == 4 and data["missing"] == []
    # an entry pointing at a memd that is gone is reported
    settings.write_text(json.dumps(sm.with_memd({}, "/gone/bin/memd hook")))
    proc = cli(claude_home, "status")
    assert proc.returncode == 1 and "/gone/bin/memd is not an executable file" in proc.stdout


def test_dry_run_writes_nothing(claude_home: Path, settings: Path) -> None:
    before = settings.read_bytes()
    proc = cli(claude_home, "install", "--dry-run")
    assert proc.returncode == 0 and len(sm.installed(json.loads(proc.stdout))) == 4
    assert settings.read_bytes() == before


def test_a_concurrent_change_is_not_clobbered(claude_home: Path, settings: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = sm.write

    def racing_write(loaded: sm.Loaded, data: dict[str, Any]) -> None:
        settings.write_text(json.dumps({"model": "changed by Claude Code"}))
        real_write(loaded, data)

    monkeypatch.setattr(sm, "write", racing_write)
    with pytest.raises(sm.SettingsError, match="changed while memd was editing"):
        sm.install(settings, claude_home.parent / "state", "/x/memd hook")
    assert json.loads(settings.read_text()) == {"model": "changed by Claude Code"}


@pytest.mark.parametrize(("command", "mine"), [
    ("/home/u/.venv/bin/memd hook", True), ("memd hook", True), ("'/path with space/memd' hook", True),
    ("/usr/bin/python3 -m memd hook", True), ("/x/memd hook --config /y/c.toml", True),
    ("memd-other hook", False), ("prettier --write", False), ("/bin/memd status", False), (None, False),
])
def test_which_commands_are_memds(command: str | None, mine: bool) -> None:
    assert sm.is_memd_command(command) is mine


def test_hook_command_quotes_paths_and_keeps_an_explicit_config(tmp_path: Path) -> None:
    cmd = sm.hook_command(str(tmp_path / "my config.toml"), executable=["/opt/my tools/memd"])
    assert cmd == f"'/opt/my tools/memd' hook --config '{tmp_path / 'my config.toml'}'"
    assert sm.is_memd_command(cmd)
