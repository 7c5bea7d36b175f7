"""Which local folders are "the same project" on every machine (the I/O edge).

The same repository sits at different paths on different machines, so Claude Code's folder names
differ. A project's identity is its repository's normalised ``origin`` URL: the git root comes
from the transcripts' ``cwd`` (the state's record of them, else the transcripts themselves, read
only as far as the first ``cwd``), its ``origin`` from the repository's config. An explicit name in
``[sync.identities]`` wins. A project with neither is not synced. A local path as ``origin`` is no
identity (it differs between machines).

Identity is decided per **memory folder Claude Code uses** (issue 21 #1; proved with the real CLI in
``tests/realcc/test_memory_home.py``): a session started in a linked git worktree or a monorepo
subfolder keeps its transcripts in a ``projects/`` folder of its own (its cwd's) but its memory in the
folder of the repository's canonical git root (the main checkout). So ``identify_all``:

- a folder whose sessions' memory lives in another folder (its *home*) and which holds no memory of
  its own is no sync participant; its sessions' cwds count for the home's identity (a main checkout
  whose only sessions ran in worktrees is found through them);
- such a folder that does hold memory files (Claude Code never loads them for its sessions: an older
  memd or Claude Code left them) is held, never synced, and named in ``memd status``;
- two memory folders with one identity (two clones of one repository on one machine: each clone is a
  canonical git root with a memory folder of its own) are one project with **one writer**: the folder
  the user chose (``memd sync --writer``), else the one that already shares the branch, else the one
  holding memory, else the first by name. The others are held, named in ``memd status`` and
  ``memd sync --list`` with the commands that resolve it; never two writers racing on one branch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd import layout

if TYPE_CHECKING:
    from memd.config import Config
    from memd.layout import Project

_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!/).+)$")  # git@host:me/app.git
_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::(?P<port>\d+))?(?P<path>/.*)?$",
                  re.I)
_DEFAULT_PORTS = {"ssh": "22", "git+ssh": "22", "https": "443", "http": "80", "git": "9418"}
_REF_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")


def normalise_url(url: str) -> str | None:
    """``git@GitHub.com:Me/App.git``, ``https://u@github.com/me/app/`` and ``ssh://git@github.com:22/me/app``
    all give ``github.com/me/app``; a local path or ``file://`` URL gives None."""
    url = url.strip()
    if not url:
        return None
    m = _URL.match(url)
    if m is not None:
        scheme = m.group("scheme").lower()
        if scheme == "file":
            return None
        host = m.group("host").lower()
        port = m.group("port")
        if port and port != _DEFAULT_PORTS.get(scheme):
            host = f"{host}:{port}"
        path = m.group("path") or ""
    else:
        s = _SCP.match(url)
        if s is None or url.startswith(("/", ".", "~")):
            return None
        host, path = s.group("host").lower(), s.group("path")
    path = path.strip("/")
    path = path.removesuffix(".git").rstrip("/")
    if not path:
        return None
    return f"{host}/{path}".lower()


def branch_of(identity: str) -> str:
    """The remote branch (under refs/heads/) that carries an identity's memory: ``memory/<identity>``."""
    parts = [p for p in _REF_UNSAFE.sub("-", identity).split("/") if p]
    safe = [p.lstrip(".").removesuffix(".lock").replace("..", "-") or "-" for p in parts]
    return "memory/" + "/".join(safe or ["-"])


def origin_of(repo_root: Path) -> str | None:
    """The ``origin`` URL in a repository's config (a worktree's root is its main repository)."""
    from dulwich.config import ConfigFile

    cfg = repo_root / ".git" / "config"
    try:
        parsed = ConfigFile.from_path(str(cfg))
        value = parsed.get((b"remote", b"origin"), b"url")
    except (OSError, KeyError, ValueError):
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else None


@dataclass(frozen=True)
class Identity:
    project: str  # the local folder name under projects/
    identity: str | None  # None: not synced
    source: str  # "config", "origin <url>", or why there is none
    excluded: bool = False  # the user opted this project out
    home: str | None = None  # its sessions' memory lives in this other folder (a worktree's or subfolder's)
    writer: str | None = None  # held: this other folder syncs the identity on this machine
    why_held: str = ""  # held: the reason, in words
    resolve: str = ""  # held: the commands that resolve it

    @property
    def branch(self) -> str | None:
        return branch_of(self.identity) if self.identity else None

    @property
    def held(self) -> bool:
        return bool(self.why_held)

    @property
    def syncs(self) -> bool:
        """This folder reads and writes its identity's branch."""
        return self.identity is not None and not self.held


