"""Every memd command shown in README.md's "Using it" block, run as a new user would, in a sandbox (its
own HOME, a small Claude folder, the working folder a project's): no traceback, and an exit code the docs
name (0 ok, 1 findings or not done, 2 usage or configuration, 3 not run: a lock). Issue 25."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from memd import layout
from tests.conftest import ROOT

DOCUMENTED = {0, 1, 2, 3}


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Using it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        cmd = line.split("#", 1)[0].strip()
        for part in cmd.split("&&"):
            part = part.strip()
            if part.startswith("memd "):
                out.append(part)
    return out


def test_the_block_is_read() -> None:
    cmds = readme_commands()
    assert "memd check --all" in cmds and "memd uninstall" in cmds and len(cmds) >= 10


@pytest.mark.parametrize("command", readme_commands())
def test_a_readme_command_runs_as_documented(command: str, claude_home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work" / "app"
    work.mkdir(parents=True)
    mem = claude_home / "projects" / layout.folder_for_cwd(work) / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("# Memory\n- [A](a.md) — the a memory\n- [Gone](gone.md) — old notes\n")
    (mem / "a.md").write_text("---\nname: A\ndescription: the a memory\ntype: user\n---\n\nbody\n")
    env = dict(os.environ)
    env.pop("ANTHROPIC_API_KEY", None)
    argv = [sys.executable, "-m", "memd", *shlex.split(command)[1:]]
    follow = "-f" in argv
    try:
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=3 if follow else 120,
                              check=False)
    except subprocess.TimeoutExpired as e:
        assert follow, f"{command} did not finish"
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        assert "Traceback" not in err
        return
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.returncode in DOCUMENTED, (command, done.returncode, done.stdout[-500:], done.stderr[-500:])
    if done.returncode == 2:  # a usage or configuration error says what is wrong, in words
        assert re.search(r"\w{3,}", done.stderr), command
