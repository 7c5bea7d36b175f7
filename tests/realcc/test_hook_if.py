"""How many hook processes Claude Code starts for memd, counted through the real CLI.

``memd hooks install`` writes each tool hook with an ``if`` rule per guarded memory folder
(docs/hooks.md). Claude Code decides on the rule before it spawns anything, so a Write outside memory
must start no memd process at all, and a Write into memory exactly one per event. The count: after a
real install, each memd hook's ``command`` is pointed at a tiny wrapper that appends the event's name
to a marker file and then execs the installed command (this venv's python) with the installed ``args``
(``-I -S .../memd/hooks/start.py``; the ``if`` rules, matchers and timeouts stay exactly as installed).
``test_the_installed_lean_start_guards_memory_as_written`` runs the settings exactly as installed.

The rule syntax these tests rely on (and ``memd.settings_merge.if_rules`` writes) was read off the
2.1.328 binary by trying it: ``~/`` is home, ``//`` an absolute path, ``*`` one segment, ``**`` any;
a rule matches its own tool's name only; symlinks are not followed.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections import Counter
from pathlib import Path

from memd import settings_merge as sm
from tests.realcc.cli import Sandbox
from tests.realcc.test_client import TOKEN, memd


def _installed_start() -> Path:
    """The hooks' start file of the memd this interpreter has installed (as `memd hooks install` finds
    it, in an isolated interpreter): the tree's in an editable install, site-packages' in a regular one,
    whatever the tests themselves import."""
    import subprocess

    out = subprocess.run([sys.executable, "-I", "-c", "import memd, os; print(os.path.dirname(memd.__file__))"],
                         capture_output=True, text=True, timeout=60, check=False, cwd="/")
    pkg = out.stdout.strip()
    base = Path(pkg) if out.returncode == 0 and pkg else Path(sm.__file__).parent
    return base / "hooks" / "start.py"


START = _installed_start()
LEAN = [sys.executable, "-I", "-S", str(START)]  # what `memd hooks install` writes for this venv


def lean(argv: list[str]) -> bool:
    """argv is the lean start of this venv (its interpreter may be named python or python3: the one
    the `memd` script was installed with)."""
    return (len(argv) == len(LEAN) and os.path.realpath(argv[0]) == os.path.realpath(LEAN[0])
            and os.path.dirname(os.path.abspath(argv[0])) == os.path.dirname(os.path.abspath(LEAN[0]))
            and argv[1:] == LEAN[1:])


def counted(sb: Sandbox, *, rules: bool = True) -> Path:
    """Install memd's hooks for real, then route each through a wrapper that counts its starts."""
    done = memd(sb, "hooks", "install")
    assert done.returncode == 0, done.stderr
    marker = sb.base / "hook-starts.txt"
    marker.write_text("")
    data = sb.settings()
    if not rules:  # the install before `if` existed, for contrast
        data = sm.with_memd(sm.without_memd(data), sm.Wanted(LEAN[0], LEAN[1:], None))
    for event, groups in data["hooks"].items():
        wrapper = sb.base / f"count-{event}"
        wrapper.write_text(f"#!/bin/sh\necho {event} >> '{marker}'\nexec '{LEAN[0]}' \"$@\"\n")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
        for g in groups:
            for h in g["hooks"]:
                if sm.is_memd_hook(h):
                    assert lean([h["command"], *h["args"]]), h  # the lean start in exec form, as installed
                    h["command"] = str(wrapper)
    sb.settings(data)
    return marker


def starts(sb: Sandbox, marker: Path, tool_calls: list[tuple[str, dict[str, object]]]) -> Counter[str]:
    """Run one session making tool_calls (acceptEdits: the writes happen); hook starts per event."""
    st = sb.stub
    st.turns(*[st.message(st.tool_use(name, inp)) for name, inp in tool_calls], st.message(st.text("done.")))
    marker.write_text("")
    run = sb.run("do it", args=("--permission-mode", "acceptEdits"))
    assert run.rc == 0, run.stderr[-2000:]
    return Counter(marker.read_text().split())


