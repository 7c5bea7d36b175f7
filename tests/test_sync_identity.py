"""Issue 21 #1: several Claude Code folders, one repository. Real git repositories (a linked worktree
made by `git worktree add`, a monorepo subfolder, two clones of one repository), machines with their own
HOME sharing a bare remote. Claude Code's rule (tests/realcc/test_memory_home.py): a worktree's or a
subfolder's sessions keep their transcripts under their own cwd's folder and their memory in the main
checkout's; a second clone has a memory folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from memd import layout
from memd.config import Config
from memd.jobs import JobContext
from memd.state import StateStore
from memd.sync import held
from memd.sync.job import run_sync
from memd.transcripts.scan import scan_project
from tests.plugins.sync import Machine, topic
from tests.test_sync_guards import _remote_names

ORIGIN = "https://github.com/me/app.git"  # the fake machines' git@github.com:me/app.git, as another URL


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def repo(path: Path, origin: str = ORIGIN) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "remote", "add", "origin", origin)
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


def folder(m: Machine, path: Path) -> Path:
    return m.claude / "projects" / layout.sanitize(os.path.realpath(path))


def session(m: Machine, cwd: Path) -> Path:
    """A Claude Code session started in cwd: its transcript under the cwd's own folder."""
    f = folder(m, cwd)
    f.mkdir(parents=True, exist_ok=True)
    rec = {"type": "user", "cwd": os.path.realpath(cwd), "sessionId": str(uuid.uuid4()), "message": {"content": "hi"}}
    (f / f"{uuid.uuid4()}.jsonl").write_text(json.dumps(rec) + "\n")
    return f


def memory(m: Machine, root: Path, files: dict[str, str]) -> Path:
    """What Claude Code keeps in the memory folder of the git root ``root``."""
    mem = folder(m, root) / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    for rel, body in files.items():
        (mem / rel).write_text(topic(rel.removesuffix(".md"), body), encoding="utf-8")
    return mem


def topics(mem: Path) -> set[str]:
    return {p.name for p in mem.glob("*.md") if p.name != "MEMORY.md"} if mem.is_dir() else set()


def remote_topics(m: Machine) -> set[str]:
    return {n.decode() for n in _remote_names(m) if n != b"MEMORY.md"}


def outcomes(m: Machine, **kw: Any) -> dict[str, Any]:
    return {o.project: o for o in m.sync(**kw).outcomes}


def cli(m: Machine, tmp_path: Path, *args: str, extra: str = "") -> list[str]:
    conf = tmp_path / f"{m.name}.toml"
    conf.write_text(f'[paths]\nstate_dir = "{m.state_dir}"\n[sync]\nremote = "{m.config.sync.remote}"\n'
                    f'machine = "{m.name}"\n{extra}')
    return [*args, "--claude-dir", str(m.claude), "--config", str(conf)]


@pytest.fixture
def desk(machines: Any) -> Machine:
    """Another machine that already shares two memories of github.com/me/app."""
    b: Machine = machines("mb")
    b.write("b1.md", topic("b1", "from the desk, one\n"))
    b.write("b2.md", topic("b2", "from the desk, two\n"))
    assert "sent" in b.outcome("app").message
    return b


