"""SessionStart: tell the model what it cannot see of its memory, and what the daemon found.

Runs once per session, but every session pays for it before its first turn, so it keeps to what the
tool hooks import plus ``memd.ccsettings`` (which folder the session uses, with ``os.path``: no
pathlib) and the index parser. The daemon's open warnings come from the small JSON file the state
store writes beside its database (``memd.state.WARNINGS_FILE``), not from SQLite. Each source fails
on its own: a missing or broken warnings file leaves the budget message intact, and a missing memory
folder leaves the daemon's warnings intact.
"""

from __future__ import annotations

import os

from memd.core import jsonfast
from memd.hooks.context import HookContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MAX_WARNINGS = 10
WARNINGS_FILE = "warnings.json"  # memd.state.WARNINGS_FILE (not imported: memd.state imports sqlite3)
_MAX_WARNINGS_BYTES = 4 << 20


def project_for_cwd(cwd: str, claude: str, settings: dict[str, Any]) -> tuple[str, str] | None:
    """(project name, memory folder) of a session started in cwd (git root -> folder under projects/,
    ``autoMemoryDirectory``), as ``memd.layout`` finds them; settings: every scope, merged."""
    from memd import ccsettings

    root = os.path.join(claude, "projects")
    name = ccsettings.folder_for_cwd(cwd)
    folder = ccsettings.find_folder(root, name)
    override = ccsettings.settings_memory_dir(settings)
    if folder is None:
        if override is None:
            return None
        folder = os.path.join(root, name)
    return os.path.basename(folder), override if override is not None else os.path.join(folder, "memory")


def daemon_warnings(hc: HookContext, project: str) -> list[tuple[str, str]]:
    """(kind, text) of the open warnings the daemon recorded for this project; [] without any.

    Read from the state store's warnings file: no daemon (no file), a file being replaced (the
    writer renames a complete one into place) or a broken one all mean no warnings, the last logged."""
    path = os.path.join(hc.state_dir, WARNINGS_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_WARNINGS_BYTES)
    except OSError:
        return []
    try:
        data = jsonfast.loads(raw)
        rows = data.get(project, []) if isinstance(data, dict) else []
        out: list[tuple[str, str]] = []
        for kind, level, details in rows[:50]:
            out.append((str(kind), warning_text(str(kind), str(level or ""),
                                                details if isinstance(details, dict) else {})))
        return out
    except (ValueError, TypeError, AttributeError) as exc:
        from memd.hooks.log import describe_exception

        hc.log("warning", "hook.session_start.warnings_unreadable", **describe_exception(exc))
        return []


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
    from memd import ccsettings

    claude = hc.claude_dir()
    settings = ccsettings.merged(claude, cwd)  # every scope, read once for all three questions
    if ccsettings.memory_disabled(claude, settings):
        return None
    found = project_for_cwd(cwd, claude, settings)
    if found is None:
        return None
    name, memory_dir = found
    parts: list[str] = []
    from memd.core.paths import INDEX_NAME
    from memd.hooks.tool_use import budget_message, read_text, refdefs_for

    text = read_text(memory_dir, INDEX_NAME, cfg.budget.max_file_bytes)
    if text is not None:
        from memd.core import index

        b = index.measure(text, cfg.budget.max_lines, cfg.budget.max_chars, cfg.hooks.near_ratio,
                          refdefs=refdefs_for(text, event, cfg))
        if b.level == "over":
            msg = budget_message(b, cfg, INDEX_NAME)
            if msg:
                parts.append(msg + " Do it early in this session, before you save new memories.")
    # the index measured now beats the daemon's record of it
    warnings = [t for k, t in daemon_warnings(hc, name) if not (parts and k.startswith("budget"))]
    if warnings:
        shown = "\n".join(f"- {w[:500]}" for w in warnings[:_MAX_WARNINGS])
        more = f"\n- … and {len(warnings) - _MAX_WARNINGS} more" if len(warnings) > _MAX_WARNINGS else ""
        parts.append(f"memd (the memory daemon) has open warnings about this project's memory "
                     f"({memory_dir}):\n{shown}{more}\nAddress them when you next touch memory.")
    if not parts:
        return None
    hc.log("info", "hook.session_start.note", project=name, notes=len(parts))
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "\n\n".join(parts)}}