def _base(project: Project, config: Config, cwds: list[str], roots: dict[str, Path | None] | None = None) -> Identity:
    """The identity a folder's own settings and sessions give it (before the one-writer rule); ``roots``
    caches each cwd's git root (a main checkout's and its worktrees' sessions share them)."""
    sc = config.sync
    if project.name in sc.exclude:
        return Identity(project.name, None, "opted out in sync.exclude", excluded=True)
    mapped = sc.identities.get(project.name)
    if mapped:
        return Identity(project.name, mapped.strip().lower(), "config")
    seen_root = False
    roots = {} if roots is None else roots
    for cwd in cwds:
        if cwd not in roots:
            roots[cwd] = layout.git_root(Path(cwd))
        root = roots[cwd]
        if root is None:
            continue
        seen_root = True
        url = origin_of(root)
        ident = normalise_url(url) if url else None
        if ident is not None:
            if ident in sc.exclude:
                return Identity(project.name, None, f"{ident} opted out in sync.exclude", excluded=True)
            return Identity(project.name, ident, f"origin {url}")
    why = "its repository has no usable origin URL" if seen_root else "no git repository found for its sessions"
    return Identity(project.name, None, f"not synced: {why} (map it in [sync.identities])")


def _own_files(project: Project) -> int:
    """How many memory files (the index, topic files) the folder's memory folder holds."""
    from memd.memfolder.folder import file_map

    try:
        if not project.memory_dir.is_dir():
            return 0
        return sum(1 for rel in file_map(project.memory_dir) if _synced(rel))
    except OSError:
        return 0


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a == b or os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _synced(rel: str) -> bool:
    from memd.sync.gitremote import synced

    return synced(rel)


def _home(project: Project, cwds: list[str], cache: dict[str, str]) -> str:
    """The projects/ folder whose memory the folder's sessions use (catch-up's own mapping,
    ``memd.transcripts.sessions.memory_project_for``): the newest session's cwd that is on this machine."""
    from memd.transcripts.sessions import memory_project_for

    root = project.dir.parent
    for cwd in cwds:
        home = memory_project_for(cwd, project.name, root, cache)
        if home != project.name or Path(cwd).is_dir():
            return home
    return project.name


def identify_all(projects: list[Project], config: Config, state: Any = None, *,
                 everyone: list[Project] | None = None, seen: dict[str, Any] | None = None,
                 writers: dict[str, str] | None = None, cwds_memo: dict[str, list[str]] | None = None
                 ) -> dict[str, Identity]:
    """Each of ``projects``' identity, decided among ``everyone`` (every folder under the same
    ``projects/``, listed when not given): see the module doc. ``seen`` is what each folder last
    shared (``gitremote.seen``), ``writers`` the user's choice per identity (``load_writers``);
    ``cwds_memo`` gets each folder's session cwds (the job's gates read them again)."""
    from memd.transcripts.sessions import project_cwds

    if not projects:
        return {}
    if everyone is None:
        everyone = layout.list_projects(projects[0].dir.parent.parent)
    folders = {p.name: p for p in everyone}
    folders.update((p.name, p) for p in projects)
    seen = seen or {}
    writers = writers or {}
    cache: dict[str, str] = {}
    roots: dict[str, Path | None] = {}
    cwds = {name: project_cwds(p, state) for name, p in folders.items()}
    if cwds_memo is not None:
        cwds_memo.update(cwds)
    homes = {name: _home(p, cwds[name], cache) for name, p in folders.items()}
    fed: dict[str, list[str]] = {}
    for name, home in homes.items():
        if home != name:
            fed.setdefault(home, []).extend(cwds[name])
    out: dict[str, Identity] = {}
    for name, p in folders.items():
        home = homes[name]
        if home != name:
            # a memory folder moved for every project (autoMemoryDirectory, the environment's overrides) is
            # the home's too: nothing of the folder's own
            shared = home in folders and _same_dir(folders[home].memory_dir, p.memory_dir)
            own = 0 if shared else _own_files(p)
            if not own:
                out[name] = Identity(name, None, f"not synced: its sessions' memory is in {home}'s memory folder "
                                     "(a git worktree or subfolder of that repository), which syncs it", home=home)
                continue
            base = _base(p, config, cwds[name] + fed.get(name, []), roots)
            if base.identity is None:
                out[name] = base
                continue
            out[name] = Identity(name, base.identity, base.source, home=home, writer=home, why_held=(
                f"held, not synced: its sessions' memory is in {home}'s memory folder (a git worktree or "
                f"subfolder of that repository); the {own} file(s) in its own memory folder are not loaded by "
                "Claude Code"), resolve=(
                f"move what you need into {home}'s memory folder, then remove {p.memory_dir}; or add "
                f'"{name}" to sync.exclude'))
            continue
        out[name] = _base(p, config, list(dict.fromkeys(cwds[name] + fed.get(name, []))), roots)
    groups: dict[str, list[str]] = {}
    for name, ident in out.items():
        if ident.syncs and ident.identity is not None:
            groups.setdefault(ident.identity, []).append(name)
    for identity, names in groups.items():
        if len(names) < 2:
            continue
        branch = branch_of(identity)

        def rank(n: str, identity: str = identity, branch: str = branch) -> tuple[bool, bool, bool, str]:
            row = seen.get(n)
            return (writers.get(identity) != n, not (isinstance(row, dict) and row.get("branch") == branch),
                    not _own_files(folders[n]), n)

        writer = min(names, key=rank)
        for n in names:
            if n == writer:
                continue
            i = out[n]
            row = seen.get(n)
            if not _own_files(folders[n]) and not (isinstance(row, dict) and row.get("branch") == branch):
                # nothing of its own to keep and never synced: a clone's memory folder still empty, a dead
                # worktree's folder whose cwd is gone; no rival, nothing to say until it holds a memory
                out[n] = Identity(n, None, f"not synced: {writer} syncs {identity} on this machine and this "
                                  "folder holds no memory of its own", writer=writer)
                continue
            out[n] = Identity(n, i.identity, i.source, writer=writer, why_held=(
                f"held, not synced: {writer} syncs {identity} on this machine (two memory folders of one "
                "repository, e.g. two clones of it; one writer per branch); this folder's memory stays here"),
                resolve=(f"`memd sync --writer {n}` makes this folder the one that syncs; or add \"{n}\" to "
                         "sync.exclude (its memory stays on this machine)"))
    _hold_nested(out, seen)
    return {p.name: out[p.name] for p in projects}