@pytest.mark.parametrize("kind", ["worktree", "subfolder"])
def test_a_worktree_or_subfolder_folder_is_no_participant(kind: str, desk: Machine, machines: Any) -> None:
    a: Machine = machines("ma", repos=())
    main = repo(a.home / "src" / "app")
    if kind == "worktree":
        cwd = a.home / "src" / "app-feature"
        git(main, "worktree", "add", "-q", "-b", "feature", str(cwd))
        # the main checkout never had a session of its own: its memory folder is found through the worktree's
    else:
        cwd = main / "packages" / "api"
        cwd.mkdir(parents=True)
        session(a, main)
    own = session(a, cwd)
    mem = memory(a, main, {"a1.md": f"written by a {kind} session\n"})
    assert own != mem.parent
    out = outcomes(a)
    assert set(out) == {mem.parent.name}, out  # one participant: the memory folder Claude Code uses
    assert "sent" in out[mem.parent.name].message, out
    assert not (own / "memory").exists()  # no memory folder made where Claude Code keeps none
    assert topics(mem) == {"a1.md", "b1.md", "b2.md"}
    assert remote_topics(a) == {"a1.md", "b1.md", "b2.md"}
    quiet = a.sync().outcomes  # a second sync: nothing new on either side
    assert [o.outcome for o in quiet] == ["unchanged"], quiet
    desk.sync("app")
    assert topics(desk.mem()) == {"a1.md", "b1.md", "b2.md"}
    # a new memory from the worktree/subfolder session, and one from the desk, both arrive everywhere
    memory(a, main, {"a2.md": "later\n"})
    desk.write("b3.md", topic("b3", "the desk again\n"))
    desk.sync("app")
    a.sync()
    desk.sync("app")
    assert topics(mem) == topics(desk.mem()) == remote_topics(a) == {"a1.md", "a2.md", "b1.md", "b2.md", "b3.md"}
    # catch-up's scan maps the worktree's/subfolder's transcripts to the main checkout's memory folder;
    # identity read from that scanned state is the same
    with StateStore.open(a.state_dir) as state:
        for f in (own, mem.parent):
            if f.is_dir():
                scan_project(layout.project_for_folder(a.claude, f), state, Config(), now=time.time())
        assert [t.path.parent for t in state.transcripts(mem.parent.name) if t.path.parent == own] == [own]
        assert state.transcripts(own.name) == []
        from memd.sync.identity import identify_all

        idents = identify_all(layout.list_projects(a.claude), a.config, state)
        assert idents[mem.parent.name].identity == "github.com/me/app" and idents[own.name].identity is None
        # named on the command line, the worktree's folder says why it is not synced and where its memory is
        jc = JobContext(config=a.config, claude_dir=a.claude, state_dir=a.state_dir, state=state, log=a.events)
        res = run_sync(jc, [layout.project_for_folder(a.claude, own)], named=True)
    (o,) = res.outcomes
    assert o.outcome == "skipped" and mem.parent.name in o.message and "worktree or subfolder" in o.message, o
    assert not (own / "memory").exists()


