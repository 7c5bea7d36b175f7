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
    return sorted(p for p in folder.glob("settings.json.*") if p.name != sm.ORIGINAL) if folder.exists() else []


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
    assert sorted({r.event for r in rows}) == ["PostToolUse", "PreToolUse", "SessionStart", "UserPromptSubmit"]
    tool_rows = [r for r in rows if r.event in ("PreToolUse", "PostToolUse")]
    assert all(r.matcher == "Write|Edit|MultiEdit" for r in tool_rows)
    # the exec form, no shell: this venv's interpreter started lean, running the start file inside the package
    start = str(ROOT / "memd" / "hooks" / "start.py")
    assert all(r.command == sys.executable and r.args == ["-I", "-S", start] for r in rows), rows
    assert all(r.on_failure == "continue" for r in rows)
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
    old = sm.with_memd(EXISTING, sm.Wanted("/old/venv/bin/memd", ["hook"], None))
    # and a shell-form entry of an install before the exec form
    old["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "/older/bin/memd hook"}]})
    settings.write_text(json.dumps(old))
    assert cli(claude_home, "install").returncode == 0
    data = json.loads(settings.read_text())
    rows = sm.installed(data)
    assert {r.event for r in rows} == set(sm.EVENTS)
    assert all(not r.command.startswith(("/old/", "/older/")) for r in rows)
    assert data["hooks"]["Stop"] == EXISTING["hooks"]["Stop"]


def test_uninstall_restores_the_original(claude_home: Path, settings: Path) -> None:
    assert cli(claude_home, "install").returncode == 0
    proc = cli(claude_home, "uninstall")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(settings.read_text()) == EXISTING
    n = 2 + 2 * len(sm.IF_TOOLS)  # one hook per tool's rule on the tool events (the projects root only)
    assert f"removed {n} memd hook(s)" in proc.stdout
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
    assert {r.event for r in sm.installed(json.loads(target.read_text()))} == set(sm.EVENTS)
    assert target.stat().st_mode & 0o077 == 0
    assert backups(claude_home) == []  # nothing to back up


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"PreToolUse": {}}}',
                                  '{"hooks": {"PreToolUse": [3]}}'])
def test_malformed_settings_are_left_untouched(claude_home: Path, text: str) -> None:
    p = claude_home / "settings.json"
    p.write_text(text)
    for action in ("install", "uninstall", "status"):
        proc = cli(claude_home, action)
        assert proc.returncode == (2 if action == "status" else 1), (action, proc)
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
    assert {r.event for r in sm.installed(json.loads(real.read_text()))} == set(sm.EVENTS)


def test_status(claude_home: Path, settings: Path) -> None:
    proc = cli(claude_home, "status")
    assert proc.returncode == 1 and "not installed" in proc.stdout
    cli(claude_home, "install")
    proc = cli(claude_home, "status")
    assert proc.returncode == 0, proc.stdout
    assert "PreToolUse" in proc.stdout and "recall (UserPromptSubmit): off" in proc.stdout
    data = json.loads(cli(claude_home, "status", "--format", "json").stdout)
    assert data["current"] and {r["event"] for r in data["installed"]} == set(sm.EVENTS) and data["missing"] == []
    assert data["expected"]["if"] == [f"{t}(~/.claude/projects/*/memory/**)" for t in sm.IF_TOOLS]
    # an entry pointing at a memd that is gone is reported
    settings.write_text(json.dumps(sm.with_memd({}, sm.Wanted("/gone/bin/memd-hook", [], None))))
    proc = cli(claude_home, "status")
    assert proc.returncode == 1 and "/gone/bin/memd-hook is not an executable file" in proc.stdout