def test_a_write_outside_memory_starts_no_hook_process(sandbox: Sandbox) -> None:
    marker = counted(sandbox)
    target = sandbox.repo / "notes.md"
    got = starts(sandbox, marker, [("Write", {"file_path": str(target), "content": "plain\n"})])
    assert target.read_text() == "plain\n"  # the write happened
    assert got["PreToolUse"] == 0 and got["PostToolUse"] == 0, got
    assert got["SessionStart"] == 1  # the counter itself works


def test_a_write_into_memory_starts_one_hook_process_per_event(sandbox: Sandbox) -> None:
    marker = counted(sandbox)
    target = sandbox.memory / "deploy.md"
    content = "---\nname: d\ndescription: d\ntype: project\n---\nvia CI\n"
    got = starts(sandbox, marker, [("Write", {"file_path": str(target), "content": content})])
    assert target.exists()
    assert got["PreToolUse"] == 1 and got["PostToolUse"] == 1, got


def test_an_edit_of_memory_starts_one_and_a_read_none(sandbox: Sandbox) -> None:
    marker = counted(sandbox)
    target = sandbox.memory / "deploy.md"
    target.write_text("---\nname: d\ndescription: d\ntype: project\n---\nvia CI\n")
    edit = {"file_path": str(target), "old_string": "via CI", "new_string": "via CD"}
    got = starts(sandbox, marker, [("Read", {"file_path": str(target)}), ("Edit", edit)])
    assert "via CD" in target.read_text()
    assert got["PreToolUse"] == 1 and got["PostToolUse"] == 1, got


