"""Issue 12, finding 6: `memd dream` / `memd catchup` exit 3 when nothing could run for a lock (held or
not writable), with the true reason; the state file's errors name what the system refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd.jobs import ProjectOutcome
from memd.jobs.runner import JobResult, job_lock
from tests.test_daemon_commands import memd


def _state_dir() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "memd"


@pytest.fixture
def project(claude_home: Path) -> Path:
    mem = claude_home / "projects" / "-home-u-app" / "memory"
    mem.mkdir(parents=True)
    (mem / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nA.\n")
    (mem / "MEMORY.md").write_text("- [A](a.md) — a\n")
    return mem


def test_the_job_lock_held_is_not_run_exit_3(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with job_lock(_state_dir()):
        for job in ("dream", "catchup"):
            code, out, err = memd(capsys, job, "-home-u-app", "--force" if job == "dream" else "--dry-run")
            assert code == 3, (job, out, err)
            assert "not run: another memd job is running" in err


def test_a_job_lock_that_cannot_be_written_is_not_run_exit_3(project: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (_state_dir() / "jobs.lock").mkdir(parents=True)  # not a file: it cannot be opened for writing
    code, _, err = memd(capsys, "dream", "-home-u-app", "--force")
    assert code == 3 and "not run: cannot write the job lock (is a directory)" in err


@pytest.fixture
def unwritable(project: Path) -> Iterator[Path]:
    """The memory folder made unwritable: immutable as root (root ignores modes), read-only otherwise."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(project)],
                                                            capture_output=True).returncode:
            pytest.skip("chattr +i is not supported here")
        try:
            yield project
        finally:
            subprocess.run(["chattr", "-i", str(project)], capture_output=True)
    else:
        project.chmod(0o500)
        try:
            yield project
        finally:
            project.chmod(0o755)


def test_a_consolidate_lock_that_cannot_be_written_is_not_run_exit_3(
        unwritable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = memd(capsys, "dream", "-home-u-app", "--force")
    assert code == 3, out
    assert "-home-u-app: not run (lock: cannot write the lock (" in out


def test_exit_codes_of_a_job_result() -> None:
    from memd.commands._jobrun import exit_code

    ok = ProjectOutcome("a", "changed")
    assert exit_code(JobResult("dream", [ok])) == 0
    assert exit_code(JobResult("dream", [ok], {"b": "lock: held by pid 9"}, locked={"b": False})) == 0
    assert exit_code(JobResult("dream", [ok], {"b": "lock: cannot write"}, locked={"b": True})) == 1
    assert exit_code(JobResult("dream", [], {"b": "lock: held by pid 9"}, locked={"b": False})) == 3
    assert exit_code(JobResult("dream", [], {"b": "min_sessions: 0"})) == 0  # a gate is not a failure
    assert exit_code(JobResult("dream", [ProjectOutcome("a", "partial")])) == 1


def test_the_state_file_under_a_file_size_limit_says_so(tmp_path: Path) -> None:
    code = ("import resource, sys\nfrom pathlib import Path\nfrom memd.state import StateStore\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))\n"
            "try:\n    StateStore.open(Path(sys.argv[1]))\nexcept Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "state")], capture_output=True, text=True,
                         timeout=60).stdout
    assert "cannot open the state file: file too large for this process's file-size limit" in out, out
    assert "ulimit -f: 20,000 bytes" in out
