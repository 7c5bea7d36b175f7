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

MAX_FOLDER_NAME = 200  # memd.ccsettings.MAX_FOLDER_NAME
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


def sanitize(path: str) -> str:
    """Folder name of a path, as Claude Code 2.1.328 makes it (``memd.ccsettings.sanitize``)."""
    from memd import ccsettings

    return ccsettings.sanitize(path)


def read_settings(claude: Path, repo: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Claude Code's settings as a session in ``repo`` sees them: every scope merged (managed, local,
    project, user; ``memd.ccsettings``); the user's settings.json alone without ``repo``. Missing or
    unreadable files count as empty (Claude Code does the same)."""
    from memd import ccsettings

    return ccsettings.merged(os.fspath(claude), os.fspath(repo) if repo is not None else None)


def memory_disabled(claude: Path, settings: dict[str, Any] | None = None) -> str | None:
    """Why auto memory is off, or None when it is on (``memd.ccsettings.memory_disabled``)."""
    from memd import ccsettings

    if ccsettings.env_switch() is not None:
        return ccsettings.memory_off(os.fspath(claude), {})
    return ccsettings.memory_off(os.fspath(claude), read_settings(claude) if settings is None else settings)


def memory_off_for(claude: Path, cwds: list[str]) -> str | None:
    """Why auto memory is off for a session in the first of ``cwds`` that exists (a project's
    working folders, newest first): every settings scope of its repository counts (a project's own
    ``.claude/settings.json`` or ``settings.local.json`` may turn it off). Without one, the user's
    and managed scopes alone."""
    for cwd in cwds:
        if cwd and os.path.isdir(cwd):
            repo = git_root(Path(cwd)) or Path(cwd)
            return memory_disabled(claude, read_settings(claude, repo))
    return memory_disabled(claude)


def memory_override(claude: Path, settings: dict[str, Any] | None = None) -> Path | None:
    """The memory folder ``autoMemoryDirectory`` names, or None for the default one (unset, relative,
    or rejected as Claude Code rejects it: ``~/``, ``/``, the home folder or above)."""
    from memd import ccsettings

    chosen = ccsettings.memory_override(read_settings(claude) if settings is None else settings)
    return Path(chosen) if chosen is not None else None


def git_root(path: Path) -> Path | None:
    """The canonical git root of path: worktrees and subfolders all map to the main repository
    (``memd.ccsettings.git_root``, which the hooks use without pathlib)."""
    from memd import ccsettings

    root = ccsettings.git_root(os.fspath(path))
    return Path(root) if root is not None else None


def folder_for_cwd(cwd: str | os.PathLike[str]) -> str:
    """The projects/ folder name Claude Code uses for the memory of a working folder
    (``memd.ccsettings.folder_for_cwd``)."""
    from memd import ccsettings

    return ccsettings.folder_for_cwd(os.fspath(cwd))


class Project(Record):
    name: str  # folder name under projects/
    dir: Path  # projects/<name>
    memory_dir: Path

    @property
    def index_path(self) -> Path:
        return self.memory_dir / INDEX_NAME


def find_folder(root: Path, name: str) -> Path | None:
    """The folder under root named name, matching long names by their 200-character prefix."""
    from memd import ccsettings

    found = ccsettings.find_folder(os.fspath(root), name)
    return Path(found) if found is not None else None


def project_for_folder(claude: Path, folder: Path, settings: dict[str, Any] | None = None) -> Project:
    """The project of a folder under projects/, with the memory folder Claude Code uses for it
    (``memd.ccsettings.project_memory_dir``: the environment's overrides and the settings')."""
    from memd import ccsettings

    s = read_settings(claude) if settings is None else settings
    mem = ccsettings.project_memory_dir(os.fspath(claude), folder.name, s)
    default = os.path.join(os.fspath(claude), "projects", folder.name, "memory")
    return Project(folder.name, folder, folder / "memory" if mem == default else Path(mem))


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
