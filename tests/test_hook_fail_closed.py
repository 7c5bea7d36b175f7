"""Issue 34 finding 2: the secret guard fails closed. A PreToolUse memory write that memd cannot check (an
event nested past the interpreter's limit, not UTF-8, a number past Python's digit limit, a field of the
wrong type, any error of the check) is denied with a reason the model can act on; a call that writes no
memory stays allowed. Before: a 1,000-deep nested value beside a GitLab token in ``content`` exited 0 with
nothing said (a RecursionError in memd's log only), and a Write whose content was a list was let through.

Hostile events go through the hook as Claude Code starts it after ``memd hooks install``
(``python -I -S .../memd/hooks/start.py``), the real process.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memd.hooks import entry
from tests.plugins.hooks import ROOT, HookProject, HookRun

START = ROOT / "memd" / "hooks" / "start.py"
TOKEN = "gl" + "pat-" + "Zq8xR2mK7vN4pL1sT6wY"  # the shape of a GitLab token, built from parts


def run_lean(data: bytes, hp: HookProject) -> HookRun:
    proc = subprocess.run([sys.executable, "-I", "-S", str(START)], input=data, capture_output=True, timeout=60,
                          check=False, cwd=hp.work)
    return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def _denied_unchecked(run: HookRun) -> str:
    assert run.rc == 0, run.err
    hso = run.answer["hookSpecificOutput"]
    assert hso["hookEventName"] == "PreToolUse" and hso["permissionDecision"] == "deny", hso
    reason = str(hso["permissionDecisionReason"])
    assert "could not check" in reason and "Retry it as a plain call" in reason, reason
    assert TOKEN not in run.out and TOKEN[-10:] not in run.out
    return reason


def _allowed(run: HookRun) -> None:
    assert run.rc in (0, 1), run.err  # 1: a non-blocking error Claude Code shows; the call goes ahead
    assert "deny" not in run.out


def _event(hp: HookProject, path: Path, tool_input: str, tool: str = "Write") -> bytes:
    """A PreToolUse event as Claude Code writes it, with tool_input given as raw JSON text (so it can hold
    what json.dumps would not write)."""
    head = json.dumps(hp.event("PreToolUse", tool_name=tool, tool_use_id="toolu_01"))[:-1]
    return (head + ', "tool_input": ' + tool_input.replace("PATH", json.dumps(str(path))[1:-1]) + "}").encode()


DEEP = "[" * 1000 + "]" * 1000
HOSTILE = {  # name -> tool_input (raw JSON; PATH is the file path)
    "1,000-deep nesting beside the content": f'{{"file_path": "PATH", "content": "token {TOKEN}", "x": {DEEP}}}',
    "100,000-deep nesting": '{"file_path": "PATH", "content": "token ' + TOKEN + '", "x": ' + "[" * 100_000
                            + "]" * 100_000 + "}",
    "a number of 5,000 digits": f'{{"file_path": "PATH", "content": "token {TOKEN}", "n": {"9" * 5000}}}',
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_an_event_memd_cannot_parse_is_denied_for_memory_and_allowed_elsewhere(
        hook_project: HookProject, case: str) -> None:
    hp = hook_project
    run = run_lean(_event(hp, hp.memory / "notes.md", HOSTILE[case]), hp)
    _denied_unchecked(run)
    logged = [x for x in hp.log_lines() if x["event"] == "hook.bad_event"]
    assert logged and "not readable JSON" in logged[-1]["error"]
    assert TOKEN not in (hp.state / "memd.log").read_text()
    _allowed(run_lean(_event(hp, hp.work / "notes.md", HOSTILE[case]), hp))
    # another tool, even aimed at memory: no memory write
    _allowed(run_lean(_event(hp, hp.memory / "notes.md", HOSTILE[case], tool="Read"), hp))


def test_invalid_utf8_on_stdin(hook_project: HookProject) -> None:
    hp = hook_project
    body = '{"file_path": "PATH", "content": "token ' + TOKEN + ' NOTUTF8"}'
    data = _event(hp, hp.memory / "notes.md", body).replace(b"NOTUTF8", b"\xff\xfe")
    _denied_unchecked(run_lean(data, hp))
    data = _event(hp, hp.work / "notes.md", body).replace(b"NOTUTF8", b"\xff\xfe")
    _allowed(run_lean(data, hp))
    # a path that is not UTF-8 itself, under the memory folder
    bad_path = str(hp.memory).encode() + b"/n\xffotes.md"
    data = _event(hp, hp.memory / "notes.md", '{"file_path": "PATH", "content": "plain"}')
    data = data.replace(str(hp.memory / "notes.md").encode(), bad_path)
    _denied_unchecked(run_lean(data, hp))


WRONG_TYPES = {  # (tool, tool_input): a file tool's call whose text the guard cannot read
    "Write content as a list": ("Write", {"content": ["token", TOKEN]}),
    "Write content as an object": ("Write", {"content": {"token": TOKEN}}),
    "Write content as a number": ("Write", {"content": 12345}),
    "Write without content": ("Write", {}),
    "Edit new_string as a list": ("Edit", {"old_string": "x", "new_string": [TOKEN]}),
    "MultiEdit edits as an object": ("MultiEdit", {"edits": {"old_string": "x", "new_string": TOKEN}}),
    "MultiEdit edit as a string": ("MultiEdit", {"edits": [TOKEN]}),
    "MultiEdit new_string as null": ("MultiEdit", {"edits": [{"old_string": "x", "new_string": None}]}),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_a_field_of_the_wrong_type_is_denied_for_memory(hook_project: HookProject, case: str) -> None:
    hp = hook_project
    tool, fields = WRONG_TYPES[case]
    for path, memory in ((hp.memory / "notes.md", True), (hp.work / "notes.md", False)):
        tool_input = json.dumps({"file_path": "PATH", **fields})
        run = run_lean(_event(hp, path, tool_input, tool), hp)
        if memory:
            assert "is " in _denied_unchecked(run)  # what was wrong: "its content is a list, not a string"
        else:
            assert (run.rc, run.out) == (0, "")  # outside memory: not read at all


def test_a_tool_input_or_path_of_the_wrong_type(hook_project: HookProject) -> None:
    hp = hook_project
    # tool_input as a list holding the call: its path read off the raw event
    listed = json.dumps([{"file_path": "PATH", "content": TOKEN}])
    assert "tool_input is a list" in _denied_unchecked(run_lean(_event(hp, hp.memory / "a.md", listed), hp))
    _allowed(run_lean(_event(hp, hp.work / "a.md", listed), hp))
    # a path that is no string: no path to read, a file tool: denied
    run = run_lean(_event(hp, hp.memory / "a.md", json.dumps({"file_path": ["PATH"], "content": TOKEN})), hp)
    assert "file_path is a list" in _denied_unchecked(run)


def test_huge_values(hook_project: HookProject) -> None:
    hp = hook_project
    # a path of 200,000 characters inside the memory folder, a cwd of a million: checked or denied, never let by
    long_name = "n" * 200_000 + ".md"
    run = run_lean(_event(hp, hp.memory / long_name, json.dumps({"file_path": "PATH", "content": TOKEN})), hp)
    assert run.rc == 0 and run.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    ev = hp.write_event("PreToolUse", hp.memory / "a.md", f"token {TOKEN}")
    ev["cwd"] = "/" + "c" * 1_000_000
    run = run_lean(json.dumps(ev).encode(), hp)
    assert run.rc == 0 and run.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    # 200,000 edits of one character each: the file they leave is checked, the token found
    edits = [{"old_string": "a", "new_string": "b"}] * 200_000 + [{"old_string": "b", "new_string": TOKEN}]
    ev = hp.write_event("PreToolUse", hp.memory / "a.md", "", tool="MultiEdit")
    ev["tool_input"]["edits"] = edits
    run = run_lean(json.dumps(ev).encode(), hp)
    assert run.rc == 0 and run.answer["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_an_error_of_the_check_denies_a_memory_write(hook_project: HookProject, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Any error while checking (here the scanner itself) denies the memory write with the error named."""
    from memd.core import secrets

    def broken(*args: Any, **kwargs: Any) -> list[object]:
        raise RuntimeError("scanner exploded")

    monkeypatch.setattr(secrets, "scan", broken)
    hp = hook_project
    for path in (hp.memory / "notes.md", hp.work / "notes.md"):
        ev = hp.write_event("PreToolUse", path, f"token {TOKEN}")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(ev).encode())))
        rc = entry.main([])
        out, err = capsys.readouterr()
        if path.is_relative_to(hp.memory):
            assert rc == 0 and err == ""
            reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
            assert "could not check it (RuntimeError: scanner exploded)" in reason
        else:
            assert (rc, out) == (0, "")  # outside memory the scanner is never reached


def test_an_edit_that_deletes_can_complete_a_key(hook_project: HookProject) -> None:
    """An empty new_string is no reason to skip the check: deleting the middle joins a key's two halves."""
    hp = hook_project
    (hp.memory / "a.md").write_text(f"x {TOKEN[:12]}~~~~{TOKEN[12:]} y\n")
    ev = hp.write_event("PreToolUse", hp.memory / "a.md", "", tool="Edit")
    ev["tool_input"]["old_string"] = "~~~~"
    run = run_lean(json.dumps(ev).encode(), hp)
    assert run.rc == 0 and run.answer["hookSpecificOutput"]["permissionDecision"] == "deny", run.out
