"""Issue 12, finding 4: a write that fails for a fault (no space, an immutable file) is dropped with its
true reason, the index is rebuilt from what landed (never a link to a file that was not written), and
the run is partial or failed, never "changed"; a real no-clobber conflict keeps its own words."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import store
from memd.core import lint
from memd.jobs.dream import dream_project
from memd.jobs.runner import run_job
from memd.layout import Project
from memd.memfolder.folder import read_folder
from tests.plugins.stub_api import Reply
from tests.test_model_jobs import Env, dup_folder, topic, tree
from tests.test_model_jobs import env as env

LANG = topic("Lang", "speaks French", "The user speaks French.", "user")


@pytest.fixture
def faults() -> Iterator[None]:
    yield
    store.set_faults("")


def _script_new_file_and_edit(env: Env) -> None:
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/user_lang.md", file_text=LANG),
                       s.memory("str_replace", path="/memories/project_deploy.md", old_str="Fridays.",
                                new_str="Fridays (since 2026-03-01)."),
                       s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.message(s.text("done")))


def _no_dangling_link(p: Project) -> None:
    found = lint.lint(read_folder(p.memory_dir))
    assert not [f for f in found if f.code == "MEM005"], found
    assert not [n for n in tree(p.memory_dir) if ".memd-" in n]


def test_no_space_for_a_new_file_leaves_no_link_to_it_and_the_run_is_partial(env: Env, faults: None) -> None:
    p = dup_folder(env)
    _script_new_file_and_edit(env)
    store.set_faults("store.write@user_lang.md=ENOSPC")
    result = run_job("dream", env.jc(force=True), [p])
    out = result.outcomes[0]
    assert out.outcome == "partial", out
    assert result.failed  # a command exits 1
    assert "user_lang.md: not written: no space left on device" in out.message
    assert "changed meanwhile" not in out.message and "someone else" not in out.message
    mem = tree(p.memory_dir)
    assert "user_lang.md" not in mem and "user_lang.md" not in mem["MEMORY.md"]
    assert "since 2026-03-01" in mem["project_deploy.md"]  # what could land, landed
    assert "feedback_tabs_2.md" in mem and "(feedback_tabs_2.md)" in mem["MEMORY.md"]  # its deletion skipped
    _no_dangling_link(p)
    # the run log says the same
    row = env.state.runs(project=p.name, limit=1)[0]
    assert row.outcome == "partial" and "no space left on device" in row.summary
    # the fault gone, the next run completes
    store.set_faults("")
    _script_new_file_and_edit(env)
    assert dream_project(env.jc(force=True), p).outcome == "changed"
    assert "(user_lang.md)" in (p.memory_dir / "MEMORY.md").read_text()
    _no_dangling_link(p)


def test_every_write_failing_is_a_failed_run_that_changed_nothing(env: Env, faults: None) -> None:
    p = dup_folder(env)
    before = tree(p.memory_dir)
    _script_new_file_and_edit(env)
    store.set_faults("store.write=EACCES")
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "failed", out
    assert "not written: permission denied" in out.message
    assert tree(p.memory_dir) == before


def test_a_conflict_is_still_called_a_conflict(env: Env) -> None:
    p = dup_folder(env)
    theirs = topic("Deploy", "deploy on Fridays", "Deploys moved to Mondays (said today).", "project")
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="Fridays.",
                                new_str="Fridays (since 2026-03-01).")),
             Reply(body=s.message(s.text("done")),
                   before=lambda: (p.memory_dir / "project_deploy.md").write_text(theirs)))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "unchanged", out  # nothing of the run landed, and that is not a fault
    assert "project_deploy.md: written by someone else since staging; kept theirs" in out.message
    assert (p.memory_dir / "project_deploy.md").read_text() == theirs


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_an_immutable_file_is_named_as_such(env: Env) -> None:
    p = dup_folder(env)
    target = p.memory_dir / "project_deploy.md"
    if os.geteuid() != 0 or not _chattr("+i", target):
        pytest.skip("chattr +i needs root and a file system that supports it")
    try:
        _script_new_file_and_edit(env)
        out = dream_project(env.jc(force=True), p)
    finally:
        _chattr("-i", target)
    assert out.outcome == "partial", out
    assert "project_deploy.md: not written: operation not permitted (the file or its folder is immutable" \
        in out.message
    _no_dangling_link(p)


@contextlib.contextmanager
def _full_tmpfs(where: Path) -> Iterator[None]:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_real_full_disk_changes_nothing_and_says_so(env: Env) -> None:
    p = dup_folder(env)
    files = tree(p.memory_dir)
    shutil.rmtree(p.memory_dir)
    with _full_tmpfs(p.memory_dir):
        env.memory(p, files)
        with contextlib.suppress(OSError), open(p.memory_dir / ".filler", "wb") as f:
            while True:
                f.write(b"x" * 4096)
                f.flush()
        before = tree(p.memory_dir)
        _script_new_file_and_edit(env)
        out = dream_project(env.jc(force=True), p)
        assert out.outcome == "failed", out
        assert "no space left on device" in out.message
        assert tree(p.memory_dir) == before
        os.unlink(p.memory_dir / ".filler")  # the fault goes: the next run completes
        _script_new_file_and_edit(env)
        assert dream_project(env.jc(force=True), p).outcome == "changed"
        _no_dangling_link(p)