def _hold_nested(out: dict[str, Identity], seen: dict[str, Any]) -> None:
    """Two identities whose branches nest (``memory/notes`` and ``memory/notes/app``: git cannot hold a ref
    and another under it) cannot both sync: the one that shares its branch already (else the outer one)
    syncs, the other is held with the reason and how to resolve it (issue 33 #6; it was NotADirectoryError)."""
    branches = {n: i.branch for n, i in out.items() if i.syncs and i.branch}
    owners: dict[str, list[str]] = {}
    for n, b in branches.items():
        owners.setdefault(b, []).append(n)
    pairs = sorted({(min(n, m), max(n, m)) for m, c in branches.items()  # each branch's outer ones: its prefixes
                    for k in range(c.count("/")) for n in owners.get(c.rsplit("/", k + 1)[0], [])})
    for n, m in pairs:
        b, c = branches[n], branches[m]
        if not out[n].syncs or not out[m].syncs:
            continue
        shared = {k for k in (n, m) if isinstance(seen.get(k), dict) and seen[k].get("branch") == branches[k]}
        keep = next(iter(shared)) if len(shared) == 1 else (n if len(b) < len(c) else m)
        lose = m if keep == n else n
        i = out[lose]
        out[lose] = Identity(lose, i.identity, i.source, writer=keep, why_held=(
            f"held, not synced: its identity {i.identity} would sync on branch {branches[lose]}, and {keep} "
            f"syncs {out[keep].identity} on {branches[keep]}: git cannot hold a branch and another one under "
            "it"), resolve=f"give one of them another name in [sync.identities] (e.g. "
                            f"\"{(i.identity or '').replace('/', '-')}\" for {lose})")


def identify(project: Project, config: Config, state: Any = None) -> Identity:
    """One project's identity (``identify_all`` over its siblings)."""
    return identify_all([project], config, state)[project.name]


# --------------------------------------------------------------------------- the user's choice of writer


def _writers_path(state_dir: Path) -> Path:
    return state_dir / "sync" / "writers.json"


def load_writers(state_dir: Path) -> dict[str, str]:
    """The folder the user chose (``memd sync --writer``) per identity."""
    import json

    try:
        data = json.loads(_writers_path(state_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(data, dict) \
        else {}


def choose_writer(state_dir: Path, identity: str, project: str) -> None:
    import json

    from memd.store import atomic_write

    data = load_writers(state_dir)
    data[identity] = project
    atomic_write(_writers_path(state_dir), json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)
