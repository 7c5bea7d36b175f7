"""Claude Code's settings that move or switch off auto memory, read as Claude Code 2.1.328 reads them.

``os`` and ``json`` only: the PreToolUse hook (which must not import pathlib) validates
``autoMemoryDirectory`` with this module too.

Scopes, highest precedence first (facts.md section 1; Claude Code's settings docs: managed >
command line > local > project > user). A key set in a higher scope wins, key by key:

- managed: ``/Library/Application Support/ClaudeCode/managed-settings.json`` on macOS,
  ``/etc/claude-code/managed-settings.json`` elsewhere (Linux, WSL). Server-delivered and MDM
  (plist, registry) policies are not files memd can read.
- command line (``--settings``): a session's own; memd cannot see it.
- local ``<repo>/.claude/settings.local.json`` and project ``<repo>/.claude/settings.json``, where
  ``repo`` is the session's working folder (memd uses the project's git root when it knows no cwd).
- user ``<Claude folder>/settings.json`` (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``).

``autoMemoryDirectory``: the first scope that sets it decides (an invalid value there means the
default folder, not a lower scope's value). ``autoMemoryEnabled``: the merged value.
"""

from __future__ import annotations

import os
import re
import stat
import sys

from memd.core import jsonfast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MEMORY_KEYS = ("autoMemoryEnabled", "autoMemoryDirectory")
SOURCES_KEY = "_memd_sources"  # in a merged settings dict: which file set each memory key
# CLAUDE_CODE_DISABLE_AUTO_MEMORY: truthy turns memory off, falsy forces it on (any case)
TRUTHY = frozenset({"1", "true", "yes", "on"})
FALSY = frozenset({"0", "false", "no", "off"})
# patterns compiled on first use (re caches them): `memd check` imports this module on its quick path
_DIR_NAME = r"^[A-Za-z0-9_-]{1,64}$"
_RESERVED = r"(?i)^(?:con|prn|aux|nul|com[0-9]|lpt[0-9])$"
_NON_ALNUM = r"[^A-Za-z0-9]"
MAX_FOLDER_NAME = 200


def claude_folder(explicit: str | os.PathLike[str] | None = None, configured: str = "") -> str:
    """--claude-dir, else the config's paths.claude_dir, else $CLAUDE_CONFIG_DIR, else ~/.claude
    (``memd.layout.claude_dir`` makes it a Path)."""
    chosen = explicit or configured or os.environ.get("CLAUDE_CONFIG_DIR")
    return os.path.expanduser(chosen) if chosen else os.path.join(os.path.expanduser("~"), ".claude")


def managed_settings_path() -> str:
    if sys.platform == "darwin":
        return "/Library/Application Support/ClaudeCode/managed-settings.json"
    return "/etc/claude-code/managed-settings.json"


def scope_files(claude: str, repo: str | None = None) -> list[tuple[str, str]]:
    """(scope, settings file) in precedence order, highest first."""
    out = [("managed", managed_settings_path())]
    if repo:
        out += [("local", os.path.join(repo, ".claude", "settings.local.json")),
                ("project", os.path.join(repo, ".claude", "settings.json"))]
    out.append(("user", os.path.join(claude, "settings.json")))
    return out


def read_json(path: str) -> dict[str, Any]:
    """A settings file as a dict; {} when missing, unreadable or not an object (as Claude Code)."""
    try:
        with open(path, "rb") as f:
            data = jsonfast.loads(f.read().decode("utf-8"))  # (not json: the hooks read settings, see jsonfast)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def merged(claude: str, repo: str | None = None) -> dict[str, Any]:
    """The settings of every scope merged key by key (the higher scope wins); ``SOURCES_KEY`` maps
    each memory key to the file that set it."""
    out: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for _scope, path in reversed(scope_files(claude, repo)):
        data = read_json(path)
        out.update(data)
        for k in MEMORY_KEYS:
            if data.get(k) is not None:
                sources[k] = path
    out[SOURCES_KEY] = sources
    return out


