"""Client tests: memd's hooks installed into the isolated settings, the real CLI driven by scripted turns.

``memd hooks install`` writes ``HOME/.claude/settings.json`` exactly as a user would get it; the CLI
then runs memd's hook (the worktree's ``.venv/bin/memd``) for every event, and what memd answered is
read back from the next request the CLI sent to the stand-in.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.realcc.battery import entries
from tests.realcc.cli import Run, Sandbox
from tests.realcc.stub import tool_results

MEMD = Path(sys.executable).parent / "memd"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def memd(sb: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MEMD), *args], env=sb.env(), cwd=sb.repo, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture
def hooked(sandbox: Sandbox) -> Iterator[Sandbox]:
    if not MEMD.exists():
        pytest.skip(f"no memd console script at {MEMD} (run bash .ci/run first)")
    done = memd(sandbox, "hooks", "install")
    assert done.returncode == 0, done.stderr
    assert "PreToolUse" in json.dumps(sandbox.settings())
    yield sandbox


def system_texts(body: dict[str, Any]) -> list[str]:
    """Texts of the ``system``-role messages in a request (where hook context arrives)."""
    out: list[str] = []
    for m in body.get("messages") or []:
        if m.get("role") != "system":
            continue
        c = m.get("content")
        out.extend([c] if isinstance(c, str) else [b.get("text", "") for b in c or [] if isinstance(b, dict)])
    return out


def hook_notes(text: str) -> list[str]:
    """Split a system message into its ``<Event>:<Tool> hook additional context: ...`` parts."""
    parts = re.split(r"(?:^|\n\n)(?=\w+(?::\w+)? hook additional context: )", text)
    return [p for p in parts if re.match(r"\w+(?::\w+)? hook additional context: ", p)]


def write_turns(sb: Sandbox, path: Path, content: str) -> None:
    st = sb.stub
    st.turns(st.message(st.tool_use("Write", {"file_path": str(path), "content": content})),
             st.message(st.text("done.")))


@dataclass
class Session:
    run: Run
    transcript: Path


def run_session(sb: Sandbox, prompt: str) -> Session:
    before = set(sb.transcripts())
    run = sb.run(prompt)
    assert run.rc == 0, run.stderr[-2000:]
    new = sorted(set(sb.transcripts()) - before)
    assert len(new) == 1, new
    return Session(run, new[0])


# --------------------------------------------------------------------------- PreToolUse


def test_secret_memory_write_is_denied(hooked: Sandbox) -> None:
    target = hooked.memory / "deploy_token.md"
    write_turns(hooked, target, f"---\nname: deploy-token\ndescription: d\ntype: reference\n---\ntoken {TOKEN}\n")
    run_session(hooked, "remember my deploy token")
    assert not target.exists()
    second = hooked.stub.main[1]
    (result,) = tool_results(second.body)
    assert result["is_error"] is True
    assert result["content"].startswith("PreToolUse:Write hook error: memd blocked this memory write: "
                                        "it would put a secret into memory: GitHub token")
    assert TOKEN not in result["content"]


def test_clean_memory_write_goes_through_without_a_word(hooked: Sandbox) -> None:
    target = hooked.memory / "deploy.md"
    write_turns(hooked, target, "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\nvia CI\n")
    run_session(hooked, "remember how we deploy")
    assert target.exists()
    (result,) = tool_results(hooked.stub.main[1].body)
    assert not result.get("is_error")
    assert not any("memd" in t for t in system_texts(hooked.stub.main[1].body))


# --------------------------------------------------------------------------- PostToolUse budget notes


@pytest.mark.parametrize("lines", [
    pytest.param(170, id="near-170"),
    pytest.param(214, id="over-214"),
])
def test_claude_code_notes_an_index_write_near_or_over_the_budget(sandbox: Sandbox, lines: int) -> None:
    """Pin Claude Code's own note (no memd installed): from 160 lines, after the tool result."""
    (sandbox.memory / "MEMORY.md").write_text(entries(3), encoding="utf-8")
    write_turns(sandbox, sandbox.memory / "MEMORY.md", entries(lines))
    run_session(sandbox, "rewrite the index")
    notes = [n for t in system_texts(sandbox.stub.main[1].body) for n in hook_notes(t)]
    assert len(notes) == 1, notes
    assert notes[0].startswith("PostToolUse:Write hook additional context: ")
    assert "MEMORY.md" in notes[0] and f" {lines} lines" in notes[0]


