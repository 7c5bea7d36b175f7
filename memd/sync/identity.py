"""Which local folders are "the same project" on every machine (the I/O edge).

The same repository sits at different paths on different machines, so Claude Code's folder names
differ. A project's identity is its repository's normalised ``origin`` URL: the git root comes
from the transcripts' ``cwd`` (the state's record of them, else the transcripts themselves, read
only as far as the first ``cwd``), its ``origin`` from the repository's config. An explicit name in
``[sync.identities]`` wins. A project with neither is not synced. A local path as ``origin`` is no
identity (it differs between machines).
"""

from __future__ import annotations

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

    @property
    def branch(self) -> str | None:
        return branch_of(self.identity) if self.identity else None


def identify(project: Project, config: Config, state: Any = None) -> Identity:
    """The project's identity (see the module doc)."""
    sc = config.sync
    if project.name in sc.exclude:
        return Identity(project.name, None, "opted out in sync.exclude", excluded=True)
    mapped = sc.identities.get(project.name)
    if mapped:
        return Identity(project.name, mapped.strip().lower(), "config")
    seen_root = False
    from memd.transcripts.sessions import project_cwds

    for cwd in project_cwds(project, state):
        root = layout.git_root(Path(cwd))
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