def test_the_guard_still_denies_a_secret_through_the_rule(sandbox: Sandbox) -> None:
    counted(sandbox)
    target = sandbox.memory / "token.md"
    sandbox.stub.turns(sandbox.stub.message(sandbox.stub.tool_use("Write", {
        "file_path": str(target), "content": f"---\nname: t\ndescription: t\ntype: reference\n---\n{TOKEN}\n"})),
        sandbox.stub.message(sandbox.stub.text("done.")))
    assert sandbox.run("remember the token").rc == 0
    assert not target.exists()
    results = [b for m in sandbox.stub.main[1].body["messages"] for b in (m.get("content") or [])
               if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert any("memd blocked this memory write" in str(b.get("content")) for b in results)


def test_auto_memory_directory_is_guarded_and_nothing_else(sandbox: Sandbox) -> None:
    moved = sandbox.home / "notes" / "memory"
    moved.mkdir(parents=True)
    sandbox.settings({"autoMemoryDirectory": "~/notes/memory"})
    marker = counted(sandbox)
    assert "Write(~/notes/memory/**)" in json.dumps(sandbox.settings())
    got = starts(sandbox, marker, [("Write", {"file_path": str(moved / "a.md"), "content": "x\n"}),
                                   ("Write", {"file_path": str(sandbox.repo / "b.md"), "content": "y\n"})])
    assert (moved / "a.md").exists() and (sandbox.repo / "b.md").exists()
    assert got["PreToolUse"] == 1 and got["PostToolUse"] == 1, got


def test_without_if_every_write_starts_the_hook(sandbox: Sandbox) -> None:
    """The contrast: the hooks as installed before `if` start memd for an ordinary write too."""
    marker = counted(sandbox, rules=False)
    got = starts(sandbox, marker, [("Write", {"file_path": str(sandbox.repo / "notes.md"), "content": "plain\n"})])
    assert got["PreToolUse"] == 1 and got["PostToolUse"] == 1, got


def test_a_memd_that_cannot_start_neither_blocks_nor_vanishes(sandbox: Sandbox) -> None:
    """onFailure "continue": the memory write goes ahead, and Claude Code records the failed guard."""
    done = memd(sandbox, "hooks", "install")
    assert done.returncode == 0, done.stderr
    data = sandbox.settings()
    for groups in data["hooks"].values():
        for g in groups:
            for h in g["hooks"]:
                h["command"] = str(sandbox.base / "gone" / "memd-hook")
    sandbox.settings(data)
    target = sandbox.memory / "deploy.md"
    sandbox.stub.turns(sandbox.stub.message(sandbox.stub.tool_use("Write", {"file_path": str(target),
                                                                            "content": "x\n"})),
                       sandbox.stub.message(sandbox.stub.text("done.")))
    assert sandbox.run("remember").rc == 0
    assert target.exists()
    errors = [json.loads(line)["attachment"] for t in sandbox.transcripts() for line in t.read_text().splitlines()
              if '"hook_non_blocking_error"' in line]
    assert any(a.get("hookEvent") == "PreToolUse" and "gone/memd-hook" in a.get("stderr", "") for a in errors), errors
    assert os.path.exists(target)


def test_the_installed_lean_start_guards_memory_as_written(sandbox: Sandbox) -> None:
    """The settings exactly as `memd hooks install` wrote them (no wrapper): Claude Code runs this venv's
    python -I -S .../memd/hooks/start.py for a memory Write, and memd's answers arrive: the secret is
    denied (PreToolUse), a topic file without a description gets memd's note (PostToolUse); the same
    secret written outside memory goes through (no hook runs for it)."""
    done = memd(sandbox, "hooks", "install")
    assert done.returncode == 0, done.stderr
    rows = sm.installed(sandbox.settings())
    assert rows and all(lean([r.command, *(r.args or [])]) for r in rows)
    secret, note, plain = sandbox.memory / "token.md", sandbox.memory / "deploy.md", sandbox.repo / "token.txt"
    st = sandbox.stub
    st.turns(st.message(st.tool_use("Write", {"file_path": str(secret), "content": f"the token: {TOKEN}\n"})),
             st.message(st.tool_use("Write", {"file_path": str(note), "content": "---\nname: d\n---\nvia CI\n"})),
             st.message(st.tool_use("Write", {"file_path": str(plain), "content": f"{TOKEN}\n"})),
             st.message(st.text("done.")))
    run = sandbox.run("remember", args=("--permission-mode", "acceptEdits"))
    assert run.rc == 0, run.stderr[-2000:]
    assert not secret.exists() and note.exists() and plain.read_text() == f"{TOKEN}\n"
    sent = json.dumps([m for r in st.main for m in r.body["messages"]])
    assert "memd blocked this memory write" in sent  # the guard's denial, as the tool result
    assert "has no description or type in its frontmatter" in sent  # the PostToolUse note


def test_a_memory_folder_moved_by_project_settings_is_guarded(sandbox: Sandbox) -> None:
    """Issue 23 #1: a project's own `.claude/settings.json` moves its memory; after a session there,
    `memd hooks install` covers that folder, and a secret the real CLI writes into it is denied."""
    moved = sandbox.base / "team-notes"
    moved.mkdir()
    (sandbox.repo / ".claude").mkdir()
    (sandbox.repo / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(moved)}))
    assert sandbox.run("a first session here").rc == 0  # its transcript names the working folder
    done = memd(sandbox, "hooks", "install")
    assert done.returncode == 0, done.stderr
    assert f"Write(/{moved}/**)" in json.dumps(sandbox.settings()), sandbox.settings()
    target = moved / "token.md"
    st = sandbox.stub
    st.turns(st.message(st.tool_use("Write", {"file_path": str(target), "content": f"the token: {TOKEN}\n"})),
             st.message(st.text("done.")))
    run = sandbox.run("remember the token", args=("--permission-mode", "acceptEdits"))
    assert run.rc == 0, run.stderr[-2000:]
    assert not target.exists()
    assert "memd blocked this memory write" in json.dumps([m for r in st.main for m in r.body["messages"]])
    assert memd(sandbox, "hooks", "status").returncode == 0
