"""Path rules of a memory folder, defined once: pure predicates on folder-relative POSIX paths.

``rel`` is relative to the memory folder and uses ``/`` (``sub/topic.md``, ``team/MEMORY.md``).
Every walker, reader, guard and hook asks these; none keeps its own copy.
"""

from __future__ import annotations

INDEX_NAME = "MEMORY.md"
TEAM_DIR = "team"
TEAM_INDEX = TEAM_DIR + "/" + INDEX_NAME


def is_team(rel: str) -> bool:
    """Inside ``team/`` (synced from a server by Claude Code): read it, never write it."""
    return rel == TEAM_DIR or rel.startswith(TEAM_DIR + "/")


def is_index(rel: str) -> bool:
    """The project's index or the team index."""
    return rel in (INDEX_NAME, TEAM_INDEX)


def is_hidden(rel: str) -> bool:
    """Some component starts with a dot (``.git/``, editor folders, ``.consolidate-lock``)."""
    return any(part.startswith(".") for part in rel.split("/"))