def env_switch() -> str | None:
    """"off" or "on" when CLAUDE_CODE_DISABLE_AUTO_MEMORY decides, else None."""
    value = os.environ.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY")
    if value is None:
        return None
    v = value.strip().lower()
    return "off" if v in TRUTHY else "on" if v in FALSY else None


def memory_dir(value: Any, home: str | None = None) -> str | None:
    """``autoMemoryDirectory`` as Claude Code takes it, or None (the default folder is used): an
    absolute path or one under ``~/``; a relative path is ignored; ``~/`` itself, ``/``, the home
    folder and folders above it are rejected (a memory folder there would take in the home's or
    a repository's own files, ``.env`` included)."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return None
    home = os.path.normpath(home or os.path.expanduser("~"))
    path = value
    if value.startswith(("~/", "~\\")):
        rest = os.path.normpath(value[2:] or ".")
        if rest in (".", "..") or rest.startswith(("../", "..\\")):
            return None
        path = os.path.join(home, value[2:])
    path = os.path.normpath(path).rstrip("/\\")
    if not os.path.isabs(path) or len(path) < 3:
        return None
    if path == home or home.startswith(path + os.sep):
        return None
    return path


def settings_memory_dir(settings: dict[str, Any]) -> str | None:
    """The memory folder ``autoMemoryDirectory`` of (merged) settings names, or None for the default."""
    value = settings.get("autoMemoryDirectory")
    return memory_dir(value.strip() if isinstance(value, str) else value)


# Two environment variables move the memory folder too (seen in 2.1.328 and 2.1.332; checked against
# the CLI by tests/realcc/test_settings.py):
# - CLAUDE_COWORK_MEMORY_PATH_OVERRIDE: an absolute path is the memory folder itself, above every
#   setting; anything else (empty, relative, "~/...") is ignored.
# - CLAUDE_CODE_REMOTE_MEMORY_DIR: a root holding ``projects/<folder>/memory``, below the
#   ``autoMemoryDirectory`` setting and above the default; a relative value is taken from the working
#   folder as it is ("~" is not expanded); empty is ignored.
COWORK_ENV = "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"
REMOTE_ENV = "CLAUDE_CODE_REMOTE_MEMORY_DIR"


def cowork_memory_dir() -> str | None:
    value = os.environ.get(COWORK_ENV) or ""
    if not os.path.isabs(value) or "\x00" in value:
        return None
    return os.path.normpath(value)


def remote_memory_root() -> str | None:
    value = os.environ.get(REMOTE_ENV) or ""
    if not value or "\x00" in value:
        return None
    return os.path.normpath(os.path.abspath(value))


def project_memory_dir(claude: str, folder: str, settings: dict[str, Any]) -> str:
    """The memory folder Claude Code uses for the project folder ``folder`` (its name under
    projects/): the cowork override, else ``autoMemoryDirectory``, else the remote root's
    ``projects/<folder>/memory``, else ``<claude>/projects/<folder>/memory``."""
    chosen = cowork_memory_dir() or settings_memory_dir(settings)
    if chosen is not None:
        return chosen
    remote = remote_memory_root()
    base = os.path.join(remote, "projects") if remote is not None else os.path.join(claude, "projects")
    return os.path.join(base, folder, "memory")


def project_override(claude: str, cwd: str) -> str | None:
    """``autoMemoryDirectory`` as a session in ``cwd`` takes it from its project's own settings
    (``<cwd>/.claude/settings.json``, ``settings.local.json``) or the managed ones, when one of those
    sets it (the user's own is ``user_memory_override``); None otherwise."""
    settings = merged(claude, cwd)
    source = settings.get(SOURCES_KEY, {}).get("autoMemoryDirectory")
    if source is None or source == os.path.join(claude, "settings.json"):
        return None
    return settings_memory_dir(settings)


def user_memory_override(claude: str) -> str | None:
    """``autoMemoryDirectory`` of the user settings (``<claude>/settings.json``) as Claude Code takes it,
    or None. The hooks guard this one (a project's own settings can move its memory too, but the
    hooks cannot afford to find the session's repository on every tool call)."""
    return settings_memory_dir(read_json(os.path.join(claude, "settings.json")))


def memory_disabled(claude: str, settings: dict[str, Any] | None = None) -> str | None:
    """Why auto memory is off, or None when it is on. ``CLAUDE_CODE_DISABLE_AUTO_MEMORY`` decides
    first (1/true/yes/on in any case: off; 0/false/no/off: on whatever the settings say)."""
    switch = env_switch()
    if switch == "off":
        return "CLAUDE_CODE_DISABLE_AUTO_MEMORY is set"
    if switch == "on":
        return None
    s = merged(claude) if settings is None else settings
    if s.get("autoMemoryEnabled") is False:
        where = s.get(SOURCES_KEY, {}).get("autoMemoryEnabled") or os.path.join(claude, "settings.json")
        return f"autoMemoryEnabled is false in {where}"
    return None


memory_off = memory_disabled  # the names the door's quick paths use
memory_override = settings_memory_dir


def guarded_folders(claude: str) -> list[tuple[str, bool]]:
    """The folders memd's hooks guard for the Claude folder ``claude`` (expanded, absolute), as
    ``(folder, per_project)``: the cowork override and ``autoMemoryDirectory`` (each a memory folder
    itself, ``per_project`` False) first, then the remote root's projects/ and the projects root
    (``per_project`` True: its memory folders are ``<root>/<x>/memory/``; memory left there from
    before an override is still guarded). Each as written and, where a symlink
    makes it differ, resolved: the hook's exact test and the ``if`` rules ``memd hooks install``
    writes both come from this list."""
    out: list[tuple[str, bool]] = []
    remote = remote_memory_root()
    pairs = ((cowork_memory_dir(), False), (user_memory_override(claude), False),
             (os.path.join(remote, "projects") if remote is not None else None, True),
             (os.path.join(claude, "projects"), True))
    for folder, per_project in pairs:
        if folder is None:
            continue
        plain = os.path.normpath(folder)
        for f in (plain, os.path.realpath(plain)):
            if (f, per_project) not in out:
                out.append((f, per_project))
    return out


def project_dir_name() -> str | None:
    """``CLAUDE_CODE_PROJECT_DIR_NAME``: with ``CLAUDE_CONFIG_DIR`` set, every session's transcripts
    and memory go to ``projects/<that name>``; taken only when it is 1-64 of [A-Za-z0-9_-] and not a
    Windows device name (as Claude Code)."""
    if not (os.environ.get("CLAUDE_CONFIG_DIR") or "").strip():
        return None
    name = (os.environ.get("CLAUDE_CODE_PROJECT_DIR_NAME") or "").strip()
    if not name or not re.match(_DIR_NAME, name) or re.match(_RESERVED, name):
        return None
    return name


# --------------------------------------------------------------------------- which folder a session uses
# With os.path only (the SessionStart hook cannot afford pathlib); memd.layout wraps these in Paths.


def _hash36(text: str) -> str:
    # Claude Code appends a hash to names cut at 200 characters; the CLI and the SDK use
    # different hashes, so existing folders are matched by their 200-character prefix and
    # this hash only names folders memd itself must invent (it never creates them).
    h = 0
    for ch in text:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        h, r = divmod(h, 36)
        out = digits[r] + out
        if not h:
            return out


def sanitize(path: str) -> str:
    """Folder name of a path, as Claude Code 2.1.328 makes it: every UTF-16 code unit outside
    [A-Za-z0-9] becomes '-' (an emoji, two units, becomes "--"; a decomposed "e" + accent "e-"), with
    no Unicode normalisation; a name over 200 units is cut to 200 and gets "-<hash>"."""
    name = re.sub(_NON_ALNUM, _dashes, path)
    if len(name) <= MAX_FOLDER_NAME:  # all ASCII now: characters are UTF-16 units
        return name
    return f"{name[:MAX_FOLDER_NAME]}-{_hash36(path)}"


def _dashes(m: re.Match[str]) -> str:
    return "--" if ord(m.group()) > 0xFFFF else "-"


def git_root(path: str) -> str | None:
    """The canonical git root of path: worktrees and subfolders all map to the main repository."""
    try:
        cur = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    while True:
        dotgit = os.path.join(cur, ".git")
        try:
            if os.path.isdir(dotgit):
                return cur
            if os.path.isfile(dotgit):
                return _worktree_main(cur, dotgit) or cur
        except OSError:
            return None
        parent = os.path.dirname(cur)
        if parent == cur:
            return None
        cur = parent


def _read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read(1 << 16).decode("utf-8", errors="replace").strip()


def _worktree_main(folder: str, dotgit: str) -> str | None:
    try:
        line = _read_text(dotgit)
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = os.path.join(folder, line[len("gitdir:"):].strip())  # an absolute gitdir replaces folder
    common = gitdir
    try:
        common = os.path.realpath(os.path.join(gitdir, _read_text(os.path.join(gitdir, "commondir"))))
    except OSError:
        pass
    if os.path.basename(common) == ".git":
        return os.path.dirname(common)
    return None


def folder_for_cwd(cwd: str) -> str:
    """The projects/ folder name Claude Code uses for the memory of a working folder: its canonical
    git root's name (no Unicode normalisation: Claude Code names the path as the system gives it),
    or ``CLAUDE_CODE_PROJECT_DIR_NAME`` where Claude Code honours it."""
    fixed = project_dir_name()
    if fixed is not None:
        return fixed
    root = git_root(cwd)
    if root is None:
        try:
            root = os.path.realpath(cwd)
        except (OSError, ValueError):
            root = cwd
    return sanitize(root)


def find_folder(root: str, name: str) -> str | None:
    """The folder under root named name, matching long names by their 200-character prefix."""
    direct = os.path.join(root, name)
    if os.path.isdir(direct):
        return direct
    if len(name) > MAX_FOLDER_NAME:
        prefix = name[:MAX_FOLDER_NAME] + "-"
        try:
            for entry in os.scandir(root):
                if entry.name.startswith(prefix) and entry.is_dir():
                    return entry.path
        except OSError:
            return None
    return None


_TAIL_BYTES = 65_536  # transcript bytes read for the version: the last records, never the whole file
_VERSION = rb'"version"\s*:\s*"(\d+)\.(\d+)\.(\d+)'


def transcript_version(transcript_path: object) -> tuple[int, int, int] | None:
    """The Claude Code version of the newest record in the transcript's last 64 KB (then its first
    64 KB, when one huge record fills the tail), or None. A record's ``version`` is the version of
    the CLI that wrote it; a session resumed by a newer CLI changes it mid-file, so the tail wins.

    Bounded and cheap: at most two reads of 64 KB, a regular file only (a FIFO would block), no JSON
    parsing. A ``version`` inside a record's content is a JSON-escaped ``\\"version\\"`` and does
    not match."""
    if not isinstance(transcript_path, str) or not transcript_path or "\x00" in transcript_path:
        return None
    try:
        fd = os.open(transcript_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return None

    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        start = max(0, st.st_size - _TAIL_BYTES)
        found = re.findall(_VERSION, os.pread(fd, _TAIL_BYTES, start))
        if not found and start > 0:
            found = re.findall(_VERSION, os.pread(fd, _TAIL_BYTES, 0))
    except OSError:
        return None
    finally:
        os.close(fd)
    if not found:
        return None
    major, minor, patch = found[-1]
    return int(major), int(minor), int(patch)
