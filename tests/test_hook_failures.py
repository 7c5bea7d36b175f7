"""What a failing hook tells Claude Code: the secret guard fails loudly (exit 1, non-blocking), the rest silently."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from memd.hooks import entry


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str) -> tuple[int, str, str]:
    def broken(event: dict[str, Any], hc: object) -> None:
        raise RuntimeError("scanner exploded")

    monkeypatch.setattr(entry, "dispatch", broken)
    event = {"hook_event_name": name, "tool_name": "Write", "tool_input": {"file_path": "/x", "content": "y"}}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(event).encode())))
    rc = entry.main([])
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_failed_secret_guard_is_a_reported_non_blocking_error(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(monkeypatch, capsys, "PreToolUse")
    # exit 1: Claude Code lets the write go ahead (not 2, which would block it) and shows this line
    assert rc == 1 and out == ""
    assert err.startswith("memd: the secret guard could not check this write (RuntimeError: scanner exploded)")
    log = (claude_home.parent / ".local" / "state" / "memd" / "memd.log").read_text()
    assert '"hook.failed"' in log and "PreToolUse" in log


@pytest.mark.parametrize("name", ["PostToolUse", "SessionStart", "UserPromptSubmit"])
def test_other_failures_only_lose_a_note(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], name: str) -> None:
    assert run(monkeypatch, capsys, name) == (0, "", "")
