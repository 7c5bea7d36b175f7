"""Where Claude Code keeps things (facts.md section 1). Stdlib only: hooks import this.

A project has two folders that may differ: the transcript folder (keyed on a session's
start-up cwd) and the memory folder (keyed on the canonical git root of that cwd).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from memd.core.paths import INDEX_NAME
from memd.errors import UsageError
from memd.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_FOLDER_NAME = 200
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")
UUID_JSONL = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.jsonl$")
# A marker the CLI puts in front of arguments such as "-home-dev-x" so argparse does not read
# them as options (folder names under projects/ start with "-").
PROJECT_ARG_MARK = "\x00"


def claude_dir(explicit: str | os.PathLike[str] | None = None, configured: str = "") -> Path:
    """--claude-dir, else the config's paths.claude_dir, else $CLAUDE_CONFIG_DIR, else ~/.claude."""
    from memd.ccsettings import claude_folder

    return Path(claude_folder(explicit, configured))


def projects_root(claude: Path) -> Path:
    return claude / "projects"


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
    name = _NON_ALNUM.sub(_dashes, path)
    if len(name) <= MAX_FOLDER_NAME:  # all ASCII now: characters are UTF-16 units
        return name
    return f"{name[:MAX_FOLDER_NAME]}-{_hash36(path)}"


def _dashes(m: re.Match[str]) -> str:
    return "--" if ord(m.group()) > 0xFFFF else "-"


