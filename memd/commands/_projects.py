"""Shared by `memd check`, `memd status` and `memd rebuild`: the projects a command acts on, and notes for the user."""

from __future__ import annotations

from memd.cli import select_projects

TYPE_CHECKING = False  # typing is not imported at run time: check and status start through here
if TYPE_CHECKING:
    import argparse

    from memd.cli import Context
    from memd.layout import Project


def preamble(args: argparse.Namespace, ctx: Context) -> tuple[list[Project] | None, list[str]]:
    """The projects to act on and notes for the user; None when there is nothing to look at."""
    from memd import layout

    claude = ctx.claude_dir
    notes: list[str] = []
    wants_all = bool(getattr(args, "all", False))
    if wants_all and not layout.projects_root(claude).is_dir():
        return None, [f"no Claude Code folder at {claude} (no projects yet): nothing to check"]
    why = layout.memory_disabled(claude)
    if why:
        notes.append(memory_off_note(why))
    projects = select_projects(args, ctx)
    if wants_all and not projects:
        notes.append(f"no projects under {layout.projects_root(claude)}: nothing to check")
    return projects, notes


def memory_off_note(why: str) -> str:
    return f"note: Claude Code's auto memory is off ({why}); existing memory folders are checked anyway"
