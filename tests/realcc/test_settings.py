"""Where the memory folder is, and whether memory is on: Claude Code's settings and env vs memd's.

Each case runs the CLI once and reads which MEMORY.md it loaded (the path in the block's header), then
asks memd the same question through its door (``memd check . --format json`` run in the same cwd with
the same environment: its ``memory_dir``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memd.core.index import loaded_view
from tests.realcc.cli import MEMORY_HEADER, Sandbox, memory_block

MEMD = Path(sys.executable).parent / "memd"
INDEX = "- [Alpha](alpha.md) — the alpha note\n"
SETTINGS = "issue 10 #3: memd reads autoMemory* settings only from the user settings and ignores "


def loaded_from(sb: Sandbox, prompt: str, env: dict[str, str] | None = None) -> Path | None:
    """The memory folder whose MEMORY.md the CLI loaded, or None when it loaded none."""
    run = sb.run(prompt, env=env)
    assert run.rc == 0, run.stderr[-2000:]
    (first,) = sb.main_requests(prompt)
    text = first.body["messages"][0]["content"][0].get("text", "")
    tail = " (user's auto-memory, persists across conversations):"
    for line in text.split("\n"):
        if line.startswith("Contents of ") and line.endswith(tail):
            return Path(line[len("Contents of "):-len(tail)]).parent
    return None


def memd_memory_dir(sb: Sandbox, env: dict[str, str] | None = None) -> Path:
    if not MEMD.exists():
        pytest.skip(f"no memd console script at {MEMD}")
    done = subprocess.run([str(MEMD), "check", ".", "--format", "json"], cwd=sb.repo, env=sb.env(env),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    (report,) = json.loads(done.stdout)
    return Path(report["memory_dir"])


def test_default_folder(sandbox: Sandbox) -> None:
    (sandbox.memory / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    assert loaded_from(sandbox, "default folder") == sandbox.memory
    assert memd_memory_dir(sandbox) == sandbox.memory


@pytest.mark.parametrize("file", ["settings.json", "settings.local.json"])
def test_project_auto_memory_directory(sandbox: Sandbox, file: str) -> None:
    custom = sandbox.base / "custom-memory"
    custom.mkdir()
    (custom / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    (sandbox.repo / ".claude").mkdir()
    (sandbox.repo / ".claude" / file).write_text(json.dumps({"autoMemoryDirectory": str(custom)}), encoding="utf-8")
    assert loaded_from(sandbox, f"project {file}") == custom  # Claude Code honours it
    assert memd_memory_dir(sandbox) == custom


def test_user_auto_memory_directory(sandbox: Sandbox) -> None:
    custom = sandbox.base / "user-memory"
    custom.mkdir()
    (custom / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    sandbox.settings({"autoMemoryDirectory": str(custom)})
    assert loaded_from(sandbox, "user setting") == custom
    assert memd_memory_dir(sandbox) == custom


@pytest.mark.parametrize("value", ["~/", "/"])
def test_rejected_auto_memory_directory(sandbox: Sandbox, value: str) -> None:
    (sandbox.memory / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    (sandbox.home / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    sandbox.settings({"autoMemoryDirectory": value})
    assert loaded_from(sandbox, f"rejected {value}") == sandbox.memory
    assert memd_memory_dir(sandbox) == sandbox.memory


def test_project_dir_name_env(sandbox: Sandbox) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(sandbox.claude), "CLAUDE_CODE_PROJECT_DIR_NAME": "renamed"}
    moved = sandbox.projects / "renamed" / "memory"
    moved.mkdir(parents=True)
    (moved / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    assert loaded_from(sandbox, "renamed project", env) == moved
    assert memd_memory_dir(sandbox, env) == moved


@pytest.mark.parametrize("value", ["1", "true", "on", "YES", "True"])
def test_disable_auto_memory_env_turns_loading_off(sandbox: Sandbox, value: str) -> None:
    """Pin: every truthy spelling, any case, turns memory off in Claude Code (no block)."""
    (sandbox.memory / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    assert loaded_from(sandbox, f"disabled {value}", {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": value}) is None


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", "YES", "True"])
def test_memd_reads_disable_auto_memory_like_claude_code(value: str, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    from memd import layout

    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", value)
    assert layout.memory_disabled(tmp_path, {}) is not None


@pytest.mark.parametrize("file", ["settings.json", "settings.local.json"])
def test_project_auto_memory_enabled_false_turns_loading_off(sandbox: Sandbox, file: str) -> None:
    """Pin: autoMemoryEnabled false in a project's settings turns memory off in Claude Code."""
    (sandbox.memory / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    (sandbox.repo / ".claude").mkdir()
    (sandbox.repo / ".claude" / file).write_text(json.dumps({"autoMemoryEnabled": False}), encoding="utf-8")
    assert loaded_from(sandbox, f"off in {file}") is None


def test_symlinked_index_is_loaded(sandbox: Sandbox) -> None:
    """Pin: a MEMORY.md that is a symlink (here to a file outside the folder) is loaded."""
    real = sandbox.base / "dotfiles" / "MEMORY.md"
    real.parent.mkdir()
    real.write_text(INDEX * 3, encoding="utf-8")
    os.symlink(real, sandbox.memory / "MEMORY.md")
    assert sandbox.run("linked index").rc == 0
    (first,) = sandbox.main_requests("linked index")
    assert memory_block(first.body, sandbox.memory) == loaded_view(real.read_text(encoding="utf-8")).text
    assert MEMORY_HEADER.format(path=sandbox.memory / "MEMORY.md") in first.body["messages"][0]["content"][0]["text"]


def test_memd_measures_a_symlinked_index(sandbox: Sandbox) -> None:
    real = sandbox.base / "dotfiles" / "MEMORY.md"
    real.parent.mkdir()
    real.write_text(INDEX * 3, encoding="utf-8")
    os.symlink(real, sandbox.memory / "MEMORY.md")
    done = subprocess.run([str(MEMD), "check", str(sandbox.memory), "--format", "json"], cwd=sandbox.repo,
                          env=sandbox.env(), capture_output=True, text=True, timeout=120, check=False)
    (report,) = json.loads(done.stdout)
    assert report["budget"]["lines"] == 3


# The two environment overrides (issue 23 item 4), as 2.1.328 and 2.1.332 take them: the cowork path is
# the memory folder itself and wins over everything; the remote root holds projects/<folder>/memory and
# loses to the autoMemoryDirectory setting; a cowork value that is not absolute is ignored.
def _filled(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    return folder


@pytest.mark.parametrize("case", ["cowork", "cowork-relative", "remote", "cowork-beats-setting",
                                  "setting-beats-remote", "cowork-beats-remote"])
def test_environment_moves_the_memory_folder(sandbox: Sandbox, case: str) -> None:
    _filled(sandbox.memory)
    cowork = _filled(sandbox.base / "cowork")
    remote = sandbox.base / "remote"
    moved = _filled(remote / "projects" / sandbox.memory.parent.name / "memory")
    setting = _filled(sandbox.base / "setting")
    env: dict[str, str] = {}
    if case.startswith("cowork") or case.endswith("cowork"):
        env["CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"] = "rel-cowork" if case == "cowork-relative" else str(cowork)
    if "remote" in case:
        env["CLAUDE_CODE_REMOTE_MEMORY_DIR"] = str(remote)
    if "setting" in case:
        sandbox.settings({"autoMemoryDirectory": str(setting)})
    expected = {"cowork": cowork, "cowork-relative": sandbox.memory, "remote": moved, "cowork-beats-setting": cowork,
                "setting-beats-remote": setting, "cowork-beats-remote": cowork}[case]
    assert loaded_from(sandbox, f"env {case}", env) == expected  # pin: Claude Code
    assert memd_memory_dir(sandbox, env) == expected