def read_settings(claude: Path, repo: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Claude Code's settings as a session in ``repo`` sees them: every scope merged (managed, local,
    project, user; ``memd.ccsettings``); the user's settings.json alone without ``repo``. Missing or
    unreadable files count as empty (Claude Code does the same)."""
    from memd import ccsettings

    return ccsettings.merged(os.fspath(claude), os.fspath(repo) if repo is not None else None)


def memory_disabled(claude: Path, settings: dict[str, Any] | None = None) -> str | None:
    """Why auto memory is off, or None when it is on. ``CLAUDE_CODE_DISABLE_AUTO_MEMORY`` decides
    first (1/true/yes/on in any case: off; 0/false/no/off: on whatever the settings say)."""
    from memd import ccsettings

    if ccsettings.env_switch() is not None:
        return ccsettings.memory_off(os.fspath(claude), {})
    return ccsettings.memory_off(os.fspath(claude), read_settings(claude) if settings is None else settings)


def memory_override(claude: Path, settings: dict[str, Any] | None = None) -> Path | None:
    """The memory folder ``autoMemoryDirectory`` names, or None for the default one (unset, relative,
    or rejected as Claude Code rejects it: ``~/``, ``/``, the home folder or above)."""
    from memd import ccsettings

    chosen = ccsettings.memory_override(read_settings(claude) if settings is None else settings)
    return Path(chosen) if chosen is not None else None


def git_root(path: Path) -> Path | None:
    """The canonical git root of path: worktrees and subfolders all map to the main repository."""
    try:
        cur = path.resolve()
    except OSError:
        return None
    for folder in (cur, *cur.parents):
        dotgit = folder / ".git"
        try:
            if dotgit.is_dir():
                return folder
            if dotgit.is_file():
                return _worktree_main(folder, dotgit) or folder
        except OSError:
            return None
    return None


def _worktree_main(folder: Path, dotgit: Path) -> Path | None:
    try:
        line = dotgit.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line[len("gitdir:"):].strip())
    if not gitdir.is_absolute():
        gitdir = folder / gitdir
    common = gitdir
    try:
        commondir = (gitdir / "commondir").read_text(encoding="utf-8").strip()
        common = (gitdir / commondir).resolve()
    except OSError:
        pass
    if common.name == ".git":
        return common.parent
    return None


def folder_for_cwd(cwd: str | os.PathLike[str]) -> str:
    """The projects/ folder name Claude Code uses for the memory of a working folder: its canonical
    git root's name (no Unicode normalisation: Claude Code names the path as the system gives it),
    or ``CLAUDE_CODE_PROJECT_DIR_NAME`` where Claude Code honours it."""
    from memd import ccsettings

    fixed = ccsettings.project_dir_name()
    if fixed is not None:
        return fixed
    p = Path(cwd)
    root = git_root(p)
    try:
        base = root if root is not None else p.resolve()
    except OSError:
        base = p
    return sanitize(os.fspath(base))


class Project(Record):
    name: str  # folder name under projects/
    dir: Path  # projects/<name>
    memory_dir: Path

    @property
    def index_path(self) -> Path:
        return self.memory_dir / INDEX_NAME


def find_folder(root: Path, name: str) -> Path | None:
    """The folder under root named name, matching long names by their 200-character prefix."""
    direct = root / name
    if direct.is_dir():
        return direct
    if len(name) > MAX_FOLDER_NAME:
        prefix = name[:MAX_FOLDER_NAME] + "-"
        try:
            for entry in os.scandir(root):
                if entry.name.startswith(prefix) and entry.is_dir():
                    return Path(entry.path)
        except OSError:
            return None
    return None


def project_for_folder(claude: Path, folder: Path, settings: dict[str, Any] | None = None) -> Project:
    override = memory_override(claude, settings)
    return Project(folder.name, folder, override if override is not None else folder / "memory")


def list_projects(claude: Path) -> list[Project]:
    """Every folder under projects/, sorted by name."""
    root = projects_root(claude)
    settings = read_settings(claude)
    try:
        entries = sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    return [project_for_folder(claude, root / n, settings) for n in entries]


def resolve_project(arg: str, claude: Path, cwd: Path | None = None) -> Project:
    """PROJECT as a user gives it: a working folder ('.'), a folder under projects/, or a memory folder."""
    arg = arg.removeprefix(PROJECT_ARG_MARK)
    root = projects_root(claude)
    settings = read_settings(claude)
    base = cwd or Path.cwd()
    # A bare folder name (e.g. "-home-dev-app") under projects/.
    if "/" not in arg and arg not in (".", ".."):
        found = find_folder(root, arg)
        if found is not None:
            return project_for_folder(claude, found, settings)
    p = (base / arg) if not os.path.isabs(arg) else Path(arg)
    p = Path(os.path.normpath(p))
    if p.is_dir():
        try:
            rroot = root.resolve()
        except OSError:
            rroot = root
        # A memory folder that is itself a symlink (projects/<name>/memory -> elsewhere) is named by
        # where it sits, as `--all` finds it: only the folders above it are resolved.
        lp = p.parent.resolve() / p.name
        if lp.parent.parent == rroot and lp.name == "memory" and lp.is_symlink():
            return Project(lp.parent.name, lp.parent, lp)
        rp = p.resolve()
        if rp.parent == rroot:
            return project_for_folder(claude, rp, settings)
        if rp.parent.parent == rroot and rp.name == "memory":
            return Project(rp.parent.name, rp.parent, rp)
        if rp.name == "memory" and (rp / INDEX_NAME).exists():
            return Project(rp.parent.name, rp.parent, rp)
        name = folder_for_cwd(rp)
        found = find_folder(root, name)
        folder = found if found is not None else root / name
        return project_for_folder(claude, folder, read_settings(claude, rp))  # a session there sees these
    if p.exists():
        raise UsageError(f"{arg!r} is a file, not a project (give a working folder, a folder under {root}, "
                         "or a memory folder)")
    raise UsageError(
        f"no such project: {arg!r} (give a working folder, a folder under {root}, or a memory folder)")


def session_files(project_dir: Path) -> list[Path]:
    """Main-session transcripts (UUID-named *.jsonl) of a transcript folder."""
    try:
        return sorted(Path(e.path) for e in os.scandir(project_dir)
                      if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False))
    except OSError:
        return []


def is_uuid_session(path: Path) -> bool:
    return bool(UUID_JSONL.match(path.name))


def subagent_files(project_dir: Path) -> list[Path]:
    """Subagent transcripts in both layouts: <session>/subagents/agent-*.jsonl and old agent-*.jsonl."""
    out: list[Path] = []
    try:
        entries = list(os.scandir(project_dir))
    except OSError:
        return out
    for e in entries:
        if e.is_dir(follow_symlinks=False) and e.name != "memory":
            sub = Path(e.path) / "subagents"
            try:
                out.extend(Path(s.path) for s in os.scandir(sub)
                           if s.name.startswith("agent-") and s.name.endswith(".jsonl"))
            except OSError:
                pass
    return sorted(out)


def is_main_session(path: Path) -> bool:
    return not path.name.startswith("agent-") and path.parent.name != "subagents"


def is_team_path(memory_dir: Path, path: Path) -> bool:
    """True for anything inside memory/team/ (synced from a server: read, never write)."""
    from memd.core.paths import is_team

    try:
        return is_team(path.relative_to(memory_dir).as_posix())
    except ValueError:
        return False


def state_dir(configured: str = "") -> Path:
    """memd's own folder: state, logs, snapshots, reports (XDG state path)."""
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "memd"
