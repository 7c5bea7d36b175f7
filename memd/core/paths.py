"""Path rules of a memory folder, defined once: pure predicates on folder-relative POSIX paths.

``rel`` is relative to the memory folder and uses ``/`` (``sub/topic.md``, ``team/MEMORY.md``).
Every walker, reader, guard and hook asks these; none keeps its own copy.

Which files are memory (``is_memory_file``: what staging copies and history snapshots) and which of
them are topic files (``is_topic``: what recall lists, the daemon counts and check lints as topics)
is decided here, in one place, from a path and the *kind* of file found there (``memd.memfolder.walk``
tells the kind; this module never touches the disk). The set is the one Claude Code's recall uses:
every ``*.md`` file below the memory folder, sub-folders included, other than the index. Our choices
where that leaves room:

- ``team/`` (synced from a server) holds memories too: its topic files count, ``team/MEMORY.md`` is
  its index (not a topic). memd reads them and never writes them (``is_team``).
- Hidden files and folders (any component starting with ``.``: ``.git/``, editor files,
  ``.consolidate-lock``, memd's own temp files ``.memd-*.tmp``) are not memory.
- Symlinks: memd never follows one that leaves the folder, nor a broken one, and never enters a
  symlinked folder (files inside the folder are found at their real path anyway). A symlink to a
  regular file inside the folder *does* count: Claude Code reads it through the link, and it is read
  through the link (after checking where it lands) by every reader of memd.
- A file memd cannot read whole (larger than ``budget.max_file_bytes``, or unreadable) is not a topic
  file for memd: it can be neither staged, snapshotted nor judged; ``memd check`` reports it. (Claude
  Code's recall would still list an over-size file by its first lines; at the default 4 MB no real
  memory file comes near the cap.)

To change the rule (say, after checking it against a new Claude Code), change ``MEMORY_KINDS`` or
``is_memory_file``: every reader follows.
"""

from __future__ import annotations

INDEX_NAME = "MEMORY.md"
TEAM_DIR = "team"
TEAM_INDEX = TEAM_DIR + "/" + INDEX_NAME

# The kinds of file a walk finds at a path (``memd.memfolder.walk.classify``)
FILE = "file"  # a regular file memd can read whole
LINK = "link"  # a symlink to such a file inside the memory folder
OUTSIDE = "outside"  # a symlink resolving outside the memory folder: never followed
BROKEN = "broken"  # a symlink to nothing
OTHER = "other"  # not a regular file (a folder behind a symlink, a FIFO, a socket, a device)
LARGE = "large"  # a regular file over the size cap
UNREADABLE = "unreadable"  # a regular file memd may not read

MEMORY_KINDS = frozenset({FILE, LINK})


def is_team(rel: str) -> bool:
    """Inside ``team/`` (synced from a server by Claude Code): read it, never write it."""
    return rel == TEAM_DIR or rel.startswith(TEAM_DIR + "/")


def is_index(rel: str) -> bool:
    """The project's index or the team index."""
    return rel in (INDEX_NAME, TEAM_INDEX)


def is_hidden(rel: str) -> bool:
    """Some component starts with a dot (``.git/``, editor folders, ``.consolidate-lock``)."""
    return any(part.startswith(".") for part in rel.split("/"))


def is_memory_file(rel: str, kind: str = FILE) -> bool:
    """A memory file, the index included (see the module doc): what staging and history hold."""
    return kind in MEMORY_KINDS and rel.endswith(".md") and not is_hidden(rel)


def is_topic(rel: str, kind: str = FILE) -> bool:
    """A topic file (see the module doc): a memory file other than the two indexes."""
    return is_memory_file(rel, kind) and not is_index(rel)
