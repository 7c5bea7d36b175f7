"""`memd uninstall` (issue 25): the service, the hooks, then what is left listed, `--purge` deleting
memd's state and config; Claude Code's folder untouched."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path

Cli = Callable[..., subprocess.CompletedProcess[str]]


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_uninstall_lists_then_purges_and_leaves_claude_alone(claude_home: Path, memd_cli: Cli) -> None:
    settings = claude_home / "settings.json"
    settings.write_bytes(b'{\n  "theme": "dark"\n}\n')
    mem = claude_home / "projects" / "-home-me-app" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("# Memory\n")
    (mem / "a.md").write_text("---\nname: a\ndescription: a\ntype: user\n---\n\nbody\n")
    assert memd_cli("hooks", "install").returncode == 0
    assert memd_cli("rebuild", "-home-me-app").returncode == 0  # some history
    config = claude_home.parent / ".config" / "memd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[budget]\nmax_lines = 200\n")
    state = claude_home.parent / ".local" / "state" / "memd"
    memory_before = _tree(mem)

    dry = memd_cli("uninstall", "--purge", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "would remove" in dry.stdout and f"would delete {state}" in dry.stdout
    assert state.is_dir() and "memd" in settings.read_text()

    kept = memd_cli("uninstall")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert settings.read_bytes() == b'{\n  "theme": "dark"\n}\n'  # the user's bytes back
    assert "history holds 1 project(s)" in kept.stdout and "--purge" in kept.stdout and state.is_dir()

    gone = memd_cli("uninstall", "--purge")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not state.exists() and not config.parent.exists()
    assert _tree(mem) == memory_before and settings.read_bytes() == b'{\n  "theme": "dark"\n}\n'


def test_trigger_sync_with_sync_off_says_so(claude_home: Path, memd_cli: Cli) -> None:
    """Issue 25: it said "sync queued" when sync was off and nothing would happen."""
    out = memd_cli("trigger", "sync")
    assert out.returncode == 2 and "sync is off" in out.stderr and "Traceback" not in out.stderr


def test_logs_reads_into_the_rotated_file(claude_home: Path, memd_cli: Cli) -> None:
    """Issue 25: right after a rotation `memd logs -n 5` showed only what the new file held."""
    import json

    state = claude_home.parent / ".local" / "state" / "memd"
    state.mkdir(parents=True)
    line = lambda i: json.dumps({"timestamp": "2026-12-01T10:00:00Z", "level": "info", "event": f"e{i}"})  # noqa: E731
    (state / "memd.log.1").write_text("".join(line(i) + "\n" for i in range(10)))
    (state / "memd.log").write_text(line(10) + "\n" + line(11) + "\n")
    out = memd_cli("logs", "-n", "5", "--json")
    assert out.returncode == 0, out.stderr
    assert [json.loads(x)["event"] for x in out.stdout.splitlines()] == ["e7", "e8", "e9", "e10", "e11"]
