"""Shared by the commands that act on projects: which projects, the Claude folder they live in,
notes for the user, and the config for the commands that must work with a bad one."""

from __future__ import annotations

from memd.cli import select_projects
from memd.commands._checkreport import memory_off_note

TYPE_CHECKING = False  # typing is not imported at run time: check and status start through here
if TYPE_CHECKING:
    import argparse

    from memd.cli import Context
    from memd.errors import ConfigError
    from memd.layout import Project
    from memd.maintenance import RebuildResult


def require_claude_dir(args: argparse.Namespace, ctx: Context) -> None:
    """A Claude folder given explicitly (``--claude-dir``, ``paths.claude_dir``) must exist: a typo
    there is an error, not "nothing to check". The default folder may be missing (no Claude Code yet)."""
    from memd.errors import UsageError

    flag = getattr(args, "claude_dir", None)
    given = "--claude-dir" if flag else ("paths.claude_dir in the config" if ctx.config.paths.claude_dir else None)
    if given and not ctx.claude_dir.is_dir():
        raise UsageError(f"no Claude Code folder at {ctx.claude_dir} (given by {given})")


def select(args: argparse.Namespace, ctx: Context, *, default_all: bool = False) -> list[Project]:
    """The projects a command acts on (``memd.cli.select_projects``), after two checks: an explicit
    Claude folder exists, and the current folder ('.', given or by default) is a project."""
    require_claude_dir(args, ctx)
    projects: list[Project] = select_projects(args, ctx, default_all=default_all)
    named = [*(getattr(args, "projects", None) or []), *([args.project] if getattr(args, "project", None) else [])]
    if not getattr(args, "all", False) and not (default_all and not named) and named in ([], ["."]):
        here = projects[0]
        if not here.dir.is_dir() and not here.memory_dir.is_dir():
            import os

            from memd.errors import UsageError

            raise UsageError(f"no Claude Code project here: {os.getcwd()} would be {here.dir}, which does not "
                             "exist (Claude Code makes it at a session's start); name a PROJECT, or see "
                             "`memd status` for every project")
    return projects


def preamble(args: argparse.Namespace, ctx: Context) -> tuple[list[Project] | None, list[str]]:
    """The projects to act on and notes for the user; None when there is nothing to look at."""
    from memd import layout

    require_claude_dir(args, ctx)
    claude = ctx.claude_dir
    notes: list[str] = []
    wants_all = bool(getattr(args, "all", False))
    if wants_all and not layout.projects_root(claude).is_dir():
        return None, [f"no Claude Code folder at {claude} (no projects yet): nothing to check"]
    why = layout.memory_disabled(claude)
    if why:
        notes.append(memory_off_note(why))
    projects = select(args, ctx)
    if not why:
        notes.extend(_project_memory_off(args, ctx, projects))
    if wants_all and not projects:
        notes.append(f"no projects under {layout.projects_root(claude)}: nothing to check")
    return projects, notes


def _project_memory_off(args: argparse.Namespace, ctx: Context, projects: list[Project]) -> list[str]:
    """Notes for projects named by a working folder ('.', a path) whose repository's own settings
    (``.claude/settings.json``, ``settings.local.json``) switch Claude Code's memory off. A project
    named by its folder under projects/ is not looked up here (``check``'s cached path answers those
    without reading any repository)."""
    import os
    from pathlib import Path

    from memd import layout

    out: list[str] = []
    named = [str(n) for n in (getattr(args, "projects", None) or []) if n == "." or "/" in str(n)]
    if not named and not getattr(args, "all", False) and not getattr(args, "projects", None):
        named = ["."]
    for arg in named:
        path = os.path.abspath(arg)
        if not os.path.isdir(path):
            continue
        folder = layout.folder_for_cwd(layout.git_root(Path(path)) or path)
        hit = [p for p in projects if p.name == folder or os.path.abspath(p.memory_dir) == path]
        why = layout.memory_off_for(ctx.claude_dir, [path])
        if why and hit:
            out.append(f"note: Claude Code's auto memory is off for {hit[0].name} ({why}); its memory folder "
                       "is checked anyway, and memd's jobs leave it alone")
    return out


def tolerant_config(ctx: Context) -> ConfigError | None:
    """Load the config for a command a user needs to debug a bad one (`memd status`, `memd logs`):
    a bad file gives its valid keys and defaults for the rest (``memd.config.load_tolerant``); the
    error is returned for the command to show, and later uses of ``ctx.config`` see that config."""
    return ctx.load_config_tolerantly()


def config_warning(command: str, error: ConfigError) -> str:
    """What status and logs say about a bad config before going on."""
    return (f"memd {command}: {error}\n(going on with the config's valid keys and the defaults for the rest; "
            "`memd config validate` checks it again)")


def record_manual_run(ctx: Context, job: str, project: Project, started: float, outcome: str, *,
                      changed: int = 0, deleted: int = 0, summary: str = "", error: str | None = None,
                      history_run: str = "") -> None:
    """Put a run a person asked for (`memd rebuild`, `memd undo`) in the run log beside the jobs' runs,
    so the check-in report (`memd report`) lists it. Never fails the command: the change is made."""
    import time

    from memd.state import StateStore

    try:
        with StateStore.open(ctx.state_dir) as st:
            rid = st.start_run(job, project.name, started)
            st.finish_run(rid, outcome=outcome, ended=time.time(), changed=changed, deleted=deleted,
                          summary=summary[:300], error=error, history_run=history_run)
    except Exception as e:  # the files are written and snapshotted; the run log is the lesser record
        import sys

        print(f"memd {job}: could not add the run to the run log ({type(e).__name__}: {e})", file=sys.stderr)


def record_rebuild(ctx: Context, project: Project, res: RebuildResult, *, dry_run: bool) -> None:
    """`memd rebuild`'s run in the run log: a written index (changed) or one that could not be (refused)."""
    import time

    if dry_run or not res.changed:
        return
    outcome = "changed" if res.written else "refused"
    record_manual_run(ctx, "rebuild", project, time.time(), outcome, changed=1 if res.written else 0,
                      summary="rebuild MEMORY.md: " + ("; ".join(res.actions) or "reformatted"),
                      error=None if res.written else "; ".join(res.reasons) or None, history_run=res.run)
