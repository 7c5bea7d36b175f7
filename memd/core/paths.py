"""Path rules of a memory folder, defined once: pure predicates on folder-relative POSIX paths.

``rel`` is relative to the memory folder and uses ``/`` (``sub/topic.md``, ``team/MEMORY.md``).
Every walker, reader, guard and hook asks these; none keeps its own copy.

Which files are memory (``is_memory_file``: what staging copies and history snapshots) and which of
them are topic files (``is_topic``: what recall lists, the daemon counts and check lints as topics)
is decided here, in one place, from a path and the *kind* of file found there (``memd.memfolder.walk``
tells the kind; this module never touches the disk). The set is the one Claude Code 2.1.328's recall
lists (checked by running it: ``tests/realcc/test_recall_manifest.py``, ``docs/conformance.md``):

- every ``*.md`` file (``.md`` matched case-sensitively) at any depth, symlinks followed;
- except any file named ``MEMORY.md`` (at any depth: the index, ``team/MEMORY.md``, ``sub/MEMORY.md``);
- except any path with a component starting with ``.`` (``.git/``, editor files, memd's temp files),
  but a file directly in ``team/`` is exempt (``team/.x.md`` is a topic file);
- except anything in the top-level folders ``logs/``, ``sessions/``, ``proposals/``, compared
  case-insensitively after NFC with trailing dots and spaces stripped (``Logs/``, ``sessions./``);
- except anything below ``team/``'s first level (``team/sub/x.md``).

``team/`` (synced from a server) holds memories too: memd reads them and never writes them
(``is_team``). Our one deliberate deviation, in the kinds: Claude Code follows a symlink that leaves
the memory folder; memd never reads or writes through one (kind ``OUTSIDE``; check reports it as
MEM008), except that an index that is such a link is *measured* (read only: ``memd.memfolder.walk``).
A symlink to a file inside the folder counts (kind ``LINK``), read at its target; symlinked folders
are the walk's business. A file memd cannot read whole (larger than ``budget.max_file_bytes``, or
unreadable) is not a topic file for memd: it can be neither staged, snapshotted nor judged; ``memd
check`` reports it. (Claude Code's recall would still list an over-size file by its first lines; at
the default 4 MB no real memory file comes near the cap.)

To change the rule (say, after checking it against a new Claude Code), change ``is_topic`` or
``MEMORY_KINDS``: every reader follows.
"""

from __future__ import annotations

INDEX_NAME = "MEMORY.md"
TEAM_DIR = "team"
TEAM_INDEX = TEAM_DIR + "/" + INDEX_NAME

# The kinds of file a walk finds at a path (``memd.memfolder.walk.classify``)
FILE = "file"  # a regular file memd can read whole
LINK = "link"  # a symlink to such a file inside the memory folder
OUTSIDE = "outside"  # a symlink resolving outside the memory folder: never followed (an index: measured)
BROKEN = "broken"  # a symlink to nothing
OTHER = "other"  # not a regular file (a folder behind a symlink, a FIFO, a socket, a device)
LARGE = "large"  # a regular file over the size cap
UNREADABLE = "unreadable"  # a regular file memd may not read

MEMORY_KINDS = frozenset({FILE, LINK})


def is_utf8_name(rel: str) -> bool:
    """The name is UTF-8 text. One that is not (Latin-1 bytes, say) reads back with lone surrogates
    (``surrogateescape``): MEMORY.md, UTF-8 text, cannot link it, and sync's git trees could not bring it to
    another machine as it is. Such a file is left out of a rebuilt index and out of sync, said in words."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(rel: str) -> str:
    """A name for words: its undecodable bytes written as ``\\xe9`` (never a lone surrogate on stdout)."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_team(rel: str) -> bool:
    """Inside ``team/`` (synced from a server by Claude Code): read it, never write it."""
    return rel == TEAM_DIR or rel.startswith(TEAM_DIR + "/")


def is_index(rel: str) -> bool:
    """The project's index or the team index."""
    return rel in (INDEX_NAME, TEAM_INDEX)


def is_hidden(rel: str) -> bool:
    """Some component starts with a dot (``.git/``, editor folders, ``.consolidate-lock``)."""
    return any(part.startswith(".") for part in rel.split("/"))


EXCLUDED_TOP = frozenset({"logs", "sessions", "proposals"})  # top-level folders recall never lists


def _excluded_top(name: str) -> bool:
    """``logs``/``sessions``/``proposals`` as Claude Code compares them: NFC, any case, no trailing dots or spaces."""
    if not name.isascii():
        import unicodedata  # only for a non-ASCII name: the hooks import this module

        name = unicodedata.normalize("NFC", name)
    return name.rstrip(". ").lower() in EXCLUDED_TOP


def is_topic(rel: str, kind: str = FILE) -> bool:
    """A topic file (see the module doc): what Claude Code's recall lists, of the kinds memd reads."""
    if kind not in MEMORY_KINDS or not rel.endswith(".md"):
        return False
    parts = rel.split("/")
    if parts[-1] == INDEX_NAME:
        return False
    if len(parts) > 1 and parts[0] == TEAM_DIR:
        return len(parts) == 2  # team/<file>.md only, hidden ones included
    if any(p.startswith(".") for p in parts):
        return False
    return len(parts) == 1 or not _excluded_top(parts[0])


def is_memory_file(rel: str, kind: str = FILE) -> bool:
    """A memory file: a topic file or one of the two indexes (see the module doc); what staging and history hold."""
    return is_topic(rel, kind) or (is_index(rel) and kind in MEMORY_KINDS)
