"""What a session is to memd: which memory folder it feeds, its id, whether it is active, and
whether the main agent wrote memory in it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from memd import layout

MEMORY_WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})


def is_subagent(path: Path) -> bool:
    return not layout.is_main_session(path)


def session_id_for(path: Path, recorded: str | None = None) -> str:
    """The session a transcript belongs to: its UUID name, the session folder of a subagent
    (``<session>/subagents/agent-x.jsonl``), else the ``sessionId`` its records carry."""
    if path.parent.name == "subagents":
        return path.parent.parent.name
    if path.name.startswith("agent-") and recorded:
        return recorded
    return path.stem


def memory_project_for(cwd: str | None, own_folder: str, projects_root: Path,
                       cache: dict[str, str] | None = None) -> str:
    """The projects/ folder name whose memory a session feeds (facts.md section 1).

    Record ``cwd`` -> canonical git root -> folder name. Falls back to the session's own folder
    when the records carry no cwd or the cwd is not on this machine (its git root is unknowable).
    """
    if not cwd or not os.path.isabs(cwd):
        return own_folder
    if cache is not None and cwd in cache:
        return cache[cwd]
    name = own_folder
    try:
        if os.path.isdir(cwd):
            derived = layout.folder_for_cwd(cwd)
            found = layout.find_folder(projects_root, derived)
            name = found.name if found is not None else derived
    except OSError:
        name = own_folder
    if cache is not None:
        cache[cwd] = name
    return name


class MemoryPaths:
    """Decides whether a path written by a tool lies inside a project's memory folder."""

    def __init__(self, memory_dir: Path, project_name: str) -> None:
        self.prefix = os.path.normpath(os.fspath(memory_dir)) + os.sep
        # The session may have seen the folder under another Claude folder (another HOME, a
        # CLAUDE_CONFIG_DIR): the projects/<name>/memory/ part is what identifies it.
        self.marker = f"{os.sep}projects{os.sep}{project_name}{os.sep}memory{os.sep}"

    def contains(self, file_path: str) -> bool:
        p = os.path.normpath(file_path)
        return p.startswith(self.prefix) or self.marker in p

    def rel(self, file_path: str) -> str | None:
        """The path relative to the memory folder ("/"-separated), or None when it lies outside."""
        if not os.path.isabs(file_path):
            return None
        p = os.path.normpath(file_path)
        if p.startswith(self.prefix):
            rest = p[len(self.prefix):]
        elif self.marker in p:
            rest = p.split(self.marker, 1)[1]
        else:
            return None
        return rest.replace(os.sep, "/") or None

    def named_in(self, command: str) -> list[str]:
        """The memory files (relative) a shell command names by a path into the folder (a glob or the
        folder itself names none)."""
        out = []
        for m in re.finditer(r"[^\s'\"`;|&<>()]+", command):
            r = self.rel(m.group(0))
            if r is not None and r.endswith(".md") and not any(c in r for c in "*?[{"):
                out.append(r)
        return out


def _main_blocks(obj: dict[str, Any], kind: str) -> list[Any]:
    """The content blocks of a main-agent (not sidechain) line of type ``kind``; [] for any other."""
    if obj.get("type") != kind or obj.get("isSidechain") is True:
        return []
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    return content if isinstance(content, list) else []


def written_uses(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool_use id, file path) of each file-writing tool use on a main-agent assistant line (most
    lines: none). Only ``type: assistant`` lines count: the ``api-request-blob`` records of 2.1.328
    copy whole request messages, tool uses included, and are never the agent acting."""
    out: list[tuple[str, str]] = []
    for b in _main_blocks(obj, "assistant"):
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in MEMORY_WRITE_TOOLS:
            inp = b.get("input")
            fp = (inp.get("file_path") or inp.get("notebook_path")) if isinstance(inp, dict) else None
            if isinstance(fp, str) and fp:
                tid = b.get("id")
                out.append((tid if isinstance(tid, str) else "", fp))
    return out


def failed_tool_ids(obj: dict[str, Any]) -> list[str]:
    """The tool uses a main-agent user line answers with ``is_error: true``: the tool did not do its
    work. A hook's denial reads ``PreToolUse:Write hook error: <reason>`` (facts.md section 4); a
    failed Edit or a refused permission are errors too."""
    return [b["tool_use_id"] for b in _main_blocks(obj, "user")
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error") is True
            and isinstance(b.get("tool_use_id"), str)]


class Writes:
    """The file writes of a main agent that took effect, fed line by line: a write stands unless a
    later ``is_error`` tool_result answers its tool use. A write with no answer yet (the span ends
    between the two lines) stands: Claude Code writes the result right after the tool ran."""

    __slots__ = ("_failed", "_uses")

    def __init__(self) -> None:
        self._uses: list[tuple[str, float | None, str, int]] = []  # (tool_use id, time, file path, offset)
        self._failed: set[str] = set()

    def feed(self, obj: dict[str, Any], ts: float | None = None, offset: int = -1) -> None:
        """One line; ``offset`` is where it starts in the transcript (-1: not known)."""
        kind = obj.get("type")
        if kind == "assistant":
            self._uses.extend((tid, ts, fp, offset) for tid, fp in written_uses(obj))
        elif kind == "user" and self._uses:
            self._failed.update(failed_tool_ids(obj))

    def effective(self) -> list[tuple[float | None, str]]:
        """(time, file path) of the writes that were not refused or failed."""
        return [(ts, fp) for tid, ts, fp, _ in self._uses if not tid or tid not in self._failed]

    def effective_at(self) -> list[tuple[int, str]]:
        """(line offset, file path) of the writes that were not refused or failed."""
        return [(off, fp) for tid, _, fp, off in self._uses if not tid or tid not in self._failed]



HEAD_BYTES = 256 * 1024  # a transcript is read this far for its first cwd (when the state has none)


def first_cwd(path: Path, head_bytes: int = HEAD_BYTES) -> str | None:
    """The first absolute ``cwd`` a transcript's records carry, from its head (``head_bytes`` of it)."""
    import json

    try:
        with open(path, "rb") as f:
            head = f.read(head_bytes)
    except OSError:
        return None
    for line in head.split(b"\n"):
        if b'"cwd"' not in line:
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's limit
            continue
        cwd = obj.get("cwd") if isinstance(obj, dict) else None
        if isinstance(cwd, str) and os.path.isabs(cwd):
            return cwd
    return None


def project_cwds(project: layout.Project, state: Any = None) -> list[str]:
    """The working folders of a project's sessions, the newest session's first: from the state's scan
    (the cwd each transcript's records carried), else the newest transcript's own head. The dream
    reads the CLAUDE.md files of the first; sync finds the project's repository through them."""
    out: list[str] = []
    if state is not None:
        rows = sorted((t for t in state.transcripts(project.name) if t.cwd),
                      key=lambda t: t.last_record_at or 0.0, reverse=True)
        out.extend(t.cwd for t in rows)
    if not out:
        for p in reversed(layout.session_files(project.dir)):
            cwd = first_cwd(p)
            if cwd is not None:
                out.append(cwd)
                break
    return list(dict.fromkeys(out))