@pytest.mark.parametrize("lines", [
    pytest.param(170, id="near-170"),
    pytest.param(214, id="over-214"),
])
def test_index_write_past_the_budget_gets_one_budget_note(hooked: Sandbox, lines: int) -> None:
    """Issue 10 #5: memd reads the session's version from the transcript and leaves the figures and
    the advice to Claude Code's own note; over the limit it adds only the hidden entries, by title."""
    (hooked.memory / "MEMORY.md").write_text(entries(3), encoding="utf-8")
    write_turns(hooked, hooked.memory / "MEMORY.md", entries(lines))
    run_session(hooked, "rewrite the index")
    notes = [n for t in system_texts(hooked.stub.main[1].body) for n in hook_notes(t)]
    budget = [n for n in notes if re.search(r"\b(lines|budget|limit)\b", n)]
    assert len(budget) == 1, budget
    assert "memd" not in budget[0]  # the one budget note is Claude Code's
    ours = [n for n in notes if "memd" in n]
    if lines <= 200:
        assert not ours, ours  # near: Claude Code said it all
    else:
        (note,) = ours
        assert f"These {lines - 200} index entries are past the cut of MEMORY.md" in note
        assert f"Note {lines} (note_{lines}.md, line {lines})" in note
        assert not re.search(r"\b(characters|condense|under \d+)\b", note), note


def test_topic_write_over_the_budget_gets_memds_full_note_alone(hooked: Sandbox) -> None:
    """Claude Code notes only writes of the index: after a topic-file write memd's full note is the one."""
    (hooked.memory / "MEMORY.md").write_text(entries(214), encoding="utf-8")
    write_turns(hooked, hooked.memory / "deploy.md",
                "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\nvia CI\n")
    run_session(hooked, "remember how we deploy")
    notes = [n for t in system_texts(hooked.stub.main[1].body) for n in hook_notes(t)
             if n.startswith("PostToolUse")]  # (the SessionStart note of the first request is repeated)
    assert len(notes) == 1, notes
    assert notes[0].startswith("PostToolUse:Write hook additional context: memd: MEMORY.md is OVER the budget")


def test_over_budget_note_names_the_hidden_entries_once(hooked: Sandbox) -> None:
    """What only memd can say (which entries are past the cut, by title) reaches the model."""
    (hooked.memory / "MEMORY.md").write_text(entries(3), encoding="utf-8")
    write_turns(hooked, hooked.memory / "MEMORY.md", entries(214))
    run_session(hooked, "rewrite the index")
    text = "\n".join(system_texts(hooked.stub.main[1].body))
    assert text.count("Note 214 (note_214.md") == 1


# --------------------------------------------------------------------------- SessionStart


def test_session_start_over_budget_reaches_the_first_request(hooked: Sandbox) -> None:
    (hooked.memory / "MEMORY.md").write_text(entries(250), encoding="utf-8")
    run_session(hooked, "hello")
    first = hooked.stub.main[0].body
    notes = [n for t in system_texts(first) for n in hook_notes(t)]
    assert len(notes) == 1, notes
    assert notes[0].startswith("SessionStart hook additional context: memd: MEMORY.md is OVER the budget")
    assert "Note 201 (note_201.md, line 201)" in notes[0]


def test_session_start_within_budget_is_silent(hooked: Sandbox) -> None:
    (hooked.memory / "MEMORY.md").write_text(entries(20), encoding="utf-8")
    run_session(hooked, "hello")
    assert not [n for t in system_texts(hooked.stub.main[0].body) for n in hook_notes(t)]


# --------------------------------------------------------------------------- transcripts


@dataclass
class Project:
    sb: Sandbox
    sessions: dict[str, Session]


@pytest.fixture(scope="module")
def project(claude_cli: Path) -> Iterator[Project]:
    """Three real transcripts of one project, made once: a denied memory write, an allowed one, a chat."""
    import shutil
    import tempfile

    from tests.realcc.stub import CliStub

    if not MEMD.exists():
        pytest.skip(f"no memd console script at {MEMD} (run bash .ci/run first)")
    base = Path(tempfile.mkdtemp(prefix="rct"))
    with CliStub() as stub:
        sb = Sandbox(claude_cli, stub, base)
        assert memd(sb, "hooks", "install").returncode == 0
        out: dict[str, Session] = {}
        write_turns(sb, sb.memory / "token.md", f"---\nname: t\ndescription: d\ntype: reference\n---\n{TOKEN}\n")
        out["denied"] = run_session(sb, "remember the token")
        write_turns(sb, sb.memory / "deploy.md", "---\nname: deploy\ndescription: d\ntype: project\n---\nCI\n")
        out["allowed"] = run_session(sb, "remember how we deploy")
        out["chat"] = run_session(sb, "just chatting")
        yield Project(sb, out)
    shutil.rmtree(base, ignore_errors=True)