def test_dry_run_writes_nothing(claude_home: Path, settings: Path) -> None:
    before = settings.read_bytes()
    proc = cli(claude_home, "install", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    rules = [r.rule for r in sm.installed(json.loads(proc.stdout)) if r.rule]
    assert rules and all(f"if {r}" in proc.stderr for r in rules)  # the `if` rules shown
    assert settings.read_bytes() == before


def test_a_concurrent_change_is_not_clobbered(claude_home: Path, settings: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = sm.write

    def racing_write(loaded: sm.Loaded, data: dict[str, Any]) -> None:
        settings.write_text(json.dumps({"model": "changed by Claude Code"}))
        real_write(loaded, data)

    monkeypatch.setattr(sm, "write", racing_write)
    with pytest.raises(sm.SettingsError, match="changed while memd was editing"):
        sm.install(settings, claude_home.parent / "state", sm.Wanted("/x/memd-hook", [], None))
    assert json.loads(settings.read_text()) == {"model": "changed by Claude Code"}


@pytest.mark.parametrize(("command", "mine"), [
    ("/home/u/.venv/bin/memd hook", True), ("memd hook", True), ("'/path with space/memd' hook", True),
    ("/usr/bin/python3 -m memd hook", True), ("/x/memd hook --config /y/c.toml", True),
    ("/x/bin/memd-hook", True), ("'/a b/memd-hook' --config c", True), ("memd-hooks", False),
    ("/v/bin/python -I -S /v/lib/site-packages/memd/hooks/start.py", True),
    ("/v/bin/python -I -S '/a b/memd/hooks/start.py' --config c", True),
    ("/v/bin/python /x/other/hooks/start.py", False), ("python /x/memd/hooks/start.pyc", False),
    ("memd-other hook", False), ("prettier --write", False), ("/bin/memd status", False), (None, False),
])
def test_which_commands_are_memds(command: str | None, mine: bool) -> None:
    assert sm.is_memd_command(command) is mine


def test_hook_exec_keeps_an_explicit_config_as_one_argument(tmp_path: Path) -> None:
    command, args = sm.hook_exec(str(tmp_path / "my config.toml"), executable=("/opt/my tools/memd-hook", []))
    assert (command, args) == ("/opt/my tools/memd-hook", ["--config", str(tmp_path / "my config.toml")])
    assert sm.is_memd_hook({"type": "command", "command": command, "args": args})


@pytest.mark.parametrize(("hook", "mine"), [
    ({"command": "/v/bin/memd-hook", "args": []}, True),
    ({"command": "/v/bin/memd", "args": ["hook", "--config", "c"]}, True),
    ({"command": "/usr/bin/python3", "args": ["-m", "memd", "hook"]}, True),
    ({"command": "/v/bin/memd", "args": ["status"]}, False),
    ({"command": "/usr/bin/python3", "args": ["guard.py", "memd", "hook"]}, False),
    ({"command": "/v/bin/python", "args": ["-I", "-S", "/v/lib/python3.11/site-packages/memd/hooks/start.py"]}, True),
    ({"command": "/v/bin/python", "args": ["/src/memd/memd/hooks/start.py", "--config", "c"]}, True),
    ({"command": "C:\\v\\python.exe", "args": ["-I", "-S", "C:\\v\\Lib\\site-packages\\memd\\hooks\\start.py"]},
     True),
    ({"command": "/v/bin/python", "args": ["-I", "-S", "/x/other/hooks/start.py"]}, False),
    ({"command": "/v/bin/python", "args": ["-c", "print('/memd/hooks/start.py')"]}, False),
    ({"command": "/x/memd hook"}, True), ({"command": "prettier --write"}, False), ({"args": []}, False), ("x", False),
])
def test_which_hooks_are_memds(hook: object, mine: bool) -> None:
    assert sm.is_memd_hook(hook) is mine


def test_if_rules_name_the_projects_root_under_home(claude_home: Path) -> None:
    assert sm.if_rules(claude_home) == [f"{t}(~/.claude/projects/*/memory/**)" for t in sm.IF_TOOLS]


def test_if_rules_outside_home_are_absolute(claude_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "elsewhere" / "claude"
    (claude / "projects").mkdir(parents=True)
    assert sm.if_rules(claude) == [f"{t}(/{claude}/projects/*/memory/**)" for t in sm.IF_TOOLS]
    assert sm.if_rules(claude)[0].startswith("Write(//")  # "//" is absolute; one "/" is the project's


def test_if_rules_add_auto_memory_directory_and_resolved_folders(claude_home: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude"
    (real / "projects").mkdir(parents=True)
    linked = claude_home.parent / "linked-claude"
    linked.symlink_to(real)
    (real / "settings.json").write_text(json.dumps({"autoMemoryDirectory": "~/notes/memory"}))
    rules = sm.if_rules(linked)
    assert rules is not None
    writes = [r for r in rules if r.startswith("Write(")]
    assert writes == ["Write(~/notes/memory/**)", "Write(~/linked-claude/projects/*/memory/**)",
                      f"Write(/{real}/projects/*/memory/**)"]
    assert len(rules) == len(writes) * len(sm.IF_TOOLS)


def test_a_folder_no_rule_can_hold_gets_hooks_without_if(claude_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "we[ir]d*"
    (claude / "projects").mkdir(parents=True)
    assert sm.if_rules(claude) is None
    data = sm.with_memd({}, sm.Wanted("/x/memd-hook", [], None))
    rows = sm.installed(data)
    assert len(rows) == len(sm.EVENTS) and all(r.rule is None for r in rows)


def test_only_tool_events_get_if_rules(claude_home: Path) -> None:
    data = sm.with_memd({}, sm.Wanted("/x/memd-hook", [], sm.if_rules(claude_home)))
    for r in sm.installed(data):
        assert (r.rule is not None) == (r.event in sm.TOOL_EVENTS)  # `if` on any other event drops the hook
    pre = data["hooks"]["PreToolUse"]
    assert len(pre) == 1 and len(pre[0]["hooks"]) == len(sm.IF_TOOLS)  # one group, one hook per rule


def test_status_is_out_of_date_when_the_memory_folders_move(claude_home: Path, settings: Path) -> None:
    assert cli(claude_home, "install").returncode == 0
    assert cli(claude_home, "status").returncode == 0
    data = json.loads(settings.read_text())
    data["autoMemoryDirectory"] = "~/notes/memory"
    settings.write_text(json.dumps(data))
    proc = cli(claude_home, "status")
    assert proc.returncode == 1 and "not the current set" in proc.stdout
    assert cli(claude_home, "install").returncode == 0
    assert "Write(~/notes/memory/**)" in settings.read_text()
    assert cli(claude_home, "status").returncode == 0


def test_install_replaces_an_older_memd_hook_entry(claude_home: Path, settings: Path) -> None:
    """An install before the lean start wrote the memd-hook script (exec form) or a shell command: a new
    install replaces those entries, one memd hook per event and rule, never a second set beside them."""
    old = sm.with_memd(json.loads(settings.read_text()), sm.Wanted("/old/venv/bin/memd-hook", [], None))
    old["hooks"]["SessionStart"].append({"hooks": [{"type": "command", "command": "/older/bin/memd hook"}]})
    settings.write_text(json.dumps(old))
    rows = sm.installed(json.loads(settings.read_text()))
    assert {r.command for r in rows} == {"/old/venv/bin/memd-hook", "/older/bin/memd hook"}
    proc = cli(claude_home, "status")  # both older forms are memd's: listed, and out of date
    assert proc.returncode == 1 and "/old/venv/bin/memd-hook" in proc.stdout and "not the current set" in proc.stdout
    assert cli(claude_home, "install").returncode == 0
    data = json.loads(settings.read_text())
    rows = sm.installed(data)
    assert {r.command for r in rows} == {sys.executable}
    assert len(rows) == 2 * len(sm.IF_TOOLS) + 2  # the tool events one per rule, the others one each
    assert data["hooks"]["PostToolUse"][0] == EXISTING["hooks"]["PostToolUse"][0]  # the user's hook stays
    assert cli(claude_home, "status").returncode == 0


def test_the_console_script_form_is_memds_and_current_when_chosen(claude_home: Path, settings: Path) -> None:
    """`install --console-script` writes the memd-hook script (for a Claude Code that ignores `args`);
    status accepts it as current and says the lean start is faster; a plain install switches back."""
    script = Path(sys.executable).parent / "memd-hook"
    if not script.exists():
        pytest.skip(f"no memd-hook console script at {script} (pip install -e . first)")
    assert cli(claude_home, "install", "--console-script").returncode == 0
    rows = sm.installed(json.loads(settings.read_text()))
    assert {(r.command, tuple(r.args or ())) for r in rows} == {(str(script), ())}
    proc = cli(claude_home, "status")
    assert proc.returncode == 0, proc.stdout
    assert "start through the memd-hook script" in proc.stdout
    assert json.loads(cli(claude_home, "status", "--format", "json").stdout)["console_script"] is True
    assert cli(claude_home, "install").returncode == 0
    rows = sm.installed(json.loads(settings.read_text()))
    assert {r.command for r in rows} == {sys.executable} and all(r.args and r.args[:2] == ["-I", "-S"] for r in rows)


def test_status_reports_a_start_file_that_is_gone(claude_home: Path, settings: Path, tmp_path: Path) -> None:
    gone = str(tmp_path / "gone" / "memd" / "hooks" / "start.py")
    settings.write_text(json.dumps(sm.with_memd({}, sm.Wanted(sys.executable, ["-I", "-S", gone], None))))
    proc = cli(claude_home, "status")
    assert proc.returncode == 1 and f"{gone} is not a file" in proc.stdout


def test_dry_run_shows_the_lean_start(claude_home: Path, settings: Path) -> None:
    proc = cli(claude_home, "install", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    start = str(ROOT / "memd" / "hooks" / "start.py")
    assert f"{sys.executable} -I -S {start}" in proc.stderr
    assert all(r.args == ["-I", "-S", start] for r in sm.installed(json.loads(proc.stdout)))


# --------------------------------------------------------------------------- the user's bytes (issue 25)

USER_FILES = [
    '{\n  "theme": "dark",\n  "env": {"A": "1"},\n  "permissions": {"allow": ["Bash(ls:*)"]}\n}\n',
    "{}\n",
    '{\n    "model": "opus"\n}',
    '{"a":1,"hooks":{"Stop":[{"hooks":[{"type":"command","command":"echo hi"}]}]}}\n',
    '{\r\n  "x": [1, 2],\r\n  "y": "z"\r\n}\r\n',
]


@pytest.mark.parametrize("raw", USER_FILES, ids=["indented", "empty", "four-spaces", "one-line-with-hooks", "crlf"])
def test_install_then_uninstall_gives_the_users_bytes_back(tmp_path: Path, raw: str) -> None:
    f = tmp_path / "settings.json"
    f.write_bytes(raw.encode())
    state = tmp_path / "state"
    want = sm.Wanted(*sm.hook_exec(), ["Write(~/.claude/projects/*/memory/**)"])
    assert sm.install(f, state, want).changed
    installed_text = f.read_bytes().decode()
    if '"hooks"' not in raw:  # memd's member added, the user's bytes before it untouched
        user = raw.rstrip().rstrip("}").rstrip()
        assert installed_text.startswith(user), installed_text[:200]
    assert sm.uninstall(f, state).changed
    assert f.read_bytes() == raw.encode()


def test_the_first_backup_is_kept_for_good(tmp_path: Path) -> None:
    f = tmp_path / "settings.json"
    raw = b'{\n  "theme": "dark"\n}\n'
    f.write_bytes(raw)
    state = tmp_path / "state"
    command, args = sm.hook_exec()
    for i in range(sm.BACKUPS_KEPT + 5):
        assert sm.install(f, state, sm.Wanted(command, args, [f"Write(~/m{i}/**)"])).changed
    backups = sorted(p.name for p in (state / "backups").iterdir())
    assert sm.ORIGINAL in backups and len(backups) == sm.BACKUPS_KEPT + 1
    assert (state / "backups" / sm.ORIGINAL).read_bytes() == raw
    # the user edits something else meanwhile: uninstall keeps their edit (no restore of old bytes)
    data = json.loads(f.read_text())
    data["theme"] = "light"
    f.write_text(json.dumps(data, indent=2) + "\n")
    sm.uninstall(f, state)
    assert json.loads(f.read_text()) == {"theme": "light"}


def test_the_docs_say_the_bytes_come_back_only_when_nothing_else_changed() -> None:
    """Issue 34: README said "settings.json gets its own bytes back" without the condition the test above
    holds (an edit in between is kept, and the old bytes are not restored). Both docs now say it."""
    from tests.conftest import ROOT

    readme = " ".join((ROOT / "README.md").read_text().split())
    hooks = " ".join((ROOT / "docs" / "hooks.md").read_text().split())
    assert ("settings.json gets its own bytes back if nothing else in it changed since memd first edited it; "
            "otherwise only memd's entries are taken out and your edits stay") in readme
    assert "gives your exact bytes back only when nothing else in the file changed in between" in hooks
    assert "your edits stay" in hooks
