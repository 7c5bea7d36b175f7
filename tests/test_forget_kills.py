"""Issue 34 #3 and #4: a killed `memd forget` (SIGKILL at named points inside its writes, dulwich's own lock-file
writes included, and at random moments) never leaves the text in history for good. The next forget (the same
one run again, another one, or `--finish`) finishes what the killed one started: no dulwich lock wedges it, no
object of the history holds the text, no file of memd's is left in the memory folder; while it is unfinished,
`memd status` says so."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memd import history
from memd.config import Config
from memd.core.rebuild import REPAIR
from memd.layout import Project
from memd.maintenance import rebuild_project
from tests.plugins.memory_folders import ROOT

SECRET = "ghp_" + "Zq8RkT2mLw9XcV4bN7pQ1sJ6hY3uE5aD0fGi"  # built at run time: no secret literal in the repo
NAME = "-home-me-app"


def _topic(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: the {name} memory\ntype: reference\n---\n\n{body}\n"


def _setup(home: Path) -> tuple[Path, Path]:
    """A project whose secret sits in a topic file and in three history commits."""
    mem = home / ".claude" / "projects" / NAME / "memory"
    mem.mkdir(parents=True)
    project = Project(NAME, mem.parent, mem)
    state = home / ".local" / "state" / "memd"
    (mem / "MEMORY.md").write_text("# Memory\n")
    (mem / "deploy.md").write_text(_topic("deploy", "CI on Buildkite."))
    assert rebuild_project(project, Config(), state, dry_run=False, mode=REPAIR).written
    (mem / "token.md").write_text(_topic("token", f"the token is {SECRET} (rotate yearly)"))
    assert rebuild_project(project, Config(), state, dry_run=False, mode=REPAIR).written
    (mem / "notes.md").write_text(_topic("notes", f"see token.md; {SECRET} again"))
    assert rebuild_project(project, Config(), state, dry_run=False, mode=REPAIR).written
    return mem, state


def _env(home: Path, fault: str = "") -> dict[str, str]:
    e = dict(os.environ)
    e.update(HOME=str(home), XDG_STATE_HOME=str(home / ".local" / "state"), XDG_CONFIG_HOME=str(home / ".config"))
    e.pop("MEMD_FAULT", None)
    if fault:
        e["MEMD_FAULT"] = fault
    return e


def _cmd(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "memd", "--claude-dir", str(home / ".claude"), *args]


def _memd(home: Path, *args: str, fault: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(home, *args), cwd=ROOT, env=_env(home, fault), capture_output=True, text=True,
                          timeout=120, check=False)


def _objects_holding(state: Path, needle: bytes) -> int:
    from dulwich.repo import Repo

    repo = Repo(str(history.repo_dir(state, NAME)))
    try:
        n = 0
        for sha in repo.object_store:
            obj = repo[sha]
            n += needle in (getattr(obj, "data", b"") + getattr(obj, "message", b""))
        return n
    finally:
        repo.close()


def _locks(state: Path) -> list[str]:
    root = history.repo_dir(state, NAME)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.lock"))


def _memd_files(mem: Path) -> list[str]:
    return sorted(p.name for p in mem.rglob("*") if p.name.startswith(".memd-"))


def _check_finished(home: Path, mem: Path, state: Path, out: subprocess.CompletedProcess[str], why: str) -> None:
    assert out.returncode == 0, f"{why}: {out.stdout}{out.stderr}"
    assert "FileLocked" not in out.stdout + out.stderr, why
    assert _locks(state) == [], why
    assert _objects_holding(state, SECRET.encode()) == 0, f"{why}: the history still holds the text"
    assert all(SECRET not in p.read_text() for p in mem.glob("*.md")), why
    assert _memd_files(mem) == [], f"{why}: memd's files left in the memory folder"
    status = _memd(home, "status")
    assert "forget" not in status.stdout.lower() or "incomplete" not in status.stdout, status.stdout
    assert (mem / "MEMORY.md").is_file() and history.log(state, NAME, limit=5)


# Named points: the 3rd ref write is the rewrite's branch move (after the snapshot's and the run's own), the
# n-th object writes land in the snapshot, the run and the rewrite; forget's own points between its stages; a
# memory file half written (its temp file left in the memory folder).
POINTS = ["history.gitfile_write@ref:3", "history.gitfile_close@ref:3", "history.gitfile_write@ref:1",
          "history.gitfile_write@object:2", "history.gitfile_write@object:9", "forget.after_live",
          "forget.after_objects", "forget.after_ref", "store.before_rename@token.md"]


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_a_forget_killed_at_a_named_point_is_finished_by_the_next(tmp_path: Path, point: str) -> None:
    home = tmp_path / "home"
    mem, state = _setup(home)
    killed = _memd(home, "forget", NAME, "--string", SECRET, "--apply", fault=point)
    assert killed.returncode == -signal.SIGKILL, f"{point} never hit: {killed.stdout}{killed.stderr}"
    status = _memd(home, "status")
    assert f"forget: {NAME}: incomplete" in status.stdout, status.stdout
    assert SECRET not in status.stdout
    again = _memd(home, "forget", NAME, "--string", SECRET, "--apply")
    _check_finished(home, mem, state, again, point)


@pytest.mark.slow
def test_another_forget_or_finish_completes_a_killed_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mem, state = _setup(home)
    killed = _memd(home, "forget", NAME, "--string", SECRET, "--apply", fault="history.gitfile_write@ref:3")
    assert killed.returncode == -signal.SIGKILL
    assert _locks(state) == ["refs/heads/main.lock"]  # what the issue found: the branch's lock left behind
    other = _memd(home, "forget", NAME, "--string", "Buildkite", "--apply")
    _check_finished(home, mem, state, other, "another forget")
    assert "finished a forget that was interrupted" in other.stdout, other.stdout
    assert _objects_holding(state, b"Buildkite") == 0

    home2 = tmp_path / "home2"
    mem2, state2 = _setup(home2)
    killed = _memd(home2, "forget", NAME, "--secrets", "--apply", fault="forget.after_ref")
    assert killed.returncode == -signal.SIGKILL
    dry = _memd(home2, "forget", NAME, "--string", "Buildkite")
    assert "interrupted" in dry.stdout and "dry run" in dry.stdout, dry.stdout
    done = _memd(home2, "forget", NAME, "--finish")
    _check_finished(home2, mem2, state2, done, "--finish")
    assert "finished a forget that was interrupted" in done.stdout, done.stdout
    assert _memd(home2, "forget", NAME, "--finish").stdout.strip() == "no forget of this project is unfinished"


@pytest.mark.slow
def test_forgets_killed_at_random_moments_are_finished_by_the_next(tmp_path: Path) -> None:
    rng = random.Random(34)
    home = tmp_path / "timing"
    _setup(home)
    t0 = time.monotonic()
    assert _memd(home, "forget", NAME, "--string", SECRET, "--apply").returncode == 0
    took = time.monotonic() - t0
    killed = 0
    for n in range(4):
        home = tmp_path / f"t{n}"
        mem, state = _setup(home)
        p = subprocess.Popen(_cmd(home, "forget", NAME, "--string", SECRET, "--apply"), cwd=ROOT, env=_env(home),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0) * took)
        p.send_signal(signal.SIGKILL)
        killed += p.wait() == -signal.SIGKILL
        again = _memd(home, "forget", NAME, "--string", SECRET, "--apply")
        _check_finished(home, mem, state, again, f"random kill {n}")
    assert killed >= 2
