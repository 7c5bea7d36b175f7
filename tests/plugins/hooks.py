"""Fixtures for the hook tests: a project with a memory folder, and the real `memd hook` process.

``hook_project`` gives an isolated HOME (via ``claude_home``), a working folder and the memory
folder Claude Code would use for it. ``run_hook(event)`` pipes the event JSON into a real
``python -m memd hook`` process (or the installed console script) and returns what it answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPT = Path(sys.executable).parent / "memd"
SESSION = "3f2b9a64-1c0e-4d8e-9a7b-5e6f7a8b9c0d"


@dataclass
class HookRun:
    rc: int
    out: str
    err: str

    @property
    def answer(self) -> dict[str, Any]:
        data = json.loads(self.out)
        assert isinstance(data, dict)
        return data

    @property
    def context(self) -> str:
        hso = self.answer["hookSpecificOutput"]
        return str(hso["additionalContext"])


def run_hook(event: dict[str, Any] | bytes | str, *, argv: tuple[str, ...] = (), script: bool = False,
             env: dict[str, str] | None = None, timeout: float = 60, python_flags: tuple[str, ...] = ()
             ) -> HookRun:
    data = event if isinstance(event, bytes) else (
        event.encode() if isinstance(event, str) else json.dumps(event).encode())
    head = [str(SCRIPT)] if script else [sys.executable, *python_flags, "-m", "memd"]
    cmd = [*head, "hook", *argv]
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, env=full_env, cwd=ROOT,
                          check=False)
    return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


@dataclass
class HookProject:
    claude: Path
    work: Path  # the session's working folder
    memory: Path  # its memory folder
    state: Path  # memd's state folder
    config: Path  # memd's config file (not created until written)

    def event(self, name: str, **fields: Any) -> dict[str, Any]:
        ev: dict[str, Any] = {
            "session_id": SESSION, "transcript_path": str(self.claude / "projects" / "x.jsonl"),
            "cwd": str(self.work), "permission_mode": "default", "hook_event_name": name,
        }
        ev.update(fields)
        return ev

    def write_event(self, name: str, path: Path | str, content: str, tool: str = "Write",
                    **extra: Any) -> dict[str, Any]:
        if tool == "Write":
            tool_input: dict[str, Any] = {"file_path": str(path), "content": content}
        elif tool == "Edit":
            tool_input = {"file_path": str(path), "old_string": "x", "new_string": content}
        else:
            tool_input = {"file_path": str(path), "edits": [{"old_string": "a", "new_string": "fine"},
                                                            {"old_string": "b", "new_string": content}]}
        ev = self.event(name, tool_name=tool, tool_input=tool_input, tool_use_id="toolu_01test")
        if name == "PostToolUse":
            ev["tool_response"] = {"filePath": str(path), "success": True}
        ev.update(extra)
        return ev

    def set_config(self, text: str) -> None:
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text(text)

    def log_lines(self) -> list[dict[str, Any]]:
        p = self.state / "memd.log"
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


@pytest.fixture
def hook_project(claude_home: Path, tmp_path: Path) -> HookProject:
    from memd import layout

    work = tmp_path / "work" / "app"
    work.mkdir(parents=True)
    memory = claude_home / "projects" / layout.folder_for_cwd(work) / "memory"
    memory.mkdir(parents=True)
    home = claude_home.parent
    return HookProject(claude_home, work, memory, home / ".local" / "state" / "memd",
                       home / ".config" / "memd" / "config.toml")


def index_text(n: int, hook: str = "a short hook") -> str:
    return "# Memory\n\n" + "".join(f"- [Entry {i}](topic_{i}.md) — {hook} {i}\n" for i in range(n))


def topic(description: str | None = "what this is", mtype: str | None = "feedback", body: str = "body\n",
          name: str = "x") -> str:
    fm = [f"name: {name}"]
    if description is not None:
        fm.append(f"description: {description}")
    if mtype is not None:
        fm.append(f"type: {mtype}")
    return "---\n" + "\n".join(fm) + "\n---\n\n" + body
