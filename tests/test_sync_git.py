"""Issue 21: the system git as sync runs it: a server hook's refusal is reported in its own words,
and nothing git started outlives a timeout. Local bare remotes and a stand-in git; no network."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from memd.sync import gitremote
from tests.plugins.sync import topic


def test_a_push_refused_by_a_server_hook_says_what_the_server_said(machines: Any) -> None:
    a = machines("ma")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")  # the remote is memd's now
    hooks = Path(a.config.sync.remote.removeprefix("file://")) / "hooks"
    hook = hooks / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'quota exceeded for user me: 1 GB' >&2\nexit 1\n")
    hook.chmod(0o755)
    a.write("y.md", topic("y", "y\n"))
    out = a.outcome("app")
    assert out.outcome == "failed" and out.error == "hook", out
    assert "quota exceeded for user me" in out.message and "other machines" not in out.message, out
    assert not a.events.named("sync.push_rejected")  # no retry: a hook says the same thing again


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: it only waits for its parent to read its status
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return True


def test_git_and_its_helpers_are_reaped_after_a_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A git whose helper (ssh, git-remote-https) hangs: after the timeout nothing of it is left."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "helper.pid"
    fake = bindir / "git"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(gitremote.SyncError) as e:
        gitremote.git(tmp_path / "state", ["fetch", "x"], timeout=1.0)
    assert e.value.kind == "timeout"
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(pid)
    if alive:
        subprocess.run(["kill", "-9", str(pid)], check=False)
    assert not alive, "git's helper outlived the timeout"


def test_a_remote_branch_pointing_at_a_tree_fails_in_words(machines: Any) -> None:
    """Issue 33 #6: a remote ref written to point at a tree (git's own porcelain refuses it; a packed-refs
    edit or another tool does not). Both a machine that shared the branch and one new to it end ``failed``
    with the reason in words (it was AttributeError on the new one and a bare ``AssertionError:`` on the
    other), nothing local touched, and the other projects' sync goes on."""
    import re

    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.sync("app")
    where = Path(a.config.sync.remote.removeprefix("file://"))
    branch = "memory/github.com/me/app"
    g = ["git", "-C", str(where)]
    tree = subprocess.run([*g, "rev-parse", f"{branch}^{{tree}}"], capture_output=True, text=True,
                          check=True).stdout.strip()
    subprocess.run([*g, "pack-refs", "--all"], check=True)
    packed = where / "packed-refs"
    packed.write_text(re.sub(rf"^[0-9a-f]{{40}} refs/heads/{re.escape(branch)}$", f"{tree} refs/heads/{branch}",
                             packed.read_text(), flags=re.M))
    before = a.read("x.md")
    for m in (b, a):
        out = m.outcome("app")
        assert out.outcome == "failed" and out.error == "corrupt", out
        assert f"the remote's branch {branch} points at a tree, not a commit" in out.message, out
    assert a.read("x.md") == before and b.read("x.md") is None