def test_two_clones_have_one_writer(desk: Machine, machines: Any, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main as memd

    a: Machine = machines("ma", repos=())
    one, two = repo(a.home / "src" / "app"), repo(a.home / "src" / "app-copy")
    session(a, one)
    session(a, two)
    mem1 = memory(a, one, {"a1.md": "clone one's memory\n"})
    mem2 = memory(a, two, {"c2.md": "clone two's memory\n", "c3.md": "and more of it\n"})
    out = outcomes(a)
    first, second = out[mem1.parent.name], out[mem2.parent.name]
    assert "sent" in first.message, first
    assert second.outcome == "refused" and second.message.startswith("held"), second
    assert mem1.parent.name in second.message and f"--writer {mem2.parent.name}" in second.message, second
    assert remote_topics(a) == {"a1.md", "b1.md", "b2.md"}  # the desk's memory is never deleted
    assert topics(mem2) == {"c2.md", "c3.md"}  # the held clone's memory is left as it is
    for _ in range(2):  # again and again: never two writers on one branch
        a.sync()
        assert remote_topics(a) == {"a1.md", "b1.md", "b2.md"}
        assert topics(mem2) == {"c2.md", "c3.md"}
    # said in status and in --list, with the command that resolves it
    assert memd(cli(a, tmp_path, "status")) == 0
    text = capsys.readouterr().out
    assert f"sync: {mem2.parent.name}: held, not synced: {mem1.parent.name} syncs github.com/me/app" in text, text
    assert f"`memd sync --writer {mem2.parent.name}`" in text
    assert memd(cli(a, tmp_path, "sync", "--list")) == 0
    listed = capsys.readouterr().out
    row = next(ln for ln in listed.splitlines() if ln.startswith(mem2.parent.name))
    assert row.split()[-1] == "project" and "github.com/me/app" in row, listed
    # the user makes the second clone the writer: it merges with the branch as a newcomer (no common
    # base: nothing of the remote's counts as deleted), the first clone is held instead
    assert memd(cli(a, tmp_path, "sync", "--writer", mem2.parent.name)) == 0
    capsys.readouterr()
    out = outcomes(a)
    assert out[mem1.parent.name].outcome == "refused" and "held" in out[mem1.parent.name].message
    assert out[mem2.parent.name].outcome == "changed", out
    assert topics(mem2) == {"a1.md", "b1.md", "b2.md", "c2.md", "c3.md"}
    assert remote_topics(a) == {"a1.md", "b1.md", "b2.md", "c2.md", "c3.md"}
    assert topics(mem1) == {"a1.md", "b1.md", "b2.md"}  # as it was when it stopped writing
    # the first clone excluded: its hold is gone from status
    assert memd(cli(a, tmp_path, "sync", extra=f'exclude = ["{mem1.parent.name}"]\n')) == 0
    capsys.readouterr()
    assert held.status_lines(a.state_dir) == ""
    desk.sync("app")
    assert topics(desk.mem()) == {"a1.md", "b1.md", "b2.md", "c2.md", "c3.md"}


def test_memory_left_in_a_worktrees_own_folder_is_held_and_named(desk: Machine, machines: Any) -> None:
    """A worktree's own folder holding memory files (an older memd synced into it): Claude Code never
    loads them for its sessions, so they are not synced, and status says so."""
    a: Machine = machines("ma", repos=())
    main = repo(a.home / "src" / "app")
    wt = a.home / "src" / "app-feature"
    git(main, "worktree", "add", "-q", "-b", "feature", str(wt))
    session(a, main)
    own = session(a, wt)
    stale = memory(a, wt, {"old.md": "left here by an older memd\n"})
    assert stale.parent == own
    mem = memory(a, main, {"a1.md": "the real memory\n"})
    out = outcomes(a)
    assert "sent" in out[mem.parent.name].message
    o = out[own.name]
    assert o.outcome == "refused" and "not loaded by Claude Code" in o.message and str(stale) in o.message, o
    assert topics(stale) == {"old.md"} and remote_topics(a) == {"a1.md", "b1.md", "b2.md"}
    lines = held.status_lines(a.state_dir)
    assert f"sync: {own.name}: held, not synced: its sessions' memory is in {mem.parent.name}'s" in lines, lines


def test_a_second_clone_with_no_memory_yet_is_quiet_until_it_has_some(desk: Machine, machines: Any) -> None:
    """A fresh clone (Claude Code made its memory folder, empty) is no rival and no status line; the day
    its sessions write a memory it is held and named."""
    a: Machine = machines("ma", repos=())
    one, two = repo(a.home / "src" / "app"), repo(a.home / "src" / "zz-fresh-clone")
    session(a, one)
    session(a, two)
    mem1 = memory(a, one, {"a1.md": "clone one's memory\n"})
    mem2 = memory(a, two, {})
    out = outcomes(a)
    assert set(out) == {mem1.parent.name} and "sent" in out[mem1.parent.name].message, out
    assert topics(mem2) == set() and held.status_lines(a.state_dir) == ""
    memory(a, two, {"c2.md": "now it has one\n"})
    out = outcomes(a)
    assert out[mem2.parent.name].outcome == "refused" and "held" in out[mem2.parent.name].message, out
    assert mem2.parent.name in held.status_lines(a.state_dir)
    assert remote_topics(a) == {"a1.md", "b1.md", "b2.md"}


def test_a_writer_after_another_folder_synced_the_branch_deletes_nothing(desk: Machine, machines: Any) -> None:
    """Two clones that both synced the branch (each in its turn, as before issue 21 #1, or the writer
    switched back and forth): what this machine last shared is the other folder's, never a base for
    this one; the other folder's files are not deleted from the remote."""
    a: Machine = machines("ma", repos=())
    one, two = repo(a.home / "src" / "app"), repo(a.home / "src" / "app-copy")
    session(a, one)
    session(a, two)
    mem1 = memory(a, one, {"a1.md": "clone one's memory\n"})
    mem2 = memory(a, two, {"c2.md": "clone two's memory\n"})
    a.config.sync.exclude[:] = [mem2.parent.name]
    a.sync()  # clone one syncs
    a.config.sync.exclude[:] = [mem1.parent.name]
    a.sync()  # then clone two
    assert remote_topics(a) == {"a1.md", "b1.md", "b2.md", "c2.md"}
    a.config.sync.exclude[:] = []
    out = outcomes(a)  # clone one writes again (first by name), clone two is held
    assert out[mem2.parent.name].outcome == "refused", out
    assert remote_topics(a) == {"a1.md", "b1.md", "b2.md", "c2.md"}, out[mem1.parent.name]
    assert topics(mem1) == {"a1.md", "b1.md", "b2.md", "c2.md"}


def test_a_worktree_folder_under_a_moved_memory_folder_is_no_participant(desk: Machine, machines: Any) -> None:
    """With autoMemoryDirectory every folder's memory is the same folder: a worktree's folder shares the
    main checkout's memory, it holds none of its own, so it is neither synced nor held."""
    a: Machine = machines("ma", repos=())
    moved = a.home / "all-memory"
    moved.mkdir(parents=True)
    a.claude.mkdir(parents=True)
    (a.claude / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(moved)}))
    main = repo(a.home / "src" / "app")
    wt = a.home / "src" / "app-feature"
    git(main, "worktree", "add", "-q", "-b", "feature", str(wt))
    session(a, main)
    own = session(a, wt)
    (moved / "a1.md").write_text(topic("a1", "in the moved folder\n"), encoding="utf-8")
    out = outcomes(a)
    assert set(out) == {folder(a, main).name} and "sent" in out[folder(a, main).name].message, out
    assert held.status_lines(a.state_dir) == "" and not (own / "memory").exists()
    assert remote_topics(a) == {"a1.md", "b1.md", "b2.md"}