def _scan(sb: Sandbox) -> dict[str, str]:
    done = memd(sb, "scan", "--all", "--dry-run")
    assert done.returncode == 0, done.stderr
    return {m.group(1): m.group(0) for m in re.finditer(r"^\s+(\S+\.jsonl): .*$", done.stdout, re.M)}


def test_scan_reads_every_line_and_sees_the_memory_write(project: Project) -> None:
    rows, sessions = _scan(project.sb), project.sessions
    for name, s in sessions.items():
        row = rows[s.transcript.name]
        assert "bad" not in row, (name, row)
    assert "wrote memory" in rows[sessions["allowed"].transcript.name]
    assert "wrote memory" not in rows[sessions["chat"].transcript.name]


def test_scan_does_not_count_a_denied_write(project: Project) -> None:
    """Issue 10 #4 (fixed by the wt-ccfix merge): a write memd's PreToolUse hook denied is no memory write."""
    assert "wrote memory" not in _scan(project.sb)[project.sessions["denied"].transcript.name]


@pytest.mark.parametrize("name", ["denied", "allowed", "chat"])
def test_render_shows_the_conversation_once_and_no_bad_line(project: Project, name: str) -> None:
    s = project.sessions[name]
    done = memd(project.sb, "render", str(s.transcript))
    assert done.returncode == 0, done.stderr
    assert "bad line" not in done.stderr
    prompt = {"denied": "remember the token", "allowed": "remember how we deploy", "chat": "just chatting"}[name]
    # api-request-blob records copy each request's user messages (MEMORY.md and hook text included):
    # they are not the user speaking and must not be rendered as turns (facts 4).
    if name == "allowed":
        # render shows what the catch-up sends: the turns up to the session's own (allowed) memory write
        # are not sent, so its one prompt is not shown, and stderr says so (issue 11, per-turn catch-up)
        assert done.stdout.count(prompt) == 0, done.stdout[:3000]
        assert "up to the session's own memory write not shown" in done.stderr, done.stderr
    else:
        assert done.stdout.count(prompt) == 1, done.stdout[:3000]
    assert "persists across conversations" not in done.stdout
    assert TOKEN not in done.stdout or name == "denied"


# --------------------------------------------------------------------------- frontmatter rewrite


def test_claude_code_rewrites_flat_frontmatter_nested(sandbox: Sandbox) -> None:
    """Pin (facts 3, issue 10 #6): a memory Write of a flat file lands nested under ``metadata``, and
    memd reads the type and description of what lands."""
    from memd.core import frontmatter

    target = sandbox.memory / "deploy.md"
    write_turns(sandbox, target, "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\nvia CI\n")
    s = run_session(sandbox, "remember how we deploy")
    landed = target.read_text(encoding="utf-8")
    data = frontmatter.parse(landed).data
    assert data["name"] == "deploy" and data["description"] == "how we deploy"
    meta = data["metadata"]
    assert meta["type"] == "project" and meta["node_type"] == "memory"
    assert meta["originSessionId"] == s.run.result["session_id"]
    assert "modified" in meta and "type" not in data
    assert landed.endswith("---\n\nvia CI\n")


def test_memd_reads_and_keeps_what_claude_code_rewrote(hooked: Sandbox) -> None:
    """Issue 10 #6: the nested frontmatter Claude Code made of a flat Write is read by memd (type,
    description, ``metadata.modified`` as the row's date), and ``memd rebuild`` indexing the file
    afterwards leaves it byte-identical (every key, ``originSessionId`` and ``modified`` included)."""
    from datetime import datetime

    from memd.memfolder import manifest

    target = hooked.memory / "deploy.md"
    write_turns(hooked, target, "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\nvia CI\n")
    s = run_session(hooked, "remember how we deploy")
    landed = target.read_bytes()
    assert f"originSessionId: {s.run.result['session_id']}".encode() in landed
    (row,) = manifest.build(hooked.memory).entries
    assert (row.name, row.type, row.description) == ("deploy.md", "project", "how we deploy")
    assert row.modified is not None and abs(row.modified - datetime.now().timestamp()) < 600
    done = memd(hooked, "rebuild", ".")
    assert done.returncode == 0, done.stderr
    assert "(deploy.md)" in (hooked.memory / "MEMORY.md").read_text(encoding="utf-8")
    assert target.read_bytes() == landed
