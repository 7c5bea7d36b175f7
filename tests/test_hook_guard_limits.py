"""The secret guard never lets a memory write through unchecked because of its size (issue 22).

A memory write larger than ``hooks.guard_max_chars`` (new text, or the file an edit leaves) is denied
with the reason; an event too large to parse at all (over ``entry.MAX_EVENT_BYTES``) is read for its
names only, and a write into memory is denied the same way. Before, an event over 32 MB was allowed
with exit 0 and nothing said, and one of 31 MB took past the hook's 10 s (Claude Code then goes on).
The real process, as the installed command runs, where the size matters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memd.config import Config, HooksConfig
from memd.hooks import entry
from memd.hooks.context import HookContext
from memd.hooks.tool_use import oversized_event, pre_tool_use
from tests.plugins.hooks import HookProject, run_hook, topic

pytestmark = pytest.mark.slow

BIG = 1_100_000  # past the default limit (1,000,000 characters)


def _denied_for_size(answer: dict[str, object] | None) -> str:
    assert answer is not None
    hso = answer["hookSpecificOutput"]
    assert isinstance(hso, dict) and hso["permissionDecision"] == "deny", hso
    reason = hso["permissionDecisionReason"]
    assert "guard_max_chars" in reason and "shorter" in reason, reason
    return str(reason)


def test_a_write_past_the_limit_is_denied_with_the_reason(hook_project: HookProject) -> None:
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "notes.md", topic(body="plain words\n" * 100_000))
    run = run_hook(ev)
    assert run.rc == 0
    reason = _denied_for_size(run.answer)
    assert "1,200,0" in reason or "characters of new text" in reason
    assert [x for x in hook_project.log_lines() if x["event"] == "hook.denied_too_large"]
    # outside memory the size is none of memd's business
    other = hook_project.write_event("PreToolUse", hook_project.work / "data.csv", "1,2\n" * 300_000)
    assert run_hook(other).out == ""


def test_the_limit_is_configurable(hook_project: HookProject) -> None:
    hook_project.set_config("[hooks]\nguard_max_chars = 3000000\n")
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "notes.md", topic(body="plain words\n" * 100_000))
    run = run_hook(ev)
    assert (run.rc, run.out) == (0, "")  # checked, clean: Claude Code's own flow decides
    hook_project.set_config("[hooks]\nguard_max_chars = 10000\n")
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "notes.md", topic(body="plain words\n" * 1000))
    _denied_for_size(run_hook(ev).answer)


def _huge_event(hook_project: HookProject, path: Path, *, path_last: bool = False) -> bytes:
    """A Write event past entry.MAX_EVENT_BYTES, file_path before the content (Claude Code's order) or after."""
    content = "x" * (entry.MAX_EVENT_BYTES + 1000)
    tool_input = {"content": content, "file_path": str(path)} if path_last else {"file_path": str(path),
                                                                                  "content": content}
    return json.dumps(hook_project.event("PreToolUse", tool_name="Write", tool_input=tool_input)).encode()


@pytest.mark.parametrize("path_last", [False, True], ids=["path first", "path after the content"])
def test_an_event_too_large_to_parse_is_denied_for_memory(hook_project: HookProject, path_last: bool) -> None:
    run = run_hook(_huge_event(hook_project, hook_project.memory / "dump.md", path_last=path_last), timeout=120)
    assert run.rc == 0, run.err
    _denied_for_size(run.answer)
    run = run_hook(_huge_event(hook_project, hook_project.work / "dump.txt", path_last=path_last), timeout=120)
    assert (run.rc, run.out) == (0, "")


def test_an_oversized_event_without_a_readable_path_is_reported(tmp_path: Path) -> None:
    hc = HookContext(claude_dir=str(tmp_path / "claude"))
    head = b'{"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"content": "' + b"x" * 1000
    with pytest.raises(ValueError, match="could not read"):
        oversized_event(head, b'xx"}}', hc)  # the entry turns this into exit 1 and a line on stderr
    # a key's text inside a string value is no key: its quotes are escaped
    head = (b'{"hook_event_name": "PostToolUse", "tool_input": {"content": "\\", \\"file_path\\": \\"'
            + str(tmp_path / "claude" / "projects" / "-x" / "memory" / "a.md").encode() + b'\\""}}')
    assert oversized_event(head, b"", hc) == ("PostToolUse", None)


def test_an_edit_of_a_file_past_the_limit_is_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    memory = tmp_path / "claude" / "projects" / "-home-dev-app" / "memory"
    memory.mkdir(parents=True)
    (memory / "big.md").write_text("plain words here\n" * 1000)  # 17,000 characters
    hc = HookContext(claude_dir=str(tmp_path / "claude"))
    hc._config = Config(hooks=HooksConfig(guard_max_chars=10_000))
    ev = {"hook_event_name": "PreToolUse", "tool_name": "Edit", "cwd": "/",
          "tool_input": {"file_path": str(memory / "big.md"), "old_string": "plain", "new_string": "clear"}}
    assert "the edited file" in _denied_for_size(pre_tool_use(ev, hc))
    hc._config = Config()
    assert pre_tool_use(ev, hc) is None