def test_two_identities_whose_branches_nest_hold_one_in_words(machines: Any) -> None:
    """Issue 33 #6: ``[sync.identities]`` naming one project ``notes`` and another ``notes/app``: git cannot
    hold ``memory/notes`` and ``memory/notes/app`` at once (it was NotADirectoryError at every sync of the
    second). The outer one syncs; the other is refused, held with its status line saying why and what to do,
    and syncs once it is renamed."""
    from memd.config import replace

    a: Machine = machines("ma", repos=("app", "lib"))
    app, lib = a.project("app").name, a.project("lib").name
    a.config = Config(sync=replace(a.config.sync, identities={app: "notes", lib: "notes/app"}))
    a.write("x.md", topic("x", "x\n"), key="app")
    a.write("y.md", topic("y", "y\n"), key="lib")
    for _ in range(2):
        outs = {o.project: o for o in a.sync().outcomes}
        assert outs[app].outcome in ("changed", "unchanged"), outs[app]
        assert outs[lib].outcome == "refused", outs[lib]
        assert "git cannot hold a branch and another one under it" in outs[lib].message, outs[lib]
        assert not outs[lib].error
    line = held.status_lines(a.state_dir)
    assert f"sync: {lib}: held, not synced: its identity notes/app" in line and '"notes-app"' in line, line
    a.config = Config(sync=replace(a.config.sync, identities={app: "notes", lib: "notes-app"}))
    outs = {o.project: o for o in a.sync().outcomes}
    assert outs[lib].outcome in ("changed", "unchanged") and "sent" in outs[lib].message, outs[lib]
    assert f"sync: {lib}:" not in held.status_lines(a.state_dir)
