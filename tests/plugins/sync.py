"""Sync test rig (issue 15): machines (a HOME, a Claude folder, a memd state each, the same
repositories at different paths) and real git remotes started by the test: a bare repository over
file:// and dulwich's smart-HTTP server on loopback. No network."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memd import layout
from memd.config import Config, SyncConfig
from memd.jobs import JobContext
from tests.plugins.daemon import Recorder

ORIGINS = {"app": "git@github.com:me/app.git", "lib": "https://github.com/me/lib"}


def topic(name: str, body: str, *, typ: str = "project") -> str:
    return f"---\nname: {name}\ndescription: about {name}\ntype: {typ}\n---\n\n{body}"


class Machine:
    def __init__(self, root: Path, name: str, remote: str, repos: tuple[str, ...] = ("app",), **sync: Any) -> None:
        self.name = name
        self.home = root / name / "home"
        self.claude = self.home / ".claude"
        self.state_dir = self.home / ".local" / "state" / "memd"
        self.events = Recorder()
        self.config = Config(sync=SyncConfig(remote=remote, machine=name, timeout_s=30.0, **sync))
        self.repos: dict[str, Path] = {}
        for i, key in enumerate(repos):
            # the same repository at a different path on each machine
            src = self.home / ("src" if name.endswith("a") else f"work/{name}/code") / f"{key}{i}"
            (src / ".git").mkdir(parents=True)
            (src / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGINS.get(key, key)}\n')
            folder = self.claude / "projects" / layout.sanitize(str(src))
            (folder / "memory").mkdir(parents=True)
            rec = {"type": "user", "cwd": str(src), "sessionId": str(uuid.uuid4()), "message": {"content": "hi"}}
            (folder / f"{uuid.uuid4()}.jsonl").write_text(json.dumps(rec) + "\n")
            self.repos[key] = src

    def project(self, key: str = "app") -> layout.Project:
        return layout.resolve_project(str(self.repos[key]), self.claude)

    def mem(self, key: str = "app") -> Path:
        return self.project(key).memory_dir

    def write(self, rel: str, text: str, key: str = "app") -> None:
        p = self.mem(key) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")

    def read(self, rel: str, key: str = "app") -> str | None:
        p = self.mem(key) / rel
        return p.read_text(encoding="utf-8") if p.exists() else None

    def topics(self, key: str = "app") -> dict[str, bytes]:
        from memd.memfolder.folder import file_map

        return {k: v for k, v in file_map(self.mem(key)).items() if k != "MEMORY.md" and not k.startswith("team/")}

    def sync(self, *keys: str, dry_run: bool = False, remote: str | None = None, **kw: Any) -> Any:
        from memd.state import StateStore
        from memd.sync.job import run_sync

        cfg = self.config if remote is None else Config(sync=SyncConfig(remote=remote, machine=self.name))
        projects = [self.project(k) for k in keys] if keys else layout.list_projects(self.claude)
        with StateStore.open(self.state_dir) as state:
            jc = JobContext(config=cfg, claude_dir=self.claude, state_dir=self.state_dir, state=state,
                            dry_run=dry_run, log=self.events)
            return run_sync(jc, projects, named=bool(keys), **kw)

    def outcome(self, *keys: str, **kw: Any) -> Any:
        res = self.sync(*keys, **kw)
        assert len(res.outcomes) == 1, res
        return res.outcomes[0]


def bare_remote(path: Path) -> Path:
    from dulwich.repo import Repo

    path.mkdir(parents=True)
    Repo.init_bare(str(path)).close()
    return path


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """git sees no config of the caller's (global or system)."""
    home = tmp_path / "githome"
    home.mkdir()
    cfg = home / "gitconfig"
    cfg.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_ASKPASS", "SSH_ASKPASS", "CLAUDE_CONFIG_DIR",
                 "CLAUDE_CODE_PROJECT_DIR_NAME", "CLAUDE_CODE_DISABLE_AUTO_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    return cfg


@pytest.fixture
def file_remote(tmp_path: Path, git_env: Path) -> str:
    return "file://" + str(bare_remote(tmp_path / "remote.git"))


class HttpRemote:
    """dulwich's smart-HTTP git server on loopback, optionally behind basic auth."""

    def __init__(self, repo_dir: Path, auth: tuple[str, str] | None = None) -> None:
        from wsgiref.simple_server import WSGIRequestHandler

        from dulwich.repo import Repo
        from dulwich.server import DictBackend
        from dulwich.web import WSGIServerLogger, make_server, make_wsgi_chain

        self.repo = Repo(str(repo_dir))
        app: Any = make_wsgi_chain(DictBackend({"/": self.repo}))  # with git's chunked and gzipped requests
        if auth is not None:
            app = _basic_auth(app, auth)

        class Quiet(WSGIRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

        self.server = make_server("127.0.0.1", 0, app, server_class=WSGIServerLogger, handler_class=Quiet)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
        self.repo.close()


def _basic_auth(app: Any, auth: tuple[str, str]) -> Any:
    import base64

    want = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()

    def wrapped(environ: dict[str, Any], start: Any) -> Any:
        if environ.get("HTTP_AUTHORIZATION") != want:
            start("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Length", "0")])
            return [b""]
        return app(environ, start)
    return wrapped


@pytest.fixture
def http_remote(tmp_path: Path, git_env: Path) -> Iterator[HttpRemote]:
    srv = HttpRemote(bare_remote(tmp_path / "http-remote.git"))
    yield srv
    srv.close()


@pytest.fixture
def machines(tmp_path: Path, file_remote: str) -> Callable[..., Machine]:
    def make(name: str, remote: str | None = None, **kw: Any) -> Machine:
        return Machine(tmp_path, name, file_remote if remote is None else remote, **kw)
    return make
