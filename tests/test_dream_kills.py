"""Issue 34 #4: a dream SIGKILLed while it holds Claude Code's ``memory/.consolidate-lock`` (at named points inside
its writes, and at random moments) must not leave the lock as the dead process left it. The next dream (or the
daemon's start) gives the lock back as a failed run does (facts.md §1: the mtime rolled back, the body the
holder it had; no lock when there was none), and leaves no file of memd's in the memory folder."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugins.memory_folders import ROOT

NAME = "-home-me-app"
LOCK = ".consolidate-lock"


def _topic(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: the {name} memory\ntype: reference\n---\n\n{body}\n"


def _setup(home: Path, *, claude_lock: bool) -> tuple[Path, tuple[str, float] | None]:
    """A memory folder whose index links a missing file and misses two topics (the keyless dream repairs
    it); with ``claude_lock``, Claude Code's own lock from a consolidation three days ago."""
    mem = home / ".claude" / "projects" / NAME / "memory"
    mem.mkdir(parents=True)
    lines = [f"- [Topic {i}](topic_{i}.md) — fact {i}" for i in range(10)]
    (mem / "MEMORY.md").write_text("# Memory\n" + "\n".join(lines) + "\n- [Gone](gone.md) — a file that is not there\n")
    for i in range(12):
        (mem / f"topic_{i}.md").write_text(_topic(f"topic_{i}", f"fact {i} " * 40))
    if not claude_lock:
        return mem, None
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (mem / LOCK).write_text(dead)
    then = time.time() - 3 * 86400
    os.utime(mem / LOCK, (then, then))
    return mem, (dead, then)


def _env(home: Path, fault: str = "") -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMD_FAULT", "CLAUDE_"))}
    e.update(HOME=str(home), XDG_STATE_HOME=str(home / ".local" / "state"), XDG_CONFIG_HOME=str(home / ".config"))
    if fault:
        e["MEMD_FAULT"] = fault
    return e


def _cmd(home: Path) -> list[str]:
    return [sys.executable, "-m", "memd", "--claude-dir", str(home / ".claude"), "dream", NAME, "--force"]


def _lock_state(mem: Path) -> tuple[str, float] | None:
    try:
        return (mem / LOCK).read_text(), os.stat(mem / LOCK).st_mtime
    except FileNotFoundError:
        return None


def _check_next_run(home: Path, mem: Path, before: tuple[str, float] | None, why: str) -> None:
    again = subprocess.run(_cmd(home), cwd=ROOT, env=_env(home), capture_output=True, text=True, timeout=120,
                           check=False)
    assert again.returncode == 0, f"{why}: {again.stdout}{again.stderr}"
    after = _lock_state(mem)
    if before is None:
        assert after is None, f"{why}: a lock Claude Code never had is left: {after}"
    else:
        assert after is not None and after[0] == before[0], f"{why}: the lock's holder is {after}, not {before}"
        assert abs(after[1] - before[1]) < 1e-3, f"{why}: the lock's mtime (last consolidation) moved: {after}"
    left = sorted(p.name for p in mem.rglob(".memd-*"))
    assert left == [], f"{why}: memd's files left in the memory folder: {left}"
    assert "gone.md" not in (mem / "MEMORY.md").read_text(), why  # the repair did happen


POINTS = ["history.after_objects:1", "history.after_ref:1", "store.before_rename@MEMORY.md",
          "history.gitfile_write@object:2"]


@pytest.mark.slow
@pytest.mark.parametrize("claude_lock", [False, True], ids=["no-lock-before", "claude-lock-before"])
@pytest.mark.parametrize("point", POINTS)
def test_a_dream_killed_holding_the_lock_gives_it_back_at_the_next(tmp_path: Path, point: str,
                                                                   claude_lock: bool) -> None:
    home = tmp_path / "home"
    mem, before = _setup(home, claude_lock=claude_lock)
    killed = subprocess.run(_cmd(home), cwd=ROOT, env=_env(home, point), capture_output=True, text=True,
                            timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL, f"{point} never hit: {killed.stdout}{killed.stderr}"
    left = _lock_state(mem)
    assert left is not None and left[0] != (before or ("",))[0]  # what the issue found: the dead dream's pid
    _check_next_run(home, mem, before, point)


@pytest.mark.slow
def test_dreams_killed_at_random_moments_leave_the_lock_as_claude_code_expects(tmp_path: Path) -> None:
    rng = random.Random(34)
    home = tmp_path / "timing"
    _setup(home, claude_lock=False)
    t0 = time.monotonic()
    assert subprocess.run(_cmd(home), cwd=ROOT, env=_env(home), capture_output=True, timeout=120,
                          check=False).returncode == 0
    took = time.monotonic() - t0
    holding = 0
    for n in range(5):
        home = tmp_path / f"t{n}"
        mem, before = _setup(home, claude_lock=n % 2 == 1)
        p = subprocess.Popen(_cmd(home), cwd=ROOT, env=_env(home), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 1.0) * took)
        p.send_signal(signal.SIGKILL)
        p.wait()
        left = _lock_state(mem)
        holding += left is not None and left[0] == str(p.pid)
        _check_next_run(home, mem, before, f"random kill {n}")
    assert holding >= 1  # some kills did land while the dream held the lock


@pytest.mark.slow
def test_the_daemons_start_gives_back_every_lock_a_killed_dream_holds(tmp_path: Path) -> None:
    """What the daemon calls at its start (``recover_abandoned`` over every note), after a real kill."""
    from memd.jobs import gates

    home = tmp_path / "home"
    mem, before = _setup(home, claude_lock=True)
    killed = subprocess.run(_cmd(home), cwd=ROOT, env=_env(home, "history.after_ref:1"), capture_output=True,
                            text=True, timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL
    assert _lock_state(mem) != before
    state = home / ".local" / "state" / "memd"
    assert gates.recover_abandoned(state) == [str(mem / LOCK)]
    assert _lock_state(mem) == before and not list((state / gates.NOTES_DIR).glob("*"))
    assert gates.recover_abandoned(state) == []
