"""SessionStart: tell the model what it cannot see of its memory, and what the daemon found.

Runs once per session, so it may afford the config, the index parser and (lazily) the daemon's
SQLite state store. Each source fails on its own: a missing or corrupt state store leaves the
budget message intact, and a missing memory folder leaves the daemon's warnings intact.
"""

from __future__ import annotations

import os

from memd.hooks.context import HookContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from memd.layout import Project

_MAX_WARNINGS = 10


def project_for_cwd(cwd: str, hc: HookContext, settings: dict[str, Any]) -> Project | None:
    """The project whose memory a session started in cwd uses (git root -> folder under projects/);
    settings: the Claude folder's settings.json as ``memd.layout.read_settings`` read it."""
    from pathlib import Path

    from memd import layout

    claude = Path(hc.claude_dir())
    name = layout.folder_for_cwd(cwd)
    folder = layout.find_folder(layout.projects_root(claude), name)
    if folder is None:
        override = layout.memory_override(claude, settings)
        if override is None:
            return None
        folder = layout.projects_root(claude) / name
    return layout.project_for_folder(claude, folder, settings)


def daemon_warnings(hc: HookContext, project: Project) -> list[tuple[str, str]]:
    """(kind, text) of the open warnings the daemon recorded for this project; [] without a store.

    Read-only and side-effect free on purpose: ``StateStore.open`` creates, migrates, and sets aside
    a corrupt file — right for the daemon (its one writer), wrong for a hook that may run while the
    daemon holds the file open. So the hook opens the file with SQLite's ``mode=ro`` and reads the
    ``warnings`` table (project, kind, level, details) the state module keeps; anything unexpected
    (no file, another schema, corruption, a lock) means no warnings, logged.
    """
    path = os.path.join(hc.state_dir, "state.sqlite3")
    if not os.path.isfile(path):
        return []  # no daemon has run here
    try:
        import json
        import sqlite3  # only here: SessionStart runs once per session
        from urllib.parse import quote

        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=2.0)
        try:
            rows = conn.execute("SELECT kind, level, details FROM warnings WHERE project = ? ORDER BY kind",
                                (project.name,)).fetchmany(50)
        finally:
            conn.close()
    except Exception as exc:  # a corrupt, locked or newer store must not silence the rest
        from memd.hooks.log import describe_exception

        hc.log("warning", "hook.session_start.state_unreadable", **describe_exception(exc))
        return []
    out: list[tuple[str, str]] = []
    for kind, level, details in rows:
        try:
            parsed = json.loads(details) if isinstance(details, str) else {}
        except ValueError:
            parsed = {}
        text = warning_text(str(kind), str(level or ""), parsed if isinstance(parsed, dict) else {})
        out.append((str(kind), text))
    return out


def warning_text(kind: str, level: str, details: dict[str, Any]) -> str:
    """One line for a daemon warning: its message, else its figures."""
    head = f"{kind or 'warning'} ({level})" if level else (kind or "warning")
    for key in ("message", "text", "summary"):
        v = details.get(key)
        if isinstance(v, str) and v.strip():
            return f"{head}: {' '.join(v.split())}"
    figures = [f"{k}={v}" for k, v in details.items() if isinstance(v, (int, float, str)) and len(str(v)) < 80]
    titles = details.get("hidden") or details.get("hidden_titles")
    if isinstance(titles, list) and titles:
        figures.append("hidden: " + ", ".join(str(t) for t in titles[:10]))
    return f"{head}: {', '.join(figures[:8])}" if figures else head


def session_start(event: dict[str, Any], hc: HookContext) -> dict[str, Any] | None:
    cwd = event.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return None
    cfg = hc.config
    from pathlib import Path

    from memd import layout

    claude = Path(hc.claude_dir())
    settings = layout.read_settings(claude, cwd)  # every scope, read once for all three questions
    if layout.memory_disabled(claude, settings):
        return None
    project = project_for_cwd(cwd, hc, settings)
    if project is None:
        return None
    parts: list[str] = []
    from memd.core.paths import INDEX_NAME
    from memd.hooks.tool_use import budget_message, read_text

    text = read_text(os.fspath(project.memory_dir), INDEX_NAME, cfg.budget.max_file_bytes)
    if text is not None:
        from memd.core import index

        b = index.measure(text, cfg.budget.max_lines, cfg.budget.max_chars, cfg.hooks.near_ratio)
        if b.level == "over":
            msg = budget_message(b, cfg, INDEX_NAME)
            if msg:
                parts.append(msg + " Do it early in this session, before you save new memories.")
    # the index measured now beats the daemon's record of it
    warnings = [t for k, t in daemon_warnings(hc, project) if not (parts and k.startswith("budget"))]
    if warnings:
        shown = "\n".join(f"- {w[:500]}" for w in warnings[:_MAX_WARNINGS])
        more = f"\n- … and {len(warnings) - _MAX_WARNINGS} more" if len(warnings) > _MAX_WARNINGS else ""
        parts.append(f"memd (the memory daemon) has open warnings about this project's memory "
                     f"({project.memory_dir}):\n{shown}{more}\nAddress them when you next touch memory.")
    if not parts:
        return None
    hc.log("info", "hook.session_start.note", project=project.name, notes=len(parts))
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "\n\n".join(parts)}}
