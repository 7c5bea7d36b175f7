"""`memd forget` (issue 22): a secret in a topic file and in three history commits is gone from every
commit and the file; undo of older runs still works."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from memd import history
from memd.config import Config
from memd.core.rebuild import REPAIR
from memd.layout import Project
from memd.maintenance import rebuild_project

Cli = Callable[..., subprocess.CompletedProcess[str]]
SECRET = "ghp_" + "Zq8RkT2mLw9XcV4bN7pQ1sJ6hY3uE5aD0fGi"  # built at run time: no secret literal in the repo


def _topic(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: the {name} memory\ntype: reference\n---\n\n{body}\n"


def _all_objects(state: Path, project: str) -> list[bytes]:
    from dulwich.repo import Repo

    repo = Repo(str(history.repo_dir(state, project)))
    try:
        out = []
        for sha in repo.object_store:
            obj = repo[sha]
            out.append(getattr(obj, "data", b"") + getattr(obj, "message", b""))
        return out
    finally:
        repo.close()


def test_forget_takes_a_secret_out_of_the_file_and_every_commit(claude_home: Path, memd_cli: Cli) -> None:
    mem = claude_home / "projects" / "-home-me-app" / "memory"
    mem.mkdir(parents=True)
    project = Project("-home-me-app", mem.parent, mem)
    state = claude_home.parent / ".local" / "state" / "memd"
    (mem / "MEMORY.md").write_text("# Memory\n")
    (mem / "deploy.md").write_text(_topic("deploy", "CI on Buildkite."))
    assert rebuild_project(project, Config(), state, dry_run=False, mode=REPAIR).written  # run 1: indexes deploy
    (mem / "token.md").write_text(_topic("token", f"the token is {SECRET} (rotate yearly)"))
    assert rebuild_project(project, Config(), state, dry_run=False, mode=REPAIR).written  # run 2: the secret in
    (mem / "notes.md").write_text(_topic("notes", "nothing secret"))
    assert rebuild_project(project, Config(), state, dry_run=False, mode=REPAIR).written  # run 3: still there
    assert any(SECRET.encode() in o for o in _all_objects(state, project.name))
    runs_before = [r.run for r in history.list_runs(state, project.name)]

    dry = memd_cli("forget", "-home-me-app", "--string", SECRET)
    assert dry.returncode == 0, dry.stderr
    assert "would be taken out of token.md" in dry.stdout and "dry run" in dry.stdout
    assert SECRET in (mem / "token.md").read_text()

    done = memd_cli("forget", "-home-me-app", "--secrets", "--apply")
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in (mem / "token.md").read_text() and "[forgotten]" in (mem / "token.md").read_text()
    assert "(rotate yearly)" in (mem / "token.md").read_text()
    objects = _all_objects(state, project.name)
    assert not any(SECRET.encode() in o for o in objects), "an object of the history still holds it"
    runs_after = [r.run for r in history.list_runs(state, project.name)]
    assert runs_after[1:] == runs_before and runs_after[0].startswith("forget-")
    # undo of an older run still works on the rewritten history: run 3 added notes.md
    undo = memd_cli("undo", "-home-me-app", runs_before[0])
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert "notes.md" not in (mem / "MEMORY.md").read_text()
    assert not any(SECRET.encode() in o for o in _all_objects(state, project.name))
    again = memd_cli("forget", "-home-me-app", "--string", SECRET)
    assert "nothing to forget" in again.stdout


def test_forget_refuses_bad_input_in_words(claude_home: Path, memd_cli: Cli) -> None:
    (claude_home / "projects" / "-home-p" / "memory").mkdir(parents=True)
    out = memd_cli("forget", "-home-p", "--pattern", "(unclosed")
    assert out.returncode == 2 and "not a regular expression" in out.stderr and "Traceback" not in out.stderr
    out = memd_cli("forget", "-home-p")
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_forget_rewrites_the_sync_conflict_records_that_hold_it(claude_home: Path, memd_cli: Cli) -> None:
    """A conflict sync kept for the dream stores both versions in memd's state: forget reaches them too."""
    from memd.sync import evidence

    mem = claude_home / "projects" / "-home-me-app" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("# Memory\n- [Deploy](deploy.md) — CI\n")
    (mem / "deploy.md").write_text(_topic("deploy", "CI on Buildkite."))
    state = claude_home.parent / ".local" / "state" / "memd"
    other = _topic("deploy", f"CI pushes with {SECRET}.")
    evidence.record(state, "-home-me-app", [evidence.Conflict(
        id=evidence.conflict_id("deploy.md", b"x", other.encode()), project="-home-me-app", file="deploy.md",
        local=_topic("deploy", "CI on Buildkite."), remote=other, base=None, machine="laptop",
        remote_commit="0" * 40, at=0.0)])
    dry = memd_cli("forget", "-home-me-app", "--string", SECRET)
    assert "sync conflict records (memd's state): 1 hold it; would be rewritten" in dry.stdout, dry.stdout
    assert "dry run" in dry.stdout and SECRET in evidence.load(state, "-home-me-app")[0].remote
    done = memd_cli("forget", "-home-me-app", "--string", SECRET, "--apply")
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = evidence.load(state, "-home-me-app")
    assert SECRET not in row.remote and "CI pushes with [forgotten]." in row.remote
    assert SECRET not in (state / "sync" / "conflicts" / "-home-me-app.json").read_text()
