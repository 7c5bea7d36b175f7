"""Issue 34 #5: one project's failure is that project's outcome, never the command's. Every command that goes over
projects (`check`, `rebuild`, `status`, `scan`, `catchup` and `dream` over every project, `sync --all`) and
`forget`, run on a Claude folder where one project's memory folder holds a file whose name is not UTF-8 (and one
project's folder name is not UTF-8 either): no traceback, no "unexpected error", the other projects done."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.memory_folders import ROOT
from tests.plugins.sync import Machine, topic

BAD_FILE = b"caf\xe9.md"  # latin-1, not UTF-8
BAD_PROJECT = b"-home-me-caf\xe9"


def _write(path: bytes, text: str) -> None:
    with open(path, "wb") as f:
        f.write(text.encode("utf-8"))


def _index(n: int) -> str:
    return "# Memory\n" + "".join(f"- [T{i}](t{i}.md) — fact {i}\n" for i in range(n)) + "- [Gone](gone.md) — missing\n"


def _setup(m: Machine) -> dict[str, bytes]:
    """The machine's two synced projects: app (its memory also holds the badly named file) and lib; a third
    whose folder name is not UTF-8. Every index links a missing file (a rebuild or a repair changes it)."""
    mems = {"app": os.fsencode(m.mem("app")), "lib": os.fsencode(m.mem("lib"))}
    mems["bad"] = os.fsencode(m.claude / "projects") + b"/" + BAD_PROJECT + b"/memory"
    os.makedirs(mems["bad"])
    for mem in mems.values():
        for i in range(8):
            _write(mem + f"/t{i}.md".encode(), topic(f"t{i}", f"fact {i}\n"))
        _write(mem + b"/MEMORY.md", _index(8))
    _write(mems["app"] + b"/" + BAD_FILE, topic("cafe", "coffee at ten\n"))
    _write(mems["bad"] + b"/" + BAD_FILE, topic("cafe", "coffee at ten\n"))
    return mems


def _memd(m: Machine, conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMD_FAULT", "CLAUDE_"))}
    env.update(HOME=str(m.home), XDG_STATE_HOME=str(m.home / ".local" / "state"),
               XDG_CONFIG_HOME=str(m.home / ".config"), PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(m.claude), "--config", str(conf), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, errors="replace", timeout=180,
                          check=False)


@pytest.fixture
def rig(machines: Callable[..., Machine], tmp_path: Path) -> tuple[Machine, Path, dict[str, bytes]]:
    m = machines("ma", repos=("app", "lib"))
    mems = _setup(m)
    conf = tmp_path / "config.toml"
    conf.write_text(f'[paths]\nstate_dir = "{m.state_dir}"\n[sync]\nremote = "{m.config.sync.remote}"\n'
                    'machine = "ma"\n[dream]\nmin_sessions = 0\nrequire_idle = false\n')
    return m, conf, mems


def _clean(out: subprocess.CompletedProcess[str]) -> str:
    both = out.stdout + out.stderr
    assert "Traceback" not in both and "unexpected error" not in both, both
    assert "UnicodeEncodeError" not in both and "UnicodeDecodeError" not in both, both
    return both


def _repaired(mem: bytes) -> bool:
    with open(mem + b"/MEMORY.md", "rb") as f:
        return b"(gone.md)" not in f.read()


COMMANDS: dict[str, tuple[str, ...]] = {
    "check": ("check", "--all"),
    "check-json": ("check", "--all", "--format", "json"),
    "rebuild-dry": ("rebuild", "--all", "--dry-run"),
    "status": ("status", "--all"),
    "status-json": ("status", "--all", "--format", "json"),
    "scan": ("scan", "--all"),
    "catchup": ("catchup",),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_read_over_every_project_reports_each(rig: tuple[Machine, Path, dict[str, bytes]], name: str) -> None:
    m, conf, _mems = rig
    out = _memd(m, conf, *COMMANDS[name])
    both = _clean(out)
    assert out.returncode in (0, 1), both
    if name.startswith(("check", "status", "rebuild")):
        assert "-home-me-caf" in both and "app" in both and "lib" in both, both
    if name == "check":
        assert "and cannot be: its name is not UTF-8" in both and "[*] 4 fixable" not in both, both


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rebuild", "dream"])
def test_a_write_over_every_project_does_every_project(rig: tuple[Machine, Path, dict[str, bytes]], name: str) -> None:
    m, conf, mems = rig
    out = _memd(m, conf, *(("rebuild", "--all") if name == "rebuild" else ("dream", "--force")))
    both = _clean(out)
    assert all(_repaired(mem) for mem in mems.values()), both  # the projects holding the bad name too
    if name == "rebuild":
        assert "caf\\xe9.md is not indexed: its name is not UTF-8" in both, both  # the file left out, named
    assert os.path.exists(mems["app"] + b"/" + BAD_FILE)


@pytest.mark.slow
def test_sync_over_every_project_does_every_project(rig: tuple[Machine, Path, dict[str, bytes]]) -> None:
    m, conf, _mems = rig
    out = _memd(m, conf, "sync", "--all")
    both = _clean(out)
    assert out.returncode in (0, 1), both
    assert "app0: " in both and "lib1: " in both, both
    assert "a name that is not UTF-8" in both, both
    from memd.sync import gitremote

    repo: Any = gitremote.open_repo(m.state_dir)
    try:
        branches = {r.decode() for r in repo.refs}
    finally:
        repo.close()
    assert any("me/lib" in b for b in branches) and any("me/app" in b for b in branches), branches


@pytest.mark.slow
def test_forget_in_a_project_holding_a_bad_name(rig: tuple[Machine, Path, dict[str, bytes]]) -> None:
    m, conf, mems = rig
    assert _memd(m, conf, "rebuild", "--all").returncode in (0, 1)
    out = _memd(m, conf, "forget", os.fsdecode(mems["app"]), "--string", "coffee at ten", "--apply")
    both = _clean(out)
    assert out.returncode == 0, both
    with open(mems["app"] + b"/" + BAD_FILE, "rb") as f:
        assert b"coffee at ten" not in f.read()
